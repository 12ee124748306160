"""palctl simulate: run traces through policies in the simulator and report."""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, TypeVar

import click

from pal_slurm.cli.commands._variability_files import mapped_nodes, placement_options
from pal_slurm.cli.context import cli_config
from pal_slurm.cli.conventions import Duration, PalCommand, emit_json, json_option, output_option, plots_option
from pal_slurm.cli.errors import PalConfigError, PalError
from pal_slurm.cli.progress import DelayedProgress
from pal_slurm.input_files import InputError
from pal_slurm.model import ClusterView
from pal_slurm.policy import UnknownPolicy, placement, queue_order
from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.network import cluster_from_racks
from pal_slurm.sim.report import format_table, normalised_gains, aggregate, json_document, write_plots
from pal_slurm.sim.runner import run_grid, run_one
from pal_slurm.sim.sweep import grid_cells
from pal_slurm.cli.commands._sweep import inputs_digest, merged_results, run_element, show_status, submit, sweep_options, \
    sweep_request, write_report_text
from pal_slurm.sim.spec import MODES, RunSpec, parse_cluster
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.model.class_rules import ClassRule, parse_class_rules
from pal_slurm.sim.sacct import load_accounting_trace
from pal_slurm.sim.trace import Trace, bundled_trace_names, fit_gpu_models, rate_for_load, resolve_trace, synthetic_trace
from pal_slurm.sim.gpu_models import GpuModelGroup, GpuModelsError, parse_gpu_models, with_gpu_models
from pal_slurm.sim.variability import MeasuredGpus, load_measured, merge

RENAMED_DAYS = "--days N is now --window DURATION (a Slurm duration: 30-0 or 30d for 30 days)"
Result = TypeVar("Result")
ARTIFACT_POLICIES = "pal,pmfirst,packed-sticky,packed-nonsticky,random-sticky,random-nonsticky"


def _traces(specs: tuple[str, ...], synthetic: int | None, synthetic_seed: int, synthetic_rate: float | None,
            max_gpus: int, accounting: Callable[[str], Trace]) -> list[Trace]:
    """The traces named by --trace (bundled names, CSV paths, sacct:FILE via `accounting`) and --synthetic."""
    names: list[str] = []
    for spec in specs:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            names.extend(bundled_trace_names() if part in ("sia-philly", "all") else [part])
    traces = [accounting(n[len("sacct:"):]) if n.startswith("sacct:") else resolve_trace(n) for n in names]
    if synthetic:
        assert synthetic_rate is not None, "simulate derives it from --synthetic-load"
        traces.append(synthetic_trace(synthetic, seed=synthetic_seed, jobs_per_hour=synthetic_rate, max_gpus=max_gpus))
    if not traces:
        raise PalError("give --trace (a CSV path, a bundled name such as workload-1, or sia-philly) or --synthetic N")
    return traces


@click.command("simulate", cls=PalCommand, renamed={"--days": RENAMED_DAYS})
@click.option("--trace", "trace_specs", multiple=True,
              help="CSV path, bundled name (workload-1..6), 'sia-philly' for all, or sacct:FILE (sacct --json or "
                   "sacct -P output); repeatable or comma-separated.")
@click.option("--window", "window_s", type=Duration(at_least=1.0), default=None,
              help="sacct: only jobs submitted within this Slurm duration before the file's last submission "
                   "(e.g. 30-0, 7d).")
@click.option("--class-rules", "rules_text", default=None,
              help="sacct: 'FIELD:GLOB=CLASS; ...' (FIELD name|account|partition) for jobs without a pal:class= "
                   "comment [default: [simulate] class_rules].")
@click.option("--synthetic", type=click.IntRange(min=1), default=None, help="Add a synthetic Philly-like trace of N jobs.")
@click.option("--synthetic-seed", type=int, default=0, show_default=True)
@click.option("--synthetic-rate", type=click.FloatRange(min=0.0, min_open=True, max=1e6), default=None,
              help="Arrivals per hour of the synthetic trace (Poisson) [default: from --synthetic-load].")
@click.option("--synthetic-load", type=click.FloatRange(min=0.0, min_open=True, max=100.0), default=0.8, show_default=True,
              help="Without --synthetic-rate: arrivals that ask for this fraction of the cluster's GPU-hours.")
