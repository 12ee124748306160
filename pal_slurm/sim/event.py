"""`event` mode: an event-driven simulator (no rounds) with per-GPU variability and a network.

Time advances from event to event on a heap of (time, seq, kind, payload); `seq` increases
monotonically, so events at the same time are handled in the order they were scheduled and a
run repeats exactly (SimPy's rule). Events: a job arrives, a job finishes, a delay timer
expires (the policy says when, through an optional `next_wakeup(order, ctx)`). After all events
at one instant are applied, the queue order and the placement run once, and the plan is applied.

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

import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Callable

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.classes import AppClassMap
from pal_slurm.policy import PlacementContext, placement as placement_by_name, queue_order
from pal_slurm.policy import autotune
from pal_slurm.policy.placements import StickyPlacement
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.profiles import gpu_profiles
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.metrics import JobOutcome, RunResult
from pal_slurm.sim.network import cluster_from_racks, NODE, RACK, SPINE, Congestion, NetworkModel, tier_of
from pal_slurm.sim.trace import Trace, TraceJob, job_class, unclassed_scores
from pal_slurm.sim.variability import MeasuredGpus

ARRIVAL, FINISH, WAKE = 0, 1, 2


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
    congestion: Congestion = Congestion()
    network: bool = True  # False: no network slowdown at all (variability only)
    locality_penalty: float = 1.7  # PAL's L x V weight, passed to the placements
    classes: AppClassMap = field(default_factory=lambda: AppClassMap(
        {"resnet50": "A", "vgg19": "C", "pointnet": "D", "gpt2": "B", "dcgan": "B", "bert": "B"}, default="A"))
    tuner: autotune.TunerConfig = autotune.TunerConfig()
    max_events: int = 50_000_000  # a guard: a policy that never finishes is an error, not a hang
    variability: MeasuredGpus | None = None  # measured classes replace the bundled draws (sim.variability)

    def build_cluster(self) -> ClusterView:
        if self.cluster is not None:
            return self.cluster
        return ClusterView.uniform(self.num_nodes, self.gpus_per_node, nodes_per_rack=self.nodes_per_rack)


@dataclass
class _Job:
    key: int
    src: TraceJob
    perf_class: str
    sensitivity: str
    submit: float
    work_left: float  # ideal seconds of work left
    gpus: tuple[int, ...] = ()
    rate: float = 1.0  # ideal seconds of work per wall second while running
    net: float = 1.0
    last: float = 0.0  # time of the last progress update
    resume_at: float = 0.0  # no progress before this (restart cost)
    version: int = 0  # invalidates FINISH events of an earlier placement
    first_start: float | None = None
    started_at: float = 0.0  # last (re)start
    waiting_since: float = 0.0
    preemptions: int = 0
    restarts: int = 0
    comm_s: float = 0.0
    attained: float = 0.0
    _req: JobRequest | None = None  # cached request while nothing changed (waiting jobs)

    def advance(self, t: float) -> None:
        if self.gpus and t > self.last:
            run_from = max(self.last, self.resume_at)
            if t > run_from:
                dt = t - run_from
                self.work_left -= dt * self.rate
                self.comm_s += dt * (1.0 - 1.0 / self.net)
            self.attained += t - self.last
            self._req = None
        self.last = t

    def request(self) -> JobRequest:
        if self._req is not None:
            return self._req
        self._req = JobRequest(
            job_id=self.key,
            num_gpus=self.src.num_gpus,
            perf_class=self.perf_class,
            app=self.src.model,
            submit_time=self.submit,
            running_on=self.gpus,
            attained_service=self.attained,
            remaining_time=max(0.0, self.work_left),
            net_sensitivity=self.sensitivity,
            waiting_since=self.started_at if self.gpus else self.waiting_since,
            preemptions=self.preemptions,
        )
        return self._req


class EventSimulator:
    def __init__(self, config: EventConfig = EventConfig()):
        self.config = config
        self.cluster = config.build_cluster()
        self.netmodel = NetworkModel(congestion=config.congestion)
        racks = self.cluster.rack_of_node
        self._nodes_per_rack = max(racks.count(r) for r in set(racks))

    # ---- helpers --------------------------------------------------------------------------
    def _net_factor(self, app: str, gpus) -> float:
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
    def run(self, trace: Trace, policy, progress: Callable[[float], None] | None = None) -> RunResult:
        """Simulate `trace` under `policy` (a registered name, or a placement object)."""
        cfg = self.config
        cluster = self.cluster
        G = cluster.size
        for job in trace.jobs:
            if job.num_gpus > G:
                raise ValueError(f"{trace.name}: job {job.job_id} needs {job.num_gpus} GPUs; the cluster has {G}")
        pol = placement_by_name(policy) if isinstance(policy, str) else policy
        policy = pol.name
        order_fn = queue_order(cfg.queue)
        scores = gpu_profiles(G, cfg.variability_seed)
        if cfg.variability is not None:
            scores = {**scores, **cfg.variability.scores_for(cluster, cfg.variability_seed)}
        scores = {**scores, **unclassed_scores(trace, G)}
        ranking = Ranking.from_scores(scores, cfg.binning)
        sorted_scores = {c: sorted(v) for c, v in scores.items()}
        rng = random.Random(cfg.seed)
        net_for_policy = self.netmodel if cfg.network else None
        tuning = bool(getattr(pol, "autotune", False))
        tuner_state = autotune.initial_state(cfg.tuner, getattr(pol, "timers", None))
        sens_cache: dict[str, str] = {}

        heap: list = []
        seq = 0

        def push(t: float, kind: int, payload) -> None:
            nonlocal seq
            if not math.isfinite(t):  # NaN never equals itself: the loop below would spin forever
                raise SimulationError(f"{trace.name}/{policy}: event at non-finite time {t!r} ({kind}, {payload})")
            heapq.heappush(heap, (t, seq, kind, payload))
            seq += 1

        for idx, job in enumerate(trace.jobs):
            push(job.submit_time, ARRIVAL, idx)

        active: dict[int, _Job] = {}
        free = set(range(G))
        outcomes: list[JobOutcome] = []
        busy_gpu_s = 0.0
        util: list[tuple[float, int]] = [(0.0, 0)]
        last_t = 0.0
        pending_wake = math.inf
        n_total = len(trace.jobs)
        events = 0
        plans = 0
        memo: dict = {}  # the placement reuses last plan's allocations (see PlacementContext.memo)
        restarts = 0

        while heap:
            t = heap[0][0]
            busy = G - len(free)
            busy_gpu_s += busy * (t - last_t)
            last_t = t
            changed = False
            # apply every event at this instant
            while heap and heap[0][0] == t:
                _t, _s, kind, payload = heapq.heappop(heap)
                events += 1
                if events > cfg.max_events:
                    raise SimulationError(f"{trace.name}/{policy}: more than {cfg.max_events} events")
                if kind == ARRIVAL:
                    src = trace.jobs[payload]
                    if src.model not in sens_cache:
                        sens_cache[src.model] = self.netmodel.sensitivity(src.model)
                    active[payload] = _Job(
                        key=payload,
                        src=src,
                        perf_class=job_class(src, cfg.classes),
                        sensitivity=sens_cache[src.model],
                        submit=t,
                        work_left=src.ideal_runtime,
                        last=t,
                        waiting_since=t,
                    )
                    changed = True
                elif kind == FINISH:
                    key, version = payload
                    job = active.get(key)
                    if job is None or job.version != version:
                        continue  # stale: the job was moved or stopped since
                    job.advance(t)
                    free.update(job.gpus)
                    del active[key]
                    n = job.src.num_gpus
                    lb = job.src.ideal_runtime * sorted_scores[job.perf_class][n - 1] * self._best_net(job.src.model, n)
                    outcomes.append(
                        JobOutcome(
                            job_id=job.src.job_id,
                            num_gpus=n,
                            model=job.src.model,
                            submit=job.submit,
                            first_start=job.first_start,
                            finish=t,
                            ideal_runtime=job.src.ideal_runtime,
                            lower_bound_s=lb,
                            comm_overhead_s=job.comm_s,
                            preemptions=job.preemptions,
                        )
                    )
                    changed = True
                else:  # WAKE
                    if t >= pending_wake:
                        pending_wake = math.inf
                    changed = True
            if not changed or not active:
                continue
            waiting = any(not j.gpus for j in active.values())
            if not waiting and _is_sticky(pol):
                continue  # nothing to place and a sticky policy never moves running jobs
            # schedule
            for job in active.values():
                job.advance(t)
            order = order_fn([j.request() for j in active.values()])
            ctx = PlacementContext(
                cluster=cluster.with_free(free),
                ranking=ranking,
                rng=rng,
                locality_penalty=cfg.locality_penalty,
                now=t,
                network=net_for_policy,
                delay_timers=autotune.timers(tuner_state) if tuning else None,
                memo=memo,
            )
            plan = pol.plan(order, ctx)
            plans += 1
            for jid in plan.suspend:
                job = active[jid]
                free.update(job.gpus)
                job.gpus = ()
                job._req = None
                job.version += 1
                job.waiting_since = t
                if jid not in plan.launch:
                    job.preemptions += 1
            for jid, gpus in plan.launch.items():
                job = active[jid]
                if job.gpus:
                    raise RuntimeError(f"{policy}: launched job {jid} that is still running")
                gpus = tuple(gpus)
                if len(gpus) != job.src.num_gpus or not free.issuperset(gpus):
                    raise RuntimeError(f"{policy}: bad allocation {gpus} for job {jid} ({job.src.num_gpus} GPUs)")
                free.difference_update(gpus)
                job.gpus = gpus
                job._req = None
                job.version += 1
                pm = max(scores[job.perf_class][g] for g in gpus)
                job.net = self._net_factor(job.src.model, gpus)
                job.rate = 1.0 / (pm * job.net)
                cost = cfg.restart_cost_s if job.first_start is not None else 0.0
                if cost:
                    restarts += 1
                    job.restarts += 1
                job.resume_at = t + cost
                job.last = t
                if tuning:
                    tier = tier_of(gpus, cluster)[0]
                    tuner_state = autotune.observe(
                        tuner_state,
                        autotune.Observation(
                            sensitivity=job.sensitivity,
                            wanted=_wanted_tier(job.src.num_gpus, cluster),
                            got=tier,
                            waited_s=t - job.waiting_since,
                            comm_loss_s=job.src.ideal_runtime * (job.net - self._best_net(job.src.model, job.src.num_gpus)),
                            time=t,
                        ),
                        cfg.tuner,
                    )
                if job.first_start is None:
                    job.first_start = t
                job.started_at = t
                push(job.resume_at + max(0.0, job.work_left) / job.rate, FINISH, (jid, job.version))
            busy_now = G - len(free)
            if util[-1][1] != busy_now:
                util.append((t, busy_now))
            wake = getattr(pol, "next_wakeup", None)
            if wake is not None:
                w = wake(order, ctx)
                if w is not None and t < w < pending_wake:
                    pending_wake = w
                    push(w, WAKE, None)
            if progress is not None:
                progress(len(outcomes) / n_total)

        if len(outcomes) != n_total:
            stuck = sorted(active)[:5]
            raise SimulationError(f"{trace.name}/{policy}: {n_total - len(outcomes)} job(s) never ran (e.g. {stuck})")
        outcomes.sort(key=lambda o: o.job_id)
        return RunResult(
            trace=trace.name,
            policy=pol.name,
            seed=cfg.seed,
            mode="event",
            num_gpus=G,
            jobs=outcomes,
            busy_gpu_s=busy_gpu_s,
            util_series=util,
            extra={
                "last_finish_s": last_t,
                "events": events,
                "plans": plans,
                "restarts": restarts,
                "variability_seed": cfg.variability_seed,
                "congestion_leaf": cfg.congestion.leaf,
                "congestion_spine": cfg.congestion.spine,
                "timers": {f"{k[0]}/{k[1]}": v for k, v in autotune.timers(tuner_state).items()} if tuning else None,
            },
        )


def _is_sticky(pol) -> bool:
    """Whether a policy keeps running jobs where they are (then a plan with nobody waiting is a no-op)."""
    return bool(getattr(pol, "keeps_running", False)) or isinstance(pol, StickyPlacement)


def _wanted_tier(n: int, cluster: ClusterView) -> int:
    """The most consolidated tier a job of n GPUs could get on an empty cluster."""
    if n <= cluster.gpus_per_node:
        return NODE
    racks = cluster.rack_of_node
    per_rack = max(racks.count(r) for r in set(racks)) * cluster.gpus_per_node
    return RACK if n <= per_rack else SPINE


def simulate(trace: Trace, policy: str, config: EventConfig = EventConfig()) -> RunResult:
    """One event-mode run (convenience wrapper)."""
    return EventSimulator(config).run(trace, policy)


def simulator_for(spec, seed_index: int = 0) -> EventSimulator:
    """An EventSimulator for a `sim.runner.RunSpec` (palctl simulate --mode event).

    Seed index i draws GPU identities with variability seed i and seeds the placements' RNG
    with i. `nodes_per_rack=None` keeps EventConfig's default (4 nodes under a leaf);
    `congestion` is the background load of both the leaf and the spine tier.
    """
    kw = {}
    if getattr(spec, "nodes_per_rack", None):
        kw["nodes_per_rack"] = spec.nodes_per_rack
    if getattr(spec, "racks", None):
        kw["cluster"] = cluster_from_racks(dict(spec.racks), spec.gpus_per_node)
    elif getattr(spec, "cluster", None) is not None:
        kw["cluster"] = spec.cluster
    load = float(getattr(spec, "congestion", 0.0) or 0.0)
    return EventSimulator(
        EventConfig(
            num_nodes=spec.num_nodes,
            gpus_per_node=spec.gpus_per_node,
            queue=spec.queue,
            locality_penalty=spec.locality_penalty,
            variability_seed=seed_index,
            seed=seed_index,
            congestion=Congestion(load, load),
            variability=getattr(spec, "variability", None),
            **kw,
        )
    )
