"""The store link: writes never wait and are never lost silently; a stuck call is broken at its
deadline and health says so. Fakes here; the real SQLite/PostgreSQL
faults are in test_store_faults_pald.py."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

from pal_slurm.daemon.store_link import StoreLink
from pal_slurm.model import DecisionKind
from pal_slurm.store.errors import StoreUnavailable
from pal_slurm.store.memory import MemoryRepository
from pal_slurm.store.records import DecisionRecord, Heartbeat

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def decision(job_id: str) -> DecisionRecord:
    return DecisionRecord(job_id, DecisionKind.PLACE, "t", {}, created_at=T0)


class SwitchableStore:
    """A memory repository that can be down (raises) or stuck (blocks until interrupted)."""

    def __init__(self):
        self.repo = MemoryRepository()
        self.down = False
        self.stuck = threading.Event()  # set: calls block
        self.unblock = threading.Event()
        self.interrupts = 0

    def interrupt(self) -> int:
        self.interrupts += 1
        self.unblock.set()
        return 1

    def __getattr__(self, name):
        attr = getattr(self.repo, name)

        def call(*a, **k):
            if self.stuck.is_set():
                self.unblock.wait(30)
                self.unblock.clear()
                raise StoreUnavailable("server closed the connection unexpectedly")
            if self.down:
                raise StoreUnavailable("database down")
            return attr(*a, **k)

        return call


def written(store) -> list[str]:
    return sorted(d.job_id for d in store.repo.decisions(limit=10_000))


def test_writes_wait_in_order_while_the_store_is_down_and_none_is_lost():
    store = SwitchableStore()
    link = StoreLink(store, retry_s=0.0)
    store.down = True
    for i in range(50):
        link.record_decision(decision(f"{i:02d}"))
    assert link.write_now() == 0 and link.buffered == 50
    status = link.status()
    assert status.state == "unreachable" and not status.healthy and "database down" in status.error
    store.down = False
    assert link.write_now() == 50 and link.buffered == 0
    assert written(store) == [f"{i:02d}" for i in range(50)]
    assert link.status().state == "ok" and link.status().error == ""


def test_a_full_queue_drops_the_oldest_and_counts_it():
    store = SwitchableStore()
    link = StoreLink(store, max_buffered=10)
    store.down = True
    for i in range(25):
        link.record_decision(decision(f"{i:02d}"))
    assert link.buffered == 10 and link.status().dropped == 15
    store.down = False
    link.write_now()
    assert written(store) == [f"{i:02d}" for i in range(15, 25)]


def test_a_record_the_store_refuses_is_dropped_and_does_not_block_the_rest():
    store = SwitchableStore()
    link = StoreLink(store)
    link.record_decision(decision("1"))
    link.record_decision(DecisionRecord("2", DecisionKind.PLACE, "t", {}, perf_class="Z", created_at=T0))
    link.record_decision(decision("3"))
    assert link.write_now() == 3
    assert written(store) == ["1", "3"] and "unknown class" in link.status().error


def test_only_the_newest_heartbeat_is_written():
    store = SwitchableStore()
    link = StoreLink(store)
    for i in range(5):
        link.heartbeat(Heartbeat("pald", f"h:{i}", T0))
    link.write_now()
    assert store.repo.read_heartbeat("pald").holder == "h:4"


def test_a_stuck_call_is_interrupted_at_its_deadline_and_producers_never_wait():
    store = SwitchableStore()
    store.repo.write_ranking("optimal", [])
    link = StoreLink(store, deadline_s=0.3, retry_s=0.05)
    link.start()
    try:
        assert link.request_refresh(wait_s=5)
        assert link.take_read() is not None and link.status().state == "ok"
        store.stuck.set()
        link.record_decision(decision("1"))  # the thread picks it up and gets stuck
        deadline = time.monotonic() + 5
        while link.status().in_flight_s is None and time.monotonic() < deadline:
            time.sleep(0.01)
        t = time.perf_counter()
        for i in range(2, 1002):
            link.record_decision(decision(str(i)))
        # 1,000 decisions queued while the store hangs: a producer that waited on the store would
        # wait out the 0.3 s deadline each time (300 s); a loaded host took 2.9 s, so the bound is loose
        assert time.perf_counter() - t < 30.0
        while store.interrupts == 0 and time.monotonic() < deadline:
            assert link.status().state in ("ok", "stalled")
            time.sleep(0.01)
        assert store.interrupts >= 1
        while "interrupted" not in link.status().error and time.monotonic() < deadline:
            time.sleep(0.01)
        status = link.status()  # the retry may be stuck again already: stalled, or unreachable
        assert status.state in ("unreachable", "stalled") and not status.healthy
        assert "took longer than 0.3 s and was interrupted" in status.error
        store.stuck.clear()
        while link.buffered and time.monotonic() < deadline + 5:
            time.sleep(0.02)
        assert len(written(store)) == 1001  # nothing lost
        assert link.status().state == "ok"
    finally:
        store.stuck.clear()
        store.unblock.set()
        link.stop(2)


def test_reload_waits_for_a_read_that_started_after_it():
    store = SwitchableStore()
    link = StoreLink(store, refresh_s=3600)
    link.start()
    try:
        assert link.request_refresh(wait_s=5)
        assert link.take_read().snapshot is None
        store.repo.write_ranking("optimal", [])
        assert link.request_refresh(wait_s=5)
        assert link.take_read().snapshot.version == 1
    finally:
        link.stop(2)


def test_stop_writes_what_waits():
    store = SwitchableStore()
    link = StoreLink(store, refresh_s=3600)
    link.start()
    link.record_decision(decision("last"))
    link.stop(2)
    assert written(store) == ["last"]
