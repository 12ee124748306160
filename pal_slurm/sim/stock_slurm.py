"""Stock Slurm, as the event simulator's decider: what the `stock` replay arm runs.

Slurm (cons_tres, topology/tree, sched/backfill, FIFO priority) starts jobs in scheduling
passes: the main scheduler (on submissions and job ends) takes jobs in priority order until the
first that does not fit; the backfill scheduler, every `bf_interval`, also starts the jobs
behind a blocked one that do not delay it, judged on TIME LIMITS (a running job ends at its
start + limit, a backfilled job lasts its limit) and on whole nodes (it reserves the nodes the
blocked job will start on). On the replay's labs (Slurm 22.05 and 24.11) the backfill pass
starts nearly every job, in-order ones included: slurmctld's log of five workload-1 arms shows
0 to 7 of 40 jobs started by the main scheduler, and a job that fits waits for the next pass
(0.5 s on average at bf_interval=1) before its ~0.1 s launch. So this decider starts jobs at
the passes only, each pass an EASY backfill over the whole queue; between passes nothing starts.

The allocation is the registered `slurm` placement's (policy.netaware.named: variability-blind,
topology-aware first fit with EASY backfill); this decider gives it what Slurm sees (limits
as remaining time) and the passes' timing. Any other placement runs on the same passes
(`palctl whatif` at a site's timing: a candidate's starts wait for Slurm's pass as pald's
pinned jobs do), and no placement moves a started job. `queue_depth` is Slurm's
`bf_max_job_test`: a pass tests the first that many waiting jobs (None: the whole queue).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Mapping

from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.policy.base import PlacementPolicy
from pal_slurm.ranking import Ranking
from pal_slurm.sim.ticks import Period

# Slurm's backfill plans a blocked job with its select plugin's will-run test, which takes the
# running jobs off in batches whose first window is 30 wall seconds (policy.netaware.slurm_will_run)
SLURM_WILL_RUN_WINDOW_S = 30.0


class StockSlurm:
    """sim.event.Decider for stock Slurm. `limits_s`: per trace job index, its time limit in
    trace seconds (None/missing: the job's own remaining work, i.e. exact limits);
    `pass_period_s`: Slurm's bf_interval in trace seconds (0: a pass at every event);
    `pass_offset_s`: the passes' phase against the trace's start (trace seconds)."""

    def __init__(self, placement: PlacementPolicy, pass_period_s: float,
                 limits_s: Mapping[int, float] | None = None, pass_offset_s: float = 0.0,
                 queue_depth: int | None = None):
        self.engine = Engine(EngineSettings(placement=placement.name, running_jobs_move=False), rng=random.Random(0),
                             policy=placement)
        self.slurm_pass = Period(float(pass_period_s), float(pass_offset_s))
        self.limits = dict(limits_s or {})
        self.queue_depth = queue_depth
        self.starts = 0
        self.waiting = False  # jobs left waiting by the last pass (the next pass may start them)

    # ---- sim.event.Decider -------------------------------------------------------------------
    def start(self, cluster: ClusterView, ranking: Ranking) -> None:
        self.cluster = cluster

    def decide(self, now: float, jobs: list[JobRequest], view: ClusterView, ranking: Ranking) -> RoundPlan:
        waiting = sum(1 for j in jobs if not j.running_on)
        if not self.slurm_pass.is_tick(now):
            self.waiting = waiting > 0
            return RoundPlan(frozenset(), {})
        plan = self.engine.decide([self.as_slurm_sees(j, now) for j in self.tested(jobs)], view, ranking, now)
        self.starts += len(plan.launch)
        self.waiting = len(plan.launch) < waiting
        return RoundPlan(frozenset(), {k: tuple(v) for k, v in plan.launch.items()})

    def next_wakeup(self, now: float) -> float | None:
        """The next pass while jobs wait (the simulator wakes for it)."""
        return self.slurm_pass.next_after(now) if self.waiting else None

    # ---- Slurm's view ------------------------------------------------------------------------
    def tested(self, jobs: list[JobRequest]) -> list[JobRequest]:
        """The jobs a pass looks at: every running one and the first `queue_depth` waiting ones
        (the simulator hands them in submit order, FIFO priority's)."""
        if self.queue_depth is None:
            return jobs
        out, waiting = [], 0
        for j in jobs:
            if not j.running_on:
                waiting += 1
                if waiting > self.queue_depth:
                    continue
            out.append(j)
        return out

    def as_slurm_sees(self, job: JobRequest, now: float) -> JobRequest:
        """Its time limit as its remaining time: a waiting job lasts its limit, a running one
        ends at its start + limit (at least now)."""
        limit = self.limits.get(int(job.job_id))
        if limit is None:
            return job
        if job.running_on:
            return replace(job, remaining_time=max(0.0, float(limit) - (now - job.waiting_since)))
        return replace(job, remaining_time=float(limit))
