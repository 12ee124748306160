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

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]


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


def admin_comment(rig, job: int) -> str:
    out = rig.slurm("scontrol", "-o", "show", "job", str(job)).stdout
    return out.split("AdminComment=", 1)[1].split(" Comment=", 1)[0] if "AdminComment=" in out else ""


def placed_on(tags: str) -> list[str]:
    """The nodes the hook placed a job on (`pal:placed=gpu01,gpu02;...`), [] when it did not."""
    word = next((w for w in tags.split() if w.startswith("pal:placed=")), "")
    return word.removeprefix("pal:placed=").split(";", 1)[0].split(",") if word else []


def test_a_restarted_pald_does_not_double_book_a_slot_pinned_to_a_pending_job(rig):
    """Three nodes busy; pald pins a deferred 4-GPU job to the fourth and releases it, and it
    waits pending on its pin (a BeginTime a few seconds ahead, set at the release). pald
    restarts (its reservations were only in memory) and a new 4-GPU job arrives: it must not
    get the pinned node's GPUs (double-booked GPUs: 0); it waits, and both run."""
    quiet(rig)
    blockers = [rig.lab.sbatch("--gres=gpu:4", "--comment=pal:class=bert,mode=now", wrap="sleep 600")
                for _ in rig.lab.nodes[:3]]
    for b in blockers:
        rig.lab.wait_job(b, timeout=30, states=("RUNNING",))
    busy = {n for b in blockers for n in job_field(rig, b, "NodeList").split(",")}
    free_node = next(n for n in rig.lab.nodes if n not in busy)
    try:
        rig.late_flag.write_text("12")
        pinned = rig.lab.sbatch("--gres=gpu:4", "--comment=pal:class=resnet,mode=defer", wrap=JOB)
        wait_for(lambda: not rig.late_flag.exists(), 20, "pald never released the job")
        wait_for(lambda: " pal:released" in admin_comment(rig, pinned), 10, "no pal:released tag")
        assert job_field(rig, pinned, "ReqNodeList") == free_node
        assert job_field(rig, pinned, "JobState") == "PENDING", "the pinned job started: nothing to double-book"
        rig.pald.stop()
        rig.pald.start()
        newcomer = rig.lab.sbatch("--gres=gpu:4", "--comment=pal:class=resnet", wrap=JOB)
        assert job_field(rig, pinned, "JobState") == "PENDING", "the pinned job started before the newcomer came"
        tags = admin_comment(rig, newcomer)
        double_booked = 4 * placed_on(tags).count(free_node)
        print(f"newcomer after the restart: {tags!r}; double-booked GPUs: {double_booked}")
        assert double_booked == 0
        assert "pal:defer" in tags  # no room: it waits in pald's queue
    finally:
        rig.late_flag.unlink(missing_ok=True)
        rig.slurm("scancel", *map(str, blockers))
    for j in (pinned, newcomer):
        assert rig.lab.wait_job(j, timeout=60) == "COMPLETED", j


def test_a_pin_left_by_a_pald_that_died_mid_release_is_not_taken_for_the_user_s_nodelist(rig):
    """Every node busy; a deferred job is under pald's hold; pald dies after pinning it to a
    node (the pin is written here while pald is down: its first step of a release) and before
    releasing it. A new pald starts; another node frees: the job runs there, not waiting for
    the pinned node (jobs left waiting on a stale pin: 0)."""
    quiet(rig)
    blockers = [rig.lab.sbatch("--gres=gpu:4", "--comment=pal:class=bert,mode=now", wrap="sleep 600")
                for _ in rig.lab.nodes]
    for b in blockers:
        rig.lab.wait_job(b, timeout=30, states=("RUNNING",))
    try:
        job = rig.lab.sbatch("--gres=gpu:4", "--comment=pal:class=resnet,mode=defer", wrap=JOB)
        wait_for(lambda: job_field(rig, job, "Reason") == "JobHeldAdmin", 10, "pald never held the job")
        rig.pald.stop()
        stale = job_field(rig, blockers[0], "NodeList")
        p = rig.slurm("scontrol", "update", f"jobid={job}", f"NodeList={stale}", "NumNodes=1-1")
        assert p.returncode == 0, p.stderr
        rig.pald.start()
        freed = job_field(rig, blockers[1], "NodeList")
        rig.slurm("scancel", str(blockers[1]))
        state = rig.lab.wait_job(job, timeout=30)
        ran = {j.job_id: j for j in rig.lab.reader.jobs()}[job].nodes
        on_stale = int(state != "COMPLETED" or stale in ran)
        print(f"pinned to busy {stale} by a pald that died; ran on {','.join(ran) or '-'} ({state}); "
              f"jobs left waiting on the stale pin: {on_stale}")
        assert on_stale == 0 and list(ran) == [freed]
    finally:
        rig.slurm("scancel", *map(str, blockers))


