"""palctl trial report: the evidence a site reads before it turns PAL on (trial/report.py)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta, timezone

import click

from pal_slurm.cli.context import cli_config, cli_store
from pal_slurm.cli.conventions import Duration, PalCommand, emit_json, json_option, output_option, plots_option
from pal_slurm.cli.errors import PalError
from pal_slurm.model.modes import PAL_ENDED, PAL_STARTED, SHADOW_ENDED, SHADOW_PREFIX, SHADOW_STARTED
from pal_slurm.store.errors import StoreError
from pal_slurm.trial.report import Summary, TrialReport, build

MAX_RECORDS = 2_000_000  # of each kind: far past what a shadow week writes at a large site


@click.group("trial")
def COMMAND() -> None:
    """The trial path: what PAL would have done in `shadow` partitions (palctl mode)."""


@COMMAND.command("report", cls=PalCommand)
@click.option("--since", "since_s", type=Duration(at_least=60.0), default="7d", show_default=True,
              help="The period: jobs submitted this long ago or later (Slurm duration, 12h, 7d).")
@click.option("--partition", default=None, help="Only jobs Slurm ran in this partition.")
@json_option("Print the report as one JSON object.")
@output_option("the report")
@plots_option("the report's plot")
@click.pass_context
def report_cmd(ctx: click.Context, since_s: float, partition: str | None, as_json: bool, output_path: str | None,
               plots_dir: str | None) -> None:
    """Over the shadow period: the slowdown of the GPUs Slurm gave each job against those PAL
    would have given (the current ranking's scores), the nodes each spanned, the run time that
    implies (GPU-weighted, with a 95% interval), how many jobs PAL would have held, and the
    jobs where PAL would have done worse."""
    cfg = cli_config(ctx)
    repo = cli_store(ctx, read_only=True)
    since = datetime.now(timezone.utc) - timedelta(seconds=since_s)
    try:
        records = [d for prefix in (SHADOW_PREFIX, SHADOW_STARTED, SHADOW_ENDED, PAL_STARTED, PAL_ENDED)
                   for d in repo.decisions(limit=MAX_RECORDS, since=since, reason_prefix=prefix)]
        snapshot = repo.latest_ranking()
    except StoreError as err:
        raise PalError(str(err)) from None
    racks = None
    if cfg.slurm.topology_conf:
        from pal_slurm.slurm.topology import read_racks

        try:
            racks = read_racks(cfg.slurm.topology_conf)
        except Exception as exc:  # noqa: BLE001 - the report without leaves, said so
            click.echo(f"cannot read {cfg.slurm.topology_conf} ({exc}): leaf switches not compared", err=True)
    report = build(records, snapshot.entries if snapshot else (), partition, cfg.policy.default_class, racks)
    doc = {"since": since.isoformat(timespec="seconds"), "partition": partition,
           "ranking": None if snapshot is None else snapshot.version, **as_doc(report)}
    emit_json(doc, as_json, output_path)
    if not as_json:
        for line in render(report, since_s, snapshot is None):
            click.echo(line)
    if plots_dir:
        from pal_slurm.trial.plots import write_plots

        for path in write_plots(plots_dir, report):
            click.echo(f"wrote {path}", err=as_json)


def as_doc(report: TrialReport) -> dict[str, object]:
    return {"shadowed": report.shadowed, "would": report.would, "started": report.started,
            "unranked_gpus": report.unranked_gpus,
            "overall": None if report.overall is None else asdict(report.overall),
            "by_class": {c: asdict(s) for c, s in report.by_class.items()},
            "ran": {mode: asdict(s) for mode, s in report.ran.items()},
            "ran_jobs": {mode: [asdict(j) for j in jobs] for mode, jobs in report.ran_jobs.items()},
            "jobs": [{**asdict(j), "ratio": j.ratio, "saved_s": j.saved_s, "worse": j.worse} for j in report.compared]}


def _days(seconds: float) -> str:
    return f"{seconds / 86400:.3g} days" if seconds >= 86400 else f"{seconds / 3600:.3g} hours"


def _summary_row(name: str, s: Summary) -> str:
    return (f"{name:<8} {s.jobs:>6} {s.gpus:>6} {s.weighted_ratio:>8.3f} [{s.ratio_ci[0]:.3f}, {s.ratio_ci[1]:.3f}]"
            f" {s.run_gpu_h:>10.1f} {s.saved_gpu_h:>10.1f} {s.worse:>6}")


def render(report: TrialReport, since_s: float, no_ranking: bool) -> list[str]:
    lines = []
    held = report.would.get("defer", 0)
    ran = _ran_lines(report)
    if report.shadowed == 0:
        return [f"no job was submitted in a shadow partition in the last {_days(since_s)} "
                "(`palctl mode` shows the modes; `palctl mode PARTITION shadow` starts a trial)", *ran]
    s = report.overall
    words = (f"over {report.shadowed} GPU jobs submitted in shadow in the last {_days(since_s)}, PAL would have "
             f"placed {report.would.get('place', 0)}, held {held} for room and passed {report.would.get('pass', 0)}")
    lines.append(words + ".")
    if s is None:
        lines.append("none of the jobs PAL would have placed has been seen running yet: no comparison")
    else:
        change = (1 - s.weighted_ratio) * 100
        lines.append(f"on the {s.jobs} jobs it would have placed and Slurm ran, PAL's GPUs would have been "
                     f"{abs(change):.1f}% {'faster' if change >= 0 else 'slower'} than Slurm's (GPU-weighted; 95% "
                     f"interval of the ratio {s.ratio_ci[0]:.3f}-{s.ratio_ci[1]:.3f}), saving {s.saved_gpu_h:.1f} of "
                     f"{s.run_gpu_h:.1f} GPU hours run; PAL would have done worse on {s.worse} of them.")
        lines.append("")
        lines.append(f"{'class':<8} {'jobs':>6} {'GPUs':>6} {'ratio':>8} {'95% interval':<16} {'GPU h run':>10} "
                     f"{'GPU h saved':>10} {'worse':>6}")
        for cls, summary in report.by_class.items():
            lines.append(_summary_row(cls, summary))
        lines.append(_summary_row("all", s))
        worse = [j for j in report.compared if j.worse]
        if worse:
            lines.append("")
            lines.append("jobs where PAL would have done worse (job, class, slowdown Slurm -> PAL, nodes Slurm -> PAL"
                         ", leaf switches Slurm -> PAL):")
            for j in sorted(worse, key=lambda j: -j.ratio)[:20]:
                leaves = "" if j.slurm_leaves is None else f"  {j.slurm_leaves} -> {j.pal_leaves}"
                lines.append(f"  {j.job_id:<10} {j.perf_class} {j.slurm_slowdown:.3f} -> {j.pal_slowdown:.3f}  "
                             f"{j.slurm_nodes} -> {j.pal_nodes}{leaves}")
    lines.extend(ran)
    if held:
        lines.append(f"\n{held} jobs PAL would have held for room: how long is not modelled in shadow "
                     "(the shadow keeps no queue)")
    if no_ranking:
        lines.append("\nno ranking yet: every GPU counts as the median one (`palctl profile-nodes`, `palctl rank`)")
    elif report.unranked_gpus:
        lines.append(f"\n{report.unranked_gpus} GPUs of these jobs are not in the ranking: counted as the median GPU")
    return lines


def _ran_lines(report: TrialReport) -> list[str]:
    """Where the jobs ran: Slurm's placements in shadow partitions, PAL's in `on` ones."""
    if not report.ran:
        return []
    lines = ["", "where the jobs ran (slowdown: GPU-weighted, the ranking's median GPU is 1.000):",
             f"{'placed by':<22} {'jobs':>6} {'GPUs':>6} {'slowdown':>9} {'mean wait':>10} {'GPU h run':>10}"]
    for mode, who in (("shadow", "Slurm (shadow)"), ("on", "PAL (on)")):
        s = report.ran.get(mode)
        if s is None:
            continue
        wait = "-" if s.mean_wait_s is None else f"{s.mean_wait_s:.0f} s"
        lines.append(f"{who:<22} {s.jobs:>6} {s.gpus:>6} {s.gpu_slowdown:>9.3f} {wait:>10} {s.run_gpu_h:>10.1f}")
    return lines
