"""Install -> run -> remove on the lab, with a site's own job_submit.lua (its rules: a default
time limit, an account required) calling pal.lua (job_submit_lua/examples/job_submit.lua). Its
rules apply to every job throughout; with PAL, PAL jobs are placed or held; after the removal
steps of docs/install.md (pause, remove pal.lua, stop pald, drop the store) stock Slurm runs
GPU jobs, nothing is held or pinned, and no pal-slurm table is left."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from pal_lab.lab import missing_binaries, start_lab
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.models import Base
from pal_slurm.store.records import RankingEntry

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]
HOOKS = REPO / "job_submit_lua"


def field(lab, job_id: int, key: str) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=lab.client_env(),
                         capture_output=True, text=True).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith(key + "=")), "")


def sbatch(lab, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sbatch", "--parsable", f"--output={lab.lab_dir}/out/%j.out", *args, "--wrap", "true"],
                          env=lab.client_env(), capture_output=True, text=True, cwd="/tmp")


def test_install_run_remove_keeps_the_sites_rules_and_leaves_stock_slurm(tmp_path):
    if missing_binaries():
        pytest.skip("Slurm lab cluster unavailable, missing: " + ", ".join(missing_binaries()))
    root = Path(tempfile.mkdtemp(prefix="pal-remove-"))
    root.chmod(0o755)
    hooks = root / "hooks"
    hooks.mkdir()
    shutil.copy(HOOKS / "examples" / "job_submit.lua", hooks / "job_submit.lua")
    shutil.copy(HOOKS / "pal.lua", hooks / "pal.lua")
    sock, db = root / "pald.sock", f"sqlite:///{root}/pal.db"
    lab = start_lab(root / "lab", hook=str(hooks / "job_submit.lua"), env={"PAL_SOCKET": str(sock)})
    pald = None
    try:
        store = open_store(db)
        store.write_ranking("optimal", [RankingEntry(n, s, "A", 1.0, 1.0, 0) for n in lab.nodes for s in range(4)])
        store.close()
        cfg = write_config(root / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf,
                           heartbeat=root / "hb")
        pald = PaldProcess(cfg, sock, root / "pald.log").start()

        def palctl(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "pal_slurm.cli", "--config", str(cfg), *argv],
                                  capture_output=True, text=True, cwd=REPO, timeout=60)

        # the site's rules with PAL installed
        refused = sbatch(lab, "--gres=gpu:1", "--comment=pal:class=resnet")
        assert refused.returncode != 0 and "please give --account" in refused.stderr
        ok = sbatch(lab, "--account=vision", "--gres=gpu:1", "--comment=pal:class=resnet")
        assert ok.returncode == 0, ok.stderr
        job = int(ok.stdout.strip().split(";")[0])
        assert field(lab, job, "TimeLimit") == "01:00:00"  # the site's default
        assert field(lab, job, "AdminComment").startswith(("pal:placed=", "pal:defer"))
        assert lab.wait_job(job, timeout=60) == "COMPLETED"

        # removal, in docs/install.md's order
        p = palctl("pause")
        assert p.returncode == 0, p.stderr
        deadline = time.monotonic() + 10
        while pald.health().details["held_jobs"] and time.monotonic() < deadline:
            time.sleep(0.2)
        (hooks / "pal.lua").unlink()
        (lab.lab_dir / "etc" / "pal.lua").unlink(missing_ok=True)
        (hooks / "job_submit.lua").touch()  # slurmctld re-reads the hook when it changes
        subprocess.run(["scontrol", "reconfigure"], env=lab.client_env(), check=True, capture_output=True)
        pald.stop()
        pald = None
        p = palctl("db", "downgrade", "--revision", "base", "--yes")
        assert p.returncode == 0 and "no pal-slurm tables left" in p.stdout, p.stdout + p.stderr
        tables = set(inspect(create_engine(db)).get_table_names())
        assert not tables & set(Base.metadata.tables)

        # stock Slurm, the site's rules still on
        refused = sbatch(lab, "--gres=gpu:1", "--comment=pal:class=resnet")
        assert refused.returncode != 0 and "please give --account" in refused.stderr
        after = []
        for _ in range(3):
            p = sbatch(lab, "--account=vision", "--gres=gpu:2", "--comment=pal:class=resnet")
            assert p.returncode == 0, p.stderr
            after.append(int(p.stdout.strip().split(";")[0]))
        for j in after:
            assert field(lab, j, "TimeLimit") == "01:00:00"
            assert "pal:" not in field(lab, j, "AdminComment")  # no hook of ours any more
            assert field(lab, j, "ReqNodeList") in ("", "(null)")  # nothing pinned
            assert lab.wait_job(j, timeout=60) == "COMPLETED"
        held = [j for j in lab.reader.jobs() if j.held]
        assert held == []
    finally:
        if pald is not None:
            pald.stop()
        lab.stop()
        shutil.rmtree(root, ignore_errors=True)
