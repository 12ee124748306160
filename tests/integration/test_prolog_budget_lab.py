"""The prolog's budget on a REAL Slurm 22.05 lab (emulated GPUs, per-slot typed GRES), the real
pal-prolog/pal-epilog (replay backend) and a SQLite store, with the default policy
(prolog_every_h = 24): a job on GPUs measured within the period is not measured at its start,
a job holding a GPU not yet measured is, and no node drains.

Counted from the store: the epilog measures every GPU job at its end, so a job whose prolog
measured has two benchmark samples per GPU (prolog, epilog) and one that was not due has one.
The first job holds typed GPUs 0 and 1, for which Slurm 22.05's prolog environment shows only
GPU 1: its prolog takes the full path and measures both.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
NODE = "gpu01"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.store import open_store

    d = tmp_path_factory.mktemp("budgetlab")
    url = f"sqlite:///{d / 'pal.db'}"
    StoreProfilingRepository(open_store(url)).close()  # the admin creates the schema
    conf = d / "pal.toml"
    conf.write_text(f'[store]\nurl = "{url}"\n'
                    f'[profiling]\nbackend = "replay"\nspool_dir = "{d / "spool"}"\nduration_s = 0.0\n')
    (d / "spool").mkdir(mode=0o700)
    wrappers = {}
    for kind in ("prolog", "epilog"):
        w = d / f"{kind}.sh"
        w.write_text("#!/bin/sh\n"
                     f"export PYTHONPATH={ROOT} PAL_CONFIG={conf}\n"
                     f"exec {sys.executable} {ROOT / 'sbin' / ('pal-' + kind)} 2>>{d / (kind + '.log')}\n")
        w.chmod(0o755)
        wrappers[kind] = w
    cluster = lab_factory(prolog=wrappers["prolog"], epilog=wrappers["epilog"])
    return {"dir": d, "url": url, "env": cluster.client_env()}


def _run(lab, gres: str) -> str:
    """Submit a short job on NODE holding `gres`; its id once its epilog's samples are stored."""
    from pal_slurm.bench.base import KIND_WALLTIME
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.store import open_store

    out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "-w", NODE, f"--gres={gres}",
                          "--wrap", "sleep 1"], env=lab["env"], capture_output=True, text=True, timeout=30, check=True)
    job = out.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = StoreProfilingRepository(open_store(lab["url"], upgrade=False)).samples()
        if any(s.job_id == job and s.kind == KIND_WALLTIME for s in got):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job}: no epilog samples; prolog.log: {_log(lab, 'prolog')[-800:]}")


def _log(lab, kind: str) -> str:
    path = lab["dir"] / f"{kind}.log"
    return path.read_text() if path.exists() else ""


def _bench(lab, job: str) -> Counter:
    """Benchmark samples (prolog and epilog, not wall time) per GPU slot of `job`."""
    from pal_slurm.bench.base import KIND_WALLTIME
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.store import open_store

    got = StoreProfilingRepository(open_store(lab["url"], upgrade=False)).samples()
    return Counter(s.slot for s in got if s.job_id == job and s.kind != KIND_WALLTIME)


def _settled_state(lab, wait_s: float = 60.0) -> str:
    """The node's state once its last job's epilog is done: `completing` lasts while the epilog
    (its benchmark) runs after the job is shown complete, longer on a loaded host."""
    deadline = time.monotonic() + wait_s
    while True:
        state = subprocess.run(["sinfo", "-h", "-n", NODE, "-o", "%T"], env=lab["env"], capture_output=True,
                               text=True, timeout=30).stdout.strip()
        if state != "completing" or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def test_a_second_job_on_the_same_gpus_is_not_measured_and_the_node_never_drains(lab):
    from pal_slurm.bench.measured import read_state

    first = _run(lab, "gpu:s0:1,gpu:s1:1")
    assert _bench(lab, first) == {0: 2, 1: 2}, _log(lab, "prolog")  # both GPUs, though slurmd shows GPU 1
    noted = read_state(lab["dir"] / "spool")
    assert set(noted) == {f"{NODE}:0", f"{NODE}:1"}

    second = _run(lab, "gpu:s0:1,gpu:s1:1")
    assert _bench(lab, second) == {0: 1, 1: 1}, _log(lab, "prolog")  # the epilog's only
    single = _run(lab, "gpu:s1:1")
    assert _bench(lab, single) == {1: 1}
    assert read_state(lab["dir"] / "spool") == noted

    wider = _run(lab, "gpu:s1:1,gpu:s2:1")  # GPU 2 is due: the job's GPUs are measured
    assert _bench(lab, wider) == {1: 2, 2: 2}, _log(lab, "prolog")
    assert set(read_state(lab["dir"] / "spool")) == {f"{NODE}:0", f"{NODE}:1", f"{NODE}:2"}

    assert _settled_state(lab) == "idle"  # not drained, not draining
    assert "Traceback" not in _log(lab, "prolog") and "due check failed" not in _log(lab, "prolog")