def test_gpus_promised_to_submissions_slurm_rejects_are_free_at_the_next_read(rig):
    """Four 4-GPU submissions that Slurm rejects after the hook placed them (an unknown
    license: slurmctld refuses it after job_submit), then a legitimate 4-GPU job. pald's
    promises to the rejected ones end at its first read started `submit_grace_s` after them
    (GPUs still reserved: 0), not after the 30 s TTL, and the job that follows is placed."""
    quiet(rig)
    t0 = time.monotonic()
    for _ in range(4):
        p = rig.slurm("sbatch", "--parsable", "--licenses=nosuch", "--gres=gpu:4", "--comment=pal:class=resnet",
                      "--wrap", JOB, user=USER)
        assert p.returncode != 0 and "licen" in p.stderr.lower(), (p.returncode, p.stderr)
    promised = rig.pald.health().details["reserved_gpus"]
    wait_for(lambda: rig.pald.health().details["reserved_gpus"] == 0, 10, "promises to rejected jobs kept")
    freed_s = time.monotonic() - t0
    job = rig.lab.sbatch("--gres=gpu:4", "--comment=pal:class=resnet", wrap=JOB)
    tags = admin_comment(rig, job)
    print(f"GPUs promised to 4 rejected submissions: {promised}; all free again {freed_s:.1f} s later; "
          f"GPUs still reserved: {rig.pald.health().details['reserved_gpus'] - 4 * len(placed_on(tags))}; "
          f"the next job: {tags!r}")
    # 16 when the four sbatch calls take under submit_grace_s; on a loaded machine the first
    # promises may already be gone by the time the last is made: at least that one's 4 remain
    assert 4 <= promised <= 16 and promised % 4 == 0, promised
    assert placed_on(tags), tags  # placed, not deferred no_room
    assert rig.lab.wait_job(job, timeout=60) == "COMPLETED"


def test_a_job_is_placed_on_a_reservation_only_when_its_access_list_admits_the_user(rig):
    """A reservation for root on one node. USER's job asking for it is refused by Slurm; pald
    knows the access list, passes it untouched and promises it nothing (GPUs reserved: 0).
    root's job asking for it is placed on the reservation's node."""
    quiet(rig)
    node = rig.lab.nodes[-1]
    p = rig.slurm("scontrol", "create", "reservation", "ReservationName=theirs", "Users=root", f"Nodes={node}",
                  "StartTime=now", "Duration=10")
    assert p.returncode == 0, p.stderr
    try:
        time.sleep(2.5)  # pald's next site read shows the reservation
        p = rig.slurm("sbatch", "--parsable", "--reservation=theirs", "--gres=gpu:4", "--comment=pal:class=resnet",
                      "--wrap", JOB, user=USER)
        reserved = rig.pald.health().details["reserved_gpus"]
        print(f"USER's job on root's reservation: sbatch rc {p.returncode} ({p.stderr.strip()}); "
              f"GPUs pald reserved for it: {reserved}")
        assert p.returncode != 0 and reserved == 0
        job = rig.lab.sbatch("--reservation=theirs", "--gres=gpu:4", "--comment=pal:class=resnet", wrap=JOB)
        assert placed_on(admin_comment(rig, job)) == [node], admin_comment(rig, job)
        assert rig.lab.wait_job(job, timeout=60) == "COMPLETED"
    finally:
        rig.slurm("scontrol", "delete", "ReservationName=theirs")
