"""palctl simulate: run traces through policies in the simulator and report."""

from __future__ import annotations

import time

import click

from pal_slurm.cli.errors import PalError
from pal_slurm.cli.progress import DelayedProgress
from pal_slurm.policy import UnknownPolicy, placement, queue_order
from pal_slurm.sim.report import format_table, normalised_gains, aggregate, write_json, write_plots
from pal_slurm.sim.runner import MODES, RunSpec, parse_cluster, run_grid
from pal_slurm.input_files import InputError
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.trace import bundled_trace_names, resolve_trace, synthetic_trace

ARTIFACT_POLICIES = "pal,pmfirst,packed-sticky,packed-nonsticky,random-sticky,random-nonsticky"


def _traces(specs: tuple[str, ...], synthetic: int | None, synthetic_seed: int, max_gpus: int):
    names: list[str] = []
    for spec in specs:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            names.extend(bundled_trace_names() if part in ("sia-philly", "all") else [part])
    traces = [resolve_trace(n) for n in names]
    if synthetic:
        traces.append(synthetic_trace(synthetic, seed=synthetic_seed, max_gpus=max_gpus))
    if not traces:
        raise PalError("give --trace (a CSV path, a bundled name such as workload-1, or sia-philly) or --synthetic N")
    return traces


@click.command("simulate")
@click.option("--trace", "trace_specs", multiple=True, help="CSV path, bundled name (workload-1..6), or 'sia-philly' for all; repeatable or comma-separated.")
@click.option("--synthetic", type=click.IntRange(min=1), default=None, help="Add a synthetic Philly-like trace of N jobs.")
@click.option("--synthetic-seed", type=int, default=0, show_default=True)
@click.option("--policies", default=ARTIFACT_POLICIES, show_default=True, help="Comma-separated placements.")
@click.option("--mode", type=click.Choice(MODES), default="compat", show_default=True)
@click.option("--cluster", "cluster_text", default="16x4", show_default=True, help="NODESxGPUS_PER_NODE.")
@click.option("--nodes-per-rack", type=click.IntRange(min=1), default=None, help="Event mode: nodes under one leaf switch.")
@click.option("--topology", "topology_path", type=click.Path(dir_okay=False), default=None,
              help="Event mode: a Slurm topology.conf; its nodes (with --cluster's GPUs per node) and leaf switches.")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="Runs per (trace, policy); seed 0 of compat is the artifact's draw.")
@click.option("--queue", "queue_name", default="fifo", show_default=True, help="fifo, las or srtf.")
@click.option("--locality-penalty", type=click.FloatRange(min=1.0), default=1.7, show_default=True)
@click.option("--round", "round_s", type=click.FloatRange(min=1.0), default=360.0, show_default=True, help="Compat mode round length (s).")
@click.option("--congestion", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="Event mode: background network load.")
@click.option("--baseline", default="packed-sticky", show_default=True, help="Policy the gains are relative to.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, writable=True), default=None, help="Write results as JSON.")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=None, help="Write PNG plots into this folder.")
def simulate(trace_specs, synthetic, synthetic_seed, policies, mode, cluster_text, nodes_per_rack, topology_path,
             seeds, queue_name, locality_penalty, round_s, congestion, baseline, json_out, plots_dir):
    """Simulate traces under placement policies and print a comparison table."""
    try:
        num_nodes, gpus_per_node = parse_cluster(cluster_text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--cluster") from None
    racks = None
    if topology_path:
        from pal_slurm.slurm.errors import SlurmParseError
        from pal_slurm.slurm.topology import read_racks

        if mode != "event":
            raise click.BadParameter("a topology needs --mode event", param_hint="--topology")
        try:
            racks = tuple(read_racks(topology_path).items())
        except SlurmParseError as exc:
            raise PalError(str(exc)) from None
        num_nodes = len(racks)
    names = [p.strip() for p in policies.split(",") if p.strip()]
    try:
        names = [placement(n).name for n in names]
        queue_order(queue_name)
    except UnknownPolicy as exc:
        raise click.BadParameter(str(exc), param_hint="--policies/--queue") from None
    if not names:
        raise click.BadParameter("no policy given", param_hint="--policies")
    try:
        traces = _traces(trace_specs, synthetic, synthetic_seed, num_nodes * gpus_per_node)
    except InputError as exc:
        raise PalError(str(exc)) from None
    for trace in traces:
        for warning in trace.warnings:
            click.echo(f"warning: {warning}", err=True)
    too_big = [(t.name, j.job_id, j.num_gpus) for t in traces for j in t.jobs if j.num_gpus > num_nodes * gpus_per_node]
    if too_big:
        name, jid, n = too_big[0]
        raise PalError(f"{name}: job {jid} needs {n} GPUs but the cluster has {num_nodes * gpus_per_node}")
    spec = RunSpec(mode=mode, num_nodes=num_nodes, gpus_per_node=gpus_per_node, nodes_per_rack=nodes_per_rack,
                   seeds=seeds, queue=queue_name, locality_penalty=locality_penalty, round_s=round_s,
                   congestion=congestion, racks=racks)
    start = time.monotonic()
    with DelayedProgress(f"simulating {len(traces)} trace(s) x {len(names)} policies x {seeds} seed(s)") as bar:
        try:
            results = run_grid(traces, names, spec, on_progress=bar)
        except SimulationError as exc:
            raise PalError(str(exc)) from None
    elapsed = time.monotonic() - start
    summaries = [r.summary() for r in results]
    rows = aggregate(summaries)
    click.echo(format_table(rows))
    gains = normalised_gains(rows, baseline)
    if gains:
        click.echo(f"\ngeomean avg JCT vs {baseline}: " + ", ".join(f"{p} {v:.3f}" for p, v in sorted(gains.items(), key=lambda kv: kv[1])))
    click.echo(f"{len(results)} run(s) in {elapsed:.1f} s ({mode} mode, {num_nodes}x{gpus_per_node} GPUs)", err=True)
    meta = {"mode": mode, "cluster": f"{num_nodes}x{gpus_per_node}", "queue": queue_name, "seeds": seeds,
            "locality_penalty": locality_penalty, "round_s": round_s, "congestion": congestion,
            "baseline": baseline, "geomean_avg_jct_vs_baseline": gains, "elapsed_s": elapsed}
    if json_out:
        write_json(json_out, results, meta)
        click.echo(f"wrote {json_out}", err=True)
    if plots_dir:
        for p in write_plots(plots_dir, results, baseline):
            click.echo(f"wrote {p}", err=True)


COMMAND = simulate
