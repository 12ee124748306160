"""palctl whatif: what PAL and pal-net would gain on this cluster, from its own ranking and accounting."""

from __future__ import annotations

import functools
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from pal_slurm.cli.commands._variability_files import placement_options
from pal_slurm.cli.commands._sweep import inputs_digest, merged_results, run_element, submit, sweep_options, sweep_request, \
    write_report_text
from pal_slurm.cli.commands.simulate import RENAMED_DAYS, run_simulation, class_rules, measured_gpus, resolve_cluster, resolve_gpu_models
from pal_slurm.cli.conventions import Duration, PalCommand, emit_json, json_option, output_option, plots_option
from pal_slurm.cli.errors import PalError
from pal_slurm.cli.progress import DelayedProgress
from pal_slurm.input_files import InputError
from pal_slurm.policy import UnknownPolicy, placement
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.runner import run_grid, run_one
from pal_slurm.sim.sweep import grid_cells
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.sacct import load_accounting_trace
from pal_slurm.intake.durations import format_duration
from pal_slurm.sim.trace import Trace, fit_gpu_models
from pal_slurm.sim.whatif import DEFAULT_BASELINES, DEFAULT_POLICIES, compare, format_page, resample, write_plot
from pal_slurm.sim import site_timing
from pal_slurm.slurm.errors import SlurmError, SlurmParseError
from pal_slurm.slurm.scheduler_config import SchedulerTiming, default_timing, parse_scheduler_parameters, \
    read_scheduler_timing


def scheduler_timing(ctx: click.Context, given: str | None) -> SchedulerTiming:
    """The Slurm scheduler settings the site-timing model assumes: `--scheduler-parameters`
    when given, else the running slurmctld's (`scontrol show config`), else Slurm's defaults
    with the reason the site's could not be read."""
    if given is not None:
        try:
            return parse_scheduler_parameters(given, "--scheduler-parameters")
        except SlurmParseError as exc:
            raise click.BadParameter(str(exc), param_hint="--scheduler-parameters") from None
    from pal_slurm.cli.context import cli_config
    from pal_slurm.slurm.runner import CommandRunner

    cfg = cli_config(ctx).slurm
    try:
        return read_scheduler_timing(CommandRunner(slurm_conf=cfg.conf, bin_dir=cfg.bin_dir))
    except SlurmError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return default_timing(f"scontrol show config: {reason[:160]}")


def timing_header(timing: SchedulerTiming, draws: int, jobs: int) -> list[str]:
    """What the site-timing section assumed, in the page's words."""
    def mark(key: str, value: object, unit: str = "") -> str:
        return f"{key}={value}{unit}" + ("" if key in timing.given else " (default)")

    params = f"SchedulerParameters={timing.parameters}" if timing.parameters else "no SchedulerParameters"
    phases = ", ".join(f"{p:g}" for p in site_timing.pass_phases(timing.bf_interval_s, draws))
    lines = [
        f"At this site's timing: {jobs} job(s) at their recorded submit times, every start at a Slurm backfill pass",
        f"  Slurm scheduler assumed, from {timing.source}: {timing.scheduler_type}, {params}",
        f"    modelled: a pass every {mark('bf_interval', timing.bf_interval_s, ' s')}, testing the first "
        f"{mark('bf_max_job_test', timing.bf_max_job_test)} waiting jobs, backfill on the jobs' recorded time limits",
        f"    not modelled: {mark('sched_interval', timing.sched_interval_s, ' s')}, "
        f"{mark('bf_window', timing.bf_window_min, ' min')}, {mark('bf_resolution', timing.bf_resolution_s, ' s')}, "
        f"bf_continue={'yes' if timing.bf_continue else 'no'}",
        f"  {draws} timing draw(s): the passes' phase against the first submission at {phases} s; "
        "figures are the mean over the draws (least-greatest)",
    ]
    if not timing.backfills:
        lines.insert(2, f"  note: SchedulerType={timing.scheduler_type}; the model runs sched/backfill's passes")
    return lines


def _names(text: str, what: str) -> list[str]:
    try:
        return [placement(n.strip()).name for n in text.split(",") if n.strip()]
    except UnknownPolicy as exc:
        raise click.BadParameter(str(exc), param_hint=what) from None


@click.command("whatif", cls=PalCommand, renamed={"--days": RENAMED_DAYS})
@click.option("--accounting", "accounting_path", required=True, type=click.Path(dir_okay=False),
              help="The site's accounting: `sacct -a -X --json -S now-30days` output (or sacct -P, see docs/whatif.md).")
