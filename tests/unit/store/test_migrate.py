"""Alembic migrations, run from code: upgrade from empty, schema == models, downgrade to base."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from pal_slurm.model.classes import DEFAULT_APP_CLASSES
from pal_slurm.store import migrate
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.engine import make_engine
from pal_slurm.store.models import Base

OUR_TABLES = set(Base.metadata.tables)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sub/dir/pal.db"
    return request.getfixturevalue("postgres_url")


def test_head_is_shipped():
    assert migrate.head() == "0002"
    assert (migrate.MIGRATIONS_DIR / "env.py").exists()


def test_upgrade_from_empty_matches_models_then_downgrade(empty_url):
    engine = make_engine(empty_url)
    try:
        assert migrate.current(engine) is None
        migrate.upgrade(engine)
        assert migrate.current(engine) == migrate.head()
        tables = set(inspect(engine).get_table_names())
        assert OUR_TABLES <= tables and migrate.VERSION_TABLE in tables
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, Base.metadata)
        diff = [d for d in diff if not (d[0] == "remove_table" and d[1].name == migrate.VERSION_TABLE)]
        assert diff == [], f"migrations and models differ: {diff}"

        migrate.upgrade(engine)  # a second upgrade is a no-op
        assert migrate.current(engine) == migrate.head()

        migrate.downgrade(engine, "base")
        assert migrate.current(engine) is None
        assert not (OUR_TABLES & set(inspect(engine).get_table_names()))

        migrate.upgrade(engine)  # and back up again
        assert OUR_TABLES <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_open_store_migrates_and_seeds_once(empty_url):
    repo = open_store(empty_url)
    try:
        assert repo.app_classes() == dict(DEFAULT_APP_CLASSES)
        repo.remove_app_class("bert")
    finally:
        repo.close()
    again = open_store(empty_url)  # reopening must not re-seed what the admin removed
    try:
        assert "bert" not in again.app_classes()
    finally:
        again.close()


def test_open_store_without_upgrade_leaves_the_database_alone(empty_url):
    make_engine(empty_url).dispose()  # the database exists (for SQLite: an empty file)
    repo = open_store(empty_url, upgrade=False)
    try:
        assert migrate.current(repo.engine) is None
    finally:
        repo.close()


def test_sqlite_uses_wal(tmp_path):
    repo = open_store(f"sqlite:///{tmp_path}/pal.db")
    try:
        with repo.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        repo.close()


@pytest.mark.postgres
def test_plain_postgresql_url_means_psycopg2(postgres_url):
    plain = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    repo = open_store(plain)
    try:
        assert repo.engine.dialect.driver == "psycopg2"
        assert repo.app_classes() == dict(DEFAULT_APP_CLASSES)
    finally:
        repo.close()


def test_programs_starting_at_once_migrate_exactly_once(empty_url):
    import threading

    results: list[object] = []

    def start() -> None:
        try:
            repo = open_store(empty_url)
            results.append(len(repo.app_classes()))
            repo.close()
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [len(DEFAULT_APP_CLASSES)] * 4  # seeded once, no duplicate-key failure


def test_package_data_ships_every_migration_file():
    """setup.cfg's package_data must cover env.py and every revision, or an installed
    pal-slurm cannot migrate (there is no alembic.ini at runtime)."""
    import configparser
    from pathlib import Path, PurePosixPath

    root = Path(__file__).resolve().parents[3]
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    patterns = [p.strip() for p in cfg["options.package_data"]["pal_slurm"].split(",")]
    package = root / "pal_slurm"
    files = [
        p.relative_to(package).as_posix()
        for p in (package / "store" / "migrations").rglob("*.py")
        if "__pycache__" not in p.parts
    ]
    assert "store/migrations/env.py" in files and "store/migrations/versions/0001_initial.py" in files
    for rel in files:
        path = PurePosixPath(rel)
        assert any(
            len(path.parts) == len(PurePosixPath(pat).parts) and path.match(pat) for pat in patterns
        ), f"{rel} not in package_data"
