"""Run metrics: JCT statistics, makespan, utilisation, queueing delay and lower-bound ratios.

Definitions (the same for both simulator modes, so they compare):
- JCT = finish - submit of each tracked job; avg, geomean, p50, p99 (linear interpolation).
- makespan = last tracked finish - first tracked submit.
- utilisation (allocated) = GPU-seconds allocated to any job / (GPUs x makespan window);
  useful = ideal GPU-seconds of the tracked jobs (median GPUs, no penalties) / the same.
- queueing delay = first start - submit.
- lower bounds: makespan >= total ideal GPU-seconds / GPUs; a job's JCT >= its runtime on the
  best GPUs with no wait (computed by the simulator per job: `lower_bound_s`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class JobOutcome:
    job_id: int
    num_gpus: int
    model: str
    submit: float
    first_start: float
    finish: float
    ideal_runtime: float  # seconds on median GPUs, no penalties
    lower_bound_s: float  # best possible JCT (best GPUs, best locality, no wait)
    comm_overhead_s: float = 0.0  # seconds lost to network/locality penalties
    preemptions: int = 0
    gpus: tuple[int, ...] = ()  # the GPUs it ended on (a replay's model is compared with the lab's by them)

    @property
    def jct(self) -> float:
        return self.finish - self.submit


@dataclass
class RunResult:
    """One (trace, policy, seed) run."""

    trace: str
    policy: str
    seed: int
    mode: str
    num_gpus: int
    jobs: list[JobOutcome]
    busy_gpu_s: float  # allocated GPU-seconds (all jobs, tracked or not, inside the window)
    util_series: list[tuple[float, int]] = field(default_factory=list)  # (time, busy GPUs)
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return summarize(self)


def _percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def summarize(run: RunResult) -> dict[str, Any]:
    jobs = run.jobs
    if not jobs:
        raise ValueError(f"{run.trace}/{run.policy}: no job finished")
    jcts = [j.jct for j in jobs]
    first_submit = min(j.submit for j in jobs)
    last_finish = max(j.finish for j in jobs)
    makespan = last_finish - first_submit
    window = run.num_gpus * makespan if makespan > 0 else float("nan")
    ideal_gpu_s = sum(j.ideal_runtime * j.num_gpus for j in jobs)
    makespan_lb = ideal_gpu_s / run.num_gpus
    return {
        "trace": run.trace,
        "policy": run.policy,
        "seed": run.seed,
        "mode": run.mode,
        "jobs": len(jobs),
        "avg_jct_s": float(np.mean(jcts)),
        "geomean_jct_s": float(math.exp(np.mean(np.log(np.maximum(jcts, 1e-9))))),
        "p50_jct_s": _percentile(jcts, 50),
        "p99_jct_s": _percentile(jcts, 99),
        "makespan_s": float(makespan),
        "utilization": float(run.busy_gpu_s / window) if window == window else float("nan"),
        "useful_utilization": float(ideal_gpu_s / window) if window == window else float("nan"),
        "avg_queue_delay_s": float(np.mean([j.first_start - j.submit for j in jobs])),
        "comm_overhead_s": float(sum(j.comm_overhead_s for j in jobs)),
        "preemptions": int(sum(j.preemptions for j in jobs)),
        "makespan_lb_ratio": float(makespan / makespan_lb) if makespan_lb > 0 else float("nan"),
        "jct_lb_ratio": float(np.mean([j.jct / j.lower_bound_s for j in jobs if j.lower_bound_s > 0])),
        "busy_gpu_s": float(run.busy_gpu_s),
        **run.extra,
    }


# Two-sided 95% Student t quantiles by degrees of freedom (no SciPy dependency).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}


def t95(dof: int) -> float:
    if dof <= 0:
        return float("nan")
    keys = sorted(_T95)
    for k in keys:
        if dof <= k:
            return _T95[k]
    return 1.96


def mean_ci95(values: Iterable[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% confidence interval); half-width 0 for one value."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    if v.size == 1:
        return float(v[0]), 0.0
    return float(v.mean()), float(t95(v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))


def geomean(values: Iterable[float]) -> float:
    v = np.asarray(list(values), dtype=float)
    return float(math.exp(np.mean(np.log(v)))) if v.size else float("nan")


def as_dict(outcome: JobOutcome) -> dict[str, Any]:
    return asdict(outcome)
