"""palctl db upgrade|current on a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.store import migrate


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request, tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("PAL_CONFIG", "/dev/null")
    if request.param == "sqlite":
        value = f"sqlite:///{tmp_path}/pal.db"
    else:
        value = request.getfixturevalue("postgres_url")
    monkeypatch.setenv("PAL_DB_URL", value)
    return value


def palctl(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_current_then_upgrade_then_current(url):
    head = migrate.head()
    res = palctl("db", "current")
    assert res.exit_code == 0
    assert "revision: none (not migrated" in res.output and f"head:     {head}" in res.output
    assert palctl("db", "current", "--check").exit_code == 1

    res = palctl("db", "upgrade")
    assert res.exit_code == 0 and f"upgraded empty -> {head}" in res.output
    res = palctl("db", "upgrade")
    assert res.exit_code == 0 and f"already at revision {head}" in res.output

    res = palctl("db", "current", "--check")
    assert res.exit_code == 0 and f"revision: {head} (up to date)" in res.output


def test_url_option_beats_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_CONFIG", "/dev/null")
    monkeypatch.setenv("PAL_DB_URL", f"sqlite:///{tmp_path}/other.db")
    target = f"sqlite:///{tmp_path}/chosen.db"
    assert palctl("db", "upgrade", "--url", target).exit_code == 0
    assert (tmp_path / "chosen.db").exists()
    assert "revision: none" in palctl("db", "current").output  # other.db untouched


def test_unknown_revision_and_dead_server(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_CONFIG", "/dev/null")
    monkeypatch.setenv("PAL_DB_URL", f"sqlite:///{tmp_path}/pal.db")
    res = palctl("db", "upgrade", "--revision", "9999")
    assert res.exit_code == 1 and "migration failed" in res.output
    res = palctl("db", "current", "--url", "postgresql://u:pw@127.0.0.1:1/x?connect_timeout=2")
    assert res.exit_code == 1 and "unavailable" in res.output and "Traceback" not in res.output


def test_prune(url):
    from datetime import datetime, timedelta, timezone

    from pal_slurm.store.bootstrap import open_store
    from pal_slurm.store.records import Sample

    now = datetime.now(timezone.utc)
    repo = open_store(url)
    try:
        repo.add_samples(
            [
                Sample("n1", 0, "A", "replay", 1.0, False, taken_at=(now - timedelta(days=200)).timestamp()),
                Sample("n1", 0, "A", "replay", 1.0, False, taken_at=(now - timedelta(days=1)).timestamp()),
            ]
        )
    finally:
        repo.close()
    res = palctl("db", "prune", "--older-than", "90-00:00:00")
    assert res.exit_code == 0, res.output
    assert "1 samples, 0 decisions, 0 held jobs" in res.output
    repo = open_store(url)
    try:
        assert len(repo.recent_samples(now - timedelta(days=365))) == 1
    finally:
        repo.close()
    assert palctl("db", "prune", "--older-than", "0").exit_code == 2  # below the minimum
    res = palctl("db", "prune", "--older-than", "90")  # once 90 days; never read as 90 minutes
    assert res.exit_code == 2 and "this option took days before" in res.output
    res = palctl("db", "prune", "--older-than", "90:00")  # 90 minutes: refused, not nearly everything pruned
    assert res.exit_code == 2 and "at least 86400 s" in res.output
    assert palctl("db", "prune", "--older-than", "90d").exit_code == 0
    assert palctl("db", "prune").exit_code == 2  # required


def test_downgrade_one_step_keeps_the_rest_and_base_drops_every_table_of_ours(url):
    from sqlalchemy import create_engine, inspect, text

    from pal_slurm.store.bootstrap import open_store
    from pal_slurm.store.models import Base

    repo = open_store(url)
    repo.set_app_class("myapp", "B")
    repo.close()
    engine = create_engine(url)
    try:
        with engine.begin() as conn:  # a table of the site's own in the same database stays
            conn.execute(text("CREATE TABLE site_notes (id INTEGER PRIMARY KEY)"))
        res = palctl("db", "downgrade", "--revision", "0001")
        assert res.exit_code == 0 and f"downgraded {migrate.head()} -> 0001" in res.output, res.output
        tables = set(inspect(engine).get_table_names())
        assert "pal_switches" not in tables and "pal_app_classes" in tables
        repo = open_store(url, upgrade=False)
        assert repo.app_classes()["myapp"] == "B"  # the older schema's rows kept
        repo.close()

        res = palctl("db", "downgrade", "--revision", "base")
        assert res.exit_code == 2 and "--yes" in res.output  # refused without confirmation
        assert "pal_app_classes" in set(inspect(engine).get_table_names())
        res = palctl("db", "downgrade", "--revision", "base", "--yes")
        assert res.exit_code == 0 and "no pal-slurm tables left" in res.output, res.output
        tables = set(inspect(engine).get_table_names())
        assert not (tables & set(Base.metadata.tables)) and "site_notes" in tables
        res = palctl("db", "downgrade", "--revision", "base", "--yes")
        assert res.exit_code == 0 and "nothing to downgrade" in res.output
    finally:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS site_notes"))
        engine.dispose()


@pytest.mark.postgres
def test_the_documented_postgresql_setup(postgres_server, monkeypatch):
    """docs/install.md, "The store on PostgreSQL": a login role that owns its database and has no
    other right checks, migrates, writes and reads the store; a role that does not own it cannot
    create the tables. (The fixture's server trusts its logins: the password is not checked.)"""
    import json
    import uuid

    role = f"pal_{uuid.uuid4().hex[:8]}"
    other = f"{role}_x"
    sql = postgres_server.execute_autocommit
    sql(f"CREATE ROLE {role} LOGIN PASSWORD 'secret'")
    sql(f"CREATE ROLE {other} LOGIN PASSWORD 'secret'")
    sql(f"CREATE DATABASE {role} OWNER {role}")
    monkeypatch.setenv("PAL_CONFIG", "/dev/null")
    try:
        monkeypatch.setenv("PAL_DB_URL", f"postgresql+psycopg2://{role}:secret@127.0.0.1:{postgres_server.port}/{role}")
        res = palctl("db", "current")
        assert res.exit_code == 0 and "revision: none (not migrated" in res.output, res.output
        res = palctl("db", "upgrade")
        assert res.exit_code == 0 and f"upgraded empty -> {migrate.head()}" in res.output, res.output
        assert palctl("db", "current", "--check").exit_code == 0
        assert palctl("classes", "add", "llama", "B").exit_code == 0
        res = palctl("classes", "list", "--json")
        assert res.exit_code == 0 and json.loads(res.output)["classes"]["llama"] == "B"

        monkeypatch.setenv("PAL_DB_URL", f"postgresql+psycopg2://{other}:secret@127.0.0.1:{postgres_server.port}/{role}")
        sql(f"DROP OWNED BY {role} CASCADE", database=role)  # an empty database again, still owned by the role
        res = palctl("db", "upgrade")
        assert res.exit_code == 1 and "permission denied for schema public" in res.output, res.output
    finally:
        postgres_server.drop_database(role)
        sql(f"DROP ROLE IF EXISTS {other}")
        sql(f"DROP ROLE IF EXISTS {role}")
