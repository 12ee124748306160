"""The composition root of the store: a URL in, a migrated Repository out (or, for commands
that only read, a Repository that leaves the database as it found it: `open_store_readonly`)."""

from __future__ import annotations

from pal_slurm.store.engine import make_engine, safe_url
from pal_slurm.store.errors import StoreUnavailable
from pal_slurm.store.memory import MemoryRepository
from pal_slurm.store.repository import Repository
from pal_slurm.store.sql import SqlRepository

MEMORY_URL = "memory://"


def open_store(url: str, *, upgrade: bool = True) -> Repository:
    """Open the store at `url` and (by default) migrate it to the newest schema.

    `sqlite:////path/pal.db` (WAL, busy timeout) or `postgresql://...` (psycopg2);
    `memory://` gives a fresh in-memory store (tests, dry runs). Raises StoreUnavailable
    with a clear message when the database cannot be reached or created. Only `upgrade=True`
    creates a missing SQLite file: a reader (`palctl status`, the prolog) gets "no store
    database at PATH" instead of silently making an empty one.
    """
    if url == MEMORY_URL:
        return MemoryRepository()
    engine = make_engine(url, create=upgrade)
    repo = SqlRepository(engine)  # before the first connection: it tracks them all
    try:
        if upgrade:  # Alembic is imported only here: the prolog's sink never migrates
            from pal_slurm.store import migrate

            migrate.upgrade(engine)
    except BaseException:
        engine.dispose()
        raise
    return repo


def open_store_readonly(url: str) -> Repository:
    """Open the store at `url` for reading only: nothing is created, migrated or written.

    A database without pal-slurm's schema (a SQLite file or directory that does not exist, a
    PostgreSQL database never migrated) reads as an empty store: the answers of a freshly
    migrated one (no ranking, no decision, the built-in application classes), so a read-only
    palctl command run before pald or `palctl db upgrade` does not create the file as whoever
    ran it. A schema at another revision than this pal-slurm's raises StoreUnavailable (run
    `palctl db upgrade`): its queries are written for their own schema only. The repository
    refuses writes (make_engine's `read_only`).
    """
    if url == MEMORY_URL:
        return MemoryRepository()
    from pal_slurm.store import migrate

    engine = make_engine(url, read_only=True)
    repo = SqlRepository(engine)  # before the first connection: it tracks them all
    try:
        revision = migrate.current(engine)
        if revision is None:
            repo.close()
            return MemoryRepository()
        head = migrate.head()
        if revision != head:
            raise StoreUnavailable(
                f"store {safe_url(url)} has schema revision {revision}, this pal-slurm reads "
                f"{head}: run `palctl db upgrade` (or use the pal-slurm that wrote it)"
            )
    except BaseException:
        repo.close()
        raise
    return repo
