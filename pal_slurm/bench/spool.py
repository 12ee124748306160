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

The spool is written by the prolog/epilog (root, or SlurmUser) on a node where users run jobs,
so it trusts nothing it did not make itself: the directory must be a real directory owned by
root or by the writer, writable by nobody else (`SpoolUnsafe` otherwise: nothing is written or
read); every file is opened with O_NOFOLLOW | O_CLOEXEC and must be a regular file owned by the
writer (a planted symlink or foreign file is removed, never followed); a file set aside larger
than `MAX_FILE_BYTES` is dropped unread; and all files set aside together stay under
`MAX_SPOOL_BYTES` (the oldest are dropped, one log line each). A store away for weeks costs
at most that much disk, never the node's /var.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
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
# a file set aside never grows past ROTATE_BYTES plus one append; anything much larger was not
# written here and is not read into memory
MAX_FILE_BYTES = 16 * ROTATE_BYTES
MAX_SPOOL_BYTES = 64 * 1024 * 1024  # files set aside, together; the oldest go first
OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC

log = logging.getLogger("pal.spool")


class SpoolUnsafe(OSError):
    """The spool directory (or a file in it) could be controlled by someone else."""


def check_dir(d: Path) -> None:
    """The spool directory is a directory (not a symlink), owned by root or by us, and not
    group- or world-writable; else SpoolUnsafe (FileNotFoundError when missing)."""
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode):
        raise SpoolUnsafe(f"spool {d} is not a directory (a symlink?)")
    if st.st_uid not in (0, os.geteuid()):
        raise SpoolUnsafe(f"spool {d} is owned by uid {st.st_uid}, not root or uid {os.geteuid()}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SpoolUnsafe(f"spool {d} is group- or world-writable (mode {stat.S_IMODE(st.st_mode):o})")


def _open(path: Path, flags: int, mode: int = 0o600) -> int:
    """open(2) that never follows a symlink and accepts only a regular file of ours."""
    fd = os.open(path, flags | OPEN_FLAGS, mode)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise SpoolUnsafe(f"spool file {path} is not a regular file of uid {os.geteuid()}")
    return fd


def append(spool_dir: str | Path, samples: Sequence[Sample]) -> Path:
    """Append samples to the spool; OSError when the directory is missing/read-only/full."""
    d = Path(spool_dir)
    check_dir(d)
    path = d / SPOOL_FILE
    data = "".join(s.to_json() + "\n" for s in samples).encode()
    while True:
        fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
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
                _cap_total(d)
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


def _cap_total(d: Path) -> list[Path]:
    """Drop the oldest files set aside until together they fit MAX_SPOOL_BYTES; returns those
    dropped."""
    limit = MAX_SPOOL_BYTES
    sizes = []
    for p in sorted(d.glob(f"{DRAINING_PREFIX}*.jsonl"), key=_age_key):
        try:
            sizes.append((p, os.lstat(p).st_size))
        except FileNotFoundError:
            continue
    total = sum(size for _, size in sizes)
    dropped = []
    for p, size in sizes:
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size
        dropped.append(p)
        log.error("spool %s over %d bytes: dropped its oldest file %s (%d bytes of samples)", d, limit, p.name, size)
    return dropped


def _age_key(p: Path) -> tuple[float, str]:
    try:
        return (os.lstat(p).st_mtime, p.name)
    except FileNotFoundError:
        return (0.0, p.name)


@dataclass
class DrainReport:
    delivered: int = 0
    corrupt: list[str] = field(default_factory=list)  # "file:line: reason"
    files: int = 0
    busy: bool = False  # another drain of this spool was running: it delivers, this one did nothing


def pending(spool_dir: str | Path) -> int:
    """How many lines wait in the spool (valid or not)."""
    d = Path(spool_dir)
    if not d.is_dir():
        return 0
    check_dir(d)
    total = 0
    for p in _spool_files(d):
        try:
            fd = _open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue  # drained meanwhile
        except OSError:
            continue  # unsafe or too large: the next drain drops it
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_FILE_BYTES:
                total += 1  # counted once, dropped unread by the drain
                continue
            total += sum(1 for line in fh if line.strip())
    return total


def _spool_files(d: Path) -> list[Path]:
    live = d / SPOOL_FILE
    return sorted(d.glob(f"{DRAINING_PREFIX}*.jsonl")) + ([live] if live.is_symlink() or live.exists() else [])


def _take(d: Path) -> list[Path]:
    """Rename the live spool aside (under its lock); return every file waiting to be drained."""
    live = d / SPOOL_FILE
    try:
        fd: int | None = _open(live, os.O_RDONLY)
    except FileNotFoundError:
        fd = None
    except OSError as exc:  # a symlink (ELOOP) or a foreign file: removed, never followed
        log.error("spool %s: removed %s: %s", d, live.name, exc)
        live.unlink(missing_ok=True)
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
    check_dir(d)
    lock = _open(d / DRAIN_LOCK, os.O_WRONLY | os.O_CREAT)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report.busy = True
            return report
        _cap_total(d)
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
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as exc:  # a planted symlink (ELOOP) or a foreign file: removed unread
        log.error("spool %s: removed %s unread: %s", spool_dir, path.name, exc)
        report.corrupt.append(f"{path.name}: removed unread: {exc}")
        path.unlink(missing_ok=True)
        return
    size = os.fstat(fd).st_size
    if size > MAX_FILE_BYTES:
        os.close(fd)
        log.error("spool %s: dropped %s unread: %d bytes, over the %d-byte cap", spool_dir, path.name, size, MAX_FILE_BYTES)
        report.corrupt.append(f"{path.name}: dropped unread: {size} bytes over the {MAX_FILE_BYTES}-byte cap")
        path.unlink(missing_ok=True)
        return
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as fh:
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
        _keep_rejected(spool_dir, rejected)
    path.unlink(missing_ok=True)


def _keep_rejected(spool_dir: Path, lines: list[str]) -> None:
    """Append unparsable lines to `rejected.jsonl` for a human. Never raises: the samples of
    the file are delivered already, and the file must go (else the next drain repeats them).
    A symlink or foreign file in its place is removed (once) rather than written through."""
    path = spool_dir / REJECTED_FILE
    for first in (True, False):
        try:
            fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            if first and (path.is_symlink() or isinstance(exc, SpoolUnsafe)):
                log.error("spool %s: removed %s: %s", spool_dir, REJECTED_FILE, exc)
                path.unlink(missing_ok=True)
                continue
            log.error("spool %s: %d rejected line(s) not kept: %s", spool_dir, len(lines), exc)
            return
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.writelines(lines)
        return


def main(argv: list[str] | None = None) -> int:
    """`python3 -m pal_slurm.bench.spool`: drain this host's spool into the configured store
    (or to pald, with `[samples] send = "pald"`).

    For cron on compute nodes that rarely run jobs (the prolog drains the spool itself whenever
    it reaches the store). Exit 0 when everything queued was delivered (or nothing was), 1 when
    the store (or pald) is unreachable (the samples stay queued), 2 for a bad configuration or a
    spool directory that fails `check_dir` (nothing read).
    """
    import sys

    from pal_slurm.bench.repository import StoreError, open_sink
    from pal_slurm.bench.settings import SettingsError, load_settings

    args = sys.argv[1:] if argv is None else argv
    config = args[0] if args else None
    try:
        settings = load_settings(config)
        sink = open_sink(settings, upgrade=True)  # one drain at a time: it may migrate, as palctl does
    except SettingsError as exc:
        print(f"pal spool: {exc}", file=sys.stderr)
        return 2
    except (StoreError, OSError) as exc:
        print(f"pal spool: store unreachable, samples stay queued: {exc}", file=sys.stderr)
        return 1
    try:
        report = drain(sink, settings.spool_dir)
    except SpoolUnsafe as exc:
        print(f"pal spool: not draining an unsafe spool: {exc}", file=sys.stderr)
        return 2
    except (StoreError, OSError) as exc:
        print(f"pal spool: store unreachable, samples stay queued: {exc}", file=sys.stderr)
        return 1
    finally:
        close = getattr(sink, "close", None)
        if close is not None:
            close()
    if report.busy:
        print("pal spool: another drain of this spool is running; it delivers the samples")
        return 0
    for bad in report.corrupt:
        print(f"pal spool: corrupt line skipped (kept in {REJECTED_FILE}): {bad}", file=sys.stderr)
    print(f"pal spool: delivered {report.delivered} sample(s) from {report.files} file(s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
