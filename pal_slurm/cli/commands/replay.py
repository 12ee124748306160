"""palctl replay: replay a trace on real Slurm lab clusters, stock Slurm against pal-slurm.

The replay lives in the lab package (`pal_lab`), which the runtime never imports at module
level: this command imports it when run and says so where it is absent (docs/install.md)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pal_slurm.cli.conventions import PalCommand, emit_json, json_option, output_option, plots_option
from pal_slurm.cli.errors import PalError
from pal_slurm.cli.progress import DelayedProgress
from pal_slurm.cli.signals import Terminated, exit_cleanly_on_termination

if TYPE_CHECKING:  # annotations only: nothing of the lab package loads until the command runs
    from pal_lab.replay.harness import ArmRun, LabShape
    from pal_lab.replay.plan import ReplayPlan


@click.command("replay", cls=PalCommand, renamed={"--nodes": "--nodes N is now --node-count N (--nodes is always a hostlist)"})
@click.option("--trace", "trace_spec", required=True, help="CSV path or bundled name (workload-1..6), as for palctl simulate.")
@click.option("--arms", default="stock,pal", show_default=True, help="Comma-separated: stock, pal, pal-net, pal-fit, pal-fit-aged (pal-fit with the srtf-aged queue), pal-fit-slurm (pal-fit in Slurm's priority order).")
@click.option("--time-scale", "scale", type=click.FloatRange(min=1.0), default=600.0, show_default=True,
              help="Trace seconds per wall second. Lower is closer to a site and slower: every wall "
                   "second Slurm's passes or pald's cycle take costs this many trace seconds "
                   "(docs/results/slurm/ compares 600 and 150).")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Replay only the first N jobs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Per-GPU variability draw (as simulate's seed index).")
@click.option("--node-count", "num_nodes", type=click.IntRange(min=1), default=16, show_default=True,
              help="Nodes of each lab cluster.")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--nodes-per-rack", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--work-dir", type=click.Path(file_okay=False), default=None, help="Labs, payload records and logs (default: a temporary folder, kept).")
@json_option("Print the results as one JSON document on stdout (the per-arm lines go to stderr).")
@output_option("the results as JSON")
@plots_option("a JCT CDF and per-GPU Gantt charts")
def replay(trace_spec: str, arms: str, scale: float, jobs: int | None, seed: int, num_nodes: int, gpus_per_node: int,
           nodes_per_rack: int, work_dir: str | None, as_json: bool, output_path: str | None,
           plots_dir: str | None) -> None:
    """Replay a trace on freshly started Slurm lab clusters, one per arm, and compare.

    Stopped by Ctrl-C, SIGTERM or SIGHUP, it first stops the labs and pald it started (exit
    status 128 + the signal after SIGTERM or SIGHUP); the work dir keeps what ran."""
    require_lab()
    from pal_lab.replay.harness import ARMS, LabShape
    from pal_lab.replay.plan import PlanError, plan_replay
    from pal_slurm.sim.trace import TraceError, resolve_trace

    arm_list = [a.strip() for a in arms.split(",") if a.strip()]
    bad = [a for a in arm_list if a not in ARMS]
    if bad or not arm_list:
        raise click.BadParameter(f"unknown arm(s) {bad}; choose from {', '.join(ARMS)}", param_hint="--arms")
    shape = LabShape(num_nodes, gpus_per_node, nodes_per_rack)
    try:
        plan = plan_replay(resolve_trace(trace_spec), scale, gpus_per_node, num_nodes * gpus_per_node, jobs)
    except (TraceError, PlanError) as exc:
        raise PalError(str(exc)) from None
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="pal-replay-"))
    click.echo(f"replaying {len(plan.jobs)} job(s) of {plan.trace} at {scale:g} trace s per wall s "
               f"on {num_nodes}x{gpus_per_node} GPUs; work dir {work}", err=True)
    try:
        with exit_cleanly_on_termination():
            results, runs = _run_arms(plan, arm_list, work, seed, shape, scale, as_json)
    except Terminated as stop:
        click.echo(f"palctl replay: stopped by {stop.name}; the labs and pald it started are stopped; "
                   f"what ran is in {work}", err=True)
        raise
    if "stock" in runs:
        base = runs["stock"].summary
        for arm, run in runs.items():
            if arm != "stock":
                click.echo(f"{arm} / stock: avg JCT {run.summary.avg_jct_s / base.avg_jct_s:.3f}, "
                           f"makespan {run.summary.makespan_s / base.makespan_s:.3f}", err=as_json)
    emit_json({"results": results}, as_json, output_path)
    if plots_dir:
        from pal_lab.replay.plots import write_plots

        for p in write_plots(plots_dir, plan.trace, {a: r.jobs for a, r in runs.items()}, gpus_per_node, shape.node_names):
            click.echo(f"wrote {p}", err=True)


def require_lab() -> None:
    """Fail with a PalError (not a traceback) where the lab package is not installed."""
    try:
        import pal_lab  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "pal_lab":
            raise
        raise PalError("palctl replay needs the lab tooling (the pal_lab package), which this "
                       "install lacks: run it from a source checkout (docs/install.md)") from None


def _run_arms(plan: ReplayPlan, arm_list: list[str], work: Path, seed: int, shape: LabShape, scale: float,
              quiet: bool) -> tuple[list[dict[str, object]], dict[str, ArmRun]]:
    """Each arm on its own fresh lab, one after another: (result rows, runs by arm)."""
    from pal_lab.replay.harness import ReplayError, run_arm
    from pal_lab.replay.predict import predict_arm
    from pal_lab.lab import LabError

    results: list[dict[str, object]] = []
    runs: dict[str, ArmRun] = {}
    for i, arm in enumerate(arm_list):
        t0 = time.monotonic()
        with DelayedProgress(f"arm {arm} ({i + 1}/{len(arm_list)})") as bar:
            try:
                run = run_arm(plan, arm, work / arm, seed=seed, shape=shape, on_progress=bar)
            except (ReplayError, LabError) as exc:
                raise PalError(f"arm {arm}: {exc}") from None
        runs[arm] = run
        # with where the lab and the model part ways: the first such job is where a prediction miss starts
        pred = predict_arm(plan, run, seed, shape)
        parted, headline = pred.partings, pred.headline()
        row = run.summary.as_dict()
        row.update(predicted_avg_jct_s=headline["avg_jct_s"], predicted_makespan_s=headline["makespan_s"],
                   predicted_by=f"event:{headline['policy']}", time_scale=scale, seed=seed,
                   payload_vs_slurm_max_s=run.payload_vs_slurm_s, **run.measured_inputs(),
                   jobs_run_otherwise_than_predicted=len(parted),
                   first_run_otherwise=parted[0].describe() if parted else None,
                   wall_s=time.monotonic() - t0)
        results.append(row)
        s = run.summary
        click.echo(f"{arm:8} avg JCT {s.avg_jct_s / 3600:7.3f} h  p99 {s.p99_jct_s / 3600:7.3f} h  "
                   f"makespan {s.makespan_s / 3600:7.3f} h  util {s.utilization:.3f}  "
                   f"slowdown {s.gpu_weighted_slowdown:.3f}  (predicted avg JCT "
                   f"{headline['avg_jct_s'] / 3600:.3f} h, makespan {headline['makespan_s'] / 3600:.3f} h)", err=quiet)
        if parted:
            click.echo(f"{'':8} {pred.partings_line(len(plan.jobs))}", err=quiet)
    return results, runs


COMMAND = replay
