"""The composition root of the store: a URL in, a migrated Repository out."""

from __future__ import annotations

from pal_slurm.store.engine import make_engine
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
