"""The store: SQLAlchemy models behind a small repository interface; Alembic migrations.

Entry point: `open_store(url)` (bootstrap.py) returns a `Repository` (repository.py), either
`SqlRepository` (SQLite/PostgreSQL) or `MemoryRepository`. Errors: `StoreError` and its
subclasses `StoreUnavailable` (database away; callers keep working from memory), `StoreFull`,
`InvalidRecord`. Active/standby leadership for pald: leader.py.
"""

from typing import TYPE_CHECKING, Any

from pal_slurm.store.errors import InvalidRecord, StoreError, StoreFull, StoreUnavailable

if TYPE_CHECKING:  # what the lazy attribute below is, for the type checker
    from pal_slurm.store.bootstrap import open_store

__all__ = ["InvalidRecord", "StoreError", "StoreFull", "StoreUnavailable", "open_store"]


def __getattr__(name: str) -> Any:  # lazy: importing the errors must not pull in SQLAlchemy/Alembic
    if name == "open_store":
        from pal_slurm.store.bootstrap import open_store

        return open_store
    raise AttributeError(name)
