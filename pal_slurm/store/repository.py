"""The store's small interface: what pald, profiling and palctl need, and nothing more.

Two implementations honour it and pass the same contract tests
(tests/unit/store/test_repository.py): `SqlRepository` (SQLite or PostgreSQL, `sql.py`) and
`MemoryRepository` (`memory.py`, for fast unit tests and as pald's fallback shape).

Every method may raise `StoreUnavailable` (database away) or `InvalidRecord` (bad input); the
shared checks below keep both implementations refusing exactly the same input.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Iterable, Mapping, Protocol, Sequence, runtime_checkable

from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.store.errors import InvalidRecord
from pal_slurm.store.records import (
    DecisionRecord,
    GpuRecord,
    HeldJob,
    HeldState,
    Heartbeat,
    NodeRecord,
    RankingEntry,
    RankingSnapshot,
    Sample,
    Switch,
)

MAX_NAME = 128


@runtime_checkable
class Repository(Protocol):
    # ---- topology -------------------------------------------------------------------
    def upsert_nodes(self, nodes: Iterable[NodeRecord]) -> None:
        """Insert nodes or update their rack."""

    def upsert_gpus(self, gpus: Iterable[GpuRecord]) -> None:
        """Insert GPUs (creating their nodes) or update uuid/model; key is (node, slot).
        A uuid known at another (node, slot) moves to the new one (the GPU was moved)."""

    def nodes(self) -> list[NodeRecord]:
        """All nodes, by name."""

    def gpus(self) -> list[GpuRecord]:
        """All GPUs, by (node, slot)."""

    # ---- benchmark samples ----------------------------------------------------------
    def add_samples(self, samples: Iterable[Sample]) -> int:
        """Store samples in one transaction (all or none); unknown GPUs are created."""

    def recent_samples(
        self, since: datetime, *, perf_class: str | None = None, include_busy: bool = False
    ) -> list[Sample]:
        """Samples taken at or after `since`, oldest first; busy ones only when asked."""

    # ---- rankings ---------------------------------------------------------------------
    def write_ranking(
        self, method: str, entries: Iterable[RankingEntry], created_at: datetime | None = None
    ) -> RankingSnapshot:
        """Store a new snapshot with version = latest + 1 (1 for the first) and return it."""

    def latest_ranking(self) -> RankingSnapshot | None:
        """The highest version, or None when nothing was ranked yet."""

    def ranking(self, version: int) -> RankingSnapshot | None:
        """One snapshot by version."""

    # ---- application classes ------------------------------------------------------------
    def app_classes(self) -> dict[str, str]:
        """Application name (lower case) -> class letter."""

    def set_app_class(self, app: str, perf_class: str) -> None:
        """Map an application (case-insensitive) to a class in CLASS_ORDER."""

    def remove_app_class(self, app: str) -> bool:
        """Forget an application; False when it was not mapped."""

    # ---- decisions ----------------------------------------------------------------------
    def record_decision(self, decision: DecisionRecord) -> None:
        """Append a decision to the log."""

    def decisions(self, job_id: str | None = None, limit: int = 100, *, since: datetime | None = None,
                  reason_prefix: str | None = None) -> list[DecisionRecord]:
        """Newest first; all jobs or one; made at or after `since`; whose reason starts with
        `reason_prefix` (`palctl trial report` reads the shadow records this way)."""

    # ---- held (deferred) jobs -----------------------------------------------------------
    def add_held_job(self, job: HeldJob) -> None:
        """Remember a job the hook held; adding a known job id again replaces it."""

    def held_jobs(self, state: HeldState | None = HeldState.HELD) -> list[HeldJob]:
        """Jobs in a state (None: all), by submission time then job id."""

    def mark_released(
        self, job_id: str, at: datetime | None = None, state: HeldState = HeldState.RELEASED
    ) -> bool:
        """Move a HELD job to `state`; False when it is unknown or no longer held."""

    # ---- switches (store/switches.py) ---------------------------------------------------
    def switches(self) -> dict[str, Switch]:
        """Every switch set so far, by name."""

    def set_switch(self, switch: Switch) -> None:
        """Set (replace) the switch `switch.name`."""

    # ---- heartbeat ----------------------------------------------------------------------
    def write_heartbeat(self, beat: Heartbeat) -> None:
        """Replace the heartbeat of `beat.name`."""

    def read_heartbeat(self, name: str) -> Heartbeat | None:
        """The last heartbeat of `name`, or None."""

    # ---- housekeeping -----------------------------------------------------------------
    def prune(self, before: datetime, *, keep_samples: int = 0, max_rows: int | None = None) -> dict[str, int]:
        """Delete samples and decisions older than `before`, and held-job rows that left the
        HELD state before it; ranking snapshots are kept, and so are the newest `keep_samples`
        samples of each GPU and class. With `max_rows`, at most that many rows of each kind go
        (the oldest first), so a large backlog is pruned in short transactions. Returns rows
        deleted per kind."""

    def interrupt(self) -> int:
        """Break calls stuck in the database driver on other threads (a watchdog's tool);
        returns how many were broken. Those calls raise StoreUnavailable."""

    def close(self) -> None:
        """Release connections."""


# ---- checks shared by every implementation ---------------------------------------------


def as_utc(when: datetime) -> datetime:
    """Aware UTC; a naive datetime is taken to be UTC already (what the store hands back)."""
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def check_switch(switch: Switch) -> Switch:
    check_name(switch.name, "switch name")
    check_name(switch.changed_by, "switch changed_by")
    if not isinstance(switch.value, str) or len(switch.value) > 64:
        raise InvalidRecord(f"switch {switch.name!r}: value must be text of at most 64 characters")
    if len(switch.name) > 64:
        raise InvalidRecord(f"switch name {switch.name[:70]!r}...: at most 64 characters")
    return switch


def check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRecord(f"{what} must be a non-empty string, got {value!r}")
    value = value.strip()
    if len(value) > MAX_NAME:
        raise InvalidRecord(f"{what} longer than {MAX_NAME} characters: {value[:40]!r}...")
    return value


def check_class(perf_class: str) -> str:
    if perf_class not in CLASS_ORDER:
        raise InvalidRecord(
            f"unknown class {perf_class!r}: classes are {', '.join(CLASS_ORDER)}"
        )
    return perf_class


def normalise_app(app: str) -> str:
    return check_name(app, "application name").lower()


def check_slot(slot: int) -> int:
    if not isinstance(slot, int) or isinstance(slot, bool) or slot < 0:
        raise InvalidRecord(f"GPU slot must be an integer >= 0, got {slot!r}")
    return slot


def check_gpu(gpu: GpuRecord) -> GpuRecord:
    check_name(gpu.node, "node name")
    check_slot(gpu.slot)
    return gpu


def check_batch_uuids(items: Iterable[tuple[str, int, str | None]]) -> None:
    """One batch must not give one GPU uuid to two (node, slot)s: that is a contradiction.
    Across batches a uuid may move (a GPU reseated elsewhere): the newest observation wins."""
    seen: dict[str, tuple[str, int]] = {}
    for node, slot, uuid in items:
        if uuid is None:
            continue
        where = seen.setdefault(uuid, (node, slot))
        if where != (node, slot):
            raise InvalidRecord(
                f"GPU uuid {uuid} given to both {where[0]}:{where[1]} and {node}:{slot}"
            )


def check_finite(value: float | None, what: str) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InvalidRecord(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(value):
        raise InvalidRecord(f"{what} must be finite, got {value!r}")
    return value


def check_json(value: Mapping[str, object], what: str) -> dict[str, object]:
    try:
        copy: dict[str, object] = json.loads(json.dumps(dict(value), allow_nan=False))
        return copy
    except (TypeError, ValueError) as exc:
        raise InvalidRecord(f"{what} must be JSON-serialisable: {exc}") from None


def check_sample(s: Sample) -> Sample:
    check_name(s.node, "node name")
    check_slot(s.slot)
    check_class(s.perf_class)
    check_name(s.backend, "backend")
    if check_finite(s.value, "value") is None:
        raise InvalidRecord("a sample needs a value")
    check_json(s.metrics, "metrics")
    if isinstance(s.taken_at, bool) or check_finite(s.taken_at, "taken_at (epoch seconds)") is None:
        raise InvalidRecord(f"taken_at must be epoch seconds, got {s.taken_at!r}")
    return s


def check_entry(e: RankingEntry) -> RankingEntry:
    check_name(e.node, "node name")
    check_slot(e.slot)
    check_class(e.perf_class)
    if check_finite(e.score, "score") is None or check_finite(e.sf, "sf") is None:
        raise InvalidRecord("ranking entries need a score and an sf")
    if not isinstance(e.bin, int) or e.bin < 0:
        raise InvalidRecord(f"bin must be an integer >= 0, got {e.bin!r}")
    return e


def check_entries(entries: Iterable[RankingEntry]) -> list[RankingEntry]:
    out = [check_entry(e) for e in entries]
    seen: set[tuple[str, int, str]] = set()
    for e in out:
        key = (e.node, e.slot, e.perf_class)
        if key in seen:
            raise InvalidRecord(f"ranking lists {e.node} slot {e.slot} class {e.perf_class} twice")
        seen.add(key)
    return out


def check_nodes_map(nodes: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    out = {}
    for node, slots in nodes.items():
        check_name(node, "node name")
        out[node] = [check_slot(s) for s in slots]
    return out


def check_held(job: HeldJob) -> HeldJob:
    check_name(job.job_id, "job id")
    check_class(job.perf_class)
    if not isinstance(job.gpus, int) or job.gpus < 0:
        raise InvalidRecord(f"gpus must be an integer >= 0, got {job.gpus!r}")
    return job
