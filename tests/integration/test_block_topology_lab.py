"""pald on a site with topology/block (Slurm 23.11 and later): two blocks of 4 nodes,
BlockSizes=4, the real hook and pald reading the blocks from `scontrol show topology`.

Slurm runs a job of up to a block's size inside one block and leaves a node pin across two
pending for ever (Reason=BadConstraints; docs/decisions/block-topology.md), so every placement
pald makes must lie in one block. The tests check that multi-node PAL jobs land in one block
while one has room, that Slurm takes every placement (no job ever BadConstraints, none
rejected, all complete), what happens when no block has room (the job waits, unpinned, and
lands in the first block that frees), that a job larger than a block is left to Slurm, and
that a user's own --segment (which Slurm 24.11 shows pald nowhere) still runs as asked.

Slurm 22.05 (Debian 12) has no topology/block: skipped there, with the release found.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from pal_lab.lab import SBIN
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.intake.hostlist import expand
from pal_slurm.slurm.dialects import parse_version
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry
from tests.integration.test_pald_slurm import wait_quiet

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]

BLOCKS = {"b1": {f"gpu{i:02d}" for i in range(1, 5)}, "b2": {f"gpu{i:02d}" for i in range(5, 9)}}
TOPOLOGY = "BlockName=b1 Nodes=gpu[01-04]\nBlockName=b2 Nodes=gpu[05-08]\nBlockSizes=4\n"
BLOCK_RELEASE = (23, 11)  # topology/block's first release


def slurm_release() -> tuple[int, int] | None:
    try:
        out = subprocess.run([str(SBIN / "slurmctld-wlm"), "-V"], capture_output=True, text=True, timeout=10).stdout
        return parse_version(out).release
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


@pytest.fixture(scope="module")
def env(tmp_path_factory, lab_factory):
    release = slurm_release()
    if release is None or release < BLOCK_RELEASE:
        found = f"{release[0]}.{release[1]:02d}" if release else "(release unknown)"
        pytest.skip(f"Slurm {found} has no topology/block (Slurm 23.11 and later; make test-debian13 runs 24.11)")
    tmp = tmp_path_factory.mktemp("pald-block")
    sock = tmp / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)},
                      nodes=8, extra_conf="TopologyPlugin=topology/block", topology=TOPOLOGY)
    db = f"sqlite:///{tmp}/pal.db"
    store = open_store(db)
    store.write_ranking("optimal", [RankingEntry(n, s, c, 1.0, 1.0, 0) for n in lab.nodes for s in range(4)
                                    for c in "ABCD"])
    store.close()
    cfg = write_config(tmp / "pal.toml", socket=sock, db_url=db, slurm_conf=lab.slurm_conf, heartbeat=tmp / "hb")
    pald = PaldProcess(cfg, sock, tmp / "pald.log").start()
    yield lab, pald, db
    pald.stop()


def job_fields(lab, job_id: int) -> dict[str, str]:
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], env=lab.client_env(),
                         capture_output=True, text=True, check=True).stdout
    return dict(w.partition("=")[::2] for w in out.split())


def block_of(nodes: set[str]) -> str | None:
    """The one block holding all of `nodes`, None when they span two."""
    return next((name for name, members in BLOCKS.items() if nodes <= members), None)


def ran_on(lab, job_id: int) -> set[str]:
    return set(expand(job_fields(lab, job_id)["NodeList"]))


def decisions(db: str, job_id: int) -> list[str]:
    store = open_store(db)
    try:
        return [d.reason for d in store.decisions(str(job_id))]
    finally:
        store.close()


def blocker(lab, node: str, seconds: int = 60) -> int:
    """A non-PAL job on all of `node`'s GPUs."""
    job = lab.sbatch("--gres=gpu:4", f"--nodelist={node}", wrap=f"sleep {seconds}")
    assert lab.wait_job(job, timeout=30, states=("RUNNING",)) == "RUNNING"
    return job


def wait_seen(pald, free_gpus: int, timeout: float = 15.0) -> None:
    """Until pald's view, read after this call, shows `free_gpus` free (the blockers seen)."""
    since = time.monotonic()
    while time.monotonic() < since + timeout:
        d = pald.health().details
        age = d["last_sync_age_s"]
        if age is not None and time.monotonic() - since > age + 0.1 and d["free_gpus"] == free_gpus:
            return
        time.sleep(0.2)
    raise AssertionError(f"pald never saw {free_gpus} GPUs free: {pald.health().details}")


def never_refused(lab, jobs) -> None:
    """Slurm took every placement: each job completed and none was left BadConstraints."""
    for job in jobs:
        f = job_fields(lab, job)
        assert f["JobState"] == "COMPLETED", (job, f["JobState"], f.get("Reason"))
    assert "do not have shared block" not in lab.log(), "Slurm refused a pin across blocks"


