"""Profiling's view of the store: bench Samples in, store records out; ranking snapshots as
they are (`pal_slurm.ranking.snapshot.RankingSnapshot`, the store's own type).

The store keeps samples in its own record type. This adapter converts both ways so bench code
keeps its richer Sample (a primary value with its direction, a kind, a busy reason), stored
inside the record's JSON `metrics` under `sample_*` keys. Ranking entries persist score, sf,
bin and flags; the per-entry sample count and backend are shown by `palctl rank` but not stored.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Sequence

from pal_slurm.bench.base import KIND_BENCH, Sample
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.store import records
from pal_slurm.store.errors import StoreError, StoreUnavailable

_META = ("sample_value", "sample_higher_is_better", "sample_kind", "sample_busy_reason")

__all__ = ["StoreError", "StoreProfilingRepository", "StoreUnavailable", "open_profiling", "open_sink"]


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, timezone.utc)


def _ts(dt: datetime) -> float:
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def to_record(s: Sample) -> records.Sample:
    metrics = dict(s.metrics)
    metrics.update(
        sample_value=s.value,
        sample_higher_is_better=s.higher_is_better,
        sample_kind=s.kind,
        sample_busy_reason=s.busy_reason,
    )
    return records.Sample(
        node=s.node, slot=s.slot, perf_class=s.perf_class, backend=s.backend, taken_at=_dt(s.taken_at),
        metrics=metrics, score=None, busy=s.busy, job_id=s.job_id, uuid=s.uuid,
    )


def from_record(r: records.Sample) -> Sample | None:
    """None for a record with neither our value nor a score (nothing to rank)."""
    metrics = dict(r.metrics)
    meta = {k: metrics.pop(k) for k in _META if k in metrics}
    value = meta.get("sample_value", r.score)
    if value is None:
        return None
    return Sample(
        node=r.node, slot=r.slot, perf_class=r.perf_class, backend=r.backend, value=float(value),
        higher_is_better=bool(meta.get("sample_higher_is_better", False)), metrics=metrics, uuid=r.uuid,
        job_id=r.job_id, taken_at=_ts(r.taken_at), busy=r.busy,
        busy_reason=str(meta.get("sample_busy_reason", "")), kind=str(meta.get("sample_kind", KIND_BENCH)),
    )


class StoreProfilingRepository:
    """add_samples / samples / latest_ranking / save_ranking over a store Repository."""

    def __init__(self, repo) -> None:
        self.repo = repo

    def add_samples(self, samples: Sequence[Sample]) -> None:
        if samples:
            self.repo.add_samples([to_record(s) for s in samples])

    def samples(self, since: float | None = None) -> list[Sample]:
        recs = self.repo.recent_samples(_dt(since or 0.0), include_busy=True)
        return [s for s in (from_record(r) for r in recs) if s is not None]

    def latest_ranking(self) -> RankingSnapshot | None:
        return self.repo.latest_ranking()

    def ranking(self, version: int | None = None) -> RankingSnapshot | None:
        """Snapshot `version` (None: the latest), or None when there is no such one."""
        return self.repo.latest_ranking() if version is None else self.repo.ranking(version)

    def save_ranking(self, snapshot: RankingSnapshot) -> RankingSnapshot:
        """Store it; the store assigns the version (latest + 1), returned in the result."""
        stored = self.repo.write_ranking(snapshot.method, snapshot.entries, created_at=snapshot.created_at)
        return replace(snapshot, version=stored.version)

    def close(self) -> None:
        self.repo.close()


def open_sink(url: str) -> StoreProfilingRepository:
    """For prolog/epilog: open without migrating (many nodes at once must not race on DDL)."""
    from pal_slurm.store import open_store

    return StoreProfilingRepository(open_store(url, upgrade=False))


def open_profiling(config_path: str | None):
    """(settings, repository) for palctl; ConfigError or StoreError when impossible."""
    from pal_slurm.bench.settings import load_settings
    from pal_slurm.store import open_store

    settings = load_settings(config_path)
    return settings, StoreProfilingRepository(open_store(settings.store_url))
