"""Slurm Prolog: one benchmark sample per GPU allocated on this node. Always exits 0."""

from __future__ import annotations

from typing import Mapping

from pal_slurm.bench.hook import HookContext, deliver, is_profile_job, job_class, job_gpus, log, measure, run_script


def record(ctx: HookContext) -> str:
    if is_profile_job(ctx):
        log.info("prolog job %s: a palctl profile-nodes job measures itself", ctx.job_id)
        return "skipped"
    gpus, _ = job_gpus(ctx)
    if not gpus:
        log.info("prolog job %s on %s: no GPUs allocated here", ctx.job_id, ctx.node)
        return "no-gpus"
    samples = measure(ctx, gpus, job_class(ctx))
    outcome = deliver(ctx, samples)
    log.info("prolog job %s on %s: %d sample(s) %s", ctx.job_id, ctx.node, len(samples), outcome)
    return outcome


def main(env: Mapping[str, str] | None = None, ctx: HookContext | None = None) -> int:
    return run_script(record, "prolog", env, ctx)

