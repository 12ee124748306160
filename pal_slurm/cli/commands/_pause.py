"""What `palctl pause` and `palctl resume` share: set the store's pause switch, then have pald
read it at once (its `reload`), so the hook's next answer already follows it.

The switch lives in the store, not in pald: it survives pald's restarts and a standby that
takes over reads it on its first store read. pald down is no reason to refuse: the switch is
kept, and pald follows it from its start (meanwhile the hook passes every job anyway)."""

from __future__ import annotations

import getpass
import socket
from datetime import datetime, timezone

import click

from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.cli.errors import PalError
from pal_slurm.daemon.client import PaldClient, PaldError
from pal_slurm.store.errors import StoreError
from pal_slurm.store.switches import SiteSwitches, pause_switch

RELOAD_TIMEOUT_S = 10.0  # pald's reload waits up to its store deadline (5 s) for the read


def set_pause(ctx: click.Context, paused: bool) -> None:
    cfg = cli_config(ctx)
    repo = cli_store(ctx, read_only=False)
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    try:
        before = SiteSwitches.from_store(repo.switches()).paused
        repo.set_switch(pause_switch(paused, who, datetime.now(timezone.utc)))
    except StoreError as err:
        raise PalError(f"the pause switch was not changed: {err}") from None
    word = "paused" if paused else "resumed"
    click.echo(f"{word} by {who}" + ("" if before != paused else f" (it already was {word})"))
    try:
        client = PaldClient(cfg.daemon.socket, timeout_s=RELOAD_TIMEOUT_S)
        client.reload()
        follows = bool(client.health().details.get("paused")) == paused
    except PaldError as exc:
        click.echo(f"pald is not answering ({exc}): it follows the switch when it starts")
        return
    if not follows:  # the store read failed (pald is degraded): the link retries on its own
        click.echo("pald has not read the switch yet (see `palctl status`): it follows it on its next store read")
    elif paused:
        click.echo("pald passes every job and releases the jobs it holds, unpinned, within one cycle")
    else:
        click.echo("pald places PAL jobs again")
