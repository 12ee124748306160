"""`compat` mode: the PAL artifact's round-based simulator, reproduced exactly.

The model (see the project's notes on the artifact):
- rounds of R seconds (360); at each round boundary t: (1) every running job advances by
  R / (pm * loc * iter_time) iterations and attains R seconds of service; jobs reaching their
  iteration count finish *at t* (JCT is quantised to rounds); (2) stop once every tracked job
  finished; (3) jobs with arrival <= t join the queue; (4) queue order, then placement;
  (5) suspended jobs free their GPUs; launched jobs get loc = penalty if they span > 1 node
  else 1, and pm = max over their GPUs of the class's per-GPU PerfVar (raw, not binned).
- per-GPU PerfVar drawn per run from the Longhorn data (`artifact_profiles`, seed 42); PAL
  and PM-First see the K-means bins of it (`artifact` binning); random placements use the
  same RNG stream after the draws.
- after the trace, extra jobs keep arriving (Poisson, 2 per hour, `random.seed(1)`), reusing
  trace rows cyclically; only the trace's own jobs (0..len-1) are measured.
No checkpoint or restart cost: the artifact has none.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Iterator

from pal_slurm.model import ClusterView
from pal_slurm.model.classes import ARTIFACT_CLASSES
from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.policy import placement as placement_by_name
from pal_slurm.policy.base import PlacementPolicy
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.profiles import artifact_profiles
from pal_slurm.sim.core import SimActuator, SimJob, SimState
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.loop import EventLoop
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.trace import Trace, TraceJob, fit_gpu_models, job_class, unclassed_scores
from pal_slurm.sim.variability import MeasuredGpus


@dataclass(frozen=True)
class CompatConfig:
    num_nodes: int = 16
    gpus_per_node: int = 4
    round_s: float = 360.0
    locality_penalty: float = 1.7
    jobs_per_hour: float = 2.0  # extra arrivals after the trace
    variability_seed: int = 42
    arrival_seed: int = 1
    queue: str = "fifo"
    binning: str = "artifact"
    max_rounds: int = 200_000  # a guard: a policy that never finishes is an error, not a hang
    max_job_rounds: int = 20_000_000  # and a bound on the work: backlogs grow with the extra arrivals
    cluster: ClusterView | None = None  # overrides num_nodes x gpus_per_node (e.g. a measured cluster's nodes)
    variability: MeasuredGpus | None = None  # measured classes replace the bundled draws (sim.variability)


@dataclass(eq=False, slots=True)
class CompatJob(SimJob):
    """A job on the round clock: progress in iterations, gained at each round boundary."""

    done: float = 0.0  # iterations done
    loc: float = 1.0  # the artifact's locality penalty (spans more than one node) or 1.0
    iter_time: float = 1.0

    def __post_init__(self) -> None:
        self.iter_time = self.src.iter_time

    def remaining_time(self) -> float:
        return (self.src.iterations - self.done) * self.iter_time


def arrivals(trace: Trace, jobs_per_hour: float, seed: int) -> Iterator[tuple[int, float, TraceJob]]:
    """(key, arrival time, trace row): the trace, then Poisson extras reusing rows cyclically."""
    rng = random.Random(seed)
    jobs = trace.jobs
    prev = 0.0
    for key, job in enumerate(jobs):
        prev = job.submit_time
        yield key, prev, job
    key = len(jobs)
    while True:
        gap = math.ceil(-math.log(1.0 - rng.random()) / jobs_per_hour * 3600)
        prev = prev + gap
        yield key, prev, jobs[key % len(jobs)]
        key += 1


ROUND = 0  # the one event kind: a round boundary


class CompatSimulator:
    def __init__(self, config: CompatConfig = CompatConfig()):
        self.config = config
        self.cluster = config.cluster or ClusterView.uniform(config.num_nodes, config.gpus_per_node)

    def run(self, trace: Trace, policy: str, progress: Callable[[float], None] | None = None) -> RunResult:
        cfg = self.config
        placement = placement_by_name(policy)
        trace = fit_gpu_models(trace, self.cluster)  # the artifact's cluster names no models: dropped
        horizon = max(j.submit_time + j.ideal_runtime for j in trace.jobs) / cfg.round_s
        if horizon > cfg.max_rounds:
            raise SimulationError(f"{trace.name}: needs at least {horizon:.0f} rounds of {cfg.round_s:g} s, more than "
                                  f"compat mode's {cfg.max_rounds}; use --mode event for a trace this long")
        return _Rounds(self, trace, placement, progress).run()


class _Rounds:
    """One run on the simulator's event loop (sim.loop), whose one event is the round: at each
    boundary t it (1) advances the running jobs by the round and ends those done, (2) lets in
    the arrivals up to t, (3) decides and carries the plan out, then schedules the next round
    at t + R, until every tracked job has ended."""

    def __init__(self, sim: CompatSimulator, trace: Trace, placement: PlacementPolicy,
                 progress: Callable[[float], None] | None):
        cfg = self.cfg = sim.config
        self.cluster, self.trace, self.placement, self.progress = sim.cluster, trace, placement, progress
        G = self.cluster.size
        perfvar, rng = artifact_profiles(G, cfg.variability_seed)
        if cfg.variability is not None:
            perfvar = {**perfvar, **cfg.variability.scores_for(self.cluster, cfg.variability_seed)}
        perfvar = {**perfvar, **unclassed_scores(trace, G)}
        self.engine = Engine(EngineSettings(placement=placement.name, queue=cfg.queue,
                                            locality_penalty=cfg.locality_penalty), rng=rng, policy=placement)
        self.ranking = Ranking.from_scores(perfvar, cfg.binning)
        # An idle round (nothing launched or stopped) repeats while nothing changes, unless the
        # placement reshuffles running jobs at random: a sticky one draws only when it places.
        self.replans_idle = placement.traits.randomised and not placement.traits.sticky
        self.n_tracked = len(trace.jobs)
        self.state: SimState[CompatJob] = SimState(self.cluster, perfvar)
        # the loop's guard is the rounds' (max_rounds): one event per round
        self.loop = EventLoop(f"{trace.name}/{placement.name}", max_events=cfg.max_rounds + 1)
        self.actuator = SimActuator(self.state, self.loop, self.start)
        self.source = arrivals(trace, cfg.jobs_per_hour, cfg.arrival_seed)
        self.pending_arrival = next(self.source)
        self.job_rounds = 0
        self.measured = 0
        self.busy_gpu_s = 0.0
        self.util: list[tuple[float, int]] = []
        self.rounds = 0
        self.last_t = 0.0
        self.idle_plan = False

    def start(self, job: CompatJob, gpus: tuple[int, ...], t: float) -> None:
        self.state.start(job, gpus, t)
        job.loc = self.cfg.locality_penalty if self.cluster.nodes_spanned(gpus) > 1 else 1.0

    def run(self) -> RunResult:
        self.loop.push(0.0, ROUND, None)
        self.loop.run((self.round,))
        return RunResult(
            trace=self.trace.name,
            policy=self.placement.name,
            seed=self.cfg.variability_seed,
            mode="compat",
            num_gpus=self.cluster.size,
            jobs=sorted(self.state.outcomes, key=lambda o: o.job_id),
            busy_gpu_s=self.busy_gpu_s,
            util_series=self.util,
            extra={"last_finish_s": self.last_t, "rounds": self.rounds},
        )

    def round(self, t: float, _payload: object) -> bool:
        cfg, state = self.cfg, self.state
        active = state.active
        R = cfg.round_s
        self.last_t = t
        self.rounds += 1
        if self.rounds > cfg.max_rounds:
            raise SimulationError(f"{self.trace.name}/{self.placement.name}: no end after {cfg.max_rounds} rounds of "
                                  f"{cfg.round_s:g} s (compat mode); a trace this long needs --mode event")
        self.job_rounds += len(active)
        if self.job_rounds > cfg.max_job_rounds:
            raise SimulationError(f"{self.trace.name}/{self.placement.name}: {len(active)} jobs still queued or "
                                  f"running after {self.rounds} rounds (compat mode keeps adding "
                                  f"{cfg.jobs_per_hour:g} jobs/h); the cluster cannot keep up: use --mode event or "
                                  "a bigger --cluster")
        # (1) progress of the round that just ended
        changed = False
        n_tracked = self.n_tracked
        for job in list(active.values()):
            if not job.gpus:
                continue
            job.done += R / (job.pm * job.loc * job.iter_time)
            job.attained += R
            state.touch(job)
            job.comm_s += R * (1.0 - 1.0 / job.loc)
            if job.done >= job.src.iterations:
                changed = True
                tracked = job.key < n_tracked
                best_loc = 1.0 if job.src.num_gpus <= self.cluster.gpus_per_node else cfg.locality_penalty
                state.finish(job, t, best_loc if tracked else None, job_id=job.key)
                self.measured += tracked
        if self.measured == n_tracked:
            return False  # every tracked job ended: no next round
        # (2) arrivals
        while self.pending_arrival[1] <= t:
            key, at, src = self.pending_arrival
            state.arrive(CompatJob(key, src, job_class(src, ARTIFACT_CLASSES), at))
            changed = True
            self.pending_arrival = next(self.source)
        # (3) schedule, unless nothing can have changed since an idle round
        if changed or not self.idle_plan or self.replans_idle:
            plan = self.engine.decide(state.requests(), state.view(), self.ranking, t, in_submit_order=True)
            self.actuator.carry_out(plan)
            self.idle_plan = not plan.suspend and not plan.launch
        busy = state.busy
        self.busy_gpu_s += busy * R
        if not self.util or self.util[-1][1] != busy:
            self.util.append((t, busy))
        if self.progress is not None:
            self.progress(self.measured / n_tracked)
        self.loop.push(t + R, ROUND, None)
        return False  # (the round decided itself)
