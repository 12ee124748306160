"""Shared fixture bits for the profiling command tests: a private state dir, no /etc config."""

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli


@pytest.fixture
def palctl(tmp_path, monkeypatch):
    monkeypatch.setenv("PAL_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("PAL_PROFILING_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PAL_PROFILING_DURATION_S", "0")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOB_GPUS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def run(*args):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    run.state = tmp_path / "state"
    return run
