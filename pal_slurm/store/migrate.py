"""Alembic, driven from code: the migrations ship inside the package, no alembic.ini needed.

`upgrade(engine)` brings a database to the newest schema (a no-op when it is there already);
`current(engine)` says where it is. The version table is `pal_alembic_version`, so a
PostgreSQL database shared with other applications keeps their Alembic history apart.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text
from sqlalchemy import exc as sa_exc

from pal_slurm.store.engine import WRITE_OPTION, translate

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "pal_alembic_version"
# pg_advisory_xact_lock key held while migrating ("palmigr" in ASCII). SQLite: BEGIN IMMEDIATE.
MIGRATION_LOCK = 0x70616C6D696772


def alembic_config(engine: Engine | None = None) -> AlembicConfig:
    """An Alembic Config pointing at our scripts; `engine`'s URL for offline use."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if engine is not None:
        url = engine.url.render_as_string(hide_password=False).replace("%", "%%")
        cfg.set_main_option("sqlalchemy.url", url)
    return cfg


def head() -> str:
    """The newest revision shipped with this package."""
    rev = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert rev is not None
    return rev


def _run(engine: Engine, action, revision: str) -> None:  # type: ignore[no-untyped-def]
    """Run one Alembic command in one transaction that holds the schema lock first, so that
    several programs starting at once (pald, palctl, a cron job) migrate exactly once."""
    cfg = alembic_config(engine)
    try:
        with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                )
            cfg.attributes["connection"] = connection
            action(cfg, revision)
    except (sa_exc.SQLAlchemyError, OSError) as err:
        raise translate(err, engine.url) from err


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate forward to `revision` (default: the newest)."""
    _run(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Migrate back to `revision` ("base" drops every table of ours)."""
    _run(engine, command.downgrade, revision)


def current(engine: Engine) -> str | None:
    """The database's revision, None for a database never migrated."""
    try:
        with engine.connect() as connection:
            ctx = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
            return ctx.get_current_revision()
    except (sa_exc.SQLAlchemyError, OSError) as err:
        raise translate(err, engine.url) from err
