"""palctl mode: PAL's mode per partition (off / shadow / on), shown or changed at run time."""

from __future__ import annotations

import getpass
import socket
from datetime import datetime, timezone

import click

from pal_slurm.cli.commands._pause import RELOAD_TIMEOUT_S
from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.cli.conventions import PalCommand
from pal_slurm.cli.errors import PalError
from pal_slurm.daemon.client import PaldClient, PaldError
from pal_slurm.model.modes import ALL, MODES
from pal_slurm.store.errors import StoreError
from pal_slurm.store.switches import SiteSwitches, mode_switch


@click.command("mode", cls=PalCommand)
@click.argument("partition", required=False)
@click.argument("mode", required=False, type=click.Choice(MODES))
@click.pass_context
def mode(ctx: click.Context, partition: str | None, mode: str | None) -> None:
    """Show PAL's mode of every partition, or set PARTITION's to MODE: `off` (its jobs pass
    untouched), `shadow` (pald decides as when on and records it, the job runs as Slurm places
    it: `palctl trial report`) or `on`. PARTITION `*` is every partition not named. Kept in the
    store (over pal.toml's [daemon] mode and partition_modes); a job that may run in several
    partitions gets the most cautious of their modes."""
    cfg = cli_config(ctx)
    if partition is not None and mode is None:
        raise click.UsageError("give a MODE after the partition (off, shadow or on), or neither to list")
    repo = cli_store(ctx, read_only=mode is None)
    try:
        if partition is not None and mode is not None:
            who = f"{getpass.getuser()}@{socket.gethostname()}"
            repo.set_switch(mode_switch(partition, mode, who, datetime.now(timezone.utc)))
        switches = SiteSwitches.from_store(repo.switches())
    except StoreError as err:
        raise PalError(f"the store did not answer: {err}") from None
    modes = cfg.daemon.modes().overridden(switches.modes)
    if partition is not None:
        click.echo(f"{'every other partition' if partition == ALL else partition}: {mode}")
        try:
            PaldClient(cfg.daemon.socket, timeout_s=RELOAD_TIMEOUT_S).reload()
            click.echo("pald follows it from its next answer")
        except PaldError as exc:
            click.echo(f"pald is not answering ({exc}): it follows the mode when it starts")
        return
    for name, value in sorted(modes.by_partition.items()):
        source = "palctl mode" if name in switches.modes else "pal.toml"
        click.echo(f"{name:<20} {value:<7} ({source})")
    click.echo(f"{'(every other)':<20} {modes.default:<7} ({'palctl mode' if ALL in switches.modes else 'pal.toml'})")


COMMAND = mode