@click.option("--variability", "variability_specs", multiple=True,
              help="Measured GPUs instead of the bundled Longhorn data: 'store' (current ranking), 'store:vN', a file "
                   "import-variability reads, or CLASS=FILE; repeatable, later ones win per class. The cluster "
                   "follows the data unless --cluster/--topology say otherwise.")
@placement_options
@click.option("--policies", default=ARTIFACT_POLICIES, show_default=True, help="Comma-separated placements.")
@click.option("--mode", type=click.Choice(MODES), default="compat", show_default=True)
@click.option("--cluster", "cluster_text", default=None,
              help="NODESxGPUS_PER_NODE [default: the measured nodes with --variability, else 16x4].")
@click.option("--nodes-per-rack", type=click.IntRange(min=1), default=None, help="Event mode: nodes under one leaf switch.")
@click.option("--gpu-models", "gpu_models_text", default=None, metavar="MODEL=NODES[:TIME],...",
              help="Event mode: a cluster of several GPU models, e.g. a100=4:0.5,v100=12 (the first 4 nodes "
                   "a100, running jobs in 0.5x the time; the next 12 v100). A trace's gpu_model column "
                   "names the model a job must run on.")
@click.option("--topology", "topology_path", type=click.Path(dir_okay=False), default=None,
              help="Event mode: a Slurm topology.conf; its nodes (with --cluster's GPUs per node) and leaf switches.")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="Runs per (trace, policy); seed 0 of compat is the artifact's draw.")
@click.option("--queue", "queue_name", default="fifo", show_default=True, help="fifo, las, srtf, srtf-aged or slurm (submit order here: no Slurm to read).")
@click.option("--locality-penalty", type=click.FloatRange(min=1.0), default=1.7, show_default=True)
@click.option("--round", "round_s", type=Duration(at_least=1.0, was="seconds"), default="06:00", show_default=True,
              help="Compat mode round length, a Slurm duration (MM:SS; 06:00 is 360 s).")
@click.option("--congestion", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="Event mode: background network load.")
@click.option("--starvation-bound", "starvation_bound_s", type=Duration(at_least=0.0), default=None,
              help="Event mode: a site's [policy] starvation_bound_s, a Slurm duration (4:00:00 is pald's default): "
                   "no wait pal-fit adds plans a job's start later, and a job that waited longer is placed as "
                   "stock Slurm would [default: no bound].")
@click.option("--baselines", default="packed-sticky", show_default=True,
              help="Comma-separated policies to compare with; gains are relative to the first.")
@click.option("--status", "status_dir", type=click.Path(file_okay=False), default=None,
              help="Say where the sweep in this --array-dir stands (elements done, failed, pending; the merge) "
                   "and exit; any other option is ignored.")