@click.option("--window", "window_s", type=Duration(at_least=1.0), default="30-0", show_default=True,
              help="Only jobs submitted within this Slurm duration before the file's last submission (e.g. 7d).")
@click.option("--variability", "variability_specs", multiple=True, default=("store",), show_default=True,
              help="Measured GPUs: 'store' (current ranking), 'store:vN', a variability file or CLASS=FILE.")
@placement_options
@click.option("--topology", "topology_path", type=click.Path(dir_okay=False), default=None,
              help="The site's topology.conf: racks (leaf switches) of the measured nodes.")
@click.option("--cluster", "cluster_text", default=None, help="NODESxGPUS instead of the measured nodes.")
@click.option("--nodes-per-rack", type=click.IntRange(min=1), default=None, help="Without --topology: nodes per leaf switch.")
@click.option("--gpu-models", "gpu_models_text", default=None, metavar="MODEL=NODES[:TIME],...",
              help="Several GPU models, e.g. a100=4:0.5,v100=12 (nodes in order; a model's time factor).")
@click.option("--policies", default=",".join(DEFAULT_POLICIES), show_default=True, help="Candidate placements.")
@click.option("--baselines", default=",".join(DEFAULT_BASELINES), show_default=True,
              help="Stock-like placements; gains are relative to the first (slurm = the model of stock Slurm, EASY "
                   "backfill; firstfit = its node choice without backfill).")
@click.option("--samples", type=click.IntRange(min=1, max=100), default=5, show_default=True,
              help="Workload samples: the recorded one plus bootstrap resamples (confidence intervals).")
@click.option("--class-rules", "rules_text", default=None,
              help="'FIELD:GLOB=CLASS; ...' for jobs without a pal:class= comment [default: [simulate] class_rules].")
@click.option("--congestion", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="Background network load.")
@click.option("--draws", type=click.IntRange(min=0, max=50), default=5, show_default=True,
              help="Timing draws at the site's timing (phases of Slurm's backfill passes); 0: no site-timing section.")
@click.option("--scheduler-parameters", "scheduler_parameters", default=None, metavar="TEXT",
              help="Slurm's SchedulerParameters (e.g. bf_interval=30,bf_max_job_test=500) instead of reading "
                   "`scontrol show config`; '' for Slurm's defaults.")
