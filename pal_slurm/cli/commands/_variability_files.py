"""The options that place a variability file's GPUs, the same on every command that reads one
(import-variability, simulate --variability, whatif --variability); the placement rules are in
pal_slurm.bench.importer."""

from __future__ import annotations

from typing import Callable, TypeVar

import click

from pal_slurm.intake.hostlist import expand as expand_hostlist

F = TypeVar("F", bound=Callable[..., object])


def placement_options(f: F) -> F:
    """--map-to-nodes and --gpus-per-node (parameters `map_to_nodes`, `file_gpus_per_node`)."""
    f = click.option("--gpus-per-node", "file_gpus_per_node", type=click.IntRange(min=1), default=4,
                     show_default=True,
                     help="GPUs per node when placing a variability file's GPUs by position "
                          "(--map-to-nodes, or GPUs the file does not locate).")(f)
    f = click.option("--map-to-nodes", "map_to_nodes", default=None, metavar="NODES",
                     help="Place a variability file's GPUs, in id order, on these nodes, e.g. 'gpu[01-04]' "
                          "(instead of where the file says).")(f)
    return f


def mapped_nodes(expr: str | None) -> list[str] | None:
    """--map-to-nodes expanded; None when not given; BadParameter naming the option."""
    if expr is None:
        return None
    try:
        nodes = expand_hostlist(expr)
    except ValueError as exc:
        raise click.BadParameter(f"bad node list {expr!r}: {exc}", param_hint="--map-to-nodes") from None
    if not nodes:
        raise click.BadParameter("no nodes given", param_hint="--map-to-nodes")
    return nodes
