"""palctl rankings: the current ranking snapshot as a table (node, GPU, class, score, bin, flags),
or, with --changed, the GPUs that drifted since the previous ranking.

Exit codes: 0 shown (with --changed: no GPU drifted); 1 an error (no ranking, store
unreachable, a node that could not be marked); 2 a bad option; 3 with --changed: some GPU
drifted (usable from cron or monitoring)."""

from __future__ import annotations

import click

from pal_slurm.bench.repository import StoreError, StoreProfilingRepository
from pal_slurm.cli.commands._drift import drift_between, mark_nodes
from pal_slurm.cli.commands._profiling import open_profiling
from pal_slurm.cli.context import cli_config
from pal_slurm.cli.conventions import PalCommand, emit_json, json_option, output_option
from pal_slurm.cli.errors import ExitStatus, PalError
from pal_slurm.model.classes import class_rank
from pal_slurm.ranking.snapshot import RankingSnapshot


@click.command("rankings", cls=PalCommand)
@click.option("--class", "perf_class", default=None, help="Only this class (A..D).")
@json_option("Print the snapshot (or, with --changed, the drift) as one JSON document.")
@output_option("the snapshot (or the drift) as JSON")
@click.option("--changed", is_flag=True, help="List GPUs that got slower or changed bin since the previous ranking.")
@click.option("--since", type=click.IntRange(min=1), default=None,
              help="With --changed: compare with this version (default: the one before the latest).")
@click.option("--threshold", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --changed: relative slowdown that counts as drift (default [drift] threshold).")
@click.option("--action", type=click.Choice(["none", "comment", "drain"]), default="none", show_default=True,
              help="With --changed: mark the drifted GPUs' nodes in Slurm (node Comment, or drain).")
@click.option("--dry-run", is_flag=True, help="With --action: print the exact scontrol calls instead of running them.")
@click.pass_context
def rankings(ctx: click.Context, perf_class: str | None, as_json: bool, output_path: str | None, changed: bool,
             since: int | None, threshold: float | None, action: str, dry_run: bool) -> None:
    """Show the latest ranking snapshot per node / GPU / class, or what drifted (--changed)."""
    try:
        _, repo = open_profiling(ctx, read_only=True)
        snap = repo.latest_ranking()
    except (StoreError, OSError, ValueError) as exc:
        raise PalError(str(exc)) from None
    if snap is None:
        raise PalError("no ranking yet: run palctl profile-nodes, then palctl rank")
    if changed:
        _changed(ctx, repo, snap, perf_class, since, threshold, action, dry_run, as_json, output_path)
        return
    entries = [e for e in snap.entries if perf_class is None or e.perf_class == perf_class]
    if perf_class is not None and not entries:
        raise PalError(f"ranking v{snap.version} has no class {perf_class!r} (classes: {','.join(snap.classes())})")
    entries.sort(key=lambda e: (class_rank(e.perf_class), e.perf_class, e.node, e.slot))
    if as_json or output_path:
        d = snap.to_dict()
        d["entries"] = [x for x in d["entries"] if perf_class is None or x["perf_class"] == perf_class]
        emit_json(d, as_json, output_path, sort_keys=True)
        if as_json:
            return
    click.echo(f"ranking v{snap.version} ({snap.method})")
    header = f"{'NODE':<12} {'GPU':>3} {'CLASS':<5} {'SCORE':>7} {'SF':>7} {'BIN':>3} FLAGS"
    click.echo(header)
    for e in entries:
        click.echo(f"{e.node:<12} {e.slot:>3} {e.perf_class:<5} {e.score:>7.3f} {e.sf:>7.3f} {e.bin:>3} "
                   f"{','.join(e.flags) or '-'}")


DRIFT_FOUND = ExitStatus.DRIFT


def _changed(ctx: click.Context, repo: StoreProfilingRepository, snap: RankingSnapshot, perf_class: str | None,
             since: int | None, threshold: float | None, action: str, dry_run: bool, as_json: bool,
             output_path: str | None) -> None:
    base_version = since if since is not None else snap.version - 1
    if base_version >= snap.version:
        raise PalError(f"--since v{base_version} is not older than the latest ranking v{snap.version}")
    try:
        base = repo.ranking(base_version) if base_version >= 1 else None
    except (StoreError, OSError) as exc:
        raise PalError(str(exc)) from None
    if base is None:
        raise PalError(f"no ranking v{base_version} to compare v{snap.version} with")
    threshold = threshold if threshold is not None else cli_config(ctx).drift.threshold
    drifts = [d for d in drift_between(base, snap, threshold) if perf_class is None or d.perf_class == perf_class]
    emit_json({
        "from_version": base.version, "to_version": snap.version, "threshold": threshold,
        "drifted": [{"node": d.node, "slot": d.slot, "perf_class": d.perf_class, "old_score": d.old_score,
                     "new_score": d.new_score, "change": round(d.change, 6), "old_bin": d.old_bin,
                     "new_bin": d.new_bin} for d in drifts]}, as_json, output_path, sort_keys=True)
    if not as_json:
        click.echo(f"ranking v{base.version} -> v{snap.version}: {len(drifts)} GPU(s) drifted "
                   f"(slower by more than {threshold:.0%} or another bin)")
        for d in drifts:
            click.echo("  " + d.describe())
    failed = mark_nodes(ctx, drifts, action, dry_run)
    if failed:
        raise PalError(f"{failed} node(s) could not be marked")
    if drifts:
        ctx.exit(DRIFT_FOUND)


COMMAND = rankings
