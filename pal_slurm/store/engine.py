"""Engines for the two supported databases, and the one place driver errors become store errors.

SQLite: WAL (readers never block the writer: palctl can read while pald writes), a bounded
busy timeout instead of instant "database is locked", foreign keys on. Only an engine made with
`create=True` creates the file (and its directory); every connection opens the file with
`mode=rw`, so a pooled reconnect after the file was deleted fails loudly instead of creating an
empty database that silently swallows writes. There is no fallback to another path.
A `read_only=True` engine creates and changes nothing (for commands that only read): a missing
SQLite file reads as an empty database held in memory, and every connection refuses writes.
PostgreSQL (psycopg2): pre-ping so a restarted server costs one retry, a connect timeout so a
dead server costs seconds, not minutes, and a statement timeout so a stuck server cannot hold
a caller for longer than that.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any, NoReturn
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.pool import StaticPool

from pal_slurm.store.errors import InvalidRecord, StoreError, StoreFull, StoreUnavailable

SQLITE_BUSY_TIMEOUT_MS = 5000
PG_CONNECT_TIMEOUT_S = 5
PG_STATEMENT_TIMEOUT_MS = 10_000

# PostgreSQL SQLSTATEs meaning "no room": disk_full, out_of_memory-ish insufficient resources.
PG_FULL_CODES = frozenset({"53100"})


def parse_url(url: str | URL) -> URL:
    """Parse a store URL. A bare `postgresql://` means psycopg2 (our [postgres] extra), whatever
    SQLAlchemy's own default driver is (2.1 switched it to psycopg 3)."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as err:
        raise StoreUnavailable(f"bad store URL {str(url)!r}: {err}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def safe_url(url: str | URL) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return "<unparseable URL>"


# Execution option marking a connection that will write: on SQLite its transaction starts with
# BEGIN IMMEDIATE, taking the write lock up front (a deferred transaction that reads and then
# writes fails at once with "database is locked" in WAL mode if another writer got in between).
WRITE_OPTION = "pal_write"


def _sqlite_on_connect(dbapi_conn: Any, _record: Any, *, read_only: bool = False) -> None:
    # We emit BEGIN ourselves (see _sqlite_on_begin); pysqlite's implicit BEGIN is off.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if read_only:
            # No switch to WAL (that writes the file's header): a reader takes the file as it is.
            cur.execute("PRAGMA query_only = ON")
            return
        cur.execute("PRAGMA foreign_keys = ON")
        _ensure_wal(cur)
        cur.execute("PRAGMA synchronous = NORMAL")
    finally:
        cur.close()


def _ensure_wal(cur: Any) -> None:
    """Switch the file to WAL (persistent, so normally only its first connection does it).
    The switch needs an exclusive lock and SQLite's busy handler does not wait for it, so a
    program starting beside another one retries here for up to the busy timeout."""
    if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _sqlite_read_only_on_connect(dbapi_conn: Any, record: Any) -> None:
    _sqlite_on_connect(dbapi_conn, record, read_only=True)


def _pg_read_only_on_connect(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    try:
        cur.execute("SET default_transaction_read_only = on")
    finally:
        cur.close()
    dbapi_conn.commit()


def _pg_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # A SET, not a startup `options` parameter: connection poolers (pgbouncer) refuse those.
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"SET statement_timeout = {PG_STATEMENT_TIMEOUT_MS}")
    finally:
        cur.close()
    dbapi_conn.commit()


def _sqlite_on_begin(conn: Any) -> None:
    if conn.get_execution_options().get(WRITE_OPTION):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.exec_driver_sql("BEGIN")


def sqlite_path(url: URL) -> str | None:
    """The database file of a SQLite URL, None for an in-memory database."""
    db = url.database
    if not db or db == ":memory:" or db.startswith("file::memory:"):
        return None
    return db


def missing_sqlite_message(path: str) -> str:
    """What to tell someone whose SQLite store file is not there."""
    parent = os.path.dirname(os.path.abspath(path))
    where = "" if os.path.isdir(parent) else f" (nor its directory {parent})"
    return (f"no store database at {path}: the file does not exist{where}; create it with "
            "`palctl db upgrade` (pald creates it at its first start), or fix [store] url")


def _create_sqlite_file(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, mode=0o750, exist_ok=True)
    except OSError as err:
        raise StoreUnavailable(
            f"cannot create the store directory {parent}: {err.strerror}; "
            "set [store] url in pal.toml or PAL_DB_URL to a writable place"
        ) from None
    if not os.path.exists(path):
        try:
            sqlite3.connect(path).close()
        except sqlite3.Error as err:
            raise StoreUnavailable(f"cannot create the store database {path}: {err}") from None


def _sqlite_rw_creator(path: str, timeout_s: float):  # type: ignore[no-untyped-def]
    """Connections that open an existing file read-write and never create one."""
    uri = f"file:{quote(os.path.abspath(path))}?mode=rw"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)

    return connect


