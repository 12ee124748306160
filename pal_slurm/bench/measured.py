"""When the prolog last measured each GPU of a node: its state file, for the due check.

One JSON file, `STATE_FILE`, in the spool directory the hooks already own (`[profiling]
spool_dir`, checked by `spool.check_dir` before a write). Nothing here may stop a job: a
missing, unreadable, corrupt or foreign file (a symlink, a FIFO, too large) reads as "nothing
measured" (every GPU due: a measurement too many, never a crash), with one warning; a record
that cannot be written is the caller's OSError to log, and the GPUs stay due. The file is
replaced whole (a temporary file renamed over it) under an flock, so two prologs on one node
never tear it or drop each other's GPUs.

Read by the prolog's first step on every job start: `logging` and `pathlib` are imported only
on the paths that need them (a not-due job needs neither).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from typing import Iterable

from pal_slurm.bench.due import slot_key

STATE_FILE = "measured.json"
LOCK_FILE = "measured.lock"
STATE_VERSION = 1
OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC
MAX_STATE_BYTES = 1024 * 1024  # a node's record is a few hundred bytes; larger was not written here

LOGGER = "pal.hook"  # the hooks' logger (pal_slurm.bench.hook)


def warn(msg: str, *args: object) -> None:
    """A warning on the hooks' logger, importing `logging` only when there is one to give."""
    import logging

    logging.getLogger(LOGGER).warning(msg, *args)


def parse_state(text: str | bytes) -> dict[str, float]:
    """{slot_key: epoch seconds} from the file's text; ValueError when it is not such a record."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise ValueError("not a measured-GPUs record of this version")
    measured = data.get("measured")
    if not isinstance(measured, dict):
        raise ValueError("no 'measured' table")
    out: dict[str, float] = {}
    for key, value in measured.items():
        if isinstance(key, str) and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out


def read_state(state_dir: str | os.PathLike[str]) -> dict[str, float]:
    """When each GPU was last measured; {} (all due) when the file is missing or unusable."""
    path = os.path.join(state_dir, STATE_FILE)
    try:  # O_NONBLOCK: a FIFO planted here must not hold the job's start
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | OPEN_FLAGS)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        warn("cannot read %s (%s): every GPU is due", path, exc.strerror or exc)
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ValueError("not a regular file")
        with os.fdopen(fd, "rb") as fh:
            text = fh.read(MAX_STATE_BYTES + 1)
        if len(text) > MAX_STATE_BYTES:
            raise ValueError(f"larger than {MAX_STATE_BYTES} bytes")
        return parse_state(text)
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warn("unusable %s (%s): every GPU is due", path, exc)
        return {}


def record_measured(state_dir: str | os.PathLike[str], node: str, gpus: Iterable[int], when: float) -> None:
    """Note that `gpus` of `node` were measured at `when`: read, merge, write a temporary file,
    rename it over the record, all under `LOCK_FILE`. OSError (the caller logs it) when the
    directory is unsafe, missing, read-only or full."""
    from pathlib import Path

    from pal_slurm.bench.spool import check_dir  # the slow path only: it imports the samples model

    d = Path(state_dir)
    check_dir(d)
    lock = os.open(d / LOCK_FILE, os.O_WRONLY | os.O_CREAT | OPEN_FLAGS, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = read_state(d)
        for slot in gpus:
            state[slot_key(node, slot)] = when
        body = json.dumps({"version": STATE_VERSION, "measured": dict(sorted(state.items()))})
        tmp = d / f".{STATE_FILE}.{os.getpid()}"
        try:
            os.unlink(tmp)  # left by a process of this pid that died mid-write
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_FLAGS, 0o600)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, d / STATE_FILE)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    warn("cannot remove %s: %s", tmp, exc.strerror or exc)
            raise
    finally:
        os.close(lock)
