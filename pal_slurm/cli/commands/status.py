"""palctl status: one screen that says whether pal-slurm is healthy, and what to do if not."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import click

from pal_slurm.cli.context import cli_config
from pal_slurm.cli.conventions import Duration, PalCommand, emit_json, json_option, output_option
from pal_slurm.cli.errors import ExitStatus
from pal_slurm.daemon.client import PaldClient, PaldError
from pal_slurm.daemon.failsafe import heartbeat_age
from pal_slurm.config import Config
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.store.switches import SiteSwitches
from pal_slurm.intake.durations import format_duration


# The status as the JSON document `--json` prints (nested sections of JSON values).
Report = dict[str, Any]


def _store_report(url: str) -> tuple[bool, str, RankingSnapshot | None, int | None, SiteSwitches | None]:
    """(ok, line, latest snapshot or None, held count or None, the site's switches or None)."""
    from pal_slurm.store.bootstrap import open_store

    try:
        repo = open_store(url, upgrade=False)
    except Exception as exc:  # noqa: BLE001 - any failure is "unreachable" here
        return False, f"unreachable: {exc}", None, None, None
    try:
        snap = repo.latest_ranking()
        held = len(repo.held_jobs())
        switches = SiteSwitches.from_store(repo.switches())
        return True, f"ok ({_redact(url)})", snap, held, switches
    except Exception as exc:  # noqa: BLE001
        return False, f"unreachable: {exc}", None, None, None
    finally:
        repo.close()


def _redact(url: str) -> str:
    """Hide a password in a database URL."""
    if "://" in url and "@" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


@click.command("status", cls=PalCommand)
@click.option("--stale-after", type=Duration(at_least=360.0, was="hours"), default="7-00:00:00", show_default=True,
              help="A ranking snapshot older than this Slurm duration is stale (e.g. 7-00:00:00, 36h).")
@json_option("Print the report as one JSON object (for scripts).")
@output_option("the report")
@click.pass_context
def status(ctx: click.Context, stale_after: float, as_json: bool, output_path: str | None) -> None:
    """Is pald up, the store reachable, the ranking fresh? Jobs held, last errors.

    Exit codes: 0 everything is fine; 1 something needs attention (the report says what);
    2 palctl itself could not run (bad configuration or option). Usable from monitoring.
    """
    report = collect(cli_config(ctx), stale_after / 3600)
    emit_json(report, as_json, output_path, sort_keys=True)
    if not as_json:
        render(report)
    if report["problems"]:
        ctx.exit(ExitStatus.ERROR)


def collect(cfg: Config, stale_after: float) -> Report:
    """The whole status as plain data: what `--json` prints and the text view renders."""
    problems: list[str] = []
    report: Report = {"problems": problems}
    try:
        health = PaldClient(cfg.daemon.socket, timeout_s=1.0).health()
        d = health.details
        report["pald"] = {"up": True, "status": health.status, "rank": health.rank, **d}
        if health.status != "ok":
            store_error = f" ({d['store_error']})" if d.get("store_error") else ""
            problems.append(f"pald is degraded: Slurm {d.get('slurm')}, store {d.get('store')}{store_error}")
        if not d.get("leader", True):
            problems.append(f"pald is a standby ({d.get('leader_state', '')}): PAL jobs pass to Slurm")
        if d.get("slurm") == "unsupported":
            problems.append(f"pal-slurm cannot read this Slurm, PAL jobs pass to Slurm untouched: "
                            f"{d.get('slurm_error')}")
    except PaldError as exc:
        report["pald"] = {"up": False, "error": str(exc), "socket": cfg.daemon.socket}
        problems.append("pald is not answering: PAL jobs pass to Slurm untouched; start it (systemctl start pald)")

    age = heartbeat_age(cfg.daemon.heartbeat_file)
    stale = age is not None and age > cfg.daemon.heartbeat_stale_s
    report["heartbeat"] = {"file": cfg.daemon.heartbeat_file, "age_s": None if age is None else round(age, 1),
                           "stale": stale}
    if stale:
        problems.append("pald's heartbeat is stale")

    ok, line, snap, held, switches = _store_report(cfg.store.url)
    report["store"] = {"ok": ok, "detail": line}
    report["paused"] = None if switches is None else {
        "paused": switches.paused, "by": switches.changed_by,
        "at": None if switches.changed_at is None else switches.changed_at.isoformat(timespec="seconds")}
    modes = cfg.daemon.modes().overridden(switches.modes if switches is not None else {})
    report["modes"] = {"partitions": dict(modes.by_partition), "every_other": modes.default}
    pald_paused = report["pald"].get("paused")
    if switches is not None and pald_paused is not None and pald_paused != switches.paused:
        problems.append(f"the store says {'paused' if switches.paused else 'not paused'} but pald has not read it "
                        "yet (it does within its store refresh; `palctl pause`/`resume` asks it at once)")
    if not ok:
        problems.append("the store is unreachable: pald serves its last ranking from memory")
    if snap is None:
        report["ranking"] = None
        problems.append("no ranking: PAL places by locality only")
    else:
        hours = (datetime.now(timezone.utc) - snap.created_at).total_seconds() / 3600
        fresh = hours <= stale_after
        report["ranking"] = {"version": snap.version, "method": snap.method, "age_h": round(hours, 2),
                             "gpus": len({(e.node, e.slot) for e in snap.entries}),
                             "classes": sorted({e.perf_class for e in snap.entries}), "fresh": fresh}
        if not fresh:
            problems.append(f"the ranking is older than {format_duration(stale_after * 3600)}: re-profile (cron.d/pal-reprofile)")
    report["held_jobs"] = held
    report["ok"] = not problems
    return report


def _duration(seconds: float) -> str:
    """A planned start's distance, as an admin reads it (it may be past: the plan's estimate)."""
    if seconds < 0:
        return "now (estimate passed)"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def render(report: Report) -> None:
    rows = []
    p = report["pald"]
    if p["up"]:
        sync = p.get("last_sync_age_s")
        rows.append(("pald", f"{'up' if p['status'] == 'ok' else 'DEGRADED'} (pid {p.get('pid')}, uptime "
                             f"{p.get('uptime_s')} s, ranking v{p['rank']}, Slurm sync "
                             f"{'never' if sync is None else f'{sync} s ago'}, {p.get('free_gpus')}/{p.get('gpus')} GPUs free)"))
        rows.append(("decisions", ", ".join(f"{k} {v}" for k, v in (p.get("counts") or {}).items())))
        if p.get("slurm_release"):
            rows.append(("slurm", p["slurm_release"]))
        if p.get("buffered_decisions") or p.get("store_dropped"):
            rows.append(("buffered", f"{p.get('buffered_decisions')} store write(s) waiting in pald, "
                                     f"{p.get('store_dropped') or 0} dropped (buffer full)"))
        errors = p.get("recent_errors") or []
    else:
        rows.append(("pald", f"DOWN: {p['error']} (socket {p['socket']})"))
        errors = []
    hb = report["heartbeat"]
    if hb["age_s"] is None:
        rows.append(("heartbeat", f"none at {hb['file']}"))
    else:
        rows.append(("heartbeat", f"{hb['age_s']:.1f} s ago{' (STALE: pal-failsafe releases held jobs)' if hb['stale'] else ''}"))
    rows.append(("store", report["store"]["detail"]))
    modes = report["modes"]
    rows.append(("modes", ", ".join([*(f"{p} {m}" for p, m in sorted(modes["partitions"].items())),
                                     f"every other partition {modes['every_other']}"])))
    paused = report["paused"]
    if paused is not None:
        rows.append(("pause", f"PAUSED by {paused['by']} at {paused['at']}: every job passes to Slurm "
                              "(`palctl resume`)" if paused["paused"] else "not paused"))
    r = report["ranking"]
    if r is None:
        rows.append(("rankings", "none yet: run `palctl profile-nodes` then `palctl rank`"))
    else:
        rows.append(("rankings", f"v{r['version']} ({r['method']}), {r['age_h']:.1f} h old, {r['gpus']} GPUs x "
                                 f"{len(r['classes'])} classes ({'fresh' if r['fresh'] else 'STALE'})"))
    if report["held_jobs"] is not None:
        rows.append(("held jobs", f"{report['held_jobs']} waiting for pald"))
    planned = p.get("planned_starts") or {} if p["up"] else {}
    if planned:  # held jobs with a backfill reservation: jobs behind them pass only around it
        rows.append(("reserved", "; ".join(f"job {j} on {v['nodes']} in {_duration(v['in_s'])}"
                                           for j, v in sorted(planned.items()))))
    rows.append(("errors", "none" if not errors else f"{len(errors)} recent"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k.ljust(width)}  {v}")
    for e in errors[-5:]:
        when = time.strftime("%H:%M:%S", time.localtime(e.get("at", 0)))
        click.echo(f"  {when} {e.get('what')}: {e.get('error')}")
    if report["problems"]:
        click.echo("\nneeds attention:")
        for problem in report["problems"]:
            click.echo(f"  - {problem}")
    else:
        click.echo("\nall good")


COMMAND = status
