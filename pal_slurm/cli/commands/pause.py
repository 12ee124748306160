"""palctl pause: stop PAL at once, without touching Slurm's configuration."""

from __future__ import annotations

import click

from pal_slurm.cli.commands._pause import set_pause
from pal_slurm.cli.conventions import PalCommand


@click.command("pause", cls=PalCommand)
@click.pass_context
def pause(ctx: click.Context) -> None:
    """Pause PAL: every job passes to Slurm untouched, and pald releases the jobs it holds
    (unpinned, as submitted) within one cycle. Kept in the store: survives pald restarts.
    `palctl resume` undoes it."""
    set_pause(ctx, True)


COMMAND = pause
