"""Job traces: the Sia-Philly CSV format and a seeded synthetic generator.

Sia-Philly rows are `job_id,num_gpus,submit_time,duration,model` where `duration` is a number
of *iterations* (the artifact multiplies it by a per-model iteration time). An optional
`gpu_model` column names the GPU model a job must run on (a100, v100: a site's
`--gres=gpu:a100:2`), for clusters of several models (`palctl simulate --gpu-models`); empty:
any GPU.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Sequence

from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.cluster import ClusterView
from pal_slurm.model.shape import JobShape
from pal_slurm.input_files import InputError, read_csv, where

# Seconds per iteration per model (PAL artifact, workload.py::get_per_iter_time).
ITER_TIME_S = {
    "BERT": 0.179,
    "DCGAN": 0.0469266931,
    "GPT2": 3.5714,
    "PointNet": 0.28125,
    "resnet50": 0.17540429367763434,
    "vgg19": 0.300610341,
}
DEFAULT_ITER_TIME_S = 1.0


class TraceError(InputError):
    """A trace that cannot be used; the message names the file, the line and the column."""


UNCLASSED = "-"  # TraceJob.perf_class of a job with no class: no variability (every GPU 1.0 for it)


def job_class(job: "TraceJob", classes: AppClassMap) -> str:
    """A job's class: UNCLASSED as is; else its explicit class (a name or an application, as a
    `pal:class=` comment gives it) or its model, through the simulator's class map."""
    if job.perf_class == UNCLASSED:
        return UNCLASSED
    return classes.class_of(job.perf_class or job.model)


def unclassed_scores(trace: "Trace", num_gpus: int) -> dict[str, tuple[float, ...]]:
    """{UNCLASSED: all 1.0} when the trace has unclassed jobs (else {}, leaving rankings as they were)."""
    return {UNCLASSED: (1.0,) * num_gpus} if any(j.perf_class == UNCLASSED for j in trace.jobs) else {}


# Bounds that no real trace reaches; past them a value is a unit mistake, not a workload.
MAX_TIME_S = 1e9  # ~31 years of submit times
MAX_RUNTIME_S = 1e9  # ideal runtime of one job
MAX_GPUS_PER_JOB = 1_000_000


@dataclass(frozen=True)
class TraceJob:
    job_id: int
    num_gpus: int
    submit_time: float  # seconds
    iterations: float  # total iterations
    model: str
    shape: JobShape | None = None  # a Slurm shape (-N k --gres=gpu:g); None: num_gpus anywhere

    iter_s: float | None = None  # seconds per iteration when not the model's (accounting traces: 1.0)
    perf_class: str | None = None  # explicit variability class; None: from the model (sim's class map)
    gpu_model: str | None = None  # the GPU model it must run on (--gres=gpu:a100:2); None: any GPU
    time_limit_s: float | None = None  # its Slurm time limit (accounting traces; what backfill plans with); None: unknown

    def __post_init__(self) -> None:
        # The simulators loop on these numbers: NaN or inf would never finish. No path (file,
        # generator, accounting) can build a job that would.
        if not (isinstance(self.num_gpus, int) and 0 < self.num_gpus <= MAX_GPUS_PER_JOB):
            raise TraceError(f"job {self.job_id}: num_gpus must be an integer in 1..{MAX_GPUS_PER_JOB}, got {self.num_gpus!r}")
        if not (math.isfinite(self.submit_time) and 0 <= self.submit_time <= MAX_TIME_S):
            raise TraceError(f"job {self.job_id}: submit_time must be finite, in 0..{MAX_TIME_S:g} s, got {self.submit_time!r}")
        if not (math.isfinite(self.iterations) and self.iterations > 0):
            raise TraceError(f"job {self.job_id}: duration must be finite and > 0, got {self.iterations!r}")
        if self.iter_s is not None and not (math.isfinite(self.iter_s) and self.iter_s > 0):
            raise TraceError(f"job {self.job_id}: iter_s must be finite and > 0, got {self.iter_s!r}")
        if self.shape is not None and self.shape.total != self.num_gpus:
            raise TraceError(f"job {self.job_id}: shape {self.shape} is not {self.num_gpus} GPUs")
        if not self.ideal_runtime <= MAX_RUNTIME_S:
            raise TraceError(f"job {self.job_id}: runs {self.ideal_runtime:.3g} s, more than {MAX_RUNTIME_S:g} s")

    @property
    def iter_time(self) -> float:
        if self.iter_s is not None:
            return self.iter_s
        return ITER_TIME_S.get(self.model, DEFAULT_ITER_TIME_S)

    @property
    def ideal_runtime(self) -> float:
        """Seconds on median GPUs with no locality penalty."""
        return self.iterations * self.iter_time


