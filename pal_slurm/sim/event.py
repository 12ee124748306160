"""`event` mode: an event-driven simulator (no rounds) with per-GPU variability and a network.

Time advances from event to event on the simulator's event loop (sim.loop: a heap of (time,
seq, kind, payload), events at one time in the order they were scheduled). Events: a job
arrives, a job finishes, a delay timer expires (the policy says when, through an optional
`next_wakeup(order, ctx)`). After all events at one instant are applied, the queue order and
the placement run once, and the plan is carried out by the simulator's Actuator.

Progress model:
- a GPU keeps its own identity (`gpu_profiles`, seeded): it is always the same real measured
  GPU, per class; a job's speed is ideal / (max over its GPUs of the class's per-GPU score x the
  network factor of its placement), so its runtime on GPUs `P` is
  `ideal_runtime * max_g score[g] * placement_slowdown(model, P)`;
- the network factor comes from `sim.network.NetworkModel` (tiers node/rack/spine, per-model
  sensitivity, congestion); the seconds it costs are the job's `comm_overhead_s`;
- a job that restarts (after a preemption, or moved by a non-sticky placement) first spends
  `restart_cost_s` on its new GPUs without progress (checkpoint reload; every GPU of the job
  pays it, so it costs restart_cost_s x GPUs GPU-seconds);
- policies see `PlacementContext(now=t, network=model, delay_timers=...)` and jobs with
  `waiting_since`, `remaining_time` (ideal seconds left) and `net_sensitivity`.

Any registered placement runs unchanged through `plan(order, ctx)`. Every trace job is tracked
(no extra arrivals, unlike compat). The result is the same `RunResult` as compat.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, TypeGuard

import numpy as np

from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.model.classes import ARTIFACT_CLASSES, AppClassMap
from pal_slurm.engine import AS_PLANNED, Cycle, Engine, EngineSettings
from pal_slurm.policy import placement as placement_by_name
from pal_slurm.policy.base import PlacementPolicy
from pal_slurm.policy.slurm_starts import SLURM_STARTS
from pal_slurm.policy import autotune
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.profiles import gpu_profiles
from pal_slurm.sim.core import SimActuator, SimJob, SimState
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.gpu_models import GpuModelGroup, scaled_scores, with_gpu_models
from pal_slurm.sim.loop import Event, EventLoop
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.network import Congestion, NetworkModel, cluster_from_racks
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.trace import Trace, fit_gpu_models, job_class, unclassed_scores
from pal_slurm.sim.variability import MeasuredGpus

ARRIVAL, FINISH, WAKE = 0, 1, 2
SWEEP_MIN = 100_000  # queued events before stale finishes are swept out (see drop_stale_finishes)
# from this many instants on, a job catches up on its progress with numpy's running folds
# (EventJob.advance_over); below it, one advance per instant costs less than the arrays
FOLD_FROM = 48


def _is_current(job: "EventJob | None", version: int) -> TypeGuard["EventJob"]:
    """Whether a finish event pushed at `version` is still the job's (not moved or stopped since)."""
    return job is not None and job.version == version



class Decider(Protocol):
    """Another decider in place of the engine's plan (pald's service, in the test that proves
    both decide alike). It sees what the engine would: the jobs, the view, the ranking."""

    def start(self, cluster: ClusterView, ranking: Ranking) -> None: ...

    def decide(self, now: float, jobs: list[JobRequest], view: ClusterView, ranking: Ranking) -> RoundPlan: ...

    def next_wakeup(self, now: float) -> float | None:
        """When the decider wants to decide again by time alone (pald's next cycle), or None."""
        ...


