"""The prolog's first step: a job whose GPUs are not due ends there, importing nothing heavy;
any doubt or error runs the full prolog, and the prolog still exits 0."""

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pal_slurm.bench import measured
from pal_slurm.bench.measured import read_state, record_measured
from pal_slurm.bench.prolog_gate import skip_job

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("numpy", "sqlalchemy", "click", "pynvml", "pal_slurm.bench.hook", "pal_slurm.slurm.readers",
         "pal_slurm.policy.registry")


@pytest.fixture
def spool_dir(tmp_path):
    d = tmp_path / "spool"
    d.mkdir(mode=0o700)
    return d


def env_for(tmp_path, spool_dir, extra_conf="", **env):
    conf = tmp_path / "pal.toml"
    # backend and placement name registry entries: checking them would import the policies
    conf.write_text(f'[policy]\nplacement = "pal-fit"\n[profiling]\nbackend = "replay"\nspool_dir = "{spool_dir}"\n'
                    f'duration_s = 0.0\n{extra_conf}')
    return {"PAL_CONFIG": str(conf), "SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0,1",
            **env}


def test_gpus_measured_within_the_period_skip_the_job(tmp_path, spool_dir):
    record_measured(spool_dir, "n1", [0, 1], time.time() - 3600)
    assert skip_job(env_for(tmp_path, spool_dir))
    assert not skip_job(env_for(tmp_path, spool_dir, SLURM_JOB_GPUS="0,2"))  # GPU 2 never measured
    assert not skip_job(env_for(tmp_path, spool_dir, SLURMD_NODENAME="n2"))  # another node's record
    assert not skip_job(env_for(tmp_path, spool_dir, "prolog_every_h = 0.5\n"))
    assert not skip_job(env_for(tmp_path, spool_dir), now=time.time() - 7200)  # the clock went back


def test_without_gpu_indices_in_the_environment_the_full_prolog_decides(tmp_path, spool_dir):
    record_measured(spool_dir, "n1", [0, 1], time.time())
    env = env_for(tmp_path, spool_dir)
    del env["SLURM_JOB_GPUS"]
    assert not skip_job(env)
    assert not skip_job({**env, "CUDA_VISIBLE_DEVICES": "GPU-1234abcd"})  # UUIDs are no indices
    assert skip_job({**env, "CUDA_VISIBLE_DEVICES": "1,0"})


def test_pal_only_skips_other_jobs_and_asks_slurm_when_the_comment_is_not_shown(tmp_path, spool_dir):
    pal_only = "prolog_pal_only = true\n"
    assert skip_job(env_for(tmp_path, spool_dir, pal_only, SLURM_JOB_COMMENT="nightly build"))
    assert skip_job(env_for(tmp_path, spool_dir, pal_only, SLURM_JOB_COMMENT="", SLURM_JOB_GPUS=""))
    assert not skip_job(env_for(tmp_path, spool_dir, pal_only, SLURM_JOB_COMMENT="pal:class=resnet"))
    assert not skip_job(env_for(tmp_path, spool_dir, pal_only))  # no comment shown: the job record says


def test_a_bad_configuration_or_state_runs_the_full_prolog_and_is_logged(tmp_path, spool_dir, caplog):
    caplog.set_level(logging.WARNING, logger="pal.hook")
    record_measured(spool_dir, "n1", [0, 1], time.time())
    env = env_for(tmp_path, spool_dir)
    assert skip_job(env)
    (tmp_path / "pal.toml").write_text("[profiling]\nprolog_every_h = -1\n")
    assert not skip_job(env)
    assert "prolog due check failed" in caplog.text and "prolog_every_h" in caplog.text
    (spool_dir / measured.STATE_FILE).write_text("{torn")
    assert not skip_job(env_for(tmp_path, spool_dir))
    assert "every GPU is due" in caplog.text


def run_prolog(env, bindir):
    """sbin/pal-prolog as slurmd starts it, with `python -X importtime`: its stderr names every
    module it imported. `bindir`'s squeue fails, as with no controller."""
    bindir.mkdir(exist_ok=True)
    for tool in ("sinfo", "squeue", "scontrol"):
        (bindir / tool).write_text("#!/bin/sh\nexit 1\n")
        (bindir / tool).chmod(0o755)
    res = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "sbin" / "pal-prolog")],
                         env={**env, "PYTHONPATH": str(ROOT), "PATH": f"{bindir}:/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    imported = {line.split("|")[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    return res, imported


def test_the_prolog_of_a_job_not_due_exits_0_without_heavy_imports(tmp_path, spool_dir):
    record_measured(spool_dir, "n1", [0, 1], time.time() - 3600)
    before = (spool_dir / measured.STATE_FILE).read_bytes()
    res, imported = run_prolog(env_for(tmp_path, spool_dir), tmp_path / "bin")
    assert res.returncode == 0, res.stderr
    assert "pal_slurm.bench.prolog_gate" in imported  # the check ran (and importtime saw it)
    assert [m for m in HEAVY if m in imported] == []
    assert "logging" not in imported  # nothing to log: the logging package is not loaded either
    assert (spool_dir / measured.STATE_FILE).read_bytes() == before


def test_the_prolog_of_a_due_job_runs_the_full_prolog_and_still_exits_0(tmp_path, spool_dir):
    """The counterpart that shows the import check can fail: a due job loads the hook. Slurm
    cannot be asked here, so nothing is measured and nothing is noted."""
    res, imported = run_prolog(env_for(tmp_path, spool_dir), tmp_path / "bin")
    assert res.returncode == 0, res.stderr
    assert "pal_slurm.bench.hook" in imported
    assert read_state(spool_dir) == {}


def test_a_state_file_that_breaks_the_check_still_exits_0(tmp_path, spool_dir):
    (spool_dir / measured.STATE_FILE).mkdir()  # a directory where the file should be
    res, imported = run_prolog(env_for(tmp_path, spool_dir), tmp_path / "bin")
    assert res.returncode == 0, res.stderr
    assert "every GPU is due" in res.stderr and "pal_slurm.bench.hook" in imported
