"""Stock Slurm, as the event simulator's decider: what the `stock` replay arm runs.

Slurm (cons_tres, topology/tree, sched/backfill, FIFO priority) starts jobs in two ways:

- the main scheduler, on every submission and job end: jobs in priority order, each started
  where cons_tres puts it, until the first one that does not fit (it stops there);
- the backfill scheduler, every `bf_interval`: the jobs behind the first blocked one that can
  start without delaying it, judged on TIME LIMITS (a running job ends at its start + limit, a
  backfilled job lasts its limit), not on how long jobs really run.

So a backfilled job starts at the next backfill pass, not the instant it fits, and backfill
is as cautious as the limits are long (a replay's whole-minute limits are hours of trace time).
The allocation is the stock model's (`replay.predict.STOCK_SLURM`: variability-blind,
topology-aware first fit with EASY backfill); this decider gives it what Slurm sees (limits
as remaining time) and Slurm's two paths with their timing.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Mapping

from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.model.decision import JobId
from pal_slurm.policy.base import PlacementPolicy
from pal_slurm.ranking import Ranking
from pal_slurm.sim.ticks import Period


class StockSlurm:
    """sim.event.Decider for stock Slurm. `limits_s`: per trace job index, its time limit in
    trace seconds (None/missing: the job's own remaining work, i.e. exact limits);
    `backfill_period_s`: Slurm's bf_interval in trace seconds (0: backfill at every event)."""

    def __init__(self, placement: PlacementPolicy, backfill_period_s: float,
                 limits_s: Mapping[int, float] | None = None):
        self.engine = Engine(EngineSettings(placement=placement.name), rng=random.Random(0), policy=placement)
        self.backfill_pass = Period(float(backfill_period_s))
        self.limits = dict(limits_s or {})
        self.starts = {"main": 0, "backfill": 0}
        self.waiting = False  # jobs left waiting by the last decision (a pass may start them)

    # ---- sim.event.Decider -------------------------------------------------------------------
    def start(self, cluster: ClusterView, ranking: Ranking) -> None:
        self.cluster = cluster

    def decide(self, now: float, jobs: list[JobRequest], view: ClusterView, ranking: Ranking) -> RoundPlan:
        seen = [self.as_slurm_sees(j, now) for j in jobs]
        plan = self.engine.decide(seen, view, ranking, now)
        order = [j for j in self.engine.order_jobs(seen) if not j.running_on]
        launch: dict[JobId, tuple[int, ...]] = {}
        in_order = True
        backfill_now = self.backfill_pass.is_tick(now)
        for job in order:
            gpus = plan.launch.get(job.job_id)
            if gpus is None:
                in_order = False  # the main scheduler stops at the first job that waits
                continue
            if in_order:
                launch[job.job_id] = tuple(gpus)
                self.starts["main"] += 1
            elif backfill_now:
                launch[job.job_id] = tuple(gpus)
                self.starts["backfill"] += 1
            else:
                break  # a backfilled start waits for the pass; later ones were planned around it
        self.waiting = len(launch) < len(order)
        return RoundPlan(frozenset(), launch)

    def next_wakeup(self, now: float) -> float | None:
        """The next backfill pass while jobs wait (the simulator wakes for it)."""
        return self.backfill_pass.next_after(now) if self.waiting else None

    # ---- Slurm's view ------------------------------------------------------------------------
    def as_slurm_sees(self, job: JobRequest, now: float) -> JobRequest:
        """Its time limit as its remaining time: a waiting job lasts its limit, a running one
        ends at its start + limit (at least now)."""
        limit = self.limits.get(int(job.job_id))
        if limit is None:
            return job
        if job.running_on:
            return replace(job, remaining_time=max(0.0, float(limit) - (now - job.waiting_since)))
        return replace(job, remaining_time=float(limit))
