"""palctl status: one screen that says whether pal-slurm is healthy, and what to do if not."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import click

from pal_slurm.cli.context import cli_config
from pal_slurm.daemon.client import PaldClient, PaldError
from pal_slurm.daemon.failsafe import heartbeat_age


def _store_report(url: str):
    """(ok, line, latest snapshot or None, held count or None)."""
    from pal_slurm.store.bootstrap import open_store

    try:
        repo = open_store(url, upgrade=False)
    except Exception as exc:  # noqa: BLE001 - any failure is "unreachable" here
        return False, f"unreachable: {exc}", None, None
    try:
        snap = repo.latest_ranking()
        held = len(repo.held_jobs())
        return True, f"ok ({_redact(url)})", snap, held
    except Exception as exc:  # noqa: BLE001
        return False, f"unreachable: {exc}", None, None
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


@click.command("status")
@click.option("--stale-after", type=click.FloatRange(min=0.1), default=168.0, show_default=True,
              help="Hours after which a ranking snapshot counts as stale.")
@click.pass_context
def status(ctx: click.Context, stale_after: float) -> None:
    """Is pald up, the store reachable, the ranking fresh? Jobs held, last errors.

    Exits 0 when everything is fine, 1 when something needs attention (usable from monitoring).
    """
    cfg = cli_config(ctx)
    problems = []
    rows = []

    try:
        health = PaldClient(cfg.daemon.socket, timeout_s=1.0).health()
        d = health.details
        sync = d.get("last_sync_age_s")
        rows.append(("pald", f"{'up' if health.status == 'ok' else 'DEGRADED'} (pid {d.get('pid')}, uptime "
                             f"{d.get('uptime_s')} s, ranking v{health.rank}, Slurm sync "
                             f"{'never' if sync is None else f'{sync} s ago'}, {d.get('free_gpus')}/{d.get('gpus')} GPUs free)"))
        rows.append(("decisions", ", ".join(f"{k} {v}" for k, v in (d.get("counts") or {}).items())))
        if d.get("slurm_release"):
            rows.append(("slurm", d["slurm_release"]))
        if health.status != "ok":
            problems.append(f"pald is degraded: Slurm {d.get('slurm')}, store {d.get('store')}")
        if d.get("slurm") == "unsupported":
            problems.append(f"pal-slurm cannot read this Slurm, PAL jobs pass to Slurm untouched: "
                            f"{d.get('slurm_error')}")
        errors = d.get("recent_errors") or []
    except PaldError as exc:
        rows.append(("pald", f"DOWN: {exc} (socket {cfg.daemon.socket})"))
        problems.append("pald is not answering: PAL jobs pass to Slurm untouched; start it (systemctl start pald)")
        errors = []

    age = heartbeat_age(cfg.daemon.heartbeat_file)
    if age is None:
        rows.append(("heartbeat", f"none at {cfg.daemon.heartbeat_file}"))
    else:
        stale = age > cfg.daemon.heartbeat_stale_s
        rows.append(("heartbeat", f"{age:.1f} s ago{' (STALE: pal-failsafe releases held jobs)' if stale else ''}"))
        if stale:
            problems.append("pald's heartbeat is stale")

    ok, line, snap, held = _store_report(cfg.store.url)
    rows.append(("store", line))
    if not ok:
        problems.append("the store is unreachable: pald serves its last ranking from memory")
    if snap is None:
        rows.append(("rankings", "none yet: run `palctl profile-nodes` then `palctl rank`"))
        problems.append("no ranking: PAL places by locality only")
    else:
        hours = (datetime.now(timezone.utc) - snap.created_at).total_seconds() / 3600
        classes = sorted({e.perf_class for e in snap.entries})
        gpus = len({(e.node, e.slot) for e in snap.entries})
        fresh = hours <= stale_after
        rows.append(("rankings", f"v{snap.version} ({snap.method}), {hours:.1f} h old, {gpus} GPUs x "
                                 f"{len(classes)} classes ({'fresh' if fresh else 'STALE'})"))
        if not fresh:
            problems.append(f"the ranking is older than {stale_after:g} h: re-profile (cron.d/pal-reprofile)")
    if held is not None:
        rows.append(("held jobs", f"{held} waiting for pald"))
    rows.append(("errors", "none" if not errors else f"{len(errors)} recent"))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k.ljust(width)}  {v}")
    for e in errors[-5:]:
        when = time.strftime("%H:%M:%S", time.localtime(e.get("at", 0)))
        click.echo(f"  {when} {e.get('what')}: {e.get('error')}")
    if problems:
        click.echo("\nneeds attention:")
        for p in problems:
            click.echo(f"  - {p}")
        ctx.exit(1)
    click.echo("\nall good")


COMMAND = status
