"""pal-failsafe (run from cron every minute): if pald's heartbeat is stale, release every job
the hook held for pald, so a dead daemon never leaves jobs stuck. Releasing is always safe:
the job then simply runs where Slurm puts it. A job its user (or an operator) held after pald
released it is theirs (intake/tags.py) and stays held.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from pal_slurm import __version__
from pal_slurm.config import Config, ConfigError, load_config
from pal_slurm.daemon.cycle import is_pal_held
from pal_slurm.daemon.launcher import mark_released
from pal_slurm.daemon.launcher import JobControl
from pal_slurm.daemon.sync import SlurmRead
from pal_slurm.intake.tags import FAILSAFE_RELEASE

log = logging.getLogger("pal-failsafe")


def heartbeat_age(path: str, now: float | None = None) -> float | None:
    """Seconds since pald's last heartbeat, or None if there never was one.

    A heartbeat with `synced_at` (the end of pald's last complete Slurm sync and cycle) is as
    old as the older of its two times: a pald whose loop runs but whose sync keeps failing
    releases nothing, so it counts as dead."""
    p = Path(path)
    now = time.time() if now is None else now
    try:
        doc = json.loads(p.read_text())
        at = float(doc["at"])
        if doc.get("synced_at") is not None:
            at = min(at, float(doc["synced_at"]))
        return now - at
    except (OSError, ValueError, KeyError, TypeError):
        try:
            return now - p.stat().st_mtime
        except OSError:
            return None


def release_held(reader: SlurmRead, actuator: JobControl) -> list[int]:
    released = []
    for job in reader.jobs():
        if is_pal_held(job):
            try:
                actuator.release(job.job_id)
                released.append(job.job_id)
                mark_released(actuator, job.job_id, job.admin_comment, FAILSAFE_RELEASE)
            except Exception as exc:  # noqa: BLE001 - keep releasing the others
                log.error("cannot release job %s: %s", job.job_id, exc)
    return released


def run(config: Config, reader: SlurmRead, actuator: JobControl, now: float | None = None,
        force: bool = False) -> tuple[str, list[int]]:
    age = heartbeat_age(config.daemon.heartbeat_file, now)
    if not force and age is not None and age <= config.daemon.heartbeat_stale_s:
        return f"pald alive (heartbeat {age:.0f} s ago)", []
    why = "forced" if force else ("no heartbeat" if age is None else f"heartbeat {age:.0f} s old")
    return why, release_held(reader, actuator)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pal-failsafe", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pal-failsafe {__version__}")
    parser.add_argument("--config")
    parser.add_argument("--force", action="store_true", help="release PAL-held jobs whatever the heartbeat says")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(name)s: %(message)s", stream=sys.stderr)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"pal-failsafe: {exc}", file=sys.stderr)
        return 2
    from pal_slurm.slurm.actuator import SlurmActuator
    from pal_slurm.slurm.readers import SlurmReader
    from pal_slurm.slurm.runner import CommandRunner

    runner = CommandRunner(slurm_conf=config.slurm.conf, bin_dir=config.slurm.bin_dir)
    try:
        why, released = run(config, SlurmReader(runner), SlurmActuator(runner), force=args.force)
    except Exception as exc:  # noqa: BLE001
        print(f"pal-failsafe: {exc}", file=sys.stderr)
        return 1
    if released:
        log.warning("%s: released %d PAL-held job(s): %s", why, len(released), " ".join(map(str, released)))
    else:
        log.info("%s: nothing to release", why)
    return 0


if __name__ == "__main__":
    sys.exit(main())