@dataclass(frozen=True)
class Trace:
    name: str
    jobs: tuple[TraceJob, ...]
    warnings: tuple[str, ...] = ()  # things the run can go on with (unknown models, ...)


REQUIRED = ("job_id", "num_gpus", "submit_time", "duration", "model")
_MODEL_BY_KEY = {m.lower(): m for m in ITER_TIME_S}


def load_trace(path: str | Path, name: str | None = None) -> Trace:
    """Read a Sia-Philly CSV. Bad content raises TraceError naming file, line and column."""
    path = Path(path)
    table = read_csv(path, what="trace", required=REQUIRED, error=TraceError)
    jobs = []
    first_line: dict[int, int] = {}
    unknown: dict[str, int] = {}
    for row in table.rows:
        job_id = row.integer("job_id", minimum=0)
        if job_id in first_line:
            raise row.fail(f"duplicate job_id {job_id} (first on line {first_line[job_id]})", "job_id")
        first_line[job_id] = row.line
        raw_model = row.text("model")
        model = _MODEL_BY_KEY.get(raw_model.lower())
        if model is None:
            model = raw_model
            unknown.setdefault(raw_model, row.line)
        iterations = row.number("duration", above=0.0)
        iter_time = ITER_TIME_S.get(model, DEFAULT_ITER_TIME_S)
        if iterations * iter_time > MAX_RUNTIME_S:
            raise row.fail(f"{iterations:g} iterations x {iter_time:g} s is more than {MAX_RUNTIME_S:g} s; "
                           "duration counts iterations", "duration")
        jobs.append(TraceJob(
            job_id=job_id,
            num_gpus=row.integer("num_gpus", minimum=1, maximum=MAX_GPUS_PER_JOB),
            submit_time=row.number("submit_time", minimum=0.0, maximum=MAX_TIME_S),
            iterations=iterations,
            model=model,
            gpu_model=row.get("gpu_model") or None,
        ))
    if not jobs:
        raise TraceError("no jobs (only a header)", path)
    warnings = tuple(
        f"{where(path, line, table.header.index('model') + 1)}unknown model {m!r}: "
        f"{DEFAULT_ITER_TIME_S:g} s per iteration, the default class; known: {', '.join(sorted(ITER_TIME_S))}"
        for m, line in unknown.items()
    )
    return Trace(name or path.stem, tuple(sorted(jobs, key=lambda j: (j.submit_time, j.job_id))), warnings)


def bundled_trace(name: str) -> Trace:
    """A bundled Sia-Philly trace by name (`workload-1` .. `workload-6`)."""
    p = Path(str(resources.files("pal_slurm") / "data" / "traces" / "sia-philly" / f"{name}.csv"))
    if not p.exists():
        raise TraceError(f"no bundled trace {name!r}; have {', '.join(bundled_trace_names())}")
    return load_trace(p, name)


def bundled_trace_names() -> list[str]:
    d = Path(str(resources.files("pal_slurm") / "data" / "traces" / "sia-philly"))
    return sorted(p.stem for p in d.glob("*.csv"))


def fit_gpu_models(trace: Trace, cluster: ClusterView) -> Trace:
    """The trace as `cluster` runs it. On a cluster that names GPU models every job that asks
    for one must fit in that model's GPUs (a clear TraceError, not a job that never runs). On
    one that names none, the requests are dropped with a warning and those jobs run on any GPU:
    a site's accounting (every job on a typed site names a model) still simulates without
    `--gpu-models`."""
    asking = [job for job in trace.jobs if job.gpu_model is not None]
    if not asking:
        return trace
    by_model = cluster.gpus_by_model
    if not by_model:
        models = ", ".join(sorted({j.gpu_model for j in asking if j.gpu_model}))
        note = (f"{trace.name}: {len(asking)} job(s) ask for a GPU model ({models}); the simulated cluster "
                "names none (--gpu-models), so they run on any GPU")
        jobs = tuple(replace(j, gpu_model=None) if j.gpu_model is not None else j for j in trace.jobs)
        return Trace(trace.name, jobs, trace.warnings + (note,))
    for job in asking:
        assert job.gpu_model is not None
        have = len(by_model.get(job.gpu_model, ()))
        if not have:
            raise TraceError(f"{trace.name}: job {job.job_id} needs GPU model {job.gpu_model!r}; "
                             f"the cluster's models: {', '.join(sorted(by_model))}")
        if job.num_gpus > have:
            raise TraceError(f"{trace.name}: job {job.job_id} needs {job.num_gpus} {job.gpu_model} GPUs; "
                             f"the cluster has {have}")
    return trace


