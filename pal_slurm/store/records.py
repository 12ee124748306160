"""Plain frozen records that cross the repository boundary (never ORM objects).
Samples and ranking snapshots are the model's own types (`pal_slurm.model.sample.Sample`,
`pal_slurm.ranking.snapshot.RankingSnapshot`), stored as they are; a sample's time is epoch
seconds (it is made on compute nodes and spooled as JSON), every other time here is aware UTC.
The daemon, profiling and palctl only see these; which table holds them is the store's business.
GPUs are named by (node, slot): that is what Slurm and the prolog know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Mapping

from pal_slurm.model.decision import DecisionKind
from pal_slurm.model.sample import KIND_BENCH, Sample
from pal_slurm.ranking.snapshot import RankingEntry, RankingSnapshot

__all__ = ["DecisionRecord", "GpuRecord", "HeldJob", "HeldState", "Heartbeat", "NodeRecord", "RankingEntry",
           "RankingSnapshot", "Sample", "sample_from_row", "stored_metrics", "utcnow"]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class NodeRecord:
    name: str  # Slurm NodeName
    rack: str | None = None  # leaf switch / rack, when known


@dataclass(frozen=True)
class GpuRecord:
    node: str
    slot: int  # local index (gres.conf order)
    uuid: str | None = None  # NVML UUID when known
    model: str | None = None  # e.g. "NVIDIA H100 80GB HBM3"


# How a Sample sits in a sample row: the row's own columns, plus the fields it has no column
# for in its JSON `metrics` under these keys (rows written before had a `score` column only).
_SAMPLE_META = ("sample_value", "sample_higher_is_better", "sample_kind", "sample_busy_reason")


def stored_metrics(s: Sample) -> dict[str, Any]:
    """The row's metrics: the sample's own, plus its value, direction, kind and busy reason."""
    return {**s.metrics, "sample_value": s.value, "sample_higher_is_better": s.higher_is_better,
            "sample_kind": s.kind, "sample_busy_reason": s.busy_reason}


def sample_from_row(node: str, slot: int, perf_class: str, backend: str, taken_at: datetime,
                    metrics: Mapping[str, Any], score: float | None, busy: bool, job_id: str | None,
                    uuid: str | None) -> Sample | None:
    """The Sample a row holds; None for a row with neither a value nor a score (nothing to rank)."""
    own = dict(metrics)
    meta = {k: own.pop(k) for k in _SAMPLE_META if k in own}
    value = meta.get("sample_value", score)
    if value is None:
        return None
    return Sample(
        node=node, slot=slot, perf_class=perf_class, backend=backend, value=float(value),
        higher_is_better=bool(meta.get("sample_higher_is_better", False)), metrics=own, uuid=uuid,
        job_id=job_id, taken_at=taken_at.timestamp(), busy=busy,
        busy_reason=str(meta.get("sample_busy_reason", "")), kind=str(meta.get("sample_kind", KIND_BENCH)),
    )


@dataclass(frozen=True)
class DecisionRecord:
    """One answer pald gave (submit time or cycle), kept for `palctl explain` and audits."""

    job_id: str
    kind: DecisionKind
    reason: str = ""
    nodes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # node -> slots
    ranking_version: int | None = None
    perf_class: str | None = None
    created_at: datetime = field(default_factory=utcnow)


class HeldState(str, Enum):
    HELD = "held"  # waiting for pald to place and release it
    RELEASED = "released"  # pald placed and released it
    FAILSAFE = "failsafe"  # released by pal-failsafe (pald silent)
    GONE = "gone"  # cancelled or vanished from Slurm


@dataclass(frozen=True)
class HeldJob:
    job_id: str
    perf_class: str
    gpus: int
    submitted_at: datetime
    released_at: datetime | None = None
    state: HeldState = HeldState.HELD


@dataclass(frozen=True)
class Switch:
    """One of the site's run-time switches (store/switches.py names them and reads them)."""

    name: str  # e.g. "pause"
    value: str  # e.g. "on"
    changed_at: datetime
    changed_by: str  # who set it: "user@host"


@dataclass(frozen=True)
class Heartbeat:
    name: str  # what beats, e.g. "pald"
    holder: str  # who: "host:pid"
    beat_at: datetime
    details: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"leader": true}
