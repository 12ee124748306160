"""Alembic environment for the pal-slurm store.

Normally run from `pal_slurm.store.migrate`, which hands over an open connection in
`config.attributes["connection"]`; falls back to `sqlalchemy.url` for the alembic CLI.
SQLite gets batch mode (ALTER TABLE by copy), since it cannot alter most things in place.
"""

from __future__ import annotations

from alembic import context

from pal_slurm.store.migrate import VERSION_TABLE
from pal_slurm.store.models import Base

config = context.config


def _configure(**kwargs) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        **kwargs,
    )


def run_offline() -> None:
    url = config.get_main_option("sqlalchemy.url")
    _configure(url=url, literal_binds=True, render_as_batch=str(url).startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_with(connection) -> None:  # type: ignore[no-untyped-def]
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        run_with(connection)
        return
    from pal_slurm.store.engine import make_engine

    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("alembic: no sqlalchemy.url and no connection given")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            run_with(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