def test_multi_node_pal_jobs_land_in_one_block_while_one_has_room(env):
    """gpu01 and gpu05 busy: each block has 3 free nodes. Six 2-node PAL jobs (two at a time
    fit, one per block; a node left over in each) each run inside one block, and Slurm
    accepts every placement."""
    lab, pald, db = env
    wait_quiet(lab, pald)
    blockers = [blocker(lab, "gpu01"), blocker(lab, "gpu05")]
    jobs = [lab.sbatch("-N2", "--gres=gpu:4", f"--comment=pal:class=resnet{',mode=defer' if i % 2 else ''}",
                       wrap="sleep 2") for i in range(6)]
    for job in jobs:
        assert lab.wait_job(job, timeout=90) == "COMPLETED", job
    for b in blockers:
        subprocess.run(["scancel", str(b)], env=lab.client_env(), check=True)
    placed = {job: ran_on(lab, job) for job in jobs}
    assert all(len(nodes) == 2 and block_of(nodes) for nodes in placed.values()), placed
    assert not any(nodes & {"gpu01", "gpu05"} for nodes in placed.values()), placed
    comments = [job_fields(lab, job)["AdminComment"] for job in jobs]
    assert all(c.startswith("pal:") and not c.startswith("pal:pass") for c in comments), comments  # PAL's
    never_refused(lab, jobs)
    print("block: six 2-node PAL jobs on", sorted(f"{block_of(n)}:{','.join(sorted(n))}" for n in placed.values()))


def test_when_no_block_has_room_the_job_waits_unpinned_and_lands_in_the_first_block_that_frees(env):
    """Three of b1's nodes and three of b2's busy: one free node in each block, so a 2-node
    job has room only across the blocks, which Slurm would refuse. The PAL job waits (held by
    pald, no pin); once gpu02's job ends it runs in b1 (gpu02 + gpu04)."""
    lab, pald, db = env
    wait_quiet(lab, pald)
    blockers = {n: blocker(lab, n) for n in ("gpu01", "gpu02", "gpu03", "gpu05", "gpu06", "gpu07")}
    wait_seen(pald, 8)
    job = lab.sbatch("-N2", "--gres=gpu:4", "--comment=pal:class=resnet", wrap="sleep 1")
    time.sleep(3)  # several pald cycles
    f = job_fields(lab, job)
    assert f["JobState"] == "PENDING", f["JobState"]
    assert f["ReqNodeList"] in ("", "(null)"), f"pinned across blocks: {f['ReqNodeList']}"
    assert f["AdminComment"].startswith("pal:defer"), f["AdminComment"]
    subprocess.run(["scancel", str(blockers["gpu02"])], env=lab.client_env(), check=True)
    assert lab.wait_job(job, timeout=60) == "COMPLETED", job
    assert ran_on(lab, job) == {"gpu02", "gpu04"}
    for b in blockers.values():
        subprocess.run(["scancel", str(b)], env=lab.client_env(), check=True)
    never_refused(lab, [job])
    print("block: no block had room: the job waited unpinned, then ran on", sorted(ran_on(lab, job)))


def test_a_job_larger_than_a_block_is_left_to_slurm(env):
    """6 nodes > BlockSizes=4: pald passes it (`block_span`); Slurm's own placement runs it."""
    lab, pald, db = env
    wait_quiet(lab, pald)
    job = lab.sbatch("-N6", "--gres=gpu:1", "--comment=pal:class=resnet", wrap="true")
    assert lab.wait_job(job, timeout=60) == "COMPLETED", job
    assert job_fields(lab, job)["AdminComment"].startswith("pal:pass=block_span"), job_fields(lab, job)["AdminComment"]


SEGMENT_PIN_TAKEN = (25, 11)  # the first tested release that runs a --segment job pinned later (25.05 does not)


def test_a_users_own_segment_runs_as_asked(env):
    """--segment: Slurm 24.11 shows it neither to the hook nor in squeue, and refuses a
    submission that carries a pin beside it; so the hook pins no multi-node job under
    topology/block (pald holds it, reason `block`), and the cycle places it in one block like
    any other. 24.11 and 25.05 keep a pinned --segment job BadConstraints, and pald drops the pin at
    its next read (`refused:BadConstraints`): the job runs where Slurm's block placement puts
    it. 25.11 and 26.05 run the cycle's pin (inside one block, so the segments are too). Either way
    the job keeps its segment, runs, and is never rejected."""
    lab, pald, db = env
    wait_quiet(lab, pald)
    job = lab.sbatch("-N4", "--segment=2", "--gres=gpu:1", "--comment=pal:class=resnet", wrap="true")
    assert lab.wait_job(job, timeout=60) == "COMPLETED", job
    release = slurm_release()
    assert release is not None
    if release >= SEGMENT_PIN_TAKEN:
        assert decisions(db, job)[-1:] == ["released:pal"], decisions(db, job)
        assert block_of(ran_on(lab, job)) is not None, ran_on(lab, job)
    else:
        assert "refused:BadConstraints" in decisions(db, job), decisions(db, job)
    print("block: --segment job", job, "ran on", sorted(ran_on(lab, job)), "decisions", decisions(db, job))
