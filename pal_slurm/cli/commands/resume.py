"""palctl resume: undo `palctl pause`."""

from __future__ import annotations

import click

from pal_slurm.cli.commands._pause import set_pause
from pal_slurm.cli.conventions import PalCommand


@click.command("resume", cls=PalCommand)
@click.pass_context
def resume(ctx: click.Context) -> None:
    """Resume PAL after `palctl pause`: PAL jobs are placed (or held) again from the next
    submission; jobs released during the pause run where Slurm put them."""
    set_pause(ctx, False)


COMMAND = resume
