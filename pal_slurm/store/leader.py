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
`try_acquire()`/`is_leader()`, so call one right before acting. On PostgreSQL the lock is a
session-level advisory lock held on a dedicated connection: it goes when that connection goes
(process killed, host dead: the server drops the session after TCP keepalives fail, set here to
about 10 s; `tcp_user_timeout` bounds how long the leader itself can stay blind).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import text
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import NullPool

from pal_slurm.store.engine import make_engine, parse_url, safe_url, sqlite_path

DEFAULT_NAME = "pald"

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

    def try_acquire(self) -> bool:
        """Lead if possible; True when we lead now. Never raises for a database outage."""

    def is_leader(self) -> bool:
        """Do we still lead? Checks the lock is still ours (no acquiring)."""

    def release(self) -> None:
        """Step down (idempotent)."""


class AlwaysLeader:
    """One process by construction (in-memory store): always the leader."""

    def __init__(self, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self._held = False

    def try_acquire(self) -> bool:
        self._held = True
        return True

    def is_leader(self) -> bool:
        return self._held

    def release(self) -> None:
        self._held = False


class FileLockLeader:
    """flock(2) on `<path>`: held while our file descriptor is open (and dies with us)."""

    def __init__(self, path: str, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{holder_id()}\n".encode())
        self._fd = fd
        return True

    def is_leader(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


class PgAdvisoryLeader:
    """`pg_try_advisory_lock` on a dedicated connection (never a pooled one)."""

    def __init__(self, url: str, name: str = DEFAULT_NAME) -> None:
        self.name = name
        self.key = lock_key(name)
        self._where = safe_url(url)
        self._engine = make_engine(
            url, poolclass=NullPool, connect_args=dict(PG_CONNECT_ARGS), pool_pre_ping=False
        )
        self._conn: Any = None  # sqlalchemy Connection while we lead
        self.last_error: str | None = None

    @property
    def backend_pid(self) -> int | None:
        """The server process holding our lock (for operators and tests)."""
        if self._conn is None:
            return None
        return self._pid

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:  # noqa: BLE001 - a dead connection may fail to close; it is gone
                pass

    def try_acquire(self) -> bool:
        if self._conn is not None and self.is_leader():
            return True
        conn = None
        try:
            conn = self._engine.connect()
            is_tcp = conn.exec_driver_sql("SELECT inet_server_addr() IS NOT NULL").scalar()
            for stmt in PG_SESSION_SETTINGS:
                if is_tcp or "tcp_" not in stmt:
                    conn.exec_driver_sql(stmt)
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key}).scalar()
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            conn.commit()  # leave no transaction open; the session lock outlives it
        except (sa_exc.SQLAlchemyError, OSError) as err:
            self.last_error = f"{self._where}: {str(err).splitlines()[0]}"
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001
                    pass
            return False
        if not got:
            conn.close()
            return False
        self._conn, self._pid = conn, pid
        self.last_error = None
        return True

    def is_leader(self) -> bool:
        if self._conn is None:
            return False
        try:
            self._conn.exec_driver_sql("SELECT 1").scalar()
            self._conn.commit()
        except (sa_exc.SQLAlchemyError, OSError) as err:
            self.last_error = f"{self._where}: lost the lock connection: {str(err).splitlines()[0]}"
            self._drop()
            return False
        return True

    def release(self) -> None:
        if self._conn is None:
            return
        try:
            self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
            self._conn.commit()
        except (sa_exc.SQLAlchemyError, OSError):
            pass  # a dead connection has released the lock already
        finally:
            self._drop()

    def close(self) -> None:
        self.release()
        self._engine.dispose()


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