@json_option("Print the results as one JSON document on stdout (the table goes to stderr).")
@output_option("the results as JSON")
@plots_option()
@sweep_options
@click.pass_context
def simulate(ctx: click.Context, trace_specs: tuple[str, ...], window_s: float | None, rules_text: str | None,
             synthetic: int | None, synthetic_seed: int, synthetic_rate: float | None, synthetic_load: float,
             variability_specs: tuple[str, ...], map_to_nodes: str | None, file_gpus_per_node: int,
             policies: str, mode: str, cluster_text: str | None,
             nodes_per_rack: int | None, gpu_models_text: str | None, topology_path: str | None, seeds: int,
             queue_name: str, locality_penalty: float, round_s: float, congestion: float,
             starvation_bound_s: float | None, baselines: str, as_json: bool,
             output_path: str | None, plots_dir: str | None, status_dir: str | None, **sweep_params: Any) -> None:
    """Simulate traces under placement policies and print a comparison table."""
    if status_dir is not None:
        show_status(ctx, status_dir, as_json)
        return
    sweep = sweep_request(sweep_params)
    measured = measured_gpus(ctx, variability_specs, map_to_nodes, file_gpus_per_node)
    cluster, racks = resolve_cluster(cluster_text, topology_path, mode, nodes_per_rack, measured)
    num_nodes, gpus_per_node = len(cluster.nodes), cluster.gpus_per_node
    gpu_models, cluster = resolve_gpu_models(gpu_models_text, mode, cluster)
    stock = [p.strip() for p in baselines.split(",") if p.strip()]
    names = [p.strip() for p in policies.split(",") if p.strip()]
    try:
        stock = [placement(n).name for n in stock]
        names = [placement(n).name for n in names]
        queue_order(queue_name)
    except UnknownPolicy as exc:
        raise click.BadParameter(str(exc), param_hint="--policies/--baselines/--queue") from None
    if not stock:
        raise click.BadParameter("give at least one baseline", param_hint="--baselines")
    baseline = stock[0]
    if not names:
        raise click.BadParameter("no policy given", param_hint="--policies")
    try:
        if synthetic and synthetic_rate is None:
            synthetic_rate = rate_for_load(synthetic_load, cluster.size)
            click.echo(f"synthetic: {synthetic_rate:.2f} jobs/h (load {synthetic_load:g} of {cluster.size} GPUs)", err=True)
        traces = _traces(trace_specs, synthetic, synthetic_seed, synthetic_rate, num_nodes * gpus_per_node,
                         accounting=lambda path: load_accounting_trace(
                             path, class_rules(ctx, rules_text), None if window_s is None else window_s / 86400))
    except InputError as exc:
        raise PalError(str(exc)) from None
    try:
        traces = [fit_gpu_models(t, cluster) for t in traces]
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
                   congestion=congestion, racks=racks, variability=measured, gpu_models=gpu_models,
                   starvation_bound_s=starvation_bound_s,
                   cluster=cluster if measured and cluster_text is None and not racks else None)
    cells = grid_cells([t.name for t in traces], seeds, names)
    # made only for a sweep (a digest of every job: seconds for a site's month of accounting)
    digest = functools.partial(inputs_digest, [t.jobs for t in traces], measured.source if measured else None)
    if sweep.array:
        submit(ctx, sweep, "simulate", cells, digest(), as_json)
        return
    if sweep.element is not None:
        run_element(sweep, cells, digest(), lambda c: run_simulation(lambda: run_one(traces[c.trace], c.policy, spec, c.seed)))
        return
    if sweep.merge:
        results, elapsed = merged_results(sweep, cells, digest())
    else:
        start = time.monotonic()
        with DelayedProgress(f"simulating {len(traces)} trace(s) x {len(names)} policies x {seeds} seed(s)") as bar:
            results = run_simulation(lambda: run_grid(traces, names, spec, on_progress=bar))
        elapsed = time.monotonic() - start
    summaries = [r.summary() for r in results]
    rows = aggregate(summaries)
    gains = normalised_gains(rows, baseline)
    page = format_table(rows)
    if gains:
        page += f"\n\ngeomean avg JCT vs {baseline}: " + ", ".join(
            f"{p} {v:.3f}" for p, v in sorted(gains.items(), key=lambda kv: kv[1]))
    click.echo(page, err=as_json)
    click.echo(f"{len(results)} run(s) in {elapsed:.1f} s ({mode} mode, {num_nodes}x{gpus_per_node} GPUs)", err=True)
    meta = {"mode": mode, "variability": measured.source if measured else "bundled Longhorn", "cluster": f"{num_nodes}x{gpus_per_node}", "queue": queue_name, "seeds": seeds,
            "locality_penalty": locality_penalty, "round_s": round_s, "congestion": congestion,
            "baseline": baseline, "baselines": stock, "geomean_avg_jct_vs_baseline": gains, "elapsed_s": elapsed,
            "gpu_models": gpu_models_text}
    doc = json_document(results, meta)
    emit_json(doc, as_json, output_path)
    if sweep.merge:
        write_report_text(sweep, page)
        emit_json(doc, False, str(sweep.folder.report_json))
    if plots_dir:
        for p in write_plots(plots_dir, results, baseline):
            click.echo(f"wrote {p}", err=True)


def run_simulation(runs: Callable[[], Result]) -> Result:
    """A simulation, its SimulationError a PalError (exit 1 with the message)."""
    try:
        return runs()
    except SimulationError as exc:
        raise PalError(str(exc)) from None


def resolve_gpu_models(text: str | None, mode: str,
                       cluster: ClusterView) -> tuple[tuple[GpuModelGroup, ...], ClusterView]:
    """(--gpu-models groups, the cluster with its nodes' models), or PalError."""
    if text is None:
        return (), cluster
    if mode != "event":
        raise PalError("--gpu-models needs --mode event (compat mode is the artifact's one-model cluster)")
    try:
        groups = parse_gpu_models(text)
        return groups, with_gpu_models(cluster, groups)
    except GpuModelsError as exc:
        raise PalError(str(exc)) from None