@dataclass(frozen=True)
class EventConfig:
    num_nodes: int = 16
    gpus_per_node: int = 4
    nodes_per_rack: int | None = 4  # None: one rack (no spine tier)
    cluster: ClusterView | None = None  # overrides the three above (e.g. from topology.conf)
    queue: str = "fifo"
    binning: str = "optimal"
    variability_seed: int = 0  # which real GPUs the simulated ones are (gpu_profiles)
    seed: int = 0  # the placements' RNG (random placements)
    restart_cost_s: float = 30.0  # seconds without progress on every restart
    start_cost_s: float = 0.0  # seconds without progress on a first start (a replay's measured Slurm launch cost)
    congestion: Congestion = Congestion()
    network: bool = True  # False: no network slowdown at all (variability only)
    locality_penalty: float = 1.7  # PAL's L x V weight, passed to the placements
    classes: AppClassMap = ARTIFACT_CLASSES
    tuner: autotune.TunerConfig = autotune.TunerConfig()
    # Slurm's rule: a started job keeps its GPUs until it ends (nobody moves or stops it); the
    # placement sees only the waiting jobs, and launches start by Slurm's start rule
    # (policy.slurm_starts). False: the artifact's model (non-sticky placements move running
    # jobs, preempting ones stop them).
    jobs_stay_put: bool = False
    # a site's `[policy] starvation_bound_s` for placements with a starvation bound (pal-fit),
    # in trace seconds; None: none (policy.netaware.stages.bound says why that is the default)
    starvation_bound_s: float | None = None
    max_events: int = 50_000_000  # a guard: a policy that never finishes is an error, not a hang
    variability: MeasuredGpus | None = None  # measured classes replace the bundled draws (sim.variability)
    gpu_models: tuple[GpuModelGroup, ...] = ()  # several GPU models (sim.gpu_models); (): one, unnamed

    def build_cluster(self) -> ClusterView:
        cluster = self.cluster if self.cluster is not None else \
            ClusterView.uniform(self.num_nodes, self.gpus_per_node, nodes_per_rack=self.nodes_per_rack)
        return with_gpu_models(cluster, self.gpu_models) if self.gpu_models else cluster


@dataclass(eq=False, slots=True)
class EventJob(SimJob):
    """A job on the event clock: ideal seconds of work left, shrinking while it runs at `rate`
    (after `resume_at`: a restart's cost)."""

    work_left: float = 0.0  # ideal seconds of work left
    rate: float = 1.0  # ideal seconds of work per wall second while running
    net: float = 1.0
    last: float = 0.0  # time of the last progress update
    resume_at: float = 0.0  # no progress before this (restart cost)
    restarts: int = 0
    synced: int = 0  # the run's decision instants it has advanced through (_EventRun.catch_up)

    def remaining_time(self) -> float:
        return self.work_left

    def advance(self, t: float) -> None:
        """Progress up to t (its request shows it once the state is told: SimState.touch)."""
        if self.gpus and t > self.last:
            run_from = max(self.last, self.resume_at)
            if t > run_from:
                dt = t - run_from
                self.work_left -= dt * self.rate
                self.comm_s += dt * (1.0 - 1.0 / self.net)
            self.attained += t - self.last
        self.last = t

    def advance_over(self, times: Sequence[float]) -> None:
        """`advance(t)` for each of `times` (ascending, each after `last`) in turn, with the same
        arithmetic in the same order, so the same bits: a long run of instants as numpy's
        running folds (`accumulate` folds left to right, one rounding per step, as the loop
        does; `reduce` would sum pairwise and round differently)."""
        if len(times) < FOLD_FROM or not self.gpus:
            for t in times:
                self.advance(t)
            return
        ts = np.asarray(times, dtype=np.float64)
        lasts = np.empty_like(ts)
        lasts[0], lasts[1:] = self.last, ts[:-1]
        run_from = np.maximum(lasts, self.resume_at)
        dt = np.where(ts > run_from, ts - run_from, 0.0)  # (0.0 where advance adds nothing: x - 0.0 is x)
        self.work_left = float(np.subtract.accumulate(np.concatenate(([self.work_left], dt * self.rate)))[-1])
        self.comm_s = float(np.add.accumulate(np.concatenate(([self.comm_s], dt * (1.0 - 1.0 / self.net))))[-1])
        self.attained = float(np.add.accumulate(np.concatenate(([self.attained], ts - lasts)))[-1])
        self.last = float(ts[-1])


