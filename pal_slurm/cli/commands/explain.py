"""palctl explain JOBID: why a job got its GPUs (class, bins, chosen GPUs, locality)."""

from __future__ import annotations

import click

from pal_slurm.bench.explain import explain_lines
from pal_slurm.cli.context import cli_store
from pal_slurm.cli.errors import PalError
from pal_slurm.store.errors import StoreError


@click.command("explain")
@click.argument("job_id")
@click.pass_context
def explain(ctx, job_id):
    """Explain pal-slurm's decision for JOB_ID from the decision log and its ranking."""
    job_id = job_id.strip()
    if not job_id or not job_id.replace("_", "").isalnum():
        raise click.BadParameter(f"not a job id: {job_id!r}", param_hint="JOB_ID")
    repo = cli_store(ctx)
    try:
        decisions = repo.decisions(job_id)
        version = decisions[0].ranking_version if decisions else None
        ranking = repo.ranking(version) if version is not None else None
    except StoreError as exc:
        raise PalError(str(exc)) from None
    if not decisions:
        raise PalError(
            f"no decision recorded for job {job_id}: pald never saw it (no pal:class= in its comment, "
            "or submitted while pald was down), or the id is wrong"
        )
    for line in explain_lines(decisions, ranking):
        click.echo(line)


COMMAND = explain
