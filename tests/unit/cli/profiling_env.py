"""Shared fixture for the profiling command tests: a private SQLite store, an empty config."""

import pytest
from click.testing import CliRunner

from pal_slurm.bench.repository import StoreProfilingRepository
from pal_slurm.cli.main import cli
from pal_slurm.store import open_store


@pytest.fixture
def palctl(tmp_path, monkeypatch):
    conf = tmp_path / "pal.toml"
    conf.write_text("")
    url = f"sqlite:///{tmp_path / 'pal.db'}"
    monkeypatch.setenv("PAL_CONFIG", str(conf))
    monkeypatch.setenv("PAL_DB_URL", url)
    monkeypatch.setenv("PAL_PROFILING_DURATION_S", "0")
    for var in ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "PAL_STORE_URL"):
        monkeypatch.delenv(var, raising=False)

    def run(*args):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    def repo():
        return StoreProfilingRepository(open_store(url))

    run.repo = repo
    return run
