"""The simulator's core, shared by both clocks: job state, plan application, outcomes.

Both modes simulate the same thing: trace jobs arrive, the engine (or a decider) plans, the
plan is carried out on an in-memory cluster, jobs finish and leave an outcome. Both run on one
event loop (sim/loop.py, the run's Clock) and differ only in how time passes on it:

- `compat` (sim/compat.py): the PAL artifact's rounds, a periodic event; a running job gains a
  round's iterations at each boundary (its arithmetic is the artifact's, bit for bit);
- `event` (sim/event.py): arrivals, finishes and wake-ups; a running job's work left shrinks
  continuously, after a restart cost.

So the core owns what is the same: the job (`SimJob`: identity, class, where it runs, its
slowest GPU, first start, preemptions, attained service, the request the engine sees), the
cluster's free GPUs and the active jobs (`SimState`), the engine's Actuator on them
(`SimActuator`: a plan's stops, then its starts through `start(launch)` as in pald), and a
finished job's outcome with its lower bound (`SimState.finish`). A clock subclasses `SimJob` with its progress model (how much work is
left) and supplies, when a job starts, what its GPUs and network make of its speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, Mapping, Sequence, TypeVar

from pal_slurm.engine import Clock, Launch
from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.model.decision import JobId
from pal_slurm.policy.shapes import choice_of
from pal_slurm.sim.metrics import JobOutcome
from pal_slurm.sim.trace import TraceJob

Scores = Mapping[str, Sequence[float]]  # class -> per-GPU score (slowdown factor; 1.0 = median GPU)


@dataclass(eq=False, slots=True)
class SimJob:
    """One trace job in a run, as both clocks track it. A clock's subclass adds its progress
    model and says how much ideal work is left (`remaining_time`)."""

    key: int
    src: TraceJob
    perf_class: str
    submit: float
    sensitivity: str = "medium"  # network sensitivity the placements see
    gpus: tuple[int, ...] = ()
    pm: float = 1.0  # the class's score of its slowest GPU (its speed: ideal / pm)
    first_start: float | None = None
    started_at: float = 0.0  # last (re)start
    waiting_since: float = 0.0
    preemptions: int = 0
    version: int = 0  # changes on every start and stop (the event clock drops stale finishes)
    comm_s: float = 0.0  # seconds lost to the network
    attained: float = 0.0  # seconds of service received
    _req: JobRequest | None = field(default=None, repr=False)  # the request while nothing changed
    _first: JobRequest | None = field(default=None, repr=False)  # the first; later ones evolve it

    def remaining_time(self) -> float:
        raise NotImplementedError

    def touch(self) -> None:
        """Its state changed: the next request is built again. (Called by `SimState.touch`,
        which a clock calls, so the state's kept requests follow.)"""
        self._req = None

    def request(self) -> JobRequest:
        """The job as the engine sees it."""
        if self._req is not None:
            return self._req
        waiting_since = self.started_at if self.gpus else self.waiting_since
        if self._first is not None:
            self._req = self._first.evolved(
                running_on=self.gpus, attained_service=self.attained, remaining_time=max(0.0, self.remaining_time()),
                waiting_since=waiting_since, preemptions=self.preemptions)
            return self._req
        self._req = self._first = JobRequest(
            job_id=self.key, num_gpus=self.src.num_gpus, perf_class=self.perf_class, app=self.src.model,
            submit_time=self.submit, running_on=self.gpus, attained_service=self.attained,
            remaining_time=max(0.0, self.remaining_time()), net_sensitivity=self.sensitivity,
            waiting_since=waiting_since, preemptions=self.preemptions, shape=self.src.shape,
            gpu_model=self.src.gpu_model,
        )
        return self._req


J = TypeVar("J", bound=SimJob)


class SimState(Generic[J]):
    """The in-memory cluster of one run: which GPUs are free, which jobs (of the clock's job
    type J) are active, and the outcomes of those that finished. Its `stop`/`start` are the
    simulator's actuator."""

    def __init__(self, cluster: ClusterView, scores: Scores):
        self.cluster = cluster
        self.scores = scores
        self.sorted_scores = {c: sorted(v) for c, v in scores.items()}
        self._model_scores: dict[tuple[str, str], list[float]] = {}  # (class, GPU model) -> its GPUs' sorted
        self.active: dict[JobId, J] = {}  # in arrival order
        self.running: dict[JobId, J] = {}  # the active jobs that hold GPUs
        # Each active job's request, in arrival order, kept as jobs change instead of asked of
        # every job at every decision: a large run holds thousands of waiting jobs whose
        # requests do not change, and the event clock decides tens of thousands of times.
        self._requests: dict[JobId, JobRequest | None] = {}
        self._stale: dict[JobId, J] = {}  # jobs whose request is rebuilt at the next requests()
        self.free: set[int] = set(range(cluster.size))
        self.outcomes: list[JobOutcome] = []

    @property
    def busy(self) -> int:
        return self.cluster.size - len(self.free)

    def view(self) -> ClusterView:
        return self.cluster.with_free(self.free)

    def requests(self) -> list[JobRequest]:
        """Every active job's request, in arrival order: by submit time (a clock makes a job
        active when it arrives, in time order), all of one priority (Engine.order_jobs's
        `in_submit_order`)."""
        if self._stale:
            for key, job in self._stale.items():
                self._requests[key] = job.request()
            self._stale.clear()
        return list(self._requests.values())  # type: ignore[arg-type]

    def touch(self, job: J) -> None:
        """`job` changed in a way its request shows (GPUs, progress, wait, preemptions): the
        next requests() builds its request again. Whoever changes a job's state says so here."""
        job.touch()
        self._stale[job.key] = job

    def arrive(self, job: J) -> None:
        self.active[job.key] = job
        self._requests[job.key] = None  # (its place in arrival order; built at the next requests())
        self._stale[job.key] = job

    # ---- job state changes (the actuator's) -------------------------------------------------
    def stop(self, job: J, t: float, moved: bool) -> None:
        self.free.update(job.gpus)
        del self.running[job.key]
        job.gpus = ()
        self.touch(job)
        job.version += 1
        job.waiting_since = t
        if not moved:
            job.preemptions += 1

    def start(self, job: J, gpus: tuple[int, ...], t: float, checked: bool = False) -> None:
        """Give `job` its GPUs at t and set its slowest GPU (`pm`). `checked`: refuse a launch
        of a running job, or GPUs that are not free (a placement bug, not a simulated event)."""
        if checked:
            if job.gpus:
                raise RuntimeError(f"launched job {job.key} that is still running")
            if len(gpus) != job.src.num_gpus or not self.free.issuperset(gpus):
                raise RuntimeError(f"bad allocation {gpus} for job {job.key} ({job.src.num_gpus} GPUs)")
            model = job.src.gpu_model
            if model is not None and not self.cluster.gpus_by_model.get(model, frozenset()).issuperset(gpus):
                raise RuntimeError(f"job {job.key} needs {model} GPUs, got {gpus}")
        self.free.difference_update(gpus)
        job.gpus = gpus
        self.running[job.key] = job
        self.touch(job)
        job.version += 1
        job.pm = max(map(self.scores[job.perf_class].__getitem__, gpus))
        if job.first_start is None:
            job.first_start = t
        job.started_at = t

    # ---- the outcome ---------------------------------------------------------------------
    def lower_bound(self, job: SimJob, best_factor: float) -> float:
        """Its best possible JCT: ideal runtime on the n best GPUs of its class (of its GPU
        model, when it needs one), with the best network factor a job of its size can get, no
        wait."""
        if job.src.gpu_model is None:
            best = self.sorted_scores[job.perf_class]
        else:
            key = (job.perf_class, job.src.gpu_model)
            if key not in self._model_scores:
                scores = self.scores[job.perf_class]
                self._model_scores[key] = sorted(scores[g] for g in self.cluster.gpus_by_model[job.src.gpu_model])
            best = self._model_scores[key]
        return job.src.ideal_runtime * best[job.src.num_gpus - 1] * best_factor

    def finish(self, job: SimJob, t: float, best_factor: float | None, job_id: int) -> JobOutcome | None:
        """`job` ends at t: its GPUs are free, it leaves. Its outcome (as job `job_id`: the
        artifact numbers jobs by arrival, the event mode by the trace's ids) is recorded and
        returned, unless `best_factor` is None (a job the run does not measure)."""
        self.free.update(job.gpus)
        del self.active[job.key]
        del self._requests[job.key]
        self.running.pop(job.key, None)
        self._stale.pop(job.key, None)
        if best_factor is None:
            return None
        outcome = JobOutcome(
            job_id=job_id, num_gpus=job.src.num_gpus, model=job.src.model, submit=job.submit,
            first_start=job.first_start if job.first_start is not None else t, finish=t,
            ideal_runtime=job.src.ideal_runtime, lower_bound_s=self.lower_bound(job, best_factor),
            comm_overhead_s=job.comm_s, preemptions=job.preemptions, gpus=job.gpus,
        )
        self.outcomes.append(outcome)
        return outcome


class SimActuator(Generic[J]):
    """The engine's Actuator on the in-memory cluster: the engine's launches start jobs here
    through `start(launch)`, as they start held jobs on Slurm in pald, at the clock's time.
    `begin(job, gpus, t)` is the clock's start (it calls `SimState.start` and sets the job's
    progress model). Unlike Slurm, the simulator may also stop a running job (the artifact's
    preempting and non-sticky placements): `carry_out` does a plan's stops, then its starts."""

    def __init__(self, state: SimState[J], clock: Clock, begin: Callable[[J, tuple[int, ...], float], None]):
        self.state = state
        self.clock = clock
        self.begin = begin

    def start(self, launch: Launch) -> None:
        self.begin(self.state.active[launch.job.job_id], launch.choice.gpu_ids, self.clock.now())

    def carry_out(self, plan: RoundPlan) -> None:
        """Stop what the plan suspends (a job stopped and launched again in the same plan is
        moved, not preempted), then start what it launches, each as one Launch of the job as
        the engine saw it (its request is taken before the stops change it)."""
        state, t = self.state, self.clock.now()
        active, cluster = state.active, state.cluster
        launches = [Launch(active[jid].request(), choice_of(gpus, cluster, keep_order=True))
                    for jid, gpus in plan.launch.items()]
        for jid in plan.suspend:
            state.stop(active[jid], t, moved=jid in plan.launch)
        for launch in launches:
            self.start(launch)
