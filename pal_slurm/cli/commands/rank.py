"""palctl rank: recompute the ranking snapshot from recent samples and show what moved."""

from __future__ import annotations

import time
from collections import Counter
from typing import Iterable, Sequence

import click

from pal_slurm.bench.busy import REASON_KINDS, reason_kind
from pal_slurm.bench.repository import StoreError
from pal_slurm.cli.commands._drift import drift_between, log_drift, mark_nodes
from pal_slurm.cli.commands._profiling import open_profiling
from pal_slurm.cli.context import cli_config
from pal_slurm.cli.conventions import Duration, PalCommand
from pal_slurm.cli.errors import PalError
from pal_slurm.ranking.binning import METHODS
from pal_slurm.model.sample import Sample
from pal_slurm.ranking.rank import Move, diff, rank_samples
from pal_slurm.ranking.snapshot import RankingSnapshot


def format_moves(moves: Iterable[Move]) -> list[str]:
    lines = []
    for m in moves:
        where = f"{m.node}:{m.slot} class {m.perf_class}"
        if m.old_bin is None:
            lines.append(f"  new   {where}: bin {m.new_bin} (sf {m.new_sf:.3f})")
        elif m.new_bin is None:
            lines.append(f"  gone  {where}: was bin {m.old_bin} (sf {m.old_sf:.3f})")
        else:
            arrow = "slower" if m.new_bin > m.old_bin else "faster"
            lines.append(f"  {arrow:6}{where}: bin {m.old_bin} -> {m.new_bin} (sf {m.old_sf:.3f} -> {m.new_sf:.3f})")
    return lines


def flagged_sample_lines(samples: Sequence[Sample]) -> list[str]:
    """How many of the window's samples were flagged, and why: ranking uses a flagged sample
    only for a GPU with nothing else, so an admin should know when that is most of them."""
    flagged = [s for s in samples if s.busy]
    if not flagged:
        return []
    counts = Counter(reason_kind(s.busy_reason) for s in flagged)
    order = {k: i for i, k in enumerate(REASON_KINDS)}
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
    lines = [f"{len(flagged)} of {len(samples)} sample(s) flagged ({kinds}): each counts only for a GPU "
             "with nothing else"]
    if counts.get("idle GPU"):
        lines.append("  idle GPU: the nvml backend polled GPUs that ran nothing; with cupy (pip install "
                     "'pal-slurm[gpu]') or torch beside it, it loads them while it polls")
    return lines


@click.command("rank", cls=PalCommand)
@click.option("--window", type=Duration(at_least=1.0, was="seconds"), default=None,
              help="Use samples from this long ago until now, a Slurm duration (e.g. 7-00:00:00, 12h, 7d; "
                   "default [profiling] window_s).")
@click.option("--method", type=click.Choice(METHODS), default=None, help="Binning method (default [policy] binning).")
@click.option("--classes", default=None, help="Comma-separated classes to rank (default: every class with samples).")
@click.option("--dry-run", is_flag=True, help="Show what would move (and the scontrol calls of [drift] action) "
              "without saving a new version or marking nodes.")
@click.pass_context
def rank(ctx: click.Context, window: float | None, method: str | None, classes: str | None, dry_run: bool) -> None:
    """Recompute per-class GPU rankings from recent samples (busy samples dropped, outliers flagged)."""
    try:
        settings, repo = open_profiling(ctx, read_only=dry_run)
        now = time.time()
        window_s = window or settings.window_s
        samples = repo.samples(since=now - window_s)
        previous = repo.latest_ranking()
    except (StoreError, OSError) as exc:
        raise PalError(str(exc)) from None
    wanted = [c.strip() for c in classes.split(",") if c.strip()] if classes else None
    version = (previous.version if previous else 0) + 1
    snap = rank_samples(samples, now=now, window_s=window_s, method=method or settings.method,
                        version=version, classes=wanted)
    if not snap.entries:
        raise PalError(f"no usable benchmark samples in the last {window_s / 3600:.1f} h; run palctl profile-nodes first")
    moves = diff(previous, snap)
    if not dry_run:
        try:
            snap = repo.save_ranking(snap)
            version = snap.version
        except (StoreError, OSError) as exc:
            raise PalError(f"cannot save ranking v{version}: {exc}") from None
    gpus = len({(e.node, e.slot) for e in snap.entries})
    verb = "would be" if dry_run else "saved as"
    click.echo(f"ranking {verb} v{version}: {gpus} GPU(s), classes {','.join(snap.classes())}, "
               f"{sum(e.samples for e in snap.entries)} sample(s) used")
    for line in flagged_sample_lines(samples):
        click.echo(line)
    flagged = [e for e in snap.entries if e.flags]
    if flagged:
        click.echo(f"{len(flagged)} flagged entr{'y' if len(flagged) == 1 else 'ies'} (see palctl rankings)")
    if previous is None:
        click.echo("first ranking: every GPU is new")
    elif not moves:
        click.echo(f"no GPU changed bin since v{previous.version}")
    else:
        click.echo(f"{len(moves)} change(s) since v{previous.version}:")
        for line in format_moves(moves):
            click.echo(line)
    if previous is not None:
        _report_drift(ctx, previous, snap, version, dry_run)


def _report_drift(ctx: click.Context, previous: RankingSnapshot, snap: RankingSnapshot, version: int,
                  dry_run: bool) -> None:
    """GPUs that got slower beyond [drift] threshold: printed, logged, and their nodes marked
    when [drift] action asks for it (a failure to mark is reported, the ranking stays saved)."""
    drift_cfg = cli_config(ctx).drift
    drifts = drift_between(previous, snap, drift_cfg.threshold)
    if not drifts:
        return
    click.echo(f"{len(drifts)} GPU(s) drifted (slower by more than {drift_cfg.threshold:.0%} or another bin):")
    for d in drifts:
        click.echo("  " + d.describe())
    log_drift(drifts, version)
    if mark_nodes(ctx, drifts, drift_cfg.action, dry_run):
        click.echo("some nodes could not be marked (see above); the ranking is saved", err=True)


COMMAND = rank
