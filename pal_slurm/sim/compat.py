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
from pal_slurm.engine import Engine, EngineSettings, ManualClock
from pal_slurm.policy import placement as placement_by_name
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.profiles import artifact_profiles
from pal_slurm.sim.core import SimActuator, SimJob, SimState
from pal_slurm.sim.errors import SimulationError
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


class CompatSimulator:
    def __init__(self, config: CompatConfig = CompatConfig()):
        self.config = config
        self.cluster = config.cluster or ClusterView.uniform(config.num_nodes, config.gpus_per_node)

    def run(self, trace: Trace, policy: str, progress: Callable[[float], None] | None = None) -> RunResult:
        cfg = self.config
        G = self.cluster.size
        placement = placement_by_name(policy)
        trace = fit_gpu_models(trace, self.cluster)  # the artifact's cluster names no models: dropped
        perfvar, rng = artifact_profiles(G, cfg.variability_seed)
        if cfg.variability is not None:
            perfvar = {**perfvar, **cfg.variability.scores_for(self.cluster, cfg.variability_seed)}
        perfvar = {**perfvar, **unclassed_scores(trace, G)}
        engine = Engine(EngineSettings(placement=placement.name, queue=cfg.queue, locality_penalty=cfg.locality_penalty),
                        rng=rng, policy=placement)
        ranking = Ranking.from_scores(perfvar, cfg.binning)
        # An idle round (nothing launched or stopped) repeats while nothing changes, unless the
        # placement reshuffles running jobs at random: a sticky one draws only when it places.
        replans_idle = placement.traits.randomised and not placement.traits.sticky
        n_tracked = len(trace.jobs)
        state: SimState[CompatJob] = SimState(self.cluster, perfvar)
        gpn = self.cluster.gpus_per_node

        def start(job: CompatJob, gpus: tuple[int, ...], t: float) -> None:
            state.start(job, gpus, t)
            job.loc = cfg.locality_penalty if self.cluster.nodes_spanned(gpus) > 1 else 1.0

        clock = ManualClock()
        actuator = SimActuator(state, clock, start)

        horizon = max(j.submit_time + j.ideal_runtime for j in trace.jobs) / cfg.round_s
        if horizon > cfg.max_rounds:
            raise SimulationError(f"{trace.name}: needs at least {horizon:.0f} rounds of {cfg.round_s:g} s, more than "
                                  f"compat mode's {cfg.max_rounds}; use --mode event for a trace this long")
        job_rounds = 0
        source = arrivals(trace, cfg.jobs_per_hour, cfg.arrival_seed)
        pending_arrival = next(source)
        active = state.active
        measured = 0
        busy_gpu_s = 0.0
        util: list[tuple[float, int]] = []
        t = 0.0
        R = cfg.round_s
        rounds = 0
        idle_plan = False
        while True:
            rounds += 1
            if rounds > cfg.max_rounds:
                raise SimulationError(f"{trace.name}/{policy}: no end after {cfg.max_rounds} rounds of {cfg.round_s:g} s "
                                      "(compat mode); a trace this long needs --mode event")
            job_rounds += len(active)
            if job_rounds > cfg.max_job_rounds:
                raise SimulationError(f"{trace.name}/{policy}: {len(active)} jobs still queued or running after "
                                      f"{rounds} rounds (compat mode keeps adding {cfg.jobs_per_hour:g} jobs/h); "
                                      "the cluster cannot keep up: use --mode event or a bigger --cluster")
            # (1) progress of the round that just ended
            changed = False
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
                    best_loc = 1.0 if job.src.num_gpus <= gpn else cfg.locality_penalty
                    state.finish(job, t, best_loc if tracked else None, job_id=job.key)
                    measured += tracked
            if measured == n_tracked:
                break
            # (2) arrivals
            while pending_arrival[1] <= t:
                key, at, src = pending_arrival
                state.arrive(CompatJob(key, src, job_class(src, ARTIFACT_CLASSES), at))
                changed = True
                pending_arrival = next(source)
            # (3) schedule, unless nothing can have changed since an idle round
            if changed or not idle_plan or replans_idle:
                clock.set(t)
                plan = engine.decide(state.requests(), state.view(), ranking, t, in_submit_order=True)
                actuator.carry_out(plan)
                idle_plan = not plan.suspend and not plan.launch
            busy = state.busy
            busy_gpu_s += busy * R
            if not util or util[-1][1] != busy:
                util.append((t, busy))
            if progress is not None:
                progress(measured / n_tracked)
            t += R
        return RunResult(
            trace=trace.name,
            policy=placement.name,
            seed=cfg.variability_seed,
            mode="compat",
            num_gpus=G,
            jobs=sorted(state.outcomes, key=lambda o: o.job_id),
            busy_gpu_s=busy_gpu_s,
            util_series=util,
            extra={"last_finish_s": t, "rounds": rounds},
        )
