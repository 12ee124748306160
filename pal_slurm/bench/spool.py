"""Local queue of samples for when the store is unreachable (JSON lines on local disk).

Writers (prolog/epilog) append one line per sample under an exclusive flock, re-opening when
the file was renamed under them, so a line is never torn or lost. A spool file that reaches
`ROTATE_BYTES` is set aside (renamed `draining-*.jsonl`) by the writer that filled it, and
`drain` sets the live file aside too (new appends start a fresh file): every file set aside is
one delivery, one `add_samples` call, deleted only after that call succeeded, so each queued
sample is delivered exactly once and a drain cut short (the hook's deadline) keeps what it
delivered so far. One drain at a time per spool (`DRAIN_LOCK`, non-blocking): a prolog and an
epilog on the same node used to deliver the same waiting file twice. A line that does not
parse is reported and moved to `rejected.jsonl` for a human; it never blocks the other
samples.
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
DRAINING_PREFIX = "draining-"  # a file set aside, waiting for (or in) a drain
DRAIN_LOCK = "drain.lock"
# a spool file this large is set aside by its writer (a few hundred samples): one drain's
# transaction per file stays short enough for what is left of a hook's deadline
ROTATE_BYTES = 64 * 1024


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
            if os.fstat(fd).st_size >= ROTATE_BYTES:
                _set_aside(path)  # under this file's lock, as a drain renames it
            return path
        finally:
            os.close(fd)


def _set_aside(live: Path) -> Path:
    """Rename the live spool file to a fresh `draining-*.jsonl` name (the caller holds its
    lock; writers waiting for that lock re-open the live path)."""
    n = 0
    while (live.parent / f"{DRAINING_PREFIX}{os.getpid()}-{n}.jsonl").exists():
        n += 1
    aside = live.parent / f"{DRAINING_PREFIX}{os.getpid()}-{n}.jsonl"
    os.rename(live, aside)
    return aside


@dataclass
class DrainReport:
    delivered: int = 0
    corrupt: list[str] = field(default_factory=list)  # "file:line: reason"
    files: int = 0
    busy: bool = False  # another drain of this spool was running: it delivers, this one did nothing


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
    try:
        fd = os.open(live, os.O_RDONLY)
    except FileNotFoundError:
        fd = None
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(live).st_ino:  # FileNotFoundError: set aside already
                _set_aside(live)  # (else a writer set it aside between our open and lock)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)
    return sorted(d.glob(f"{DRAINING_PREFIX}*.jsonl"))


def drain(sink: SampleSink, spool_dir: str | Path) -> DrainReport:
    """Deliver every queued sample to `sink` exactly once (see module docstring), one
    `add_samples` call per file set aside.

    If `sink.add_samples` raises, the file it was given and those after it stay queued for the
    next drain and the exception propagates (the files delivered before it are gone). While
    another drain of the same spool runs, returns at once with `busy` set.
    """
    d = Path(spool_dir)
    report = DrainReport()
    if not d.is_dir():
        return report
    lock = os.open(d / DRAIN_LOCK, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report.busy = True
            return report
        files = _take(d)
        report.files = len(files)
        for p in files:
            _deliver(sink, p, d, report)
        return report
    finally:
        os.close(lock)  # releases the flock


def _deliver(sink: SampleSink, path: Path, spool_dir: Path, report: DrainReport) -> None:
    """One file set aside: its valid samples in one `add_samples` call, its corrupt lines to
    `rejected.jsonl`, then the file deleted."""
    samples: list[Sample] = []
    rejected: list[str] = []
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                samples.append(Sample.from_json(line))
            except ValueError as exc:
                report.corrupt.append(f"{path.name}:{lineno}: {exc}")
                rejected.append(line if line.endswith("\n") else line + "\n")
    if samples:
        sink.add_samples(samples)
    report.delivered += len(samples)
    if rejected:
        with (spool_dir / REJECTED_FILE).open("a", encoding="utf-8") as fh:
            fh.writelines(rejected)
    path.unlink(missing_ok=True)


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
    if report.busy:
        print("pal spool: another drain of this spool is running; it delivers the samples")
        return 0
    for bad in report.corrupt:
        print(f"pal spool: corrupt line skipped (kept in {REJECTED_FILE}): {bad}", file=sys.stderr)
    print(f"pal spool: delivered {report.delivered} sample(s) from {report.files} file(s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
