"""The store fails with typed errors, never hangs or crashes, when its database goes away.

pald relies on this to keep serving from memory (StoreUnavailable), the prolog to spool samples
to disk; a full disk is a StoreFull (a StoreUnavailable) and what was stored before survives.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import event

from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.engine import make_engine
from pal_slurm.store.errors import StoreFull, StoreUnavailable
from pal_slurm.store.records import HeldJob, Heartbeat, Sample
from pal_slurm.store.sql import SqlRepository

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def fat_samples(n: int, start: int = 0) -> list[Sample]:
    return [
        Sample("n1", i % 4, "A", "replay", 1.0, False, metrics={"blob": "x" * 4000, "i": start + i}, taken_at=T0.timestamp())
        for i in range(n)
    ]


def fill_until_full(repo: SqlRepository, limit: int = 2000) -> tuple[int, StoreFull]:
    stored = 0
    for _ in range(limit):
        try:
            stored += repo.add_samples(fat_samples(10, stored))
        except StoreFull as err:
            return stored, err
    raise AssertionError("the store never filled up")


@pytest.mark.postgres
def test_postgres_stopped_mid_test_then_back(postgres_factory):
    server = postgres_factory()
    server.create_database("pal")
    url = server.url("pal")
    repo = open_store(url)
    try:
        repo.add_held_job(HeldJob("1", "A", 2, T0))
        repo.write_heartbeat(Heartbeat("pald", "a:1", T0))

        server.stop(immediate=True)  # like a crash: pooled connections die under us
        for op in (
            lambda: repo.held_jobs(),
            lambda: repo.add_held_job(HeldJob("2", "B", 1, T0)),
            lambda: repo.app_classes(),
            lambda: repo.read_heartbeat("pald"),
            lambda: repo.latest_ranking(),
        ):
            with pytest.raises(StoreUnavailable) as err:
                op()
            assert "unavailable" in str(err.value) and f":{server.port}/pal" in str(err.value)
            assert not isinstance(err.value, StoreFull)

        server.start()  # the same repository recovers without being reopened
        assert [j.job_id for j in repo.held_jobs()] == ["1"]
        repo.add_held_job(HeldJob("2", "B", 1, T0))
        assert [j.job_id for j in repo.held_jobs()] == ["1", "2"]
    finally:
        repo.close()


@pytest.mark.postgres
def test_open_store_on_a_dead_server(postgres_factory):
    server = postgres_factory()
    url = server.url("postgres")
    server.stop()
    with pytest.raises(StoreUnavailable, match="unavailable"):
        open_store(url)


def test_password_is_not_leaked():
    with pytest.raises(StoreUnavailable) as err:
        open_store("postgresql+psycopg2://pal:s3cret@127.0.0.1:1/pal?connect_timeout=2")
    assert "s3cret" not in str(err.value) and "***" in str(err.value)


def test_sqlite_directory_that_cannot_exist(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable, match="cannot create the store directory"):
        open_store(f"sqlite:///{blocker}/sub/pal.db")


def test_unsupported_and_garbage_urls():
    with pytest.raises(StoreUnavailable, match="unsupported store URL"):
        open_store("mysql://x@y/z")
    with pytest.raises(StoreUnavailable, match="bad store URL"):
        open_store("not a url")


def test_sqlite_full_database(tmp_path):
    """SQLITE_FULL from the engine itself: max_page_count caps the file like a full disk."""
    url = f"sqlite:///{tmp_path}/pal.db"
    open_store(url).close()  # migrated while there is room
    engine = make_engine(url)

    @event.listens_for(engine, "connect")
    def cap(dbapi_conn, _rec):  # noqa: ANN001
        pages = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]
        dbapi_conn.execute(f"PRAGMA max_page_count = {pages + 40}")

    repo = SqlRepository(engine)
    try:
        stored, err = fill_until_full(repo)
        assert "is full" in str(err)
        assert isinstance(err, StoreUnavailable)
        assert stored > 0
        # nothing stored before is lost, the failed batch left nothing half-written
        got = repo.recent_samples(T0)
        assert len(got) == stored
        assert sorted(s.metrics["i"] for s in got) == list(range(stored))
        # small writes that fit still work once room is made
        repo.write_heartbeat(Heartbeat("pald", "a:1", T0))
    finally:
        repo.close()


@pytest.fixture
def tiny_tmpfs(tmp_path) -> Path:
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_sqlite_on_a_really_full_disk(tiny_tmpfs):
    url = f"sqlite:///{tiny_tmpfs}/pal.db"
    repo = open_store(url)
    try:
        stored, err = fill_until_full(repo)
        assert isinstance(err, StoreFull) and "is full" in str(err)
        assert len(repo.recent_samples(T0)) == stored
    finally:
        repo.close()
