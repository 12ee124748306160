"""cli_store: commands that only read the store create nothing; commands that write create it.

Each read-only command runs twice on the same [store] url: first where neither the SQLite file
nor its directory exists (afterwards both must still be absent), then on a freshly migrated,
empty store at that path. Both answers must be the same, exit code and output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.store.bootstrap import open_store
from tests.unit.cli.test_whatif import write_accounting

READERS = [
    ("rankings",),
    ("rankings", "--changed"),
    ("classes", "list"),
    ("classes", "list", "--json"),
    ("explain", "4242"),
    ("whatif", "--accounting", "{acct}"),
    ("simulate", "--trace", "workload-1", "--variability", "store"),
    ("trial", "report", "--json"),
    ("mode",),
    ("rank", "--dry-run"),
]


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """(pal.toml, its store's SQLite file, under a directory that does not exist)."""
    db = tmp_path / "state" / "pal" / "pal.db"
    cfg = tmp_path / "pal.toml"
    # a Slurm that cannot be read (explain answers from the store), a pald that is not there
    cfg.write_text(f'[store]\nurl = "sqlite:///{db}"\n[slurm]\nbin_dir = "{tmp_path}/no-slurm"\n'
                   f'[daemon]\nsocket = "{tmp_path}/pald.sock"\n')
    return cfg, db


def palctl(cfg: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--config", str(cfg), *args], env={"PAL_DB_URL": None})


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_reader_creates_nothing_and_answers_as_an_empty_store(site, tmp_path, args):
    cfg, db = site
    args = tuple(a.format(acct=write_accounting(tmp_path / "acct.json")) for a in args)
    absent = palctl(cfg, *args)
    assert absent.exception is None or isinstance(absent.exception, SystemExit), absent.output
    assert not db.parent.exists(), f"{' '.join(args)} created {db.parent}"

    open_store(f"sqlite:///{db}").close()  # the same path, now an empty, migrated store
    empty = palctl(cfg, *args)
    assert (absent.exit_code, without_clock(absent.output)) == (empty.exit_code, without_clock(empty.output))


def without_clock(output: str) -> str:
    """A reader's answer less the start of its period, which it counts back from now (`trial
    report`'s "since": the two answers may fall in different seconds)."""
    return re.sub(r'"since": "[^"]*"', '"since": "<now less the period>"', output)


def test_the_empty_answers_are_the_empty_store_s(site):
    """What the readers above answer, so that "the same as an empty store" cannot be two errors;
    and `db current`, whose answer for a missing file is that of a file never migrated."""
    cfg, db = site
    r = palctl(cfg, "rankings")
    assert r.exit_code == 1 and "no ranking yet" in r.output
    r = palctl(cfg, "classes", "list")
    assert r.exit_code == 0 and "APPLICATION" in r.output and "mapped)" in r.output
    r = palctl(cfg, "explain", "4242")
    assert r.exit_code == 1 and "no pald decision recorded for job 4242" in r.output
    r = palctl(cfg, "db", "current")
    assert r.exit_code == 0 and "revision: none (not migrated" in r.output and str(db) in r.output
    assert palctl(cfg, "db", "current", "--check").exit_code == 1
    assert not db.parent.exists()


@pytest.mark.parametrize("args", [("classes", "add", "llama", "B"), ("db", "upgrade")], ids=" ".join)
def test_a_writer_creates_the_store(site, args):
    cfg, db = site
    r = palctl(cfg, *args)
    assert r.exit_code == 0, r.output
    assert db.is_file()
