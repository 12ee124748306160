"""palctl import-variability: load a variability dataset as samples (and optionally rank)."""

from __future__ import annotations

import time

import click

from pal_slurm.bench.importer import import_samples, split_class
from pal_slurm.ranking.rank import diff, rank_samples
from pal_slurm.bench.repository import StoreError
from pal_slurm.cli.commands._profiling import open_profiling
from pal_slurm.cli.commands._variability_files import mapped_nodes, placement_options
from pal_slurm.cli.errors import PalError
from pal_slurm.ranking.datasets import DatasetError


@click.command("import-variability")
@click.argument("file")
@placement_options
@click.option("--class", "perf_class", default=None,
              help="Class of a per-run file (or only this class of a table); FILE may be CLASS=FILE instead.")
@click.option("--rank/--no-rank", "do_rank", default=False, help="Also build and save a ranking snapshot now.")
@click.pass_context
def import_variability(ctx: click.Context, file: str, map_to_nodes: str | None, file_gpus_per_node: int,
                       perf_class: str | None, do_rank: bool) -> None:
    """Load FILE (a per-GPU PerfVar table or a per-run file; CLASS=FILE names a per-run file's
    class, as in simulate --variability) into the sample store.

    GPUs go where the file says (a table's Node_ID/Local_GPU_ID; a per-run file's node and device
    columns, with cabinet, or `node-slot` ids); GPUs it does not locate (bare GPU UUIDs) fill
    node0, node1, ... in id order; --map-to-nodes puts them on named nodes instead. --rank ranks
    every class in the store (samples within profiling.window_s), so importing class B keeps
    class A ranked.
    """
    spec_class, file = split_class(file)
    if spec_class and perf_class and spec_class != perf_class.upper():
        raise click.BadParameter(f"{spec_class}={file} and --class {perf_class} disagree", param_hint="--class")
    perf_class = spec_class or perf_class
    nodes = mapped_nodes(map_to_nodes)
    now = time.time()
    try:
        samples = import_samples(file, nodes=nodes, gpus_per_node=file_gpus_per_node, perf_class=perf_class, now=now)
    except DatasetError as exc:
        raise PalError(str(exc)) from None
    if not samples:
        raise PalError(f"{file}: nothing to import (class {perf_class!r} not in the file?)")
    try:
        settings, repo = open_profiling(ctx, read_only=False)
        repo.add_samples(samples)
    except (StoreError, OSError) as exc:
        raise PalError(str(exc)) from None
    gpus = len({(s.node, s.slot) for s in samples})
    classes = ",".join(sorted({s.perf_class for s in samples}))
    click.echo(f"imported {len(samples)} sample(s) for {gpus} GPU(s), classes {classes}")
    if do_rank:
        try:
            previous = repo.latest_ranking()
            # every class in the store, not only the imported ones: a new version replaces the old
            in_window = repo.samples(since=now - settings.window_s)
            # the store keeps microseconds: a sample read back may sit a hair after `now`
            rank_now = max([now, *(s.taken_at for s in in_window)])
            snap = rank_samples(in_window, now=rank_now, window_s=settings.window_s, method=settings.method,
                                version=(previous.version if previous else 0) + 1)
            snap = repo.save_ranking(snap)
        except (StoreError, OSError) as exc:
            raise PalError(f"samples imported, but the ranking could not be saved: {exc}") from None
        click.echo(f"ranking saved as v{snap.version} (classes {','.join(snap.classes())}); "
                   f"{len(diff(previous, snap))} change(s) since the last one")


COMMAND = import_variability
