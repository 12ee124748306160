"""The lab API other integration tests build on: a custom job_submit.lua (with a sibling Lua
module), environment for the hook, and a prolog, on a second lab of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pal_lab.lab import LAB_SCRIPT, LabCluster

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

HOOK = """
-- find sibling modules next to this script (slurm-lab links them beside slurm.conf)
local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = dir .. "?.lua;" .. package.path
local labmod = require("labmod")

function slurm_job_submit(job_desc, part_list, submit_uid)
   job_desc.admin_comment = "hook:" .. labmod.tag .. ":" .. (os.getenv("LAB_TEST_TOKEN") or "none")
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
"""


@pytest.fixture(scope="module")
def hooked_lab(tmp_path_factory: pytest.TempPathFactory, lab_factory) -> tuple[LabCluster, Path]:
    src = tmp_path_factory.mktemp("hook")
    (src / "job_submit.lua").write_text(HOOK)
    (src / "labmod.lua").write_text('return { tag = "mod-ok" }\n')
    marks = src / "prolog.marks"
    prolog = src / "prolog.sh"
    prolog.write_text(f'#!/bin/sh\necho "$SLURM_JOB_ID $SLURMD_NODENAME" >> {marks}\nexit 0\n')
    prolog.chmod(0o755)
    lab = lab_factory(
        hook=src / "job_submit.lua",
        env={"LAB_TEST_TOKEN": "tok-123"},
        prolog=prolog,
        nodes=2,
        gpus=2,
    )
    return lab, marks


def test_custom_hook_env_and_prolog(hooked_lab: tuple[LabCluster, Path]) -> None:
    lab, marks = hooked_lab
    assert [n.name for n in lab.reader.nodes()] == ["gpu01", "gpu02"]
    assert lab.reader.cluster_view().size == 4
    job = lab.sbatch("-w", "gpu02", "--gres=gpu:s1:1", wrap="echo CVD=$CUDA_VISIBLE_DEVICES")
    (info,) = [j for j in lab.reader.jobs() if j.job_id == job]
    assert info.admin_comment == "hook:mod-ok:tok-123"
    assert lab.wait_job(job) == "COMPLETED"
    assert lab.job_output(job).strip() == "CVD=1"
    assert f"{job} gpu02" in marks.read_text().splitlines()


def test_script_status_and_env(hooked_lab: tuple[LabCluster, Path]) -> None:
    lab, _ = hooked_lab
    status = subprocess.run(["bash", str(LAB_SCRIPT), "status"], env=lab.script_env,
                            capture_output=True, text=True, timeout=30)
    assert status.returncode == 0
    assert any(l.startswith("slurmctld pid=") and l.endswith(" up") for l in status.stdout.splitlines())
    assert "gpu02 idle" in status.stdout or "gpu02 mixed" in status.stdout
    env = subprocess.run(["bash", str(LAB_SCRIPT), "env"], env=lab.script_env,
                         capture_output=True, text=True, timeout=30)
    assert env.stdout.strip() == f"export SLURM_CONF={lab.slurm_conf}"


def test_stop_leaves_no_process(tmp_path_factory: pytest.TempPathFactory, lab_factory) -> None:
    lab = lab_factory(nodes=1, gpus=1)
    pids = [int(p.read_text()) for p in (lab.lab_dir / "run").glob("*.pid")]
    assert len(pids) == 3  # munged, slurmctld, slurmd-gpu01
    assert lab.stop() < 5
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)


def _state(pid: int) -> str:
    try:
        return next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("State:"))
    except (OSError, StopIteration):
        return "Z"
