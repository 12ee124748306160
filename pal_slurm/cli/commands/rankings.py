"""palctl rankings: the current ranking snapshot as a table (node, GPU, class, score, bin, flags)."""

from __future__ import annotations

import json

import click

from pal_slurm.bench.repository import StoreError
from pal_slurm.cli.commands._profiling import open_profiling
from pal_slurm.cli.errors import PalError
from pal_slurm.model.classes import class_rank


@click.command("rankings")
@click.option("--class", "perf_class", default=None, help="Only this class (A..D).")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON.")
@click.pass_context
def rankings(ctx, perf_class, as_json):
    """Show the latest ranking snapshot per node / GPU / class."""
    try:
        _, repo = open_profiling(ctx)
        snap = repo.latest_ranking()
    except (StoreError, OSError, ValueError) as exc:
        raise PalError(str(exc)) from None
    if snap is None:
        raise PalError("no ranking yet: run palctl profile-nodes, then palctl rank")
    entries = [e for e in snap.entries if perf_class is None or e.perf_class == perf_class]
    if perf_class is not None and not entries:
        raise PalError(f"ranking v{snap.version} has no class {perf_class!r} (classes: {','.join(snap.classes())})")
    entries.sort(key=lambda e: (class_rank(e.perf_class), e.perf_class, e.node, e.slot))
    if as_json:
        d = snap.to_dict()
        d["entries"] = [x for x in d["entries"] if perf_class is None or x["perf_class"] == perf_class]
        click.echo(json.dumps(d, indent=1, sort_keys=True))
        return
    click.echo(f"ranking v{snap.version} ({snap.method})")
    header = f"{'NODE':<12} {'GPU':>3} {'CLASS':<5} {'SCORE':>7} {'SF':>7} {'BIN':>3} FLAGS"
    click.echo(header)
    for e in entries:
        click.echo(f"{e.node:<12} {e.slot:>3} {e.perf_class:<5} {e.score:>7.3f} {e.sf:>7.3f} {e.bin:>3} "
                   f"{','.join(e.flags) or '-'}")


COMMAND = rankings
