"""Break a store call that is stuck inside the database driver, from another thread.

Timeouts in the driver do not cover every hang: a PostgreSQL server stopped with SIGSTOP (or a
frozen VM) keeps its TCP connections open and the kernel acknowledges everything, so libpq
waits in recv() forever: no statement timeout fires (the server is not running), no TCP
keepalive or user timeout fires (the peer kernel answers). The only way out is to close our
end: `interrupt()` shuts down the socket of every open connection of the engine (the stuck
call may be in the pool's pre-ping, before the connection counts as checked out), which makes
the blocked call fail at once with a disconnect; the pool then replaces the broken
connections (an idle one is caught by the next pre-ping). For SQLite,
`sqlite3.Connection.interrupt()` aborts the running statement (not a busy-timeout wait: that
one is bounded by the busy timeout itself).

The interrupted call would otherwise go on to reconnect (the pool's pre-ping replaces the
broken connection), and a connect to a frozen server waits its whole connect timeout; so a
call that was in progress (`in_call()`) when `interrupt()` came may not open new connections
until it ends: it fails at once.

A watchdog (pald's store link) calls `interrupt()` when a call overruns its deadline. A
connection leaves the set when the pool closes or invalidates it, before its descriptor can be
reused by anything else.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from sqlalchemy import Engine, event


class OpenConnections:
    """The DBAPI connections `engine`'s pool holds open, and a way to break them."""

    def __init__(self, engine: Engine) -> None:
        self._lock = threading.Lock()
        self._live: set[Any] = set()
        self._calls: set[int] = set()  # threads inside a repository call
        self._interrupted: set[int] = set()  # ... of those, the ones interrupt() broke
        self._dbapi_error = engine.dialect.loaded_dbapi.OperationalError
        event.listen(engine, "do_connect", self._maybe_refuse)
        event.listen(engine, "connect", self._opened)
        event.listen(engine, "close", self._closed)
        event.listen(engine, "close_detached", self._closed_detached)
        event.listen(engine, "invalidate", self._invalidated)

    @contextmanager
    def in_call(self) -> Iterator[None]:
        """Marks one repository call on this thread (for `interrupt()`)."""
        me = threading.get_ident()
        with self._lock:
            self._calls.add(me)
        try:
            yield
        finally:
            with self._lock:
                self._calls.discard(me)
                self._interrupted.discard(me)

    def _maybe_refuse(self, _dialect: Any, _record: Any, _cargs: Any, _cparams: Any) -> None:
        if threading.get_ident() in self._interrupted:
            raise self._dbapi_error("connection refused: the call was interrupted (deadline passed)")

    def _opened(self, dbapi_conn: Any, _record: Any) -> None:
        with self._lock:
            self._live.add(dbapi_conn)

    def _closed(self, dbapi_conn: Any, _record: Any) -> None:
        with self._lock:
            self._live.discard(dbapi_conn)

    def _closed_detached(self, dbapi_conn: Any) -> None:
        self._closed(dbapi_conn, None)

    def _invalidated(self, dbapi_conn: Any, _record: Any, _exc: Any) -> None:
        self._closed(dbapi_conn, _record)

    def interrupt(self) -> int:
        """Break every open connection's current call (idle ones too); how many."""
        broken = 0
        with self._lock:
            self._interrupted |= self._calls
            for conn in list(self._live):
                if _break(conn):
                    broken += 1
        return broken


def _break(conn: Any) -> bool:
    if isinstance(conn, sqlite3.Connection):
        try:
            conn.interrupt()
            return True
        except sqlite3.Error:
            return False
    fileno = getattr(conn, "fileno", None)
    if fileno is None:
        return False
    try:
        fd = fileno()
        if getattr(conn, "closed", 0):
            return False
    except Exception:  # noqa: BLE001 - a closed connection has no socket left to break
        return False
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        return False
    finally:
        sock.detach()  # the driver still owns the descriptor
    return True
