"""Active/standby: never two leaders, and the standby takes over when the leader's lock dies.

PostgreSQL tests run on a real private server (advisory locks); the SQLite flavour uses flock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from pal_slurm.store.lease import LockCheck, LockState
from tests.support.waiting import wait_until
from pal_slurm.store.leader import (
    AlwaysLeader,
    FileLockLeader,
    Leadership,
    PgAdvisoryLeader,
    lock_key,
    make_leader,
)

REPO = Path(__file__).resolve().parents[3]


def spawn_leader(url: str) -> subprocess.Popen:
    """Another process that takes the lock, says so, and then sleeps (until killed)."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pal_slurm.store.leader import make_leader
        leader = make_leader({url!r})
        while not leader.try_acquire():
            time.sleep(0.05)
        print("leading", flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "leading", f"child did not lead: {line!r}"
    return proc


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def no_two_leaders(contenders: list[Leadership], rounds: int = 30) -> int:
    """Threads grab and drop the lock; a shared counter must never see two leaders at once."""
    inside = 0
    worst = 0
    acquired = 0
    guard = threading.Lock()

    def run(leader: Leadership) -> None:
        nonlocal inside, worst, acquired
        for _ in range(rounds):
            if leader.try_acquire():
                with guard:
                    inside += 1
                    acquired += 1
                    worst = max(worst, inside)
                time.sleep(0.002)
                with guard:
                    inside -= 1
                leader.release()
            time.sleep(0.001)

    threads = [threading.Thread(target=run, args=(c,)) for c in contenders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert worst == 1, f"{worst} leaders at once"
    return acquired


def test_lock_key_is_stable_and_signed_64_bit():
    assert lock_key("pald") == lock_key("pald") != lock_key("other")
    assert -(2**63) <= lock_key("pald") < 2**63


def test_make_leader_picks_the_mechanism(tmp_path):
    assert isinstance(make_leader("memory://"), AlwaysLeader)
    assert isinstance(make_leader("sqlite://"), AlwaysLeader)
    lead = make_leader(f"sqlite:///{tmp_path}/pal.db")
    assert isinstance(lead, FileLockLeader) and lead.path == f"{tmp_path}/pal.db.pald.leader"
    assert isinstance(make_leader("postgresql://u@127.0.0.1:1/x"), PgAdvisoryLeader)
    with pytest.raises(ValueError):
        make_leader("mysql://u@h/x")


def test_always_leader():
    lead = AlwaysLeader()
    assert not lead.is_leader()
    assert lead.try_acquire() and lead.is_leader()
    lead.release()
    assert not lead.is_leader()


# ---- SQLite: flock ---------------------------------------------------------------------


def test_file_lock_one_leader_then_handover(tmp_path):
    url = f"sqlite:///{tmp_path}/pal.db"
    a, b = make_leader(url), make_leader(url)
    assert a.try_acquire() and a.is_leader()
    assert not b.try_acquire() and not b.is_leader()
    assert a.try_acquire()  # idempotent while leading
    a.release()
    assert not a.is_leader()
    assert b.try_acquire() and not a.try_acquire()
    b.release()


def test_file_lock_contenders_never_overlap(tmp_path):
    url = f"sqlite:///{tmp_path}/pal.db"
    assert no_two_leaders([make_leader(url) for _ in range(4)]) > 0


def test_file_lock_standby_takes_over_when_leader_process_dies(tmp_path):
    url = f"sqlite:///{tmp_path}/pal.db"
    proc = spawn_leader(url)
    standby = make_leader(url)
    try:
        assert not standby.try_acquire()
        kill(proc)
        assert wait_until(standby.try_acquire, timeout=5)
    finally:
        if proc.poll() is None:
            kill(proc)
        standby.release()


# ---- PostgreSQL: advisory lock -----------------------------------------------------------


@pytest.mark.postgres
def test_pg_one_leader_then_handover(postgres_url):
    a, b = PgAdvisoryLeader(postgres_url), PgAdvisoryLeader(postgres_url)
    try:
        assert a.try_acquire() and a.is_leader() and a.backend_pid
        for _ in range(5):
            assert not b.try_acquire() and not b.is_leader()
            assert a.try_acquire()
        other = PgAdvisoryLeader(postgres_url, name="another-service")
        assert other.try_acquire()  # a different name is a different lock
        other.close()
        a.release()
        assert not a.is_leader()
        assert b.try_acquire() and not a.try_acquire()
    finally:
        a.close()
        b.close()


@pytest.mark.postgres
def test_pg_contenders_never_overlap(postgres_url):
    leaders = [PgAdvisoryLeader(postgres_url) for _ in range(4)]
    try:
        assert no_two_leaders(leaders, rounds=20) > 0
    finally:
        for lead in leaders:
            lead.close()


@pytest.mark.postgres
def test_pg_standby_takes_over_when_leader_connection_dies(postgres_server, postgres_url):
    leader, standby = PgAdvisoryLeader(postgres_url), PgAdvisoryLeader(postgres_url)
    try:
        assert leader.try_acquire()
        assert not standby.try_acquire()
        # the leader's session is killed server-side (what a dead host/connection amounts to)
        postgres_server.execute_autocommit(f"SELECT pg_terminate_backend({leader.backend_pid})")
        assert wait_until(standby.try_acquire, timeout=10)
        assert not leader.is_leader()  # the old leader notices at its next check...
        assert not leader.try_acquire()  # ...and cannot take the lock back
        assert "lost the lock connection" in (leader.last_error or "")
    finally:
        leader.close()
        standby.close()


@pytest.mark.postgres
def test_pg_standby_takes_over_when_leader_process_is_killed(postgres_url):
    proc = spawn_leader(postgres_url)
    standby = PgAdvisoryLeader(postgres_url)
    try:
        assert not standby.try_acquire()
        started = time.monotonic()
        kill(proc)
        assert wait_until(standby.try_acquire, timeout=10)
        assert time.monotonic() - started < 10
    finally:
        if proc.poll() is None:
            kill(proc)
        standby.close()


@pytest.mark.postgres
def test_pg_outage_means_nobody_leads_and_no_exception(postgres_factory):
    server = postgres_factory()
    url = server.url("postgres")
    leader = PgAdvisoryLeader(url)
    try:
        assert leader.try_acquire()
        server.stop(immediate=True)
        assert not leader.is_leader()
        assert not leader.try_acquire()
        assert leader.last_error and f":{server.port}/postgres" in leader.last_error
        server.start()
        assert wait_until(leader.try_acquire, timeout=10)
    finally:
        leader.close()


# ---- store faults: the lock survives what the store does not -------------------


def test_file_lock_in_a_read_only_directory_still_elects_exactly_one_leader(tmp_path):
    from tests.fixtures.store_faults import read_only_dir

    store_dir = tmp_path / "store"
    store_dir.mkdir()
    url = f"sqlite:///{store_dir}/pal.db"
    with read_only_dir(store_dir):
        a, b = make_leader(url), make_leader(url)
        assert a.check().state is LockState.HELD  # the directory itself is the lock
        assert b.check().state is LockState.TAKEN
        a.release()
        assert b.try_acquire() and not a.try_acquire()
        b.release()
        assert no_two_leaders([make_leader(url) for _ in range(3)]) > 0


def test_file_lock_and_directory_lock_exclude_each_other(tmp_path):
    """One pald locked the directory (lock file not creatable then); another that can create
    the lock file later must still see it."""
    from tests.fixtures.store_faults import read_only_dir

    store_dir = tmp_path / "store"
    store_dir.mkdir()
    url = f"sqlite:///{store_dir}/pal.db"
    with read_only_dir(store_dir):
        on_dir = make_leader(url)
        assert on_dir.try_acquire()
    on_file = make_leader(url)  # the directory is writable again: this one uses the lock file
    assert on_file.check().state is LockState.TAKEN
    on_dir.release()
    assert on_file.try_acquire() and (store_dir / "pal.db.pald.leader").exists()
    assert not make_leader(url).try_acquire()
    on_file.release()


@pytest.mark.postgres
def test_pg_check_counts_the_other_contenders(postgres_url):
    a, b, c = (PgAdvisoryLeader(postgres_url) for _ in range(3))
    try:
        assert a.check() == LockCheck(LockState.HELD, peers=0)
        assert b.check().state is LockState.TAKEN
        assert a.check().peers == 1
        c.check()
        assert a.check().peers == 2
        b.close()  # its backend exits a moment after the client hangs up
        assert wait_until(lambda: a.check().peers == 1, timeout=5)
    finally:
        for lead in (a, b, c):
            lead.close()


@pytest.mark.postgres
def test_pg_frozen_server_check_is_interrupted_and_reported_unreachable(postgres_factory):
    from tests.fixtures.store_faults import frozen_postgres

    server = postgres_factory()
    leader = PgAdvisoryLeader(server.url("postgres"))
    try:
        assert leader.check().state is LockState.HELD
        with frozen_postgres(server):
            out: list = []
            t = threading.Thread(target=lambda: out.append(leader.check()), daemon=True)
            t.start()
            t.join(0.5)
            assert t.is_alive()  # nothing in the driver times out on a frozen server
            assert leader.interrupt() >= 1
            t.join(2)
            assert not t.is_alive() and out[0].state is LockState.UNREACHABLE
        assert wait_until(lambda: leader.check().state is LockState.HELD, timeout=10)
    finally:
        leader.close()


def test_a_failing_leader_set_up_means_standby_then_retries(tmp_path, caplog):
    from pal_slurm.daemon.leadership import LeaderWatch
    from pal_slurm.store.leader import RetryingLeader

    attempts = []

    def factory():
        attempts.append(1)
        if len(attempts) <= 3:
            raise OSError("lock directory not mounted yet")
        return FileLockLeader(str(tmp_path / "pal.db.pald.leader"))

    caplog.set_level("ERROR", logger="pald.leader")
    watch = LeaderWatch(RetryingLeader(factory), grace_s=30.0)
    for _ in range(3):
        assert watch.check_now() is False  # never "always leader" while the set-up fails
        assert watch.leading() is False
    assert len([r for r in caplog.records if "leader set-up failed" in r.getMessage()]) == 1  # once, not per check
    assert watch.check_now() is True  # the set-up succeeds on a later check: it leads
    assert len(attempts) == 4
    watch.leader.release()


def test_a_failing_leader_set_up_never_leads_beside_the_real_leader(tmp_path):
    from pal_slurm.daemon.leadership import LeaderWatch
    from pal_slurm.store.leader import RetryingLeader

    path = str(tmp_path / "pal.db.pald.leader")
    real = FileLockLeader(path)
    assert real.try_acquire()
    broken = LeaderWatch(RetryingLeader(lambda: (_ for _ in ()).throw(ValueError("no driver"))), grace_s=0.0)
    late = LeaderWatch(RetryingLeader(lambda: FileLockLeader(path)), grace_s=0.0)
    assert broken.check_now() is False
    assert late.check_now() is False  # set up fine, but the lock is taken
    real.release()
    assert late.check_now() is True
    assert broken.check_now() is False
    late.leader.release()


def test_pald_whose_leader_set_up_fails_is_a_standby(tmp_path):
    from pal_slurm.config import load_config
    from pal_slurm.daemon.main import build

    cfg = tmp_path / "pal.toml"
    cfg.write_text('[store]\nurl = "mysql://pal@db/pal"\n')  # a store with no leadership mechanism
    pald = build(load_config(str(cfg)))
    assert pald.check_leadership() is False
    assert "no leadership mechanism" in (pald.leadership.leader.last_error or "")


@pytest.mark.postgres
def test_pg_own_dropped_session_still_holding_the_lock_is_not_another_leader(postgres_factory):
    """A check interrupted on a frozen backend drops our session, but the server keeps its lock
    until that backend reads the hang-up. Our next session used to see the lock TAKEN, and the
    lease made the only pald a standby, then made it wait out the takeover grace (every job
    passed unplaced for a minute after a database freeze). Now: UNREACHABLE while our old
    session holds it (the lease leads on), that session is ended, and the lock is ours again."""
    from pal_slurm.store.lease import Lease

    server = postgres_factory()
    leader = PgAdvisoryLeader(server.url("postgres"))
    lease = Lease(grace_s=60)
    try:
        assert lease.observe(leader.check(), now=0.0)
        old_backend = leader.backend_pid
        assert old_backend is not None
        os.kill(old_backend, signal.SIGSTOP)  # only our lock session's backend: the server answers others
        try:
            out: list = []
            t = threading.Thread(target=lambda: out.append(leader.check()), daemon=True)
            t.start()
            t.join(0.5)
            assert t.is_alive() and leader.interrupt() >= 1
            t.join(2)
            assert out and out[0].state is LockState.UNREACHABLE
            assert lease.observe(out[0], now=1.0)
            again = leader.check()  # a new session; the frozen one still holds the lock
            assert again.state is LockState.UNREACHABLE, again
            assert f"server pid {old_backend}" in again.error
            assert lease.observe(again, now=2.0) and not lease.saw_other_leader
        finally:
            os.kill(old_backend, signal.SIGCONT)  # it ends on the termination it was sent
        assert wait_until(lambda: leader.check().state is LockState.HELD, timeout=10)
        assert lease.observe(leader.check(), now=3.0) and lease.reason == "holds the lock"
        assert wait_until(lambda: not psutil.pid_exists(old_backend), timeout=5)  # ended, not just unlocked
    finally:
        leader.close()


@pytest.mark.postgres
def test_pg_another_contender_holding_the_lock_is_still_taken_after_we_dropped_a_session(postgres_url):
    """Remembering our own past sessions never makes another pald's lock ours."""
    a, b = PgAdvisoryLeader(postgres_url), PgAdvisoryLeader(postgres_url)
    try:
        assert a.check().state is LockState.HELD
        a.close()  # a's session is now a past one; b takes the lock
        assert wait_until(lambda: b.check().state is LockState.HELD, timeout=5)
        assert a.check().state is LockState.TAKEN
    finally:
        a.close()
        b.close()
