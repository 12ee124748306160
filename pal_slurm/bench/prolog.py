"""Slurm Prolog: one benchmark sample per GPU allocated on this node. Always exits 0."""

from __future__ import annotations

from typing import Mapping

from pal_slurm.bench.hook import (
    HookContext,
    deliver,
    is_profile_job,
    job_class,
    job_gpus,
    log,
    measure,
    no_gpus_line,
    run_script,
)


def record(ctx: HookContext) -> str:
    if is_profile_job(ctx):
        log.info("prolog job %s: a palctl profile-nodes job measures itself", ctx.job_id)
        return "skipped"
    held, _ = job_gpus(ctx)
    gpus = held.gpus
    if not gpus:
        no_gpus_line("prolog", ctx, held)
        return "no-gpus" if held.known else "unknown-gpus"
    samples = measure(ctx, gpus, job_class(ctx))
    outcome = deliver(ctx, samples)
    log.info("prolog job %s on %s: %d sample(s) %s", ctx.job_id, ctx.node, len(samples), outcome)
    return outcome


def main(env: Mapping[str, str] | None = None, ctx: HookContext | None = None) -> int:
    return run_script(record, "prolog", env, ctx)

