"""One arm's results from Slurm's records and the payloads' own, in trace seconds (pure).

Slurm's records (jobcomp) say which jobs ran and completed. Their times are whole wall seconds,
and one wall second is `scale` trace seconds (600 at the default scale: more than the median
job's runtime), so JCT, makespan and utilisation are timed with sub-second clocks instead: the
submission is the harness's clock just before `sbatch` (`submitted`), start and end are the
payload's own (its interpreter starting, its record written). Without `submitted` (replays run
before it was kept) the whole-second records are used, as they were. The slowdown the jobs
experienced and the network's share come from the payload records too (what each job read from
Slurm about its placement).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from pal_lab.replay.jobcomp import CompRecord
from pal_lab.replay.plan import ReplayPlan
from pal_slurm.sim.network import comm_overhead

if TYPE_CHECKING:
    from pal_lab.replay.payload import PayloadRecord


class ReplayIncomplete(RuntimeError):
    """Some replayed jobs have no Slurm record or did not complete."""


@dataclass(frozen=True)
class JobResult:
    name: str
    gpus: int
    base_s: float  # ideal runtime (trace s)
    submit_s: float  # trace s after the arm's first submission (Slurm's record)
    start_s: float
    end_s: float
    gpu_slowdown: float  # slowest GPU's slowdown (payload)
    net_factor: float  # network factor (payload)
    placement: Mapping[str, Sequence[int]]

    @property
    def jct_s(self) -> float:
        return self.end_s - self.submit_s

    @property
    def run_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class ArmSummary:
    trace: str
    arm: str
    jobs: int
    avg_jct_s: float
    median_jct_s: float
    p99_jct_s: float
    makespan_s: float
    utilization: float
    gpu_weighted_slowdown: float
    comm_overhead_s: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty sequence."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def job_results(plan: ReplayPlan, comp: Sequence[CompRecord], payloads: Mapping[str, PayloadRecord],
                submitted: Mapping[str, float] | None = None) -> list[JobResult]:
    """Join the plan, Slurm's records (by job name) and the payload records; raise
    ReplayIncomplete naming every job that is missing or did not complete. `submitted`: epoch
    seconds of each job's sbatch (the harness's clock): times come from it and the payloads
    (sub-second); None: from Slurm's whole-second records."""
    by_name = {r.name: r for r in comp}
    missing = [j.name for j in plan.jobs if j.name not in by_name or j.name not in payloads]
    failed = [f"{n}={by_name[n].state}" for n in by_name if by_name[n].state != "COMPLETED"
              and n in {j.name for j in plan.jobs}]
    if missing or failed:
        raise ReplayIncomplete(f"{len(missing)} job(s) without records {missing[:8]}, "
                               f"{len(failed)} not completed {failed[:8]}")
    precise = submitted is not None and all(j.name in submitted for j in plan.jobs)

    def times(name: str) -> tuple[float, float, float]:
        if precise:
            assert submitted is not None
            return submitted[name], float(payloads[name]["start"]), float(payloads[name]["end"])
        r = by_name[name]
        return r.submit, r.start, r.end

    t0 = min(times(j.name)[0] for j in plan.jobs)
    s = plan.scale
    out = []
    for j in plan.jobs:
        p = payloads[j.name]
        sub, start, end = times(j.name)
        out.append(JobResult(j.name, j.trace_job.num_gpus, j.base_s, (sub - t0) * s, (start - t0) * s,
                             (end - t0) * s, float(p["gpu_slowdown"]), float(p["net_factor"]),
                             {k: tuple(v) for k, v in p["placement"].items()}))
    return out


def summarise(trace: str, arm: str, jobs: Sequence[JobResult], total_gpus: int) -> ArmSummary:
    jcts = [j.jct_s for j in jobs]
    makespan = max(j.end_s for j in jobs) - min(j.submit_s for j in jobs)
    busy = sum(j.gpus * j.run_s for j in jobs)
    gpus = sum(j.gpus for j in jobs)
    return ArmSummary(
        trace=trace, arm=arm, jobs=len(jobs),
        avg_jct_s=statistics.fmean(jcts), median_jct_s=statistics.median(jcts), p99_jct_s=percentile(jcts, 99),
        makespan_s=makespan, utilization=busy / (total_gpus * makespan) if makespan > 0 else 0.0,
        gpu_weighted_slowdown=sum(j.gpus * j.gpu_slowdown * j.net_factor for j in jobs) / gpus,
        comm_overhead_s=sum(comm_overhead(j.run_s, j.net_factor) for j in jobs),
    )
