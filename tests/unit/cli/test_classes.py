"""palctl classes list|add|remove against a real SQLite store (and PostgreSQL once)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.model.classes import DEFAULT_APP_CLASSES
from pal_slurm.store.bootstrap import open_store


@pytest.fixture
def store_url(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path}/pal.db"
    conf = tmp_path / "pal.toml"
    conf.write_text('[policy]\ndefault_class = "B"\n')
    monkeypatch.setenv("PAL_CONFIG", str(conf))
    monkeypatch.setenv("PAL_DB_URL", url)
    return url


def palctl(*args: str):
    return CliRunner().invoke(cli, list(args))


def stored(url: str) -> dict[str, str]:
    repo = open_store(url)
    try:
        return repo.app_classes()
    finally:
        repo.close()


def test_list_shows_seeded_defaults_and_default_class(store_url):
    res = palctl("classes", "list")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split() == ["APPLICATION", "CLASS"]
    table = dict(line.split() for line in lines[1:-1])
    assert table == dict(DEFAULT_APP_CLASSES)
    assert [table[a] for a in (l.split()[0] for l in lines[1:-1])] == sorted(table.values())
    assert "unknown applications: class B" in lines[-1]


def test_list_json(store_url):
    res = palctl("classes", "list", "--json")
    assert res.exit_code == 0
    doc = json.loads(res.output)
    assert doc == {"classes": dict(DEFAULT_APP_CLASSES), "default": "B"}


def test_add_change_remove(store_url):
    res = palctl("classes", "add", "LLaMA", "b")
    assert res.exit_code == 0 and "added llama -> B" in res.output
    assert stored(store_url)["llama"] == "B"
    res = palctl("classes", "add", "llama", "C")
    assert res.exit_code == 0 and "changed llama: B -> C" in res.output
    res = palctl("classes", "add", "llama", "C")
    assert "unchanged llama -> C" in res.output
    res = palctl("classes", "remove", "LLAMA")
    assert res.exit_code == 0 and "removed llama (its jobs now get class B)" in res.output
    assert "llama" not in stored(store_url)


@pytest.mark.parametrize("letter", ["E", "AB", "1", ""])
def test_add_unknown_class_letter_is_a_usage_error(store_url, letter):
    res = palctl("classes", "add", "llama", letter)
    assert res.exit_code == 2
    assert f"unknown class {letter!r}" in res.output and "A, B, C, D" in res.output
    assert "llama" not in stored(store_url)  # nothing written


@pytest.mark.parametrize("app", ["two words", "a,b", "x=y", " "])
def test_add_bad_application_name(store_url, app):
    before = stored(store_url)
    res = palctl("classes", "add", app, "A")
    assert res.exit_code == 2 and "application name" in res.output
    assert stored(store_url) == before


def test_remove_unknown_application(store_url):
    res = palctl("classes", "remove", "nope")
    assert res.exit_code == 1
    assert "no application 'nope' in the class map" in res.output
    assert stored(store_url) == dict(DEFAULT_APP_CLASSES)


def test_store_unreachable_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PAL_CONFIG", "/dev/null")
    monkeypatch.setenv("PAL_DB_URL", "postgresql://pal:hunter2@127.0.0.1:1/pal?connect_timeout=2")
    res = palctl("classes", "list")
    assert res.exit_code == 1
    assert "is unavailable" in res.output and "hunter2" not in res.output
    assert "Traceback" not in res.output


def test_bad_config_is_a_clear_error(tmp_path, monkeypatch):
    conf = tmp_path / "pal.toml"
    conf.write_text("[policy]\ndefault_klass = 'A'\n")
    monkeypatch.delenv("PAL_DB_URL", raising=False)
    res = CliRunner().invoke(cli, ["--config", str(conf), "classes", "list"])
    assert res.exit_code == 2
    assert "unknown key 'default_klass'" in res.output and str(conf) in res.output
    res = CliRunner().invoke(cli, ["--config", str(conf), "classes", "list", "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 2 and doc["ok"] is False and doc["exit_code"] == 2
    assert "unknown key 'default_klass'" in doc["error"]


@pytest.mark.postgres
def test_classes_on_postgresql(postgres_url, monkeypatch):
    monkeypatch.setenv("PAL_CONFIG", "/dev/null")
    monkeypatch.setenv("PAL_DB_URL", postgres_url)
    assert palctl("classes", "add", "mixtral", "D").exit_code == 0
    assert stored(postgres_url)["mixtral"] == "D"
    res = palctl("classes", "list", "--json")
    assert json.loads(res.output)["classes"]["mixtral"] == "D"


def test_runs_as_a_module_in_a_real_process(store_url):
    """`python -m pal_slurm.cli.main` (what the lab and scripts use) imports cleanly."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, "-m", "pal_slurm.cli.main", "classes", "list", "--json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["classes"] == dict(DEFAULT_APP_CLASSES)