class EventSimulator:
    def __init__(self, config: EventConfig = EventConfig()):
        self.config = config
        self.cluster = config.build_cluster()
        self.netmodel = NetworkModel(congestion=config.congestion)
        racks = self.cluster.rack_of_node
        self._nodes_per_rack = max(racks.count(r) for r in set(racks))

    # ---- helpers --------------------------------------------------------------------------
    def _net_factor(self, app: str, gpus: Sequence[int]) -> float:
        if not self.config.network:
            return 1.0
        return self.netmodel.slowdown(app, gpus, self.cluster)

    def _best_net(self, app: str, n: int) -> float:
        """Network factor of the most consolidated placement a job of n GPUs could get."""
        if not self.config.network:
            return 1.0
        gpn = self.cluster.gpus_per_node
        nodes = math.ceil(n / gpn)
        racks = math.ceil(nodes / self._nodes_per_rack)
        return self.netmodel.factor(app, n, nodes, racks)

    # ---- the run --------------------------------------------------------------------------
    def run(self, trace: Trace, policy: str | PlacementPolicy, progress: Callable[[float], None] | None = None,
            decider: Decider | None = None,
            on_start: Callable[[float, int, tuple[int, ...]], None] | None = None) -> RunResult:
        """Simulate `trace` under `policy` (a registered name, or a placement object).

        `decider` replaces the engine's plan with another decider's (pald's service, in the test
        that proves both decide alike); wake-ups and the tuner stay the engine's. `on_start(t,
        trace job id, gpus)` hears every (re)start."""
        for row in trace.jobs:
            if row.num_gpus > self.cluster.size:
                raise ValueError(f"{trace.name}: job {row.job_id} needs {row.num_gpus} GPUs; "
                                 f"the cluster has {self.cluster.size}")
        trace = fit_gpu_models(trace, self.cluster)
        pol = placement_by_name(policy) if isinstance(policy, str) else policy
        return _EventRun(self, trace, pol, decider, on_start).run(progress)


