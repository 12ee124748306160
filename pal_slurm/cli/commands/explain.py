"""palctl explain JOBID: why a job got its GPUs (class, bins, what else there was, locality).

JOBID is as Slurm writes it. pald records decisions under a job's own id (and its request id);
an array task `1234_5` has an id of its own once Slurm starts it, which only Slurm knows, so it
is resolved through squeue: never read as the number 12345."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

import click

from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.cli.conventions import JOB_ID
from pal_slurm.cli.errors import PalError
from pal_slurm.intake.tags import request_id
from pal_slurm.model.modes import RUN_RECORDS
from pal_slurm.slurm.jobids import JobRef

if TYPE_CHECKING:
    from pal_slurm.config import Config
    from pal_slurm.slurm.readers import JobInfo

_TAG = re.compile(r"pal:(placed|defer|pass)(?:=([^;\s]*))?")
LIMIT_RECORD = "limit:"  # a decision taken for a Slurm job-count or resource limit (engine.held, held_jobs)
_LIMIT_SAYS = {
    "defer": "held while its user, account or QOS is at a Slurm limit ({}): released once one more job fits it",
    "pass": "Slurm kept it waiting on its pin for a limit ({}): the pin was dropped, Slurm starts it when the limit allows",
}


def find_job(jobs: Iterable[JobInfo], ref: JobRef) -> JobInfo | None:
    """The squeue record of `ref`: the job itself, a split-off array task (a record of its own),
    or the array's record of pending tasks that still holds it; None when squeue has none."""
    from pal_slurm.slurm.errors import SlurmParseError

    if ref.array_task is None:
        return next((j for j in jobs if j.job_id == ref.job_id), None)
    wanted = str(ref)
    for j in jobs:
        try:
            if wanted in (str(r) for r in j.element_refs()):
                return j
        except SlurmParseError:  # a task string this does not read: not the record asked for
            continue
    return None


def _slurm_job(cfg: Config, ref: JobRef) -> tuple[JobInfo | None, str]:
    from pal_slurm.slurm.errors import SlurmError
    from pal_slurm.slurm.readers import SlurmReader
    from pal_slurm.slurm.runner import CommandRunner

    try:
        jobs = SlurmReader(CommandRunner(slurm_conf=cfg.slurm.conf, bin_dir=cfg.slurm.bin_dir)).jobs()
    except SlurmError as exc:
        return None, f"Slurm not readable ({exc})"
    job = find_job(jobs, ref)
    return (job, "") if job is not None else (None, "not in squeue (finished more than MinJobAge ago?)")


@click.command("explain")
@click.argument("job_ref", metavar="JOBID", type=JOB_ID)
@click.pass_context
def explain(ctx: click.Context, job_ref: JobRef) -> None:
    """Why job JOBID got its GPUs (or why PAL left it to Slurm).

    JOBID as Slurm writes it: 1234, or 1234_5 for task 5 of array job 1234."""
    if job_ref.het_offset is not None:
        raise PalError(f"{job_ref} is a component of heterogeneous job {job_ref.job_id}: pald records decisions "
                       f"per job, so explain the job itself (palctl explain {job_ref.job_id})")
    cfg = cli_config(ctx)
    repo = cli_store(ctx, read_only=True)
    job, why_not = _slurm_job(cfg, job_ref)
    if job_ref.array_task is not None and job is None:
        raise PalError(f"array task {job_ref}: {why_not}; pald records a task under the job id Slurm gave it: "
                       f"find it with `sacct -X -j {job_ref} -o JobIDRaw` and run palctl explain with that id")
    job_id = job.job_id if job is not None else job_ref.job_id
    keys = [str(job_id)]
    if job_ref.array_task is not None and job is not None and job.is_array_record:
        click.echo(f"array task {job_ref} has not started: it is part of array job {job_id}'s pending record")
    elif job_ref.array_task is not None and job is not None and job.job_id != job_ref.job_id:
        click.echo(f"array task {job_ref} is job {job_id}")
    if job is not None:
        click.echo(f"job {job_id}: {job.state}, comment {job.comment!r}, admin_comment {job.admin_comment!r}")
        if job.nodes:
            slots = "; ".join(f"{n}:{','.join(map(str, sorted(s)))}" for n, s in sorted(job.gpu_slots.items()))
            click.echo(f"  runs on {','.join(job.nodes)}" + (f" (GPU slots {slots})" if slots else ""))
        rid = request_id(job.admin_comment)
        if rid:
            keys.insert(0, f"req:{rid}")
        tag = _TAG.search(job.admin_comment or "")
        if not tag:
            click.echo("  no pal: tag: not a PAL job (no pal: spec in its comment), or submitted before pal-slurm")
    else:
        click.echo(f"job {job_id}: {why_not}")
    decisions = [d for k in keys for d in repo.decisions(k, limit=20)]
    if not decisions:
        raise PalError(f"no pald decision recorded for job {job_ref} (looked up {', '.join(keys)})")
    decisions.sort(key=lambda d: d.created_at)
    for d in decisions:
        nodes = "; ".join(f"{n}:{','.join(map(str, s))}" for n, s in d.nodes.items()) or "-"
        click.echo(f"  {d.created_at:%Y-%m-%d %H:%M:%S} {d.kind.value:<5} reason={d.reason or '-'} class={d.perf_class} "
                   f"ranking=v{d.ranking_version} gpus={nodes}")
    # what pald decided, not the records of where the job then ran (trial/report.py reads those)
    decided = [d for d in decisions if not d.reason.startswith(RUN_RECORDS)] or decisions
    if decided[-1].reason.startswith(LIMIT_RECORD):
        click.echo("  " + _LIMIT_SAYS[decided[-1].kind.value].format(decided[-1].reason[len(LIMIT_RECORD):]))
    last = next((d for d in reversed(decided) if d.nodes), None)
    if last is None:
        click.echo("  PAL chose no GPUs for it: " + {"defer": "it waited in pald's queue",
                                                    "pass": "it was left to Slurm"}.get(decided[-1].kind.value, ""))
        return
    snap = repo.ranking(last.ranking_version) if last.ranking_version else None
    if snap is None:
        click.echo("  no ranking snapshot was in use: PAL placed by locality and packing only")
        return
    cls = last.perf_class
    by_gpu = {(e.node, e.slot): e for e in snap.entries if e.perf_class == cls}
    chosen = [(n, s) for n, slots in last.nodes.items() for s in slots]
    click.echo(f"  class {cls} in ranking v{snap.version} ({snap.method}):")
    for n, s in chosen:
        e = by_gpu.get((n, s))
        click.echo(f"    {n}:{s}  " + (f"score {e.score:.3f}  bin {e.bin} (sf {e.sf:.3f})"
                                       f"{'  ' + ','.join(e.flags) if e.flags else ''}" if e else "not ranked (treated as 1.0)"))
    worst = max((by_gpu[g].sf for g in chosen if g in by_gpu), default=1.0)
    best_bin = min((e.sf for e in by_gpu.values()), default=1.0)
    slow = sorted(f"{n}:{s}" for (n, s), e in by_gpu.items() if e.sf > best_bin)
    click.echo(f"  expected slowdown {worst:.3f} (the job runs at its slowest GPU's bin); the fastest bin is "
               f"{best_bin:.3f}; GPUs in slower bins for this class: {', '.join(slow) if slow else 'none'}")
    click.echo(f"  locality: {len(last.nodes)} node(s)" + (" (one node: no cross-node penalty)" if len(last.nodes) == 1 else ""))


COMMAND = explain
