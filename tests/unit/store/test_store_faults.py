"""Store faults at the store's own level, on real files and a real PostgreSQL.

- a SQLite file deleted under a running repository: refused loudly, never recreated empty,
  adopted again once a file is back (#6);
- a reader (palctl status, the prolog) never creates a store file, and says which path is
  missing instead of "no such table" (#6, #11);
- a frozen PostgreSQL (SIGSTOP) holds a call forever; `interrupt()` breaks it at once (#4).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from datetime import datetime, timezone

import pytest

from pal_slurm.model import DecisionKind
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.errors import StoreUnavailable
from pal_slurm.store.file_guard import SqliteFileGuard
from pal_slurm.store.records import DecisionRecord
from tests.fixtures.store_faults import delete_sqlite_file, frozen_postgres

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def decision(job_id: str) -> DecisionRecord:
    return DecisionRecord(job_id, DecisionKind.PLACE, "test", {"n1": (0,)}, created_at=T0)


def job_ids(url: str) -> set[str]:
    repo = open_store(url, upgrade=False)
    try:
        return {d.job_id for d in repo.decisions(limit=1000)}
    finally:
        repo.close()


def test_deleted_sqlite_file_is_refused_not_recreated_then_readopted(tmp_path):
    path = tmp_path / "pal.db"
    url = f"sqlite:///{path}"
    repo = open_store(url)
    try:
        repo.record_decision(decision("1"))
        delete_sqlite_file(path)
        for job in ("2", "3"):
            with pytest.raises(StoreUnavailable, match="was deleted while in use"):
                repo.record_decision(decision(job))
        with pytest.raises(StoreUnavailable, match="no store database at"):
            repo.decisions()
        assert not path.exists()  # no empty database appeared behind the operator's back
        open_store(url).close()  # the operator runs `palctl db upgrade`
        repo.record_decision(decision("2"))  # the same repository adopts the new file
        assert job_ids(url) == {"2"}
    finally:
        repo.close()


def test_a_file_deleted_during_a_write_gets_the_same_words_as_one_deleted_before(tmp_path):
    """The CI race of stop 38: `rm` landed between a write's two checks, and health said
    something else than the deleted-file message an admin (and the test) looks for."""
    path = tmp_path / "pal.db"
    open_store(f"sqlite:///{path}").close()
    dropped: list[bool] = []
    guard = SqliteFileGuard(str(path), lambda: dropped.append(True))
    guard.before()  # the write starts on the file we opened
    open_store(f"sqlite:///{tmp_path / 'other.db'}").close()
    (tmp_path / "other.db").replace(path)  # another file now: replaced, not deleted
    with pytest.raises(StoreUnavailable, match="was replaced during a write"):
        guard.after_write()
    guard.before()  # adopts the new file (drops the old connections once)
    delete_sqlite_file(path)
    with pytest.raises(StoreUnavailable, match="was deleted while in use") as err:
        guard.after_write()
    assert "no store database at" in str(err.value)
    assert dropped == [True]  # only `before` drops connections; after_write only reports


def test_replaced_sqlite_file_is_adopted(tmp_path):
    path = tmp_path / "pal.db"
    url = f"sqlite:///{path}"
    repo = open_store(url)
    try:
        repo.record_decision(decision("1"))
        backup = tmp_path / "backup.db"
        src, dst = sqlite3.connect(path), sqlite3.connect(backup)
        src.backup(dst)
        src.close()
        dst.close()
        repo.record_decision(decision("2"))
        # restore the backup as SQLite wants it: a new file, stale -wal/-shm removed
        shutil.copy(backup, tmp_path / "restored.db")
        for stale in ("pal.db-wal", "pal.db-shm"):
            (tmp_path / stale).unlink(missing_ok=True)
        (tmp_path / "restored.db").replace(path)
        repo.record_decision(decision("3"))  # written to the restored file, not the old inode
        assert job_ids(url) == {"1", "3"}
    finally:
        repo.close()


def test_readers_never_create_a_store_and_name_the_missing_path(tmp_path):
    missing_dir = tmp_path / "no" / "such" / "dir"
    with pytest.raises(StoreUnavailable) as err:
        open_store(f"sqlite:///{missing_dir}/pal.db", upgrade=False)
    msg = str(err.value)
    assert f"no store database at {missing_dir}/pal.db" in msg and "nor its directory" in msg
    assert "no such table" not in msg and not (tmp_path / "no").exists()

    with pytest.raises(StoreUnavailable, match=r"file does not exist; create it with `palctl db upgrade`"):
        open_store(f"sqlite:///{tmp_path}/pal.db", upgrade=False)
    assert not (tmp_path / "pal.db").exists()


def test_an_empty_file_says_run_db_upgrade_not_just_no_such_table(tmp_path):
    path = tmp_path / "pal.db"
    sqlite3.connect(path).close()
    repo = open_store(f"sqlite:///{path}", upgrade=False)
    try:
        with pytest.raises(StoreUnavailable, match=r"has no PAL tables .*palctl db upgrade"):
            repo.latest_ranking()
    finally:
        repo.close()


def call_in_thread(fn):
    """Run fn in a thread; return (thread, outcome list: [('ok', v) | ('err', exc)], started)."""
    out: list = []

    def run():
        try:
            out.append(("ok", fn()))
        except Exception as exc:  # noqa: BLE001
            out.append(("err", exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


@pytest.mark.postgres
def test_frozen_postgres_call_hangs_until_interrupted(postgres_factory):
    server = postgres_factory()
    server.create_database("pal")
    repo = open_store(server.url("pal"))
    try:
        repo.record_decision(decision("1"))
        with frozen_postgres(server):
            t, out = call_in_thread(repo.latest_ranking)
            t.join(1.0)
            assert t.is_alive(), "a frozen server should hold the call (no driver timeout fires)"
            started = time.monotonic()
            assert repo.interrupt() >= 1
            t.join(2.0)
            assert not t.is_alive() and time.monotonic() - started < 2.0
            kind, exc = out[0]
            assert kind == "err" and isinstance(exc, StoreUnavailable)
        # the server runs again: the same repository recovers, nothing written before is lost
        repo.record_decision(decision("2"))
        assert {d.job_id for d in repo.decisions()} == {"1", "2"}
    finally:
        repo.close()


@pytest.mark.postgres
def test_postgres_sessions_have_a_statement_timeout(postgres_url):
    repo = open_store(postgres_url)
    try:
        with repo.engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "10s"
    finally:
        repo.close()
