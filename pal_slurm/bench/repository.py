"""Profiling's view of the store: samples in and out, ranking snapshots saved and read.

Both are the model's own types (`pal_slurm.model.sample.Sample`,
`pal_slurm.ranking.snapshot.RankingSnapshot`), which the store keeps as they are. Ranking
entries persist score, sf, bin and flags; the per-entry sample count and backend are shown by
`palctl rank` but not stored.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from pal_slurm.model.sample import Sample
from pal_slurm.ranking.snapshot import RankingSnapshot, utc_from_epoch
from pal_slurm.store.errors import StoreError, StoreUnavailable

if TYPE_CHECKING:  # annotations only: the prolog imports this module and must stay light
    from pal_slurm.bench.base import SampleSink
    from pal_slurm.bench.settings import ProfilingSettings
    from pal_slurm.store.repository import Repository

__all__ = ["StoreError", "StoreProfilingRepository", "StoreUnavailable", "open_sink"]


class StoreProfilingRepository:
    """add_samples / samples / latest_ranking / save_ranking over a store Repository."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    def add_samples(self, samples: Sequence[Sample]) -> None:
        if samples:
            self.repo.add_samples(samples)

    def samples(self, since: float | None = None) -> list[Sample]:
        return self.repo.recent_samples(utc_from_epoch(since or 0.0), include_busy=True)

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


def open_sink(settings: ProfilingSettings, upgrade: bool = False) -> SampleSink:
    """Where a node's samples go, as `[samples] send` says: the store (for prolog/epilog opened
    without migrating: many nodes at once must not race on DDL; `upgrade` for the one drain by
    hand or cron), or pald (bench/handoff.py, imported only then)."""
    if settings.send == "pald":
        from pal_slurm.bench.handoff import PaldSink

        return PaldSink(settings.pald_address, settings.munge_socket, settings.send_timeout_s)
    from pal_slurm.store import open_store

    return StoreProfilingRepository(open_store(settings.store_url, upgrade=upgrade))
