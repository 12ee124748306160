"""A user at Slurm's MaxJobs limit on the accounting lab (slurmdbd, limits enforced), with the
real hook and pald: the PAL job Slurm would keep waiting for the limit gets no pin it cannot
use, and a job behind it that needs its GPUs is placed meanwhile.

One node of 4 GPUs, root's association allows one running job, job A (root, 1 GPU) runs.
- Limits seen after a placement (held_jobs.unpin_limited): job B (root, 1 GPU) is placed by
  the hook on a pin and then waits `AssocMaxJobsLimit`; pald drops its pin at the next read.
- Limits seen before a release (slurm.job_limits, intake.job_limits, engine.held): job B
  (root, 1 GPU) is held by pald; while A runs the cycle keeps it held (recorded
  `limit:AssocMaxJobsLimit`), never released onto a pin.
In both, another user's job C (user `daemon`) asks for 3 GPUs: with B's promise kept it could never fit
beside A; with B holding no pin it runs while A still does. B runs once A has ended.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from pal_slurm.store.bootstrap import open_store
from tests.support.accounting_pald import hooked_accounting_lab

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

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


# Another user with an association: not `nobody`, whose name Slurm 26.05 takes for its own
# uid 99 (SLURM_AUTH_NOBODY), so the association sacctmgr makes never matches uid 65534.
OTHER_USER = "daemon"


def root_at_max_jobs(env: dict[str, str]) -> None:
    """Account `team` with root (MaxJobs=1) and OTHER_USER (no limit)."""
    for argv in (["add", "account", "team"], ["add", "user", f"root,{OTHER_USER}", "account=team"],
                 ["modify", "user", "root", "set", "maxjobs=1"]):
        subprocess.run(["sacctmgr", "-i", *argv], env=env, check=True, capture_output=True)


def sbatch_as_other_user(env: dict[str, str], *args: str) -> int:
    p = subprocess.run(["runuser", "-u", OTHER_USER, "--", "sbatch", "--parsable", "--output=/dev/null",
                        "--account=team", *args, "--wrap", "true"], env=env, capture_output=True, text=True, cwd="/tmp")
    assert p.returncode == 0, p.stderr
    return int(p.stdout.strip().split(";")[0])


def decisions_of(db: str, job_id: int) -> list[tuple[str, str]]:
    """(kind, reason) of pald's decisions for `job_id`, oldest first."""
    store = open_store(db)
    try:
        return [(d.kind.value, d.reason) for d in sorted(store.decisions(str(job_id)), key=lambda d: d.created_at)]
    finally:
        store.close()


def root_running_at_its_limit(rig):
    """root's association allows one running job, and root's job A (1 GPU) runs: (lab, env, A)."""
    lab = rig.lab
    env = lab.client_env()
    root_at_max_jobs(env)
    rig.start_pald()
    a = lab.sbatch("--account=team", "--gres=gpu:1", "--comment=pal:class=resnet,mode=now", wrap="sleep 60")
    wait_for(lambda: job_field(env, a, "JobState") == "RUNNING", 30, "job A never started")
    return lab, env, a


def test_a_job_waiting_for_a_limit_keeps_no_pin_and_the_job_behind_it_runs() -> None:
    with hooked_accounting_lab("pal-limits-", nodes=1, gpus=4, extra_conf=ENFORCE) as rig:
        lab, env, a = root_running_at_its_limit(rig)
        b = lab.sbatch("--account=team", "--gres=gpu:1", "--comment=pal:class=resnet,mode=now", wrap="true")
        wait_for(lambda: job_field(env, b, "Reason").startswith("Assoc"), 30,
                 f"job B is not waiting for the limit: {job_field(env, b, 'Reason')}")
        assert job_field(env, b, "AdminComment").startswith("pal:placed="), "the hook did not pin B"
        wait_for(lambda: job_field(env, b, "ReqNodeList") in ("", "(null)"), 15, "pald kept B's pin")
        c = sbatch_as_other_user(env, "--gres=gpu:3", "--comment=pal:class=resnet")
        assert lab.wait_job(c, timeout=60) == "COMPLETED", c
        assert job_field(env, a, "JobState") == "RUNNING"  # C ran beside A: B's promise was gone
        subprocess.run(["scancel", str(a)], env=env, check=True)
        assert lab.wait_job(b, timeout=60) == "COMPLETED", b  # B runs once the limit allows
        reasons = [reason for _, reason in decisions_of(rig.db, b)]
        assert any(r.startswith("limit:Assoc") for r in reasons), reasons
        print("limit: B unpinned with", [r for r in reasons if r.startswith("limit:")], "; C ran beside A")


def test_a_held_job_at_its_limit_is_not_released_and_the_job_behind_it_runs() -> None:
    with hooked_accounting_lab("pal-limits-held-", nodes=1, gpus=4, extra_conf=ENFORCE) as rig:
        lab, env, a = root_running_at_its_limit(rig)
        b = lab.sbatch("--account=team", "--gres=gpu:1", "--comment=pal:class=resnet,mode=defer", wrap="true")
        c = sbatch_as_other_user(env, "--gres=gpu:3", "--comment=pal:class=resnet,mode=defer")  # behind B in pald's queue
        b_pins: set[str] = set()

        def c_done() -> bool:
            b_pins.add(job_field(env, b, "ReqNodeList"))
            return job_field(env, c, "JobState") == "COMPLETED"

        wait_for(c_done, 60, f"job C never ran beside A: {job_field(env, c, 'JobState')} "
                             f"{job_field(env, c, 'Reason')}")
        assert job_field(env, a, "JobState") == "RUNNING"  # C ran beside A: B held no GPUs
        assert job_field(env, b, "JobState") == "PENDING" and job_field(env, b, "Reason") == "JobHeldAdmin"
        assert b_pins <= {"", "(null)"}, f"B was released onto a pin while A ran: {b_pins}"
        wait_for(lambda: ("defer", "limit:AssocMaxJobsLimit") in decisions_of(rig.db, b), 15,
                 f"pald recorded no limit for B: {decisions_of(rig.db, b)}")
        before = decisions_of(rig.db, b)
        assert not [r for _, r in before if r.startswith("released:")], f"B was released while A ran: {before}"
        subprocess.run(["scancel", str(a)], env=env, check=True)
        assert lab.wait_job(b, timeout=60) == "COMPLETED", b  # released once A's job slot is free
        after = decisions_of(rig.db, b)
        assert any(r.startswith("released:") for _, r in after), after
        print("limit before release: B", before, "; C ran beside A; B after A:", after[-1])
