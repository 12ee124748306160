"""The prolog's budget: which of a job's GPUs are due for a sample, and when each was last measured.

Benchmarking every GPU at every GPU job's start cost each job seconds of its start (a fresh
process, the backend's start, `duration_s`, the store). The `[profiling]` policy measures a GPU
in the prolog only when its last prolog sample is older than `prolog_every_h` (0: every job,
as without a policy), optionally only for jobs whose comment carries a `pal:` spec
(`prolog_pal_only`); `etc/cron.d/pal-reprofile` measures the idle GPUs the jobs do not reach.

The pure part (`Policy`, `due_gpus`, `verdict`) decides; the file part (`read_state`,
`record_measured`) keeps, per node, when each GPU was last measured, in `STATE_FILE` under the
spool directory the hooks already own (`[profiling] spool_dir`, checked by `spool.check_dir`).
Nothing here may stop a job: a missing, unreadable or corrupt file reads as "nothing measured"
(every GPU due: a measurement too many, never a crash); a time after `now` (the clock went
back) makes the GPU due rather than trusted for however long the clock was off; a record that
cannot be written is the caller's OSError to log, and the GPUs stay due. The file is replaced
whole (a temporary file renamed over it) under an flock, so two prologs on one node never tear
it or drop each other's GPUs.

Imported by the prolog's first step (`prolog_gate`) on every job start: the light modules
only, and `logging` and `pathlib` only on the paths that need them (a not-due job needs neither).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from dataclasses import dataclass
from typing import Iterable, Mapping

from pal_slurm.model.comment_grammar import CommentError, parse_comment

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


@dataclass(frozen=True)
class Policy:
    """The `[profiling] prolog_*` keys the due check reads."""

    every_s: float = 24 * 3600.0  # prolog_every_h in seconds; 0: every job measures
    pal_only: bool = False  # prolog_pal_only

    @classmethod
    def from_hours(cls, every_h: float, pal_only: bool) -> "Policy":
        return cls(every_s=max(0.0, every_h) * 3600.0, pal_only=pal_only)


@dataclass(frozen=True)
class Verdict:
    """Whether the prolog measures this job, which GPUs are due, and why (for the log)."""

    measure: bool
    due: tuple[int, ...]
    why: str


def slot_key(node: str, slot: int) -> str:
    """The state file's key of one GPU: nodes of a lab may share one spool directory."""
    return f"{node}:{slot}"


def due_gpus(last: Mapping[str, float], node: str, gpus: Iterable[int], now: float,
             every_s: float) -> tuple[int, ...]:
    """The GPUs of `gpus` due for a sample at `now`: never measured, measured `every_s` or
    longer ago, or measured "after" now (the clock went back: not trusted)."""
    out = []
    for slot in sorted(set(gpus)):
        taken = last.get(slot_key(node, slot))
        if every_s <= 0 or taken is None or not 0 <= now - taken < every_s:
            out.append(slot)
    return tuple(out)


def is_pal_job(comment: str | None) -> bool:
    """The comment carries a `pal:` spec (a malformed one too: the job meant to be PAL's)."""
    try:
        return parse_comment(comment) is not None
    except CommentError:
        return True


def verdict(policy: Policy, comment: str | None, node: str, gpus: Iterable[int],
            last: Mapping[str, float], now: float) -> Verdict:
    """Measure this job's GPUs or not. `gpus` non-empty: the job's GPUs on this node."""
    gpus = tuple(sorted(set(gpus)))
    if policy.pal_only and not is_pal_job(comment):
        return Verdict(False, (), "not a PAL job (prolog_pal_only)")
    due = due_gpus(last, node, gpus, now, policy.every_s)
    shown = ",".join(str(g) for g in gpus)
    if not due:
        return Verdict(False, (), f"GPU(s) {shown} measured within prolog_every_h")
    return Verdict(True, due, f"GPU(s) {','.join(str(g) for g in due)} of {shown} due")


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
