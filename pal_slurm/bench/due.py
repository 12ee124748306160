"""The prolog's budget: which of a job's GPUs are due for a sample. Pure: no I/O.

Benchmarking at a GPU job's start costs the job seconds of its start (a fresh process, the
backend's start, `duration_s`, the store). The `[profiling]` policy measures a GPU in the
prolog only when its last prolog sample is older than `prolog_every_h` (0: every job),
optionally only for jobs whose comment carries a `pal:` spec (`prolog_pal_only`);
`etc/cron.d/pal-reprofile` measures the idle GPUs the jobs do not reach. When each GPU was
last measured comes from the node's state file (`pal_slurm.bench.measured`). A time after
`now` (the clock went back) makes the GPU due rather than trusted for however long the clock
was off.

Imported by the prolog's first step (`prolog_gate`) on every job start: light modules only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from pal_slurm.model.comment_grammar import CommentError, parse_comment


@dataclass(frozen=True)
class Policy:
    """The `[profiling] prolog_*` keys the due check reads."""

    every_s: float  # prolog_every_h in seconds; 0: every job measures
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
