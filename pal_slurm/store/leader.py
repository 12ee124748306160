"""Active/standby for pald: which of several daemons may act on Slurm right now.

Large sites run two pald on one PostgreSQL; the database decides who leads, so a failed pald
host costs seconds, not a night. Small sites run one pald on SQLite; the lock is a file lock,
which also stops two pald started by mistake on one host from both releasing held jobs.

Usage in a daemon's cycle:

    leader = make_leader(config.store.url)
    while True:
        if leader.try_acquire():      # cheap when already leading: checks the lock is alive
            ... act on Slurm (scontrol update / release) ...
        else:
            ... standby: keep the in-memory view warm, answer `place` with `pass` ...

Guarantee: at any moment at most one contender holds the lock (the database's, or the
kernel's for a file). A leader learns it lost the lock only when it next calls
`try_acquire()`/`is_leader()`/`check()`, so call one right before acting. On PostgreSQL the lock
is a session-level advisory lock held on a dedicated connection: it goes when that connection
goes (process killed, host dead: the server drops the session after TCP keepalives fail, set
here to about 10 s; `tcp_user_timeout` bounds how long the leader itself can stay blind). Every
contender also holds a shared "contender" lock on its connection, so a leader can count the
other pald connected (`LockCheck.peers`).

A session we dropped (a check interrupted on a frozen server, a connection cut) can outlive our
side of it: the server holds its lock until it reads the hang-up, which a frozen or cut-off
server does late. Our next session would then see the lock "taken" by our own past self, and the
lease would treat that as another leader (standby, then a takeover wait of `grace_s`: the only
pald passing every job for a minute after every database hiccup). So the sessions we dropped are
remembered by (server pid, start time), a holder that is one of them is reported UNREACHABLE
("cannot tell yet", which the lease leads on through), and that session is terminated (the same
role may signal its own backends) so the lock comes back at once.

`check()` tells "another holds the lock" from "the lock cannot be checked" (LockState); what a
daemon does with an unreachable lock is the lease's business (lease.py), not the lock's.
With SQLite the lock file lives beside the database; when it cannot be created (read-only
directory) the directory itself is flocked instead, so a read-only store never costs the
leadership (the two are checked against each other: one leader either way).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
from typing import Any, Callable, Protocol, runtime_checkable

from sqlalchemy import text
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import NullPool

from pal_slurm.store.engine import make_engine, parse_url, safe_url, sqlite_path
from pal_slurm.store.interrupt import OpenConnections
from pal_slurm.store.lease import LockCheck, LockState

DEFAULT_NAME = "pald"
PAST_SESSIONS_KEPT = 8  # our dropped lock sessions that may still hold the lock server-side

log = logging.getLogger("pald.leader")

# Server-side session settings on the lock connection: a dead leader's session (and lock) is
# dropped within keepalives_idle + interval * count seconds.
PG_SESSION_SETTINGS = (
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 2",
    "SET tcp_keepalives_count = 3",
    "SET statement_timeout = '5s'",
)
# Client side (libpq): notice a dead server within seconds instead of the kernel's ~15 min.
PG_CONNECT_ARGS: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a leadership name."""
    digest = hashlib.sha256(f"pal-slurm:leader:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def holder_id() -> str:
    """Who we are, for heartbeats and logs: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@runtime_checkable
class Leadership(Protocol):
    name: str
    exact: bool  # a live holder can never be cut off from the lock (local flock): see lease.py

    def check(self) -> LockCheck:
        """Hold or take the lock if possible and say how it stands. Never raises."""

    def interrupt(self) -> int:
        """Break a check stuck in I/O on another thread (a watchdog's tool)."""

    def try_acquire(self) -> bool:
        """Lead if possible; True when we lead now. Never raises for a database outage."""

    def is_leader(self) -> bool:
        """Do we still lead? Checks the lock is still ours (no acquiring)."""

    def release(self) -> None:
        """Step down (idempotent)."""


class AlwaysLeader:
    """One process by construction (in-memory store): always the leader."""

    exact = True

    def __init__(self, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self._held = False

    def check(self) -> LockCheck:
        self._held = True
        return LockCheck(LockState.HELD, peers=0)

    def interrupt(self) -> int:
        return 0

    def try_acquire(self) -> bool:
        return self.check().state is LockState.HELD

    def is_leader(self) -> bool:
        return self._held

    def release(self) -> None:
        self._held = False


class FileLockLeader:
    """flock(2) on `<path>` (held while our descriptor is open; dies with us), or on the
    directory holding it when `<path>` cannot be created (read-only directory)."""

    exact = True

    def __init__(self, path: str, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self.path = path
        self.directory = os.path.dirname(os.path.abspath(path))
        self._fd: int | None = None
        self.last_error: str | None = None

    def check(self) -> LockCheck:
        if self._fd is not None:
            return LockCheck(LockState.HELD)
        opened = self._open_lock_file()
        on_directory = opened is None
        if opened is not None:
            fd = opened
        else:
            try:
                fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as err:
                self.last_error = f"cannot open {self.path} or its directory: {err.strerror}"
                return LockCheck(LockState.UNREACHABLE, error=self.last_error)
        if not _try_flock(fd) or self._other_lock_held(on_directory):
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return LockCheck(LockState.TAKEN)
        if not on_directory:
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{holder_id()}\n".encode())
            except OSError:
                pass  # a read-only lock file still locks; the holder note is for humans
        self._fd = fd
        self.last_error = None
        return LockCheck(LockState.HELD)

    def _open_lock_file(self) -> int | None:
        for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
            try:
                return os.open(self.path, flags | os.O_CLOEXEC, 0o640)
            except OSError:
                continue
        return None

    def _other_lock_held(self, on_directory: bool) -> bool:
        """A holder of one of the two locks (file, directory) checks nobody holds the other."""
        try:
            other = os.open(self.path if on_directory else self.directory,
                            (os.O_RDONLY if on_directory else os.O_RDONLY | os.O_DIRECTORY) | os.O_CLOEXEC)
        except OSError:
            return False  # no lock file (yet): nobody can hold it
        try:
            if not _try_flock(other):
                return True
            fcntl.flock(other, fcntl.LOCK_UN)
            return False
        finally:
            os.close(other)

    def interrupt(self) -> int:
        return 0  # flock with LOCK_NB never blocks

    def try_acquire(self) -> bool:
        return self.check().state is LockState.HELD

    def is_leader(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _advisory_ids(key: int) -> tuple[int, int]:
    """(classid, objid) under which pg_locks shows a bigint advisory key."""
    k = key & 0xFFFFFFFFFFFFFFFF
    return k >> 32, k & 0xFFFFFFFF


class PgAdvisoryLeader:
    """`pg_try_advisory_lock` on a dedicated connection (never a pooled one). The connection
    stays open while we are a standby too: it holds our shared contender lock."""

    exact = False  # a leader cut off from the server still runs; the server drops its lock

    def __init__(self, url: str, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self.key = lock_key(name)
        self.contender_key = lock_key(f"{name}:contenders")
        self._where = safe_url(url)
        self._engine = make_engine(
            url, poolclass=NullPool, connect_args=dict(PG_CONNECT_ARGS), pool_pre_ping=False
        )
        self._connections = OpenConnections(self._engine)
        self._conn: Any = None  # sqlalchemy Connection (contender; leader when _holding)
        self._holding = False
        self._pid: int | None = None
        self._session: tuple[int, str] | None = None  # (server pid, backend start) of _conn
        self._past_sessions: list[tuple[int, str]] = []  # sessions we dropped, newest last
        self.last_error: str | None = None

    @property
    def backend_pid(self) -> int | None:
        """The server process holding our lock (for operators and tests)."""
        return self._pid if self._holding else None

    def _drop(self) -> None:
        if self._session is not None:
            self._past_sessions = [*self._past_sessions, self._session][-PAST_SESSIONS_KEPT:]
        conn, self._conn, self._holding, self._session = self._conn, None, False, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # noqa: BLE001 - a dead connection may fail to close; it is gone
                pass

    def _connect(self) -> Any:
        conn = self._engine.connect()
        try:
            is_tcp = conn.exec_driver_sql("SELECT inet_server_addr() IS NOT NULL").scalar()
            for stmt in PG_SESSION_SETTINGS:
                if is_tcp or "tcp_" not in stmt:
                    conn.exec_driver_sql(stmt)
            conn.execute(text("SELECT pg_advisory_lock_shared(:k)"), {"k": self.contender_key})
            self._pid, started = conn.exec_driver_sql(
                "SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()").one()
            self._session = (int(self._pid), str(started))
            conn.commit()  # leave no transaction open; session locks outlive it
        except BaseException:
            conn.close()
            raise
        return conn

    def _peers(self) -> int:
        classid, objid = _advisory_ids(self.contender_key)
        n = self._conn.execute(
            text("SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                 "AND classid = :c AND objid = :o AND objsubid = 1"),
            {"c": classid, "o": objid},
        ).scalar()
        return max(0, int(n or 0) - 1)

    def _holder_is_past_self(self) -> int | None:
        """The server pid holding the leader lock when it is one of our own dropped sessions
        (same pid and start time: a reused pid is someone else), after asking the server to end
        it; None when the holder is anyone else or cannot be seen."""
        if not self._past_sessions:
            return None
        classid, objid = _advisory_ids(self.key)
        rows = self._conn.execute(
            text("SELECT l.pid, a.backend_start::text FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                 "WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock' "
                 "AND l.classid = :c AND l.objid = :o AND l.objsubid = 1"),
            {"c": classid, "o": objid},
        ).all()
        past = set(self._past_sessions)
        for pid, started in rows:
            if (int(pid), str(started)) in past:
                try:
                    self._conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": int(pid)})
                except sa_exc.DBAPIError as err:  # not allowed here: the server drops it in time
                    log.info("cannot end our previous lock session %s: %s", pid, str(err).splitlines()[0])
                    self._conn.rollback()
                return int(pid)
        return None

    def check(self) -> LockCheck:
        try:
            with self._connections.in_call():
                if self._conn is None:
                    self._conn = self._connect()
                past_self = None
                if not self._holding:
                    got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key}).scalar()
                    self._holding = bool(got)
                    past_self = None if self._holding else self._holder_is_past_self()
                peers = self._peers()
                self._conn.commit()
        except (sa_exc.SQLAlchemyError, OSError) as err:
            lost = " lost the lock connection:" if self._holding else ""
            self.last_error = f"{self._where}:{lost} {str(err).splitlines()[0]}"
            self._drop()
            return LockCheck(LockState.UNREACHABLE, error=self.last_error)
        if self._holding:
            self.last_error = None
        elif past_self is not None:
            self.last_error = (f"{self._where}: the lock is still held by this pald's previous session "
                               f"(server pid {past_self}), ended now")
            return LockCheck(LockState.UNREACHABLE, error=self.last_error)
        return LockCheck(LockState.HELD if self._holding else LockState.TAKEN, peers=peers)

    def interrupt(self) -> int:
        return self._connections.interrupt()

    def try_acquire(self) -> bool:
        return self.check().state is LockState.HELD

    def is_leader(self) -> bool:
        if not self._holding:
            return False
        return self.check().state is LockState.HELD

    def release(self) -> None:
        if self._conn is None or not self._holding:
            return
        try:
            self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
            self._conn.commit()
            self._holding = False
        except (sa_exc.SQLAlchemyError, OSError):
            self._drop()  # a dead connection has released the lock already

    def close(self) -> None:
        self.release()
        self._drop()
        self._engine.dispose()


class RetryingLeader:
    """A leadership mechanism whose set-up failed (a driver missing, a bad URL, a lock directory
    not there yet): every check tries the set-up again, and until it succeeds the lock is
    UNREACHABLE, which the lease turns into "not leading" (a pald that never held the lock never
    leads on an unreachable one). Falling back to "always leader" instead would let a second pald
    act on Slurm beside the real leader. Each distinct set-up error is logged once."""

    exact = False  # unknown until the real mechanism exists: the cautious takeover rule

    def __init__(self, factory: Callable[[], Leadership], name: str = DEFAULT_NAME) -> None:
        self.name = name
        self.factory = factory
        self.inner: Leadership | None = None
        self.last_error: str | None = None

    def _ready(self) -> Leadership | None:
        if self.inner is None:
            try:
                self.inner = self.factory()
            except Exception as exc:  # noqa: BLE001 - any set-up failure means: not leading yet
                error = f"leader set-up failed: {exc}"
                if error != self.last_error:
                    log.error("%s; standby until it succeeds", error)
                self.last_error = error
                return None
            log.info("leader set-up succeeded after: %s", self.last_error)
            self.last_error = None
        return self.inner

    def check(self) -> LockCheck:
        inner = self._ready()
        if inner is None:
            return LockCheck(LockState.UNREACHABLE, error=self.last_error or "")
        return inner.check()

    def interrupt(self) -> int:
        return self.inner.interrupt() if self.inner is not None else 0

    def try_acquire(self) -> bool:
        return self.check().state is LockState.HELD

    def is_leader(self) -> bool:
        return self.inner is not None and self.inner.is_leader()

    def release(self) -> None:
        if self.inner is not None:
            self.inner.release()


def make_leader(url: str, name: str = DEFAULT_NAME) -> Leadership:
    """The leadership mechanism that fits the store at `url`."""
    if url.startswith("memory://"):
        return AlwaysLeader(name)
    parsed = parse_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return PgAdvisoryLeader(url, name)
    if backend == "sqlite":
        path = sqlite_path(parsed)
        if path is None:
            return AlwaysLeader(name)
        return FileLockLeader(f"{path}.{name}.leader", name)
    raise ValueError(f"no leadership mechanism for {safe_url(url)}")
