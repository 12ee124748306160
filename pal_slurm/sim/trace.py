"""Job traces: the Sia-Philly CSV format and a seeded synthetic generator.

Sia-Philly rows are `job_id,num_gpus,submit_time,duration,model` where `duration` is a number
of *iterations* (the artifact multiplies it by a per-model iteration time).
"""

from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

from pal_slurm.model.shape import JobShape

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


class TraceError(ValueError):
    """A trace that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class TraceJob:
    job_id: int
    num_gpus: int
    submit_time: float  # seconds
    iterations: float  # total iterations
    model: str
    shape: JobShape | None = None  # a Slurm shape (-N k --gres=gpu:g); None: num_gpus anywhere

    def __post_init__(self) -> None:
        if self.shape is not None and self.shape.total != self.num_gpus:
            raise TraceError(f"job {self.job_id}: shape {self.shape} is not {self.num_gpus} GPUs")

    @property
    def iter_time(self) -> float:
        return ITER_TIME_S.get(self.model, DEFAULT_ITER_TIME_S)

    @property
    def ideal_runtime(self) -> float:
        """Seconds on median GPUs with no locality penalty."""
        return self.iterations * self.iter_time


@dataclass(frozen=True)
class Trace:
    name: str
    jobs: tuple[TraceJob, ...]


REQUIRED = ("job_id", "num_gpus", "submit_time", "duration", "model")


def load_trace(path: str | Path, name: str | None = None) -> Trace:
    """Read a Sia-Philly CSV. Bad rows raise TraceError naming file, line and field."""
    path = Path(path)
    try:
        fh = path.open(newline="")
    except OSError as exc:
        raise TraceError(f"{path}: cannot open trace: {exc.strerror or exc}") from None
    with fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{path}: missing column(s) {', '.join(missing)}; expected {','.join(REQUIRED)}")
        jobs = []
        for lineno, row in enumerate(reader, start=2):
            where = f"{path}:{lineno}"
            try:
                job = TraceJob(
                    job_id=int(row["job_id"]),
                    num_gpus=int(row["num_gpus"]),
                    submit_time=float(row["submit_time"]),
                    iterations=float(row["duration"]),
                    model=(row["model"] or "").strip(),
                )
            except (TypeError, ValueError):
                raise TraceError(f"{where}: malformed row {dict(row)}") from None
            if job.num_gpus <= 0 or job.iterations <= 0 or job.submit_time < 0 or not job.model:
                raise TraceError(f"{where}: num_gpus and duration must be > 0, submit_time >= 0, model set")
            jobs.append(job)
    if not jobs:
        raise TraceError(f"{path}: no jobs")
    return Trace(name or path.stem, tuple(sorted(jobs, key=lambda j: (j.submit_time, j.job_id))))


def bundled_trace(name: str) -> Trace:
    """A bundled Sia-Philly trace by name (`workload-1` .. `workload-6`)."""
    p = Path(str(resources.files("pal_slurm") / "data" / "traces" / "sia-philly" / f"{name}.csv"))
    if not p.exists():
        raise TraceError(f"no bundled trace {name!r}; have {', '.join(bundled_trace_names())}")
    return load_trace(p, name)


def bundled_trace_names() -> list[str]:
    d = Path(str(resources.files("pal_slurm") / "data" / "traces" / "sia-philly"))
    return sorted(p.stem for p in d.glob("*.csv"))


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
