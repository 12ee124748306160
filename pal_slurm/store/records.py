"""Plain frozen records that cross the repository boundary (never ORM objects).

The daemon, profiling and palctl only see these; which table holds them is the store's business.
GPUs are named by (node, slot): that is what Slurm and the prolog know. Times are aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Mapping

from pal_slurm.model.decision import DecisionKind
# the one ranking-snapshot type, stored as it is
from pal_slurm.ranking.snapshot import RankingEntry, RankingSnapshot  # noqa: F401


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


@dataclass(frozen=True)
class Sample:
    """One benchmark measurement of one GPU for one class."""

    node: str
    slot: int
    perf_class: str
    backend: str  # nvml | kernel | replay | ...
    taken_at: datetime
    metrics: Mapping[str, Any] = field(default_factory=dict)  # raw values, JSON-serialisable
    score: float | None = None  # normalised time: 1.0 = median, > 1 slower
    busy: bool = False  # host was busy: excluded from rankings by default
    job_id: str | None = None  # the job whose prolog/epilog took it
    uuid: str | None = None


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
class Heartbeat:
    name: str  # what beats, e.g. "pald"
    holder: str  # who: "host:pid"
    beat_at: datetime
    details: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"leader": true}