class _EventRun:
    """One run's state, and its phases: events at an instant (arrive / finish / wake), then
    one decision (the engine's cycle, or the decider's) applied by the in-memory actuator
    (`stop` / `start`)."""

    def __init__(self, sim: EventSimulator, trace: Trace, pol: PlacementPolicy, decider: Decider | None,
                 on_start: Callable[[float, int, tuple[int, ...]], None] | None):
        cfg = self.cfg = sim.config
        self.sim, self.trace, self.pol, self.decider, self.on_start = sim, trace, pol, decider, on_start
        self.cluster = sim.cluster
        self.scores = gpu_profiles(self.cluster.size, cfg.variability_seed)
        if cfg.variability is not None:
            self.scores = {**self.scores, **cfg.variability.scores_for(self.cluster, cfg.variability_seed)}
        self.scores = {**self.scores, **unclassed_scores(trace, self.cluster.size)}
        if cfg.gpu_models:
            self.scores = scaled_scores(self.scores, self.cluster, cfg.gpu_models)
        self.ranking = Ranking.from_scores(self.scores, cfg.binning)
        self.state: SimState[EventJob] = SimState(self.cluster, self.scores)
        self.loop = EventLoop(f"{trace.name}/{pol.name}", cfg.max_events)
        self.heap = self.loop.heap  # (the loop's own list: a sweep keeps it)
        self.actuator = SimActuator(self.state, self.loop, self.start)
        self.engine = Engine(
            EngineSettings(placement=pol.name, queue=cfg.queue, locality_penalty=cfg.locality_penalty,
                           running_jobs_move=not cfg.jobs_stay_put, tuner=cfg.tuner,
                           starvation_bound_s=cfg.starvation_bound_s),
            rng=random.Random(cfg.seed), network=sim.netmodel if cfg.network else None, policy=pol,
            start_rule=SLURM_STARTS if cfg.jobs_stay_put else AS_PLANNED)
        self.tuning = pol.traits.tuned
        # a decider (pald's or Slurm's model) may read anything; a placement says what it reads
        self.renew_running = decider is not None or self.engine.reads_progress
        # the decision instants, where running jobs are not advanced at each: a job catches up
        # on them when it is next read (its stop or its finish). Where nobody reads progress
        # and running jobs stay put (sticky): advancing every running job at every decision
        # was a third of such a run on 8,192 GPUs (thousands running, hundreds of thousands of
        # decisions). A non-sticky placement moves its running jobs at every decision anyway.
        self.catches_up = not self.renew_running and pol.traits.sticky
        self.decided: list[float] = []
        if decider is not None:
            decider.start(self.cluster, self.ranking)
        self.sens_cache: dict[str, str] = {}
        self.active = self.state.active
        self.free = self.state.free  # the state's own set (the loop reads it every event)
        self.busy_gpu_s = 0.0
        self.util: list[tuple[float, int]] = [(0.0, 0)]
        self.last_t = 0.0
        self.pending_wake = math.inf
        self.plans = self.restarts = 0
        self.progress: Callable[[float], None] | None = None
        self.sweep_at = SWEEP_MIN  # heap size at which stale finish events are dropped
        for idx, row in enumerate(trace.jobs):
            self.loop.push(row.submit_time, ARRIVAL, idx)

    # ---- the run on the loop -------------------------------------------------------------
    def run(self, progress: Callable[[float], None] | None) -> RunResult:
        self.progress = progress
        self.loop.run((self.arrive, self.finish, self.wake), self.decide_at, before=self.clock_moves, tidy=self.tidy)
        n_total = len(self.trace.jobs)
        if len(self.state.outcomes) != n_total:
            stuck = sorted(self.active)[:5]
            raise SimulationError(f"{self.trace.name}/{self.pol.name}: {n_total - len(self.state.outcomes)} job(s) "
                                  f"never ran (e.g. {stuck})")
        return self.result()

    def tidy(self) -> None:
        if len(self.heap) > self.sweep_at:
            self.drop_stale_finishes()

    def clock_moves(self, t: float) -> None:
        """The busy-GPU integral up to t (the GPUs held since the last instant)."""
        self.busy_gpu_s += (self.cluster.size - len(self.free)) * (t - self.last_t)
        self.last_t = t

    def decide_at(self, t: float) -> None:
        if self.decider is None and (not self.active or (self.pol.traits.sticky
                                                         and len(self.state.running) == len(self.active))):
            return  # nothing to place and a sticky policy never moves running jobs (a decider
            # hears every end, the last one's too: pald learns of one only at its next sync,
            # pal_lab.replay.pald_model, and a cluster gone idle must not hide it till the next job)
        self.schedule(t)
        if self.progress is not None:
            self.progress(len(self.state.outcomes) / len(self.trace.jobs))

    def drop_stale_finishes(self) -> None:
        """Drop the finish events of jobs moved or stopped since they were pushed. A placement
        that re-places every job at every decision (random-nonsticky) leaves millions, and
        every pop pays for the heap's size. They count as events, as popping them would have;
        the live events keep their order (time, sequence). The one difference: a stale event
        no longer splits the busy-GPU integral at its time, so `busy_gpu_s` may differ in its
        last bits from a run that popped them (runs whose heap stays under SWEEP_MIN, such as
        the golden cases, never sweep)."""
        active = self.active

        def keep(e: Event) -> bool:
            return e[2] != FINISH or _is_current(active.get(e[3][0]), e[3][1])  # type: ignore[index]

        self.loop.dropped(keep)
        self.sweep_at = max(SWEEP_MIN, 2 * len(self.heap))

    # ---- events --------------------------------------------------------------------------
    def arrive(self, t: float, idx: Any) -> bool:
        src = self.trace.jobs[idx]  # (idx: a trace row's index)
        if src.model not in self.sens_cache:
            self.sens_cache[src.model] = self.sim.netmodel.sensitivity(src.model)
        self.state.arrive(EventJob(key=idx, src=src, perf_class=job_class(src, self.cfg.classes),
                                   sensitivity=self.sens_cache[src.model], submit=t, work_left=src.ideal_runtime,
                                   last=t, waiting_since=t))
        return True

    def finish(self, t: float, payload: Any) -> bool:
        key, version = payload  # (the job's key and version when its finish was pushed)
        job = self.active.get(key)
        if not _is_current(job, version):
            return False  # stale: the job was moved or stopped since
        self.catch_up(job)
        job.advance(t)
        self.state.finish(job, t, self.sim._best_net(job.src.model, job.src.num_gpus), job_id=job.src.job_id)
        return True

    def wake(self, t: float, _payload: object) -> bool:
        if t >= self.pending_wake:
            self.pending_wake = math.inf
        return True

    def catch_up(self, job: EventJob) -> None:
        """Advance a running job through the decision instants since it last advanced, as
        `schedule` would have at each (its progress is exact, bit for bit)."""
        if job.synced < len(self.decided):
            if job.gpus:
                job.advance_over(self.decided[job.synced:])
            job.synced = len(self.decided)

    # ---- one decision --------------------------------------------------------------------
    def schedule(self, t: float) -> None:
        running = self.state.running
        if self.renew_running:
            touch = self.state.touch
            for job in running.values():
                job.advance(t)
                touch(job)
        elif self.catches_up:  # the jobs advance through this instant when next read (catch_up)
            self.decided.append(t)
        else:  # nobody reads it: a running job's request stays as first built
            for job in running.values():
                job.advance(t)
        cyc = self.decide(t)
        self.plans += 1
        if self.catches_up:
            for jid in cyc.plan.suspend:
                self.catch_up(self.active[jid])
        self.actuator.carry_out(cyc.plan)
        busy_now = self.cluster.size - len(self.free)
        if self.util[-1][1] != busy_now:
            self.util.append((t, busy_now))
        w = self.engine.next_wakeup(cyc)
        if self.decider is not None:
            mine = self.decider.next_wakeup(t)
            w = mine if w is None else w if mine is None else min(w, mine)
        if w is not None and t < w < self.pending_wake:
            self.pending_wake = w
            self.loop.push(w, WAKE, None)

    def decide(self, t: float) -> Cycle:
        requests = self.state.requests()
        view = self.state.view()
        if self.decider is None:
            return self.engine.cycle(requests, view, self.ranking, t, in_submit_order=True)
        order = self.engine.order_jobs(requests, in_submit_order=True)
        return Cycle(order, self.engine.context(view, self.ranking, t),
                     self.decider.decide(t, requests, view, self.ranking))

    # ---- starting a job on the event clock ----------------------------------------------
    def start(self, job: EventJob, gpus: tuple[int, ...], t: float) -> None:
        """The state's start, then the job's speed on these GPUs and network, its restart
        cost, the tuner's lesson, and its finish event."""
        as_seen = job.request() if self.tuning and not job.gpus else None  # as the placement saw it
        restart = job.first_start is not None
        try:
            self.state.start(job, gpus, t, checked=True)
        except RuntimeError as exc:
            raise RuntimeError(f"{self.pol.name}: {exc}") from None
        job.net = self.sim._net_factor(job.src.model, gpus)
        job.rate = 1.0 / (job.pm * job.net)
        cost = self.cfg.restart_cost_s if restart else self.cfg.start_cost_s
        if restart and cost:
            self.restarts += 1
            job.restarts += 1
        job.resume_at = t + cost
        job.last = t
        job.synced = len(self.decided)
        if as_seen is not None:
            self.engine.observe_start(as_seen, gpus, self.cluster, t, factor=job.net,
                                      best_factor=self.sim._best_net(job.src.model, job.src.num_gpus),
                                      work_s=job.src.ideal_runtime)
        if self.on_start is not None:
            self.on_start(t, job.src.job_id, gpus)
        self.loop.push(job.resume_at + max(0.0, job.work_left) / job.rate, FINISH, (job.key, job.version))

    # ---- the outcome ---------------------------------------------------------------------
    def result(self) -> RunResult:
        cfg = self.cfg
        return RunResult(
            trace=self.trace.name,
            policy=self.pol.name,
            seed=cfg.seed,
            mode="event",
            num_gpus=self.cluster.size,
            jobs=sorted(self.state.outcomes, key=lambda o: o.job_id),
            busy_gpu_s=self.busy_gpu_s,
            util_series=self.util,
            extra={
                "last_finish_s": self.last_t,
                "events": self.loop.events,
                "plans": self.plans,
                "restarts": self.restarts,
                "variability_seed": cfg.variability_seed,
                "congestion_leaf": cfg.congestion.leaf,
                "congestion_spine": cfg.congestion.spine,
                "timers": ({f"{k[0]}/{k[1]}": v for k, v in autotune.timers(self.engine.tuner).items()}
                           if self.tuning else None),
            },
        )


