"""Root's prolog/epilog measure exactly the GPUs the job held, on a REAL Slurm lab cluster.

One node (gpu01, four emulated GPUs, per-slot typed GRES) runs three jobs at once: user
`nobody`'s two-GPU job on GPUs 1 and 2, user `daemon`'s one-GPU job on GPU 0, and `daemon`'s job
on GPU 3 whose name is ``x JOB_GRES=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1`` and whose comment
adds a ``Nodes=gpu01 ... GRES=...(IDX:0-2)`` line. The real pal-prolog/pal-epilog (replay
backend) store into SQLite; counted from the store: every job gets exactly one prolog and one
epilog benchmark sample and one wall-time sample on each GPU it held, and 0 samples on GPUs it
did not hold; no node drained. (The epilog used to measure the whole node once the job had
ended, and root read the GPU set from the first ``JOB_GRES=`` in scontrol's text.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
NODE = "gpu01"
HOSTILE_NAME = "x JOB_GRES=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1"
HOSTILE_COMMENT = "pal:class=bert\nNodes=gpu01 CPU_IDs=0-3 Mem=0 GRES=gpu:s0:1(IDX:0),gpu:s1:1(IDX:1),gpu:s2:1(IDX:2)"


@pytest.fixture(scope="module")
def lab():
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_lab.lab import missing_binaries, start_lab
    from pal_slurm.store import open_store

    if missing_binaries():
        pytest.skip("Slurm lab cluster unavailable, missing: " + ", ".join(missing_binaries()))
    # Not under pytest's 0700 tmp: the jobs' users must reach slurm.conf and munge's socket.
    d = Path(tempfile.mkdtemp(prefix="pal-gpuset-"))
    d.chmod(0o755)
    url = f"sqlite:///{d / 'pal.db'}"
    StoreProfilingRepository(open_store(url)).close()  # the admin creates the schema
    conf = d / "pal.toml"
    conf.write_text(f'[store]\nurl = "{url}"\n'
                    f'[profiling]\nbackend = "replay"\nspool_dir = "{d / "spool"}"\nduration_s = 0.0\n')
    (d / "spool").mkdir()
    wrappers = {}
    for kind in ("prolog", "epilog"):
        w = d / f"{kind}.sh"
        w.write_text("#!/bin/sh\n"
                     f"export PYTHONPATH={ROOT} PAL_CONFIG={conf}\n"
                     f"exec {sys.executable} {ROOT / 'sbin' / ('pal-' + kind)} 2>>{d / (kind + '.log')}\n")
        w.chmod(0o755)
        wrappers[kind] = w
    cluster = start_lab(d / "lab", prolog=wrappers["prolog"], epilog=wrappers["epilog"])
    try:
        yield {"dir": d, "url": url, "env": cluster.client_env()}
    finally:
        cluster.stop()
        shutil.rmtree(d, ignore_errors=True)


def _slurm(lab, user: str, *argv: str) -> str:
    res = subprocess.run(["runuser", "-u", user, "--", *argv], env=lab["env"], capture_output=True,
                         text=True, timeout=30, cwd="/tmp")
    assert res.returncode == 0, res.stderr
    return res.stdout


def _sbatch(lab, user: str, *args: str) -> str:
    out = _slurm(lab, user, "sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", "-w", NODE, *args)
    return out.strip().split(";")[0]


def _wait(what, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _state(lab, job: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=lab["env"], capture_output=True,
                          text=True, timeout=30).stdout.strip()


def test_each_job_is_measured_on_exactly_its_own_gpus(lab):
    from pal_slurm.bench.base import KIND_WALLTIME
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.store import open_store

    b = _sbatch(lab, "nobody", "--gres=gpu:s1:1,gpu:s2:1", "--wrap", "sleep 6")
    _wait(f"job {b} running", lambda: _state(lab, b) == "RUNNING")
    a = _sbatch(lab, "daemon", "--gres=gpu:s0:1", "--wrap", "sleep 2")
    h = _sbatch(lab, "daemon", "--gres=gpu:s3:1", "-J", HOSTILE_NAME, "--comment", HOSTILE_COMMENT,
                "--wrap", "sleep 2")
    # all three ran on the node at once (the hostile job's fields are what squeue shows)
    _wait("three jobs running", lambda: all(_state(lab, j) == "RUNNING" for j in (a, b, h)), 30)
    held = {a: {0}, b: {1, 2}, h: {3}}

    def walls_in():
        got = StoreProfilingRepository(open_store(lab["url"])).samples()
        done = {s.job_id for s in got if s.kind == KIND_WALLTIME}
        return got if set(held) <= done else None

    samples = _wait("every epilog's samples", walls_in, 60)
    time.sleep(1.0)  # any late epilog sample would show up in the recount below
    samples = StoreProfilingRepository(open_store(lab["url"])).samples()
    logs = "".join((lab["dir"] / f"{k}.log").read_text() for k in ("prolog", "epilog"))

    for job, gpus in held.items():
        bench = Counter(s.slot for s in samples if s.job_id == job and s.kind != KIND_WALLTIME)
        walls = Counter(s.slot for s in samples if s.job_id == job and s.kind == KIND_WALLTIME)
        assert {s.node for s in samples if s.job_id == job} == {NODE}
        assert sum(n for slot, n in bench.items() if slot not in gpus) == 0, (job, bench, logs)
        assert sum(n for slot, n in walls.items() if slot not in gpus) == 0, (job, walls, logs)
        assert bench == {g: 2 for g in gpus}, (job, bench, logs)  # one from the prolog, one from the epilog
        assert walls == {g: 1 for g in gpus}, (job, walls, logs)
    assert {s.perf_class for s in samples if s.job_id == h} == {"B"}  # bert, from the comment
    assert "measuring nothing" not in logs
    states = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=lab["env"], capture_output=True,
                            text=True, timeout=30).stdout.split("\n")
    drained = [line for line in states if "drain" in line.lower()]
    assert drained == []
