"""Slurm Epilog: a benchmark sample per GPU plus the job's wall time on its GPU set. Exits 0."""

from __future__ import annotations

from typing import Mapping, Sequence

from pal_slurm.bench.base import KIND_WALLTIME, Sample
from pal_slurm.bench.hook import (
    HookContext,
    deliver,
    is_profile_job,
    job_class,
    job_comment,
    job_gpus,
    log,
    measure,
    no_gpus_line,
    run_script,
)


def walltime_samples(
    ctx: HookContext, gpus: Sequence[int], perf_class: str, start: float | None, end: float | None = None
) -> list[Sample]:
    """One `walltime` sample per GPU: start to end (else now), with the whole GPU set."""
    if start is None:
        log.warning("epilog job %s: no StartTime known; wall time not recorded", ctx.job_id)
        return []
    now = ctx.clock()
    wall = max(0.0, (end if end is not None else now) - start)
    gpu_set = f"{ctx.node}:{','.join(str(g) for g in gpus)}"
    return [
        Sample(
            node=ctx.node, slot=g, perf_class=perf_class, backend="epilog", value=wall,
            higher_is_better=False, metrics={"wall_s": wall, "gpu_set": gpu_set},
            job_id=ctx.job_id or None, taken_at=now, kind=KIND_WALLTIME,
        )
        for g in gpus
    ]


def record(ctx: HookContext) -> str:
    held, job = job_gpus(ctx)
    comment = job_comment(ctx, job)
    if is_profile_job(comment):
        log.info("epilog job %s: a palctl profile-nodes job measures itself", ctx.job_id)
        return "skipped"
    gpus = held.gpus
    if not gpus or job is None:
        no_gpus_line("epilog", ctx, held)
        return "no-gpus" if held.known else "unknown-gpus"
    cls = job_class(ctx, comment)
    end = job.end_time if 0 < job.end_time <= ctx.clock() else None  # not yet ended: now
    samples = walltime_samples(ctx, gpus, cls, job.start_time or None, end)
    try:
        samples += measure(ctx, gpus, cls)
    except Exception as exc:  # noqa: BLE001 - still record the wall time
        log.warning("epilog job %s: benchmark failed: %s", ctx.job_id, exc)
    outcome = deliver(ctx, samples)
    log.info("epilog job %s on %s: %d sample(s) %s", ctx.job_id, ctx.node, len(samples), outcome)
    return outcome


def main(env: Mapping[str, str] | None = None, ctx: HookContext | None = None) -> int:
    return run_script(record, "epilog", env, ctx)

