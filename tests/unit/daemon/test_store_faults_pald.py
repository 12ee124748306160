"""pald in process with a real SQLite store (files on disk, the real LazyStore and link
threads) under the store faults; fake Slurm. The same faults on a real pald
process over a real Slurm lab and PostgreSQL: tests/integration/test_store_faults.py.

- #7: a held SQLite write lock must not slow releases (they used to wait 5 s each);
- #6: deleting the store file must not lose a decision: pald reports it, never writes to the
  dead inode, and writes everything once a store file is back.
"""

from __future__ import annotations

import time

import pytest

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.lazy_store import LazyStore
from pal_slurm.daemon.store_link import StoreLink
from pal_slurm.store.bootstrap import open_store
from tests.fixtures.store_faults import delete_sqlite_file, sqlite_write_lock
from tests.support.waiting import wait_until

from .builders import FakeActuator, acts, FakeReader, held_job, node_info, request

DEADLINE_S = 0.5


@pytest.fixture
def pald_on_sqlite(tmp_path):
    path = tmp_path / "pal.db"
    url = f"sqlite:///{path}"
    open_store(url).close()
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    jobs = [held_job(100 + i, gpn=1, submit=i) for i in range(16)]
    pald = Pald(cfg, None, FakeReader([node_info(f"gpu{i:02d}") for i in range(1, 5)], jobs), FakeActuator())
    pald.link = StoreLink(LazyStore(url), deadline_s=DEADLINE_S, retry_s=0.1)
    pald.start_store()
    yield pald, path, url
    pald.stop_store(2)


def decisions_in(url) -> list:
    repo = open_store(url, upgrade=False)
    try:
        return repo.decisions(limit=100_000)
    finally:
        repo.close()


def test_a_locked_sqlite_does_not_slow_releases_and_loses_nothing(pald_on_sqlite):
    pald, path, url = pald_on_sqlite
    with sqlite_write_lock(path):
        t = time.perf_counter()
        pald.sync_and_cycle()
        cycle_s = time.perf_counter() - t
        assert pald.counts["released"] == 16 and len(acts(pald.actuator.calls)) == 16
        assert cycle_s < 0.5, f"a cycle with 16 releases took {cycle_s:.2f} s under a store lock"
        # health tells the truth while the store cannot be written
        assert wait_until(lambda: pald.health().status == "degraded", timeout=DEADLINE_S * 4 + 6)
        assert pald.health().details["store"] in ("stalled", "unreachable")
        assert pald.health().details["buffered_decisions"] > 0
    assert wait_until(lambda: pald.link.buffered == 0 and pald.health().details["store"] == "ok", timeout=15)
    released = [d for d in decisions_in(url) if d.reason.startswith("released:")]
    assert len(released) == 16  # every release recorded, none lost
    repo = open_store(url, upgrade=False)
    try:
        assert len(repo.held_jobs(state=None)) == 16 and not repo.held_jobs()  # all marked released
    finally:
        repo.close()


def test_deleting_the_sqlite_file_loses_no_decision(pald_on_sqlite):
    pald, path, url = pald_on_sqlite
    pald.sync_and_cycle()
    for i in range(20):
        pald.handle(request(gpn=1, rid=f"before-{i}"))
    assert wait_until(lambda: pald.link.buffered == 0)
    before = len(decisions_in(url))

    delete_sqlite_file(path)
    for i in range(30):
        pald.handle(request(gpn=1, rid=f"after-{i}"))
    assert wait_until(lambda: pald.health().status == "degraded")
    health = pald.health().details
    assert health["store"] == "unreachable" and "was deleted while in use" in health["store_error"]
    assert health["buffered_decisions"] == 30
    time.sleep(0.3)
    assert not path.exists()  # pald did not recreate an empty store behind the operator's back

    open_store(url).close()  # the operator runs `palctl db upgrade` (or restores a backup)
    assert wait_until(lambda: pald.link.buffered == 0 and pald.health().status == "ok", timeout=10)
    after = {d.job_id for d in decisions_in(url)}
    assert after == {f"req:after-{i}" for i in range(30)}  # all 30 written to the new file
    assert before == 20 + 16  # (what the deleted file held: 20 placements, 16 releases)