def simulate(trace: Trace, policy: str, config: EventConfig = EventConfig()) -> RunResult:
    """One event-mode run (convenience wrapper)."""
    return EventSimulator(config).run(trace, policy)


def simulator_for(spec: RunSpec, seed_index: int = 0) -> EventSimulator:
    """An EventSimulator for a `sim.spec.RunSpec` (palctl simulate --mode event).

    Seed index i draws GPU identities with variability seed i and seeds the placements' RNG
    with i. `nodes_per_rack=None` keeps EventConfig's default (4 nodes under a leaf);
    `congestion` is the background load of both the leaf and the spine tier.
    """
    kw: dict[str, Any] = {}
    if spec.nodes_per_rack:
        kw["nodes_per_rack"] = spec.nodes_per_rack
    if spec.racks:
        kw["cluster"] = cluster_from_racks(dict(spec.racks), spec.gpus_per_node)
    elif spec.cluster is not None:
        kw["cluster"] = spec.cluster
    load = float(spec.congestion or 0.0)
    return EventSimulator(
        EventConfig(
            num_nodes=spec.num_nodes,
            gpus_per_node=spec.gpus_per_node,
            queue=spec.queue,
            locality_penalty=spec.locality_penalty,
            variability_seed=seed_index,
            seed=seed_index,
            congestion=Congestion(load, load),
            variability=spec.variability,
            gpu_models=spec.gpu_models,
            starvation_bound_s=spec.starvation_bound_s,
            **kw,
        )
    )
