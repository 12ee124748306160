"""pal-slurm on Slurm, as the event simulator's decider: what the `pal`/`pal-net` replay arms run.

On a Slurm site pald decides in two places, both through the one engine (pal_slurm.engine):

- the submit hook: a new job is placed now when a cycle over the held jobs and it would start
  it (`Engine.place_behind`: when it fits and, if older PAL jobs are held, the placement's
  backfill lets it pass them), else it is held (deferred) and waits for pald's cycle;
- pald's cycle, every `cycle_s`: the held jobs, in queue order, through `Engine.decide`.

The jobs pald places or releases are pinned to the GPUs it chose (or, where it cannot bind the
slots, to their nodes, where Slurm takes the lowest slots free when its pass starts the job:
`policy.slurm_starts.started_at_pass`), so Slurm starts them at its next scheduling pass (`slurm_pass_s`: on the replay's labs nearly
every start is the backfill pass's, see sim.stock_slurm; pald counts their GPUs as taken
meanwhile, and a placement that plans around running jobs sees them run until the job's limit,
as pald sees its promises); Slurm's own scheduling (EASY backfill, its node
choice) only decides jobs pald passes, and a replayed trace has none (every job asks a shape
pald places). What this decider adds to the simulator's own loop is therefore what pald sees
and when: the hook's held-job rule, the cycle's period and phase (a held job starts at the
first cycle after its GPUs free up, not at that instant), the view as of pald's last sync
(between two cycles the hook still sees a job that has ended since as running), the jobs as
Slurm shows them to pald (their time limit as remaining time, the comment's network
sensitivity, `medium` when it names none) and pald's engine (no network model: the placements'
tier penalties). The running jobs reach the engine as squeue shows them to pald: each with its
time limit less the time it has run as what is left of it (what a finish-aware placement and
backfill reservations plan with).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Mapping, Sequence

from pal_slurm.daemon.service import ServiceSettings
from pal_slurm.engine import Engine
from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.model.decision import JobId
from pal_slurm.policy.slurm_starts import SLURM_STARTS, started_at_pass
from pal_slurm.ranking import Ranking
from pal_slurm.sim.ticks import Period


class PaldOnSlurm:
    """The simulator's decider for a pal-slurm arm (sim.event.Decider).

    `limits_s`: per trace job index, the Slurm time limit pald reads as the job's remaining time
    (None: the job's own remaining work); `cycle_period_s`: pald's cycle in trace seconds
    (`cycle_s` x the replay's time scale), `cycle_offset_s` its phase against the trace's start
    (pald cycles on the epoch clock, `daemon.cycle.until_next_tick`, so a replay knows it:
    `replay.harness.pald_clock`); `ranking`: the ranking pald ranked by (a replay measures it
    from noisy samples, so it bins GPUs a little differently from the simulator's exact draw;
    the jobs still run at the draw); `wall_scale`: trace seconds per wall second of a
    time-compressed replay; `slurm_pass_s`: Slurm's scheduling pass in trace seconds (0: Slurm
    starts pald's jobs at once), `slurm_pass_offset_s` its phase against the trace's start;
    `nets`: per trace job index, the network sensitivity its comment declares (None or absent:
    the simulator's class of its model). pald lives on the wall clock: its times (now, submit
    times, time limits) are trace seconds / scale, and its delay timers
    (`settings.delay_timers` over the placement's own) are wall seconds, so a compressed replay
    stretches them by the scale: a medium job's 120 s wait for one node is 20 trace hours at
    600x. The model decides on pald's clock, as pald does.

    `view_age_s` (trace seconds): how old pald's view of Slurm is when its cycle decides. pald
    reads Slurm (sinfo, squeue, the site) at the top of each cycle and decides on that read a
    tenth of a wall second later (`replay.harness.pald_clock`); a job that ends in between is
    still running to that cycle, as it is to the hook until the next read. The cycle's ticks
    (`cycle_offset_s`) are its decisions; its reads come `view_age_s` before each."""

    def __init__(self, placement: str, cycle_period_s: float, limits_s: Mapping[int, float] | None = None,
                 settings: ServiceSettings | None = None, ranking: Ranking | None = None,
                 wall_scale: float = 1.0, slurm_pass_s: float = 0.0, slurm_pass_offset_s: float = 0.0,
                 nets: Mapping[int, str] | None = None, cycle_offset_s: float = 0.0,
                 view_age_s: float = 0.0):
        self.settings = replace(settings or ServiceSettings(), placement=placement)
        self.ranking = ranking  # pald's own (measured) ranking; None: the simulator's
        self.engine = Engine(self.settings.engine(), rng=random.Random(0), start_rule=SLURM_STARTS)
        self.cycle = Period(float(cycle_period_s), float(cycle_offset_s))
        # pald's reads of Slurm: each cycle's, view_age_s before its decision
        self.sync = Period(float(cycle_period_s), float(cycle_offset_s) - float(view_age_s))
        self.slurm_pass = Period(float(slurm_pass_s), float(slurm_pass_offset_s))
        self.pinned: dict[JobId, tuple[int, ...]] = {}  # placed or released, not started by Slurm yet
        self.limits = dict(limits_s or {})
        self.nets = dict(nets or {})
        self.scale = float(wall_scale)
        self.held: dict[JobId, JobRequest] = {}  # job id -> as pald saw it when held
        self.running: dict[JobId, JobRequest] = {}  # running at the last call
        self.ended: dict[JobId, tuple[float, JobRequest]] = {}  # ended since pald's last sync: (when, job)
        self.seen: set[JobId] = set()
        self.starts = {"placed": 0, "released": 0}

    # ---- sim.event.Decider -------------------------------------------------------------------
    def start(self, cluster: ClusterView, ranking: Ranking) -> None:
        self.cluster = cluster

    def decide(self, now: float, jobs: list[JobRequest], view: ClusterView, ranking: Ranking) -> RoundPlan:
        ranking = self.ranking or ranking
        now_pald = now / self.scale  # pald's clock
        waiting = {j.job_id: j for j in jobs if not j.running_on}
        running_now = {j.job_id: j for j in jobs if j.running_on}
        unseen = self.ended_since_sync(now, running_now)
        running = [self.as_pald_sees(j, now) for j in [*running_now.values(), *unseen]]
        self.held = {k: v for k, v in self.held.items() if k in waiting}
        launch: dict[JobId, tuple[int, ...]] = {}
        free = set(view.free).difference(*self.pinned.values(), *(j.running_on for j in unseen))
        # jobs pald pinned that Slurm has not started: to pald, running until their limit
        # (PlacementService.planning_running: for a placement that plans around running jobs)
        promises = self.engine.policy.traits.plans_around_running
        if promises:
            running += [self.as_promised(waiting[k], gpus, now) for k, gpus in self.pinned.items() if k in waiting]
        for job in sorted((j for j in waiting.values() if j.job_id not in self.seen), key=lambda j: j.submit_time):
            self.seen.add(job.job_id)
            ours = self.as_pald_sees(job, now)
            # the hook: place now when a cycle over the held jobs and this one would start it
            gpus = self.engine.place_behind(ours, list(self.held.values()), view.with_free(free), ranking, now_pald,
                                            running)
            if gpus is None:
                self.held[job.job_id] = ours
                continue
            launch[job.job_id] = tuple(gpus)
            free -= set(gpus)
            self.starts["placed"] += 1
            if promises:
                running.append(self.as_promised(job, gpus, now))
        if self.held and self.cycle.is_tick(now):
            plan = self.engine.decide([*running, *self.held.values()], view.with_free(free), ranking, now_pald)
            for job_id, gpus in plan.launch.items():
                launch[job_id] = tuple(gpus)
                free -= set(gpus)
                del self.held[job_id]
                self.starts["released"] += 1
        self.pinned.update(launch)
        if not self.slurm_pass.is_tick(now):
            return RoundPlan(frozenset(), {})
        started = started_at_pass(self.pinned, waiting, view)
        self.pinned = {k: v for k, v in self.pinned.items() if k not in started}
        self.running.update({k: waiting[k].started_on(gpus, now) for k, gpus in started.items()})
        return RoundPlan(frozenset(), started)

    def ended_since_sync(self, now: float, running: dict[JobId, JobRequest]) -> list[JobRequest]:
        """The jobs that ended after pald's last read of Slurm (at or before `now`, `sync`):
        pald still sees them running on their GPUs, so the hook does not place on them and the
        cycle plans around them (`as_pald_sees`) until its next sync. The simulator calls a
        decider at every job's end, so a job gone from `running` since the last call (running
        then, or started by it) ended now. Keeps `running` for the next call."""
        for job_id, job in self.running.items():
            if job_id not in running:
                self.ended[job_id] = (now, job)
        self.running = running
        synced = self.sync.last_at_or_before(now)
        self.ended = {k: v for k, v in self.ended.items() if v[0] > synced}
        return [job for _, job in self.ended.values()]

    def next_wakeup(self, now: float) -> float | None:
        """pald's next cycle while it holds jobs, Slurm's next pass while jobs pald pinned wait
        for it (the simulator wakes for them)."""
        times = [t for t in (self.cycle.next_after(now) if self.held else None,
                             self.slurm_pass.next_after(now) if self.pinned else None) if t is not None]
        return min(times) if times else None

    # ---- pald's view -------------------------------------------------------------------------
    def as_promised(self, job: JobRequest, gpus: Sequence[int], now: float) -> JobRequest:
        """A job pald pinned to `gpus` that Slurm has not started, as pald plans around it:
        running there until its limit (daemon.service.Reservation.as_running)."""
        return self.as_pald_sees(job, now).started_on(gpus, now / self.scale)

    def as_pald_sees(self, job: JobRequest, now: float) -> JobRequest:
        """The job as squeue shows it to pald: on pald's clock, its time limit (less the time
        it has run, for a running job) as remaining time; its network sensitivity is the one
        its comment names (`nets`: the replay writes its model's spread factor, replay.plan)."""
        limit = self.limits.get(int(job.job_id))
        net = self.nets.get(int(job.job_id), job.net_sensitivity)
        if limit is None:
            left = job.remaining_time
        elif job.running_on:
            left = max(0.0, float(limit) - (now - job.waiting_since))  # waiting_since: its start
        else:
            left = float(limit)
        return replace(job, submit_time=job.submit_time / self.scale, waiting_since=job.waiting_since / self.scale,
                       remaining_time=left / self.scale, net_sensitivity=net)