@plots_option("the plot (whatif.png; '' for none)", default=".")
@json_option("Print the numbers as one JSON document on stdout (the page goes to stderr).")
@output_option("the numbers as JSON")
@sweep_options
@click.pass_context
def whatif(ctx: click.Context, accounting_path: str, window_s: float, variability_specs: tuple[str, ...],
           map_to_nodes: str | None, file_gpus_per_node: int,
           topology_path: str | None, cluster_text: str | None, nodes_per_rack: int | None, gpu_models_text: str | None,
           policies: str, baselines: str, samples: int, rules_text: str | None, congestion: float, draws: int,
           scheduler_parameters: str | None, plots_dir: str, as_json: bool, output_path: str | None,
           **sweep_params: Any) -> None:
    """What would PAL gain here? This cluster's measured GPUs, its last N days of jobs: first at
    the site's own timing (Slurm's backfill passes, the jobs' time limits) against the model of
    stock Slurm, beside the bound and the spread over timing draws; then over workload samples
    against stock-like placement, with 95% confidence intervals and a plot."""
    sweep = sweep_request(sweep_params)
    candidates = _names(policies, "--policies")
    stock = _names(baselines, "--baselines")
    if not stock:
        raise click.BadParameter("give at least one baseline", param_hint="--baselines")
    names = list(dict.fromkeys(stock + candidates))
    baseline = stock[0]
    timing = scheduler_timing(ctx, scheduler_parameters) if draws and not sweep.array and sweep.element is None else None
    measured = measured_gpus(ctx, variability_specs, map_to_nodes, file_gpus_per_node)
    cluster, racks = resolve_cluster(cluster_text, topology_path, "event", nodes_per_rack, measured)
    gpu_models, cluster = resolve_gpu_models(gpu_models_text, "event", cluster)
    try:
        trace = load_accounting_trace(accounting_path, class_rules(ctx, rules_text), window_s / 86400)
    except InputError as exc:
        raise PalError(str(exc)) from None
    fits = tuple(j for j in trace.jobs if j.num_gpus <= cluster.size)
    if not fits:
        raise PalError(f"{accounting_path}: every job needs more GPUs than the {cluster.size} simulated ones")
    dropped = len(trace.jobs) - len(fits)
    trace = Trace(trace.name, fits, trace.warnings + ((f"{trace.name}: dropped {dropped} job(s) larger than the "
                                                       f"{cluster.size}-GPU cluster",) if dropped else ()))
    try:
        trace = fit_gpu_models(trace, cluster)
    except InputError as exc:
        raise PalError(str(exc)) from None
    for w in trace.warnings:
        click.echo(f"note: {w}", err=True)
    spec = RunSpec(mode="event", num_nodes=len(cluster.nodes), gpus_per_node=cluster.gpus_per_node,
                   nodes_per_rack=nodes_per_rack, racks=racks, congestion=congestion, variability=measured,
                   gpu_models=gpu_models, cluster=cluster if measured and cluster_text is None and not racks else None)
    start = time.monotonic()
    # the independent runs: each workload sample (its own trace) under each policy
    cells = grid_cells([trace.name] * samples, 1, names)
    # made only for a sweep (a digest of every job: seconds for a site's month of accounting)
    digest = functools.partial(inputs_digest, trace.jobs, measured.source if measured else None)
    if sweep.array:
        submit(ctx, sweep, "whatif", cells, digest(), as_json)
        return
    if sweep.element is not None:
        run_element(sweep, cells, digest(), lambda c: run_simulation(lambda: run_one(resample(trace, c.trace), c.policy, spec, c.seed)))
        return
    runs: list[list[RunResult]] = []
    if sweep.merge:
        results, seconds = merged_results(sweep, cells, digest())
        runs = [results[s * len(names):(s + 1) * len(names)] for s in range(samples)]
        start -= seconds  # the page says how long the runs took, not how long the merge did
    else:
        with DelayedProgress(f"simulating {samples} workload sample(s) x {len(names)} policies") as bar:
            for s in range(samples):
                def sample_progress(f: float, s: int = s) -> None:
                    bar((s + f) / samples)

                runs.append(run_simulation(lambda: run_grid([resample(trace, s)], names, spec, on_progress=sample_progress)))
    rows = compare(runs, baseline)
    timing_page, timing_doc = "", None
    if timing is not None:
        policies_at_timing = len({site_timing.STOCK, *candidates})
        with DelayedProgress(f"simulating {draws} timing draw(s) x {policies_at_timing} policies at the site's timing") as bar:
            timing_runs = run_simulation(lambda: site_timing.run_at_site_timing(
                trace, candidates, spec, timing.bf_interval_s, timing.bf_max_job_test, draws, progress=bar))
        rep = site_timing.report(timing_runs, timing.bf_interval_s, timing.bf_max_job_test)
        timing_page = site_timing.format_site_timing(rep, timing_header(timing, draws, len(trace.jobs)))
        timing_doc = {**site_timing.as_json(rep), "scheduler": timing.as_dict()}
    header = [
        "What would PAL gain on this cluster?",
        f"  GPUs: {cluster.size} on {len(cluster.nodes)} node(s), {len(set(cluster.rack_of_node))} rack(s); "
        f"variability: {measured.source if measured else 'bundled Longhorn'}"
        + (f"; GPU models: {gpu_models_text}" if gpu_models_text else ""),
        f"  workload: {accounting_path}, last {format_duration(window_s)}, {len(trace.jobs)} GPU job(s)",
        f"  {samples} workload sample(s) (1 as recorded + bootstrap resamples), event mode, FIFO queue"
        + (f"; {draws} timing draw(s) at the site's timing" if draws else "") + f"; {time.monotonic() - start:.0f} s",
    ]
    if timing_page:
        header += ["", timing_page, "", "Over workload samples, every policy deciding at every event:"]
    page = format_page(rows, baseline, header)
    click.echo(page, err=as_json)
    if plots_dir:
        Path(plots_dir).mkdir(parents=True, exist_ok=True)
        out = write_plot(Path(plots_dir) / "whatif.png", rows, runs[0], baseline,
                         f"{len(trace.jobs)} jobs on {cluster.size} GPUs: candidates vs {baseline}")
        click.echo(f"wrote {out}", err=True)
    doc = {"baseline": baseline, "samples": samples, "gpus": cluster.size, "jobs": len(trace.jobs),
           "variability": measured.source if measured else "bundled Longhorn",
           "rows": [asdict(r) for r in rows], "site_timing": timing_doc}
    emit_json(doc, as_json, output_path)
    if sweep.merge:
        write_report_text(sweep, page)
        emit_json(doc, False, str(sweep.folder.report_json))


COMMAND = whatif
