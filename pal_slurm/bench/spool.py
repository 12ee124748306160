"""Local queue of samples for when the store is unreachable (JSON lines on local disk).

Writers (prolog/epilog) append one line per sample under an exclusive flock, re-opening when
a drain has renamed the file under them, so a line is never torn or lost. `drain` renames the
spool file aside (new appends start a fresh file), sends every valid line in ONE
`add_samples` call, and deletes the renamed file only after that call succeeded: each queued
sample is delivered exactly once. A line that does not parse is reported and moved to
`rejected.jsonl` for a human; it never blocks the other samples.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from pal_slurm.bench.base import Sample, SampleSink

SPOOL_FILE = "samples.jsonl"
REJECTED_FILE = "rejected.jsonl"
DRAINING_PREFIX = "draining-"


def append(spool_dir: str | Path, samples: Sequence[Sample]) -> Path:
    """Append samples to the spool; OSError when the directory is missing/read-only/full."""
    path = Path(spool_dir) / SPOOL_FILE
    data = "".join(s.to_json() + "\n" for s in samples).encode()
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # a drain renamed the file between open and lock: use the new one
                continue
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
            return path
        finally:
            os.close(fd)


@dataclass
class DrainReport:
    delivered: int = 0
    corrupt: list[str] = field(default_factory=list)  # "file:line: reason"
    files: int = 0


def pending(spool_dir: str | Path) -> int:
    """How many lines wait in the spool (valid or not)."""
    total = 0
    for p in _spool_files(Path(spool_dir)):
        with p.open("rb") as fh:
            total += sum(1 for line in fh if line.strip())
    return total


def _spool_files(d: Path) -> list[Path]:
    if not d.is_dir():
        return []
    return sorted(d.glob(f"{DRAINING_PREFIX}*.jsonl")) + ([d / SPOOL_FILE] if (d / SPOOL_FILE).exists() else [])


def _take(d: Path) -> list[Path]:
    """Rename the live spool aside (under its lock); return every file waiting to be drained."""
    live = d / SPOOL_FILE
    if live.exists():
        fd = os.open(live, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            n = 0
            while (d / f"{DRAINING_PREFIX}{os.getpid()}-{n}.jsonl").exists():
                n += 1
            os.rename(live, d / f"{DRAINING_PREFIX}{os.getpid()}-{n}.jsonl")
        finally:
            os.close(fd)
    return sorted(d.glob(f"{DRAINING_PREFIX}*.jsonl"))


def drain(sink: SampleSink, spool_dir: str | Path) -> DrainReport:
    """Deliver every queued sample to `sink` exactly once (see module docstring).

    If `sink.add_samples` raises, nothing is deleted and the exception propagates: the samples
    stay queued for the next drain.
    """
    d = Path(spool_dir)
    report = DrainReport()
    if not d.is_dir():
        return report
    files = _take(d)
    samples: list[Sample] = []
    rejected: list[str] = []
    for p in files:
        with p.open("r", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    samples.append(Sample.from_json(line))
                except ValueError as exc:
                    report.corrupt.append(f"{p.name}:{lineno}: {exc}")
                    rejected.append(line if line.endswith("\n") else line + "\n")
    report.files = len(files)
    if samples:
        sink.add_samples(samples)
    report.delivered = len(samples)
    if rejected:
        with (d / REJECTED_FILE).open("a", encoding="utf-8") as fh:
            fh.writelines(rejected)
    for p in files:
        p.unlink(missing_ok=True)
    return report


def main(argv: list[str] | None = None) -> int:
    """`python3 -m pal_slurm.bench.spool`: drain this host's spool into the configured store.

    For cron on compute nodes that rarely run jobs (the prolog drains the spool itself whenever
    it reaches the store). Exit 0 when everything queued was delivered (or nothing was), 1 when
    the store is unreachable (the samples stay queued), 2 for a bad configuration.
    """
    import sys

    from pal_slurm.bench.repository import StoreError, open_profiling
    from pal_slurm.bench.settings import SettingsError

    args = sys.argv[1:] if argv is None else argv
    config = args[0] if args else None
    try:
        settings, repo = open_profiling(config)
    except SettingsError as exc:
        print(f"pal spool: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"pal spool: store unreachable, samples stay queued: {exc}", file=sys.stderr)
        return 1
    try:
        report = drain(repo, settings.spool_dir)
    except StoreError as exc:
        print(f"pal spool: store unreachable, samples stay queued: {exc}", file=sys.stderr)
        return 1
    finally:
        repo.close()
    for bad in report.corrupt:
        print(f"pal spool: corrupt line skipped (kept in {REJECTED_FILE}): {bad}", file=sys.stderr)
    print(f"pal spool: delivered {report.delivered} sample(s) from {report.files} file(s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
