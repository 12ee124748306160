"""Slurm Prolog: one benchmark sample per GPU allocated on this node, when they are due. Exits 0.

sbin/pal-prolog first asks `prolog_gate.skip_job`, which ends most jobs' prolog without
importing this module; here the same policy (`pal_slurm.bench.due`) is applied again on the
job's Slurm record, which also covers jobs whose GPUs slurmd's environment does not show.
A due job's GPUs are measured within `[profiling] prolog_max_delay_s` of the prolog's start
(and `timeout_s`), and once their samples are stored or spooled the node's state file notes
them measured.
"""

from __future__ import annotations

from typing import Mapping

from pal_slurm.bench.due import Policy, verdict
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
from pal_slurm.bench.measured import read_state, record_measured
from pal_slurm.bench.settings import ProfilingSettings


def record(ctx: HookContext) -> str:
    held, job = job_gpus(ctx)
    comment = job_comment(ctx, job)
    if is_profile_job(comment):
        log.info("prolog job %s: a palctl profile-nodes job measures itself", ctx.job_id)
        return "skipped"
    gpus = held.gpus
    if not gpus:
        no_gpus_line("prolog", ctx, held)
        return "no-gpus" if held.known else "unknown-gpus"
    s = ctx.settings
    now = ctx.clock()
    v = verdict(Policy.from_hours(s.prolog_every_h, s.prolog_pal_only), comment, ctx.node, gpus,
                read_state(s.spool_dir), now)
    if not v.measure:
        log.info("prolog job %s on %s: not measured: %s", ctx.job_id, ctx.node, v.why)
        return "not-due"
    samples = measure(ctx, gpus, job_class(ctx, comment))
    outcome = deliver(ctx, samples)
    log.info("prolog job %s on %s: %s; %d sample(s) %s", ctx.job_id, ctx.node, v.why, len(samples), outcome)
    if outcome in ("stored", "spooled") and samples:
        try:
            record_measured(s.spool_dir, ctx.node, sorted({x.slot for x in samples}), now)
        except OSError as exc:
            log.warning("prolog job %s: cannot note GPUs measured in %s (%s); they stay due",
                        ctx.job_id, s.spool_dir, exc.strerror or exc)
    return outcome


def time_limit_s(settings: ProfilingSettings) -> float:
    """What a due measurement may add to the job's start: prolog_max_delay_s, within timeout_s."""
    return min(settings.timeout_s, settings.prolog_max_delay_s)


def main(env: Mapping[str, str] | None = None, ctx: HookContext | None = None,
         started: float | None = None) -> int:
    return run_script(record, "prolog", env, ctx, limit_s=time_limit_s, started=started)
