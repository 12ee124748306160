"""Profiling on a REAL Slurm 22.05 lab cluster (the shared lab_factory fixture: slurmctld + 4 slurmd,
emulated GPUs with per-slot typed GRES), with a real SQLite store.

- the prolog/epilog with the store down exit 0 (the node stays idle, not drained), spool their
  samples, and every queued sample arrives exactly once when the store is back; with typed
  GRES they record EVERY allocated GPU, not only the last one the prolog environment shows;
- `palctl profile-nodes --backend replay` submits one job per node, and the ranking recovers
  the planted profiles (Spearman >= 0.95 on class A, the most variability-sensitive).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

ROOT = Path(__file__).resolve().parents[2]
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]
DOWN_URL = "postgresql://pal@127.0.0.1:1/pal"  # nothing listens on port 1: the store is down


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    d = tmp_path_factory.mktemp("proflab")
    conf = d / "pal.toml"
    url = f"sqlite:///{d / 'pal.db'}"

    def configure(store_url: str) -> None:
        """The hooks read this file at every run: switching the URL takes the store down/up."""
        conf.write_text(
            f'[store]\nurl = "{store_url}"\n'
            f'[profiling]\nbackend = "replay"\nspool_dir = "{d / "spool"}"\nduration_s = 0.0\nreplay_seed = 3\n'
        )

    configure(DOWN_URL)
    (d / "spool").mkdir()
    wrappers = {}
    for kind in ("prolog", "epilog"):
        w = d / f"{kind}.sh"
        w.write_text(
            "#!/bin/sh\n"
            f"export PYTHONPATH={ROOT} PAL_CONFIG={conf}\n"
            f"exec {sys.executable} {ROOT / 'sbin' / ('pal-' + kind)} 2>>{d / (kind + '.log')}\n"
        )
        w.chmod(0o755)
        wrappers[kind] = w
    cluster = lab_factory(prolog=wrappers["prolog"], epilog=wrappers["epilog"])
    return {"dir": d, "conf": conf, "url": url, "configure": configure, "env": cluster.client_env()}


def _sbatch(lab, *args) -> str:
    out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", *args], env=lab["env"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return out.strip().split(";")[0]


def _wait_gone(lab, job: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], env=lab["env"],
                             capture_output=True, text=True, timeout=30).stdout
        if job not in out.split():
            return
        time.sleep(0.3)
    raise AssertionError(f"job {job} did not finish")


def _node_state(lab, node: str) -> str:
    return subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], env=lab["env"], capture_output=True,
                          text=True, timeout=30).stdout.strip()


def test_prolog_with_store_down_spools_then_samples_arrive_once(lab):
    from pal_slurm.bench import spool
    from pal_slurm.bench.base import KIND_WALLTIME
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.store import open_store

    # typed GRES: the prolog environment would show only GPU 3 (Slurm 22.05 bug)
    job1 = _sbatch(lab, "-w", "gpu02", "--gres=gpu:s1:1,gpu:s3:1", "--comment=pal:class=bert", "--wrap", "sleep 1")
    _wait_gone(lab, job1)
    time.sleep(1.0)  # the epilog runs after the job leaves squeue
    assert _node_state(lab, "gpu02") == "idle", (lab["dir"] / "prolog.log").read_text()
    queued = []
    for p in (lab["dir"] / "spool").glob("*.jsonl"):
        queued += [line for line in p.read_text().splitlines() if line.strip()]
    from pal_slurm.bench.base import Sample

    queued = [Sample.from_json(x) for x in queued]
    bench = sorted((s.slot, s.perf_class, s.job_id) for s in queued if s.kind != KIND_WALLTIME)
    walls = sorted(s.slot for s in queued if s.kind == KIND_WALLTIME)
    # prolog (and epilog) sample GPUs 1 AND 3, class B from the comment
    assert (1, "B", job1) in bench and (3, "B", job1) in bench
    assert set(s for s, _, _ in bench) == {1, 3}
    assert walls == [1, 3]
    n_queued = len(queued)

    # the store comes back (the admin creates it); the next job's prolog stores and drains
    StoreProfilingRepository(open_store(lab["url"])).close()
    lab["configure"](lab["url"])
    job2 = _sbatch(lab, "-w", "gpu02", "--gres=gpu:s0:1", "--wrap", "sleep 1")
    _wait_gone(lab, job2)
    deadline = time.monotonic() + 20
    while spool.pending(lab["dir"] / "spool") and time.monotonic() < deadline:
        time.sleep(0.3)
    time.sleep(1.0)
    got = StoreProfilingRepository(open_store(lab["url"])).samples()
    from_job1 = [s for s in got if s.job_id == job1]
    assert len(from_job1) == n_queued  # every queued sample, exactly once
    assert {s.slot for s in got if s.job_id == job2} == {0}
    assert spool.pending(lab["dir"] / "spool") == 0
    assert _node_state(lab, "gpu02") == "idle"


def test_profile_nodes_replay_recovers_planted_profiles(lab, monkeypatch):
    from pal_slurm.bench.replay import ReplayBackend
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.cli.main import cli
    from pal_slurm.store import open_store

    lab["configure"](lab["url"])
    monkeypatch.setenv("PAL_CONFIG", str(lab["conf"]))
    monkeypatch.setenv("SLURM_CONF", lab["env"]["SLURM_CONF"])
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the benchmark jobs run `python3 -m pal_slurm.cli`
    runner = CliRunner()
    r = runner.invoke(cli, ["profile-nodes", "--nodes", "gpu[01-04]", "--backend", "replay", "--classes", "A,D",
                            "--gpus-per-node", "4", "--seed", "3", "--wait", "4:00"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    for node in NODES:
        assert any(line.startswith(node) and line.split()[-1] == "ok" for line in r.output.splitlines()), r.output
    r = runner.invoke(cli, ["rank"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    snap = StoreProfilingRepository(open_store(lab["url"])).latest_ranking()
    a = {(e.node, e.slot): e.score for e in snap.entries if e.perf_class == "A"}
    assert len(a) == 16
    planted = ReplayBackend(seed=3)
    keys = sorted(a)
    x = [planted.planted(n, s, "A") for n, s in keys]
    y = [a[k] for k in keys]

    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        out = [0] * len(v)
        for pos, i in enumerate(order):
            out[i] = pos
        return out

    rx, ry = ranks(x), ranks(y)
    n = len(x)
    rho = 1 - 6 * sum((p - q) ** 2 for p, q in zip(rx, ry)) / (n * (n * n - 1))
    assert rho >= 0.95, (rho, x, y)
