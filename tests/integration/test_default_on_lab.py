"""A default-on partition on the lab (real Slurm, the real hook and pald): every GPU job of the
partition is PAL's without a `pal:` spec, its class from the site's rules; `pal:off` keeps a job
out; a job of another partition and a job without GPUs are not touched."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pal_lab.lab import missing_binaries, start_lab
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]


def field(lab, job_id: int, key: str) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=lab.client_env(),
                         capture_output=True, text=True).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith(key + "=")), "")


def test_every_gpu_job_of_a_default_on_partition_is_pals_unless_its_user_opts_out():
    if missing_binaries():
        pytest.skip("Slurm lab cluster unavailable, missing: " + ", ".join(missing_binaries()))
    root = Path(tempfile.mkdtemp(prefix="pal-default-on-"))
    root.chmod(0o755)
    sock, db = root / "pald.sock", f"sqlite:///{root}/pal.db"
    lab = start_lab(root / "lab", hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                    env={"PAL_SOCKET": str(sock), "PAL_DEFAULT_ON": "gpu"},
                    extra_conf="PartitionName=other Nodes=ALL MaxTime=INFINITE State=UP\n")
    pald = None
    try:
        store = open_store(db)
        store.write_ranking("optimal", [RankingEntry(n, s, c, 1.0 + 0.1 * s, 1.0 + 0.1 * s, 0)
                                        for n in lab.nodes for s in range(4) for c in "ABCD"])
        store.close()
        cfg = write_config(root / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf,
                           heartbeat=root / "hb")
        cfg.write_text(cfg.read_text().replace(
            "[daemon]\n", '[daemon]\ndefault_on = "gpu"\nclass_rules = "name:bert*=B"\n'))
        pald = PaldProcess(cfg, sock, root / "pald.log").start()
        bert = lab.sbatch("--gres=gpu:1", "--job-name=bert-base", wrap="true")
        plain = lab.sbatch("--gres=gpu:1", "--job-name=misc", wrap="true")
        opted = lab.sbatch("--gres=gpu:1", "--job-name=bert-base", "--comment=baseline pal:off", wrap="true")
        other = lab.sbatch("-p", "other", "--gres=gpu:1", "--job-name=bert-base", wrap="true")
        cpu = lab.sbatch("--job-name=bert-base", wrap="true")
        for j in (bert, plain, opted, other, cpu):
            assert lab.wait_job(j, timeout=60) == "COMPLETED", j
        assert field(lab, bert, "AdminComment").startswith(("pal:placed=", "pal:defer"))
        assert field(lab, plain, "AdminComment").startswith(("pal:placed=", "pal:defer"))
        for j in (opted, other, cpu):
            assert "pal:" not in field(lab, j, "AdminComment"), j
        comments = {j.job_id: j.comment for j in lab.reader.jobs()}
        assert comments[opted] == "baseline pal:off"  # the user's text kept
        decisions = {}
        store = open_store(db)
        try:
            for d in store.decisions(limit=100):
                decisions.setdefault(d.job_id, d)
        finally:
            store.close()
        classes = {d.perf_class for d in decisions.values() if d.perf_class}
        assert "B" in classes and "A" in classes  # bert-base by its rule, misc by the default class
    finally:
        if pald is not None:
            pald.stop()
        lab.stop()
        shutil.rmtree(root, ignore_errors=True)
