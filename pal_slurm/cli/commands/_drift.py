"""What `palctl rank` and `palctl rankings --changed` share: find drifted GPUs, print them, and
mark their nodes in Slurm when an action is asked for (or print the exact calls with --dry-run)."""

from __future__ import annotations

import logging

import click

from pal_slurm.cli.context import cli_config
from pal_slurm.ranking.drift import Drift, find_drift
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.slurm.node_marks import mark_commands, run_commands

log = logging.getLogger("palctl.drift")


def drift_between(previous: RankingSnapshot | None, current: RankingSnapshot, threshold: float) -> list[Drift]:
    return find_drift(previous.entries if previous else (), current.entries, threshold)


def mark_nodes(ctx: click.Context, drifts: list[Drift], action: str, dry_run: bool) -> int:
    """Apply `action` to the drifted GPUs' nodes; returns how many nodes failed (0 = fine)."""
    commands = mark_commands(drifts, action)
    if not commands:
        return 0
    if dry_run:
        for argv in commands:
            click.echo("would run: " + " ".join(_quote(a) for a in argv))
        return 0
    from pal_slurm.slurm.runner import CommandRunner

    cfg = cli_config(ctx)
    runner = CommandRunner(slurm_conf=cfg.slurm.conf, bin_dir=cfg.slurm.bin_dir)
    failed = 0
    for node, err in run_commands(runner, commands):
        if err is None:
            click.echo(f"marked {node} ({action})")
        else:
            failed += 1
            click.echo(f"could not mark {node} ({action}): {err}", err=True)
    return failed


def log_drift(drifts: list[Drift], version: int) -> None:
    for d in drifts:
        log.warning("GPU drift in ranking v%d: %s", version, d.describe())


def _quote(arg: str) -> str:
    return f'"{arg}"' if any(c in arg for c in " ;'") else arg

