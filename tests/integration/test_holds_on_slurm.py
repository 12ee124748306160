"""Holds and reservations on the real lab: a user's hold is the user's, a restart of pald
cannot double-book a slot pinned to a pending job, a submission Slurm rejects frees what pald
reserved for it at the next read.

The lab and pald are test_faults.py's rig (slurmctld + 4 slurmd x 4 emulated GPUs, the real
job_submit.lua, the real pald process on SQLite, `release_start_s` 8 s).
"""

from __future__ import annotations

import time

import pytest

from pal_slurm.daemon import failsafe
from tests.integration.test_faults import (  # noqa: F401 - `rig` is the module's fixture
    JOB,
    RELEASE_START_S,
    USER,
    job_field,
    quiet,
    rig,
    wait_for,
)

pytestmark = pytest.mark.slurm


def submit_as_user(rig, *args: str) -> int:
    p = rig.slurm("sbatch", "--parsable", f"--output={rig.lab.lab_dir}/out/%j.out", *args, "--wrap", JOB,
                  user=USER)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.strip())


def test_a_user_s_hold_on_a_job_pald_released_stays_until_the_user_releases_it(rig):
    """pald pins and releases a deferred job; its node drains at that moment (the rig's
    drain-on-release), so the job waits pending on its pin, and its user holds it
    (`scontrol hold`: JobHeldUser). pald leaves it held past `release_start_s` (no re-pin,
    no release), so does pal-failsafe run with --force; after the user's release it runs."""
    quiet(rig)
    counts_before = dict(rig.pald.health().details["counts"])
    rig.drain_flag.touch()
    drained = ""
    try:
        job = submit_as_user(rig, "--gres=gpu:1", "--comment=pal:class=resnet,mode=defer")
        wait_for(lambda: not rig.drain_flag.exists(), 20, "pald never released the job")
        drained = job_field(rig, job, "ReqNodeList")
        assert drained.startswith("gpu"), drained
        wait_for(lambda: " pal:released" in rig.slurm("scontrol", "-o", "show", "job", str(job)).stdout, 10,
                 "no pal:released tag")
        assert job_field(rig, job, "JobState") == "PENDING", "the job started: the fault was not exercised"
        p = rig.slurm("scontrol", "hold", str(job), user=USER)
        assert p.returncode == 0, p.stderr
        assert job_field(rig, job, "Reason") == "JobHeldUser"
        # pald's cycles (1 s) and its unstick (release_start_s) pass; pal-failsafe runs forced
        assert failsafe.main(["--config", str(rig.pald.config), "--force"]) == 0
        time.sleep(RELEASE_START_S + 3)
        assert failsafe.main(["--config", str(rig.pald.config), "--force"]) == 0
        released_by_pald = int(job_field(rig, job, "Priority") != "0")
        counts = rig.pald.health().details["counts"]
        print(f"user-held jobs released by pald or pal-failsafe: {released_by_pald}; "
              f"unstuck {counts['unstuck'] - counts_before['unstuck']}, "
              f"released {counts['released'] - counts_before['released']}")
        assert released_by_pald == 0 and job_field(rig, job, "Reason") == "JobHeldUser"
        assert job_field(rig, job, "ReqNodeList") == drained  # not re-pinned
        assert counts["unstuck"] == counts_before["unstuck"]
        assert counts["released"] == counts_before["released"] + 1  # its one release, before the hold
        rig.slurm("scontrol", "update", f"nodename={drained}", "state=resume")
        drained = ""
        p = rig.slurm("scontrol", "release", str(job), user=USER)
        assert p.returncode == 0, p.stderr
        assert rig.lab.wait_job(job, timeout=RELEASE_START_S + 30) == "COMPLETED"
    finally:
        rig.drain_flag.unlink(missing_ok=True)
        if drained:
            rig.slurm("scontrol", "update", f"nodename={drained}", "state=resume")
