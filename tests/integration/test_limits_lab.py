"""A user at Slurm's MaxJobs limit on the accounting lab (slurmdbd, limits enforced), with the
real hook and pald: the PAL job Slurm keeps waiting for the limit gets no pin it cannot use,
and a job behind it that needs its GPUs is placed meanwhile (held_jobs.unpin_limited).

One node of 4 GPUs. root's association allows one running job: job A (1 GPU) runs, job B
(1 GPU) is placed by the hook on a pin and then waits `AssocMaxJobsLimit`. Another user's
job C asks for 3 GPUs: with B's promise kept it could never fit beside A; with B unpinned it
runs while A still does. B runs once A has ended, wherever Slurm puts it.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from pal_slurm.store.bootstrap import open_store
from tests.support.accounting_pald import hooked_accounting_lab

pytestmark = pytest.mark.slurm

ENFORCE = "AccountingStorageEnforce=associations,limits\n"


def job_field(env: dict[str, str], job_id: int, key: str) -> str:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith(key + "=")), "")


def wait_for(what, timeout_s: float, why: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.5)


def test_a_job_waiting_for_a_limit_keeps_no_pin_and_the_job_behind_it_runs() -> None:
    with hooked_accounting_lab("pal-limits-", nodes=1, gpus=4, extra_conf=ENFORCE) as rig:
        lab = rig.lab
        env = lab.client_env()
        for argv in (["add", "account", "team"], ["add", "user", "root,nobody", "account=team"],
                     ["modify", "user", "root", "set", "maxjobs=1"]):
            subprocess.run(["sacctmgr", "-i", *argv], env=env, check=True, capture_output=True)
        rig.start_pald()
        a = lab.sbatch("--account=team", "--gres=gpu:1", "--comment=pal:class=resnet,mode=now", wrap="sleep 60")
        wait_for(lambda: job_field(env, a, "JobState") == "RUNNING", 30, "job A never started")
        b = lab.sbatch("--account=team", "--gres=gpu:1", "--comment=pal:class=resnet,mode=now", wrap="true")
        wait_for(lambda: job_field(env, b, "Reason").startswith("Assoc"), 30,
                 f"job B is not waiting for the limit: {job_field(env, b, 'Reason')}")
        assert job_field(env, b, "AdminComment").startswith("pal:placed="), "the hook did not pin B"
        wait_for(lambda: job_field(env, b, "ReqNodeList") in ("", "(null)"), 15, "pald kept B's pin")
        p = subprocess.run(["runuser", "-u", "nobody", "--", "sbatch", "--parsable", "--output=/dev/null",
                            "--account=team", "--gres=gpu:3", "--comment=pal:class=resnet", "--wrap", "true"],
                           env=env, capture_output=True, text=True, cwd="/tmp")
        assert p.returncode == 0, p.stderr
        c = int(p.stdout.strip().split(";")[0])
        assert lab.wait_job(c, timeout=60) == "COMPLETED", c
        assert job_field(env, a, "JobState") == "RUNNING"  # C ran beside A: B's promise was gone
        subprocess.run(["scancel", str(a)], env=env, check=True)
        assert lab.wait_job(b, timeout=60) == "COMPLETED", b  # B runs once the limit allows
        store = open_store(rig.db)
        try:
            reasons = [d.reason for d in store.decisions(str(b))]
        finally:
            store.close()
        assert any(r.startswith("limit:Assoc") for r in reasons), reasons
        print("limit: B unpinned with", [r for r in reasons if r.startswith("limit:")], "; C ran beside A")