def resolve_trace(spec: str) -> Trace:
    """A path to a CSV, or the name of a bundled trace."""
    p = Path(spec)
    if p.exists() or p.suffix == ".csv" or "/" in spec:
        return load_trace(p)
    return bundled_trace(spec)


# Philly-like job mix: (gpus, weight) and (model, weight); durations log-uniform like Gavel's.
PHILLY_GPU_MIX: Sequence[tuple[int, float]] = ((1, 0.45), (2, 0.08), (4, 0.15), (8, 0.17), (12, 0.06), (16, 0.06), (24, 0.02), (32, 0.01))
MODEL_MIX: Sequence[tuple[str, float]] = (
    ("vgg19", 0.3), ("PointNet", 0.3), ("resnet50", 0.15), ("DCGAN", 0.1), ("BERT", 0.1), ("GPT2", 0.05),
)


def _mean_log_uniform_minutes(lo_exp: float, hi_exp: float) -> float:
    return (10 ** hi_exp - 10 ** lo_exp) / ((hi_exp - lo_exp) * math.log(10))


# Mean job length of `synthetic_trace` in hours: 80% log-uniform 10^1.5..10^3 min, 20% 10^3..10^4 min.
MEAN_SYNTHETIC_HOURS = (0.8 * _mean_log_uniform_minutes(1.5, 3.0) + 0.2 * _mean_log_uniform_minutes(3.0, 4.0)) / 60.0


def rate_for_load(load: float, num_gpus: int, gpu_mix: Sequence[tuple[int, float]] = PHILLY_GPU_MIX) -> float:
    """Arrivals per hour at which the synthetic mix asks for `load` x the cluster's GPU-hours.

    Load 1.0 is the most a cluster can serve; above it the queue grows without bound and a
    simulation measures the backlog, not the placement. (The synthetic mix asks for ~85
    GPU-hours per job: 20 jobs/h is ~1.6x the work 1,024 GPUs can do.)
    """
    gmix = [(g, w) for g, w in gpu_mix if g <= num_gpus]
    if not gmix or load <= 0:
        raise TraceError("a synthetic load needs GPUs and load > 0")
    mean_gpus = sum(g * w for g, w in gmix) / sum(w for _, w in gmix)
    return load * num_gpus / (mean_gpus * MEAN_SYNTHETIC_HOURS)


def synthetic_trace(
    num_jobs: int,
    seed: int = 0,
    jobs_per_hour: float = 20.0,
    gpu_mix: Sequence[tuple[int, float]] = PHILLY_GPU_MIX,
    model_mix: Sequence[tuple[str, float]] = MODEL_MIX,
    max_gpus: int | None = None,
    name: str | None = None,
) -> Trace:
    """Poisson arrivals, Philly-like GPU counts, Gavel-like durations (80% short, 20% long)."""
    if num_jobs <= 0 or jobs_per_hour <= 0:
        raise TraceError("synthetic traces need num_jobs > 0 and jobs_per_hour > 0")
    rng = random.Random(seed)
    gmix = [(g, w) for g, w in gpu_mix if max_gpus is None or g <= max_gpus]
    if not gmix:
        raise TraceError("no GPU count in the mix fits max_gpus")
    t = 0.0
    jobs = []
    for i in range(num_jobs):
        t += -math.log(1.0 - rng.random()) / jobs_per_hour * 3600.0
        gpus = rng.choices([g for g, _ in gmix], [w for _, w in gmix])[0]
        model = rng.choices([m for m, _ in model_mix], [w for _, w in model_mix])[0]
        u = rng.random()
        minutes = 10 ** rng.uniform(1.5, 3.0) if u < 0.8 else 10 ** rng.uniform(3.0, 4.0)
        seconds = 60.0 * minutes
        iters = max(1.0, round(seconds / ITER_TIME_S.get(model, DEFAULT_ITER_TIME_S)))
        jobs.append(TraceJob(i, gpus, round(t, 3), float(iters), model))
    return Trace(name or f"synthetic-{num_jobs}-s{seed}", tuple(jobs))