def class_rules(ctx: click.Context, text: str | None) -> tuple[ClassRule, ...]:
    """--class-rules, else the configuration's [simulate] class_rules; InputError (exit 1) or
    PalConfigError (exit 2, the configuration's rules) when malformed."""
    where = "--class-rules"
    if text is None:
        config = cli_config(ctx)
        try:
            return parse_class_rules(config.simulate.class_rules,
                                     f"{config.source or 'configuration'}: [simulate] class_rules")
        except InputError as exc:
            raise PalConfigError(str(exc)) from None
    return parse_class_rules(text, where)


def measured_gpus(ctx: click.Context, specs: tuple[str, ...], map_to_nodes: str | None = None,
                  file_gpus_per_node: int = 4) -> MeasuredGpus | None:
    """The --variability sources (files placed by --map-to-nodes/--gpus-per-node), merged class by
    class; PalError for anything unusable."""
    nodes = mapped_nodes(map_to_nodes)
    if not specs:
        if nodes is not None:
            raise click.BadParameter("places the GPUs of a --variability file; none given", param_hint="--map-to-nodes")
        return None

    def store_ranking(version: int | None) -> RankingSnapshot | None:
        from pal_slurm.bench.repository import StoreError
        from pal_slurm.cli.commands._profiling import open_profiling

        try:
            return open_profiling(ctx, read_only=True)[1].ranking(version)
        except (StoreError, OSError) as exc:
            raise PalError(f"--variability store: {exc}") from None

    try:
        merged = merge([load_measured(s, store_ranking, nodes=nodes, gpus_per_node=file_gpus_per_node) for s in specs])
    except InputError as exc:
        raise PalError(str(exc)) from None
    assert merged is not None, "specs is not empty"
    click.echo(f"variability: {merged.source}; other classes bundled Longhorn", err=True)
    return merged


def resolve_cluster(cluster_text: str | None, topology_path: str | None, mode: str, nodes_per_rack: int | None,
                    measured: MeasuredGpus | None) -> tuple[ClusterView, tuple[tuple[str, str], ...] | None]:
    """(cluster, racks for the runner or None): --topology, else --cluster, else the measured nodes, else 16x4."""
    given: tuple[int, int] | None = None  # --cluster's nodes and GPUs per node
    if cluster_text is not None:
        try:
            given = parse_cluster(cluster_text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--cluster") from None
    if topology_path:
        from pal_slurm.slurm.errors import SlurmParseError
        from pal_slurm.slurm.topology import read_racks

        if mode != "event":
            raise click.BadParameter("a topology needs --mode event", param_hint="--topology")
        try:
            racks = tuple(read_racks(topology_path).items())
        except SlurmParseError as exc:
            raise PalError(str(exc)) from None
        if given is not None:
            gpus_per_node = given[1]
        else:
            gpus_per_node = measured.layout()[0][1] if measured else 4
        cluster = cluster_from_racks(dict(racks), gpus_per_node)
        if measured:
            _check_fit(measured, cluster, "--topology")
        return cluster, racks
    if cluster_text is None and measured is not None:
        layout = measured.layout()
        per_rack = nodes_per_rack or 4  # event mode's default leaf size
        return ClusterView.from_layout(layout, racks={n: f"rack{i // per_rack}" for i, (n, _) in enumerate(layout)}), None
    num_nodes, gpus_per_node = given if given is not None else (16, 4)
    cluster = ClusterView.uniform(num_nodes, gpus_per_node, nodes_per_rack=nodes_per_rack)
    if measured:
        click.echo(f"variability: each of the {cluster.size} simulated GPUs is drawn from the "
                   f"{len(measured.locations())} measured ones (seeded)", err=True)
    return cluster, None


def _check_fit(measured: MeasuredGpus, cluster: ClusterView, what: str) -> None:
    """A named cluster must be the measured one: nodes without data are an error."""
    gaps = measured.gaps(cluster)
    missing = [g for g in gaps if g.startswith("no data")]
    if missing:
        raise PalError(f"{what} and --variability disagree: {missing[0]} ({measured.source})")
    for g in gaps:
        click.echo(f"warning: {g}", err=True)


COMMAND = simulate
