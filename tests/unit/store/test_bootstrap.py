"""open_store_readonly: reads a store as it is; creates, migrates and writes nothing."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import inspect

from pal_slurm.model.classes import DEFAULT_APP_CLASSES
from pal_slurm.store import migrate
from pal_slurm.store.bootstrap import open_store, open_store_readonly
from pal_slurm.store.engine import make_engine
from pal_slurm.store.errors import StoreError, StoreUnavailable
from pal_slurm.store.records import RankingEntry

ENTRIES = [RankingEntry("gpu01", s, "A", 1.0, 1.0, 0) for s in range(2)]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request, tmp_path) -> str:
    """A database that exists but holds nothing of pal-slurm's (SQLite: an empty file)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/pal.db"
        make_engine(url).dispose()
        return url
    return str(request.getfixturevalue("postgres_url"))


def test_a_missing_file_reads_as_an_empty_store_and_is_not_created(tmp_path):
    db = tmp_path / "no" / "dir" / "pal.db"
    repo = open_store_readonly(f"sqlite:///{db}")
    try:
        assert repo.latest_ranking() is None and repo.decisions() == []
        assert repo.app_classes() == dict(DEFAULT_APP_CLASSES)
    finally:
        repo.close()
    assert not (tmp_path / "no").exists()


def test_a_database_never_migrated_reads_as_empty_and_stays_so(empty_url):
    repo = open_store_readonly(empty_url)
    try:
        assert repo.latest_ranking() is None and repo.app_classes() == dict(DEFAULT_APP_CLASSES)
    finally:
        repo.close()
    engine = make_engine(empty_url, create=False)
    try:
        assert migrate.current(engine) is None and inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_migrated_store_is_read_and_refuses_writes(empty_url):
    writer = open_store(empty_url)
    writer.write_ranking("optimal", ENTRIES)
    writer.close()
    repo = open_store_readonly(empty_url)
    try:
        snap = repo.latest_ranking()
        assert snap is not None and snap.version == 1
        with pytest.raises(StoreError):
            repo.write_ranking("optimal", ENTRIES)
        with pytest.raises(StoreError):
            repo.set_app_class("llama", "B")
    finally:
        repo.close()
    again = open_store(empty_url)
    try:
        latest = again.latest_ranking()
        assert latest is not None and latest.version == 1 and "llama" not in again.app_classes()
    finally:
        again.close()


def test_a_schema_at_another_revision_is_refused_not_migrated(tmp_path):
    url = f"sqlite:///{tmp_path}/pal.db"
    open_store(url).close()
    engine = make_engine(url)
    migrate.downgrade(engine, "0001")
    with pytest.raises(StoreUnavailable, match=r"revision 0001.*palctl db upgrade"):
        open_store_readonly(url)
    assert migrate.current(engine) == "0001"
    engine.dispose()


def test_an_existing_file_is_left_as_it_was(tmp_path):
    """No journal-mode switch, no -wal file, no new bytes: a reader takes the file as it is."""
    db = tmp_path / "pal.db"
    make_engine(f"sqlite:///{db}").dispose()
    before = (db.stat().st_size, db.stat().st_mtime_ns)
    open_store_readonly(f"sqlite:///{db}").close()
    assert (db.stat().st_size, db.stat().st_mtime_ns) == before
    assert sorted(os.listdir(tmp_path)) == ["pal.db"]
