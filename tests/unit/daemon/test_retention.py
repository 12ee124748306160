"""pald prunes old decisions, samples and finished held-job rows by itself, on a slow period,
keeping the ranking window and the newest samples of every GPU and class; on SQLite and on a
real PostgreSQL (the store's own contract tests cover `prune` on every repository)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pal_slurm.config import Config, DaemonConfig, ProfilingConfig, StoreConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.retention import Pruner, RetentionPolicy
from pal_slurm.daemon.store_link import StoreLink
from pal_slurm.model.decision import DecisionKind
from pal_slurm.model.sample import Sample
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import DecisionRecord, HeldJob

from .builders import FakeActuator, FakeReader, node_info

NOW = datetime(2026, 11, 1, 12, 0, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    url = f"sqlite:///{tmp_path}/pal.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    repo = open_store(url)
    yield repo
    repo.close()


def fill(repo, *, old_days: float = 120, n_old: int = 30) -> None:
    """n_old samples and decisions `old_days`+ ago on one GPU, one of each from yesterday."""
    at = [NOW - (old_days + i) * DAY for i in range(n_old)]
    repo.add_samples([Sample("gpu01", 0, "A", "replay", 1.0, False, taken_at=t.timestamp()) for t in at]
                     + [Sample("gpu01", 0, "A", "replay", 1.0, False, taken_at=(NOW - DAY).timestamp())])
    for i, t in enumerate(at):
        repo.record_decision(DecisionRecord(f"old{i}", DecisionKind.PASS, created_at=t))
    repo.record_decision(DecisionRecord("new", DecisionKind.PASS, created_at=NOW - DAY))
    repo.add_held_job(HeldJob("h1", "A", 1, at[0]))
    repo.mark_released("h1", at=at[0] + timedelta(minutes=1))


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def policy(retention_days=90, keep=5, window_days=7, every_s=3600.0):
    return RetentionPolicy(retention_days * 86400.0, keep, window_days * 86400.0, every_s)


def test_the_leader_prunes_on_its_period_in_batches_keeping_what_rankings_need(store):
    fill(store)
    clock, leading = Clock(), [True]
    pruner = Pruner(policy(), lambda: leading[0], clock=clock, wall=lambda: NOW, batch_rows=4)
    link = StoreLink(store, clock=clock, pruner=pruner)
    link.work_once()
    assert pruner.passes == 0  # not due yet: never on every cycle
    clock.t += 60.0
    link.work_once()
    assert pruner.passes == 1
    assert pruner.deleted == {"samples": 26, "decisions": 30, "held_jobs": 1}  # 8 batches of 4
    left = store.recent_samples(NOW - 1000 * DAY)
    assert len(left) == 5  # the GPU's 5 newest (keep_samples): yesterday's and 4 old ones
    assert [d.job_id for d in store.decisions()] == ["new"]
    fill(store, old_days=200, n_old=3)
    clock.t += 1800.0
    link.work_once()
    assert pruner.passes == 1  # the next pass waits its period
    clock.t += 1800.0
    link.work_once()
    assert pruner.passes == 2 and len(store.decisions()) == 2  # "new" twice, nothing old


def test_a_standby_does_not_prune(store):
    fill(store)
    clock = Clock()
    pruner = Pruner(policy(), lambda: False, clock=clock, wall=lambda: NOW)
    link = StoreLink(store, clock=clock, pruner=pruner)
    clock.t += 3600.0
    link.work_once()
    assert len(store.decisions(limit=1000)) == 31


def test_retention_never_cuts_into_the_ranking_window(store):
    fill(store, old_days=10, n_old=5)  # 10-14 days old: past retention, inside the window
    clock = Clock()
    pruner = Pruner(policy(retention_days=1, keep=0, window_days=30), lambda: True, clock=clock, wall=lambda: NOW)
    clock.t += 60.0
    assert pruner.run(StoreLink(store, clock=clock)._call) == {"samples": 0, "decisions": 0, "held_jobs": 0}
    assert len(store.recent_samples(NOW - 1000 * DAY)) == 6


def test_retention_zero_keeps_everything(store):
    fill(store)
    clock = Clock()
    pruner = Pruner(policy(retention_days=0), lambda: True, clock=clock, wall=lambda: NOW)
    link = StoreLink(store, clock=clock, pruner=pruner)
    clock.t += 10 * 86400.0
    link.work_once()
    assert pruner.passes == 0 and len(store.decisions(limit=1000)) == 31


def test_pald_is_wired_to_prune_as_leader(tmp_path):
    repo = open_store(f"sqlite:///{tmp_path}/pal.db")
    try:
        fill(repo, old_days=400)  # older than the default 90 days whatever today is
        cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")),
                     store=StoreConfig(url=f"sqlite:///{tmp_path}/pal.db", keep_samples=0),
                     profiling=ProfilingConfig())
        pald = Pald(cfg, repo, FakeReader([node_info("gpu01")], []), FakeActuator())
        assert pald.check_leadership()
        assert pald.link is not None and pald.link.pruner is not None
        counts = pald.link.prune_now()
        assert counts["decisions"] == 30 and counts["samples"] == 30
    finally:
        repo.close()