def _empty_sqlite_connect() -> sqlite3.Connection:
    """A connection to an empty in-memory database: what a missing file reads as."""
    return sqlite3.connect(":memory:", check_same_thread=False)


def make_engine(url: str | URL, *, create: bool = True, read_only: bool = False,
                **kwargs: Any) -> Engine:
    """An Engine for `url` with our per-backend settings. Raises StoreUnavailable early when a
    SQLite file is missing (`create=False`) or cannot be created, or the driver is missing.

    `read_only=True` (whatever `create` says): nothing is created and nothing written. A missing
    SQLite file reads as an empty database (in memory; the engine keeps the file's URL for its
    messages), and every connection refuses writes (SQLite `query_only`, PostgreSQL
    `default_transaction_read_only`), so a command wrongly taken for a reader fails loudly."""
    parsed = parse_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = sqlite_path(parsed)
        if path is None:
            kwargs.setdefault("poolclass", StaticPool)
            kwargs.setdefault("connect_args", {"check_same_thread": False})
        elif read_only and not os.path.exists(path):
            kwargs.setdefault("poolclass", StaticPool)
            kwargs.setdefault("creator", _empty_sqlite_connect)
        else:
            if create and not read_only:
                _create_sqlite_file(path)
            elif not os.path.exists(path):
                raise StoreUnavailable(missing_sqlite_message(path))
            kwargs.setdefault("creator", _sqlite_rw_creator(path, SQLITE_BUSY_TIMEOUT_MS / 1000))
        engine = create_engine(parsed, **kwargs)
        event.listen(engine, "connect", _sqlite_read_only_on_connect if read_only else _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
        return engine
    if backend == "postgresql":
        connect_args = dict(kwargs.pop("connect_args", {}))
        if "connect_timeout" not in parsed.query:
            connect_args.setdefault("connect_timeout", PG_CONNECT_TIMEOUT_S)
        connect_args.setdefault("application_name", "pal-slurm")
        kwargs.setdefault("pool_pre_ping", True)
        try:
            engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        except ImportError as err:
            raise StoreUnavailable(
                f"no PostgreSQL driver ({err.name}): install pal-slurm[postgres] (psycopg2)"
            ) from None
        event.listen(engine, "connect", _pg_on_connect)
        if read_only:
            event.listen(engine, "connect", _pg_read_only_on_connect)
        return engine
    raise StoreUnavailable(
        f"unsupported store URL {safe_url(parsed)}: use sqlite:////path or postgresql://..."
    )


def _is_full(err: BaseException) -> bool:
    orig = getattr(err, "orig", None)
    text = str(orig if orig is not None else err).lower()
    if "database or disk is full" in text or "no space left on device" in text:
        return True
    return getattr(orig, "pgcode", None) in PG_FULL_CODES


def translate(err: BaseException, url: str | URL) -> StoreError:
    """The store error for a SQLAlchemy/driver/OS failure (the caller raises it `from err`)."""
    where = safe_url(url)
    if isinstance(err, StoreError):
        return err
    if _is_full(err):
        return StoreFull(f"store {where} is full: {_first_line(err)}")
    if "no such table" in _first_line(err):
        return StoreUnavailable(
            f"store {where} has no PAL tables ({_first_line(err)}): run `palctl db upgrade`"
        )
    if isinstance(err, exc.IntegrityError):
        return InvalidRecord(f"store {where} refused the record: {_first_line(err)}")
    if isinstance(err, (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError)) or (
        isinstance(err, exc.DBAPIError) and err.connection_invalidated
    ):
        return StoreUnavailable(f"store {where} is unavailable: {_first_line(err)}")
    if isinstance(err, OSError):
        return StoreUnavailable(f"store {where} is unavailable: {err}")
    return StoreUnavailable(f"store {where} failed: {_first_line(err)}")


def _first_line(err: BaseException) -> str:
    orig = getattr(err, "orig", None)
    text = str(orig if orig is not None else err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def reraise(err: BaseException, url: str | URL) -> NoReturn:
    raise translate(err, url) from err
