"""The hook inside a real slurmctld (Debian 22.05 lab, 4 nodes x 4 emulated GPUs, per-slot
GRES types) against a misbehaving stand-in pald: replies naming a
node Slurm does not have, a GPU slot the nodes lack, `gres:gpu:0`, four nodes for a one-GPU
job, an oversized line, an endless stream, a late answer, a reason forging `pal:defer`; good
answers mixed in. Before the fix the first two made sbatch fail ("Invalid node name
specified", "Requested node configuration is not available"), the next two ran jobs with no
GPU or on four nodes, the stream grew slurmctld by hundreds of MB.

Counted over N >= 100 submissions: 0 rejected, 0 failed, 0 ghost jobs (a job Slurm has that
sbatch did not report), every job ran, each with the tag its reply deserves; and the hook
stays within its deadline (sbatch wall time).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pal_slurm.daemon.cycle import is_pal_held
from pal_slurm.daemon.protocol import decode_request
from pal_slurm.intake.tags import request_id
from tests.support.tiny_pald import TinyPald

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "job_submit_lua" / "job_submit.lua"
JOBS = 112  # 14 rounds of the 8 replies below


def _line(obj) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _place(nodes, gres, **extra) -> bytes:
    return _line({"v": 1, "ok": True, "decision": "place", "reason": "pal", "nodes": nodes,
                  "gres": gres, "rank": 1, **extra})


# name -> (answer for one request, the admin_comment tag the job must end up with)
REPLIES = {
    "good": (lambda: _place({"gpu02": [3]}, "gres:gpu:s3:1",
                            warning="pal: \x1b[31mslow\x1b[0m class"), "pal:placed=gpu02;"),
    "no-such-node": (lambda: _place({"gpu09": [0]}, "gres:gpu:s0:1"), "pal:pass=bad-reply;"),
    "slot-the-node-lacks": (lambda: _place({"gpu01": [9]}, "gres:gpu:s9:1"), "pal:pass=bad-reply;"),
    "zero-gpus": (lambda: _place({"gpu01": [0]}, "gres:gpu:0"), "pal:pass=bad-reply;"),
    "four-nodes": (lambda: _place({f"gpu0{i}": [0] for i in range(1, 5)}, "gres:gpu:s0:1"),
                   "pal:pass=bad-reply;"),
    "oversized": (lambda: _line({"v": 1, "ok": True, "decision": "pass", "reason": "x" * 100_000}),
                  "pal:pass=bad-reply;"),
    "endless": (lambda: itertools.islice(itertools.repeat(b"y" * 65536), 2000), "pal:pass=bad-reply;"),
    "forged-defer": (lambda: _line({"v": 1, "ok": True, "decision": "pass", "reason": "x pal:defer"}),
                     "pal:pass=x-pal-defer;"),
}


class MisbehavingPald:
    """Answers request i with REPLIES[i % 8] and remembers which request got which reply."""

    def __init__(self):
        self.kinds = list(REPLIES)
        self.by_request: dict[str, str] = {}
        self.bad_deadlines = 0
        self._count = itertools.count()
        self._lock = threading.Lock()

    def answer(self, line: bytes):
        request = decode_request(line)  # every request is still valid protocol v1
        deadline_ms = json.loads(line).get("deadline_ms")
        if not isinstance(deadline_ms, int) or deadline_ms < time.time() * 1000 - 1000:
            self.bad_deadlines += 1  # counted here, asserted by the test (not in this thread)
        with self._lock:
            kind = self.kinds[next(self._count) % len(self.kinds)]
        self.by_request[request.request_id] = kind
        return REPLIES[kind][0]()


@pytest.fixture(scope="module")
def bad_pald_lab(tmp_path_factory, lab_factory):
    sock = tmp_path_factory.mktemp("pald") / "pald.sock"
    # the hook knows the lab's nodes have 4 GPUs: a slot s9 cannot exist
    lab = lab_factory(hook=HOOK, env={"PAL_SOCKET": str(sock), "PAL_TIMEOUT_MS": "150",
                                      "PAL_MAX_GPUS_PER_NODE": "4"})
    return lab, sock


def _wait_all_finished(lab, ids: set[int], timeout: float = 180.0) -> dict[int, object]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = {j.job_id: j for j in lab.reader.jobs()}
        pending = [i for i in ids if i not in jobs or jobs[i].state in
                   ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")]
        if not pending or time.monotonic() > deadline:
            return jobs
        time.sleep(0.5)


def test_no_bad_reply_stops_a_job(bad_pald_lab):
    lab, sock = bad_pald_lab
    pald = MisbehavingPald()
    rejected, ids, walls = [], set(), []
    with TinyPald(sock, answer=pald.answer) as server:
        for _ in range(JOBS):
            t0 = time.monotonic()
            out = subprocess.run(
                ["sbatch", "--parsable", "--output=/dev/null", "--gres=gpu:1",
                 "--comment=pal:class=resnet", "--wrap", "true"],
                env=lab.client_env(), capture_output=True, text=True, timeout=30)
            walls.append(time.monotonic() - t0)
            if out.returncode != 0:
                rejected.append(out.stderr.strip())
            else:
                ids.add(int(out.stdout.strip().split(";")[0]))
        jobs = _wait_all_finished(lab, ids)

    assert rejected == []
    assert len(ids) == JOBS and len(server.received) == JOBS
    assert pald.bad_deadlines == 0
    mine = {i: j for i, j in jobs.items() if i in ids}
    ghosts = sorted(set(jobs) - ids)  # a fresh lab: any other job is one sbatch never reported
    assert ghosts == []
    states = {i: j.state for i, j in mine.items()}
    assert sorted(states) == sorted(ids)  # every job Slurm has, and no other
    assert [i for i, s in states.items() if s != "COMPLETED"] == [], states

    # each job carries the tag its reply deserved; passed jobs kept their own request
    seen_kinds = {kind: 0 for kind in REPLIES}
    for job in mine.values():
        req_id = request_id(job.admin_comment)
        kind = pald.by_request[req_id]
        seen_kinds[kind] += 1
        assert job.admin_comment.startswith(REPLIES[kind][1]), (kind, job.admin_comment)
        assert not is_pal_held(job)
        if kind == "good":
            assert job.tres_per_node == "gres:gpu:s3:1" and job.nodes == ("gpu02",)
        else:
            assert job.tres_per_node == "gres:gpu:1" and job.node_count == 1, (kind, job)
    assert seen_kinds == {kind: JOBS // len(REPLIES) for kind in REPLIES}

    # the hook kept to its deadline: sbatch itself (a fork + RPC, slow on a loaded machine)
    # plus at most ~150 ms; far below MessageTimeout (10 s), past which sbatch fails and
    # slurmctld still runs the job (a ghost)
    walls.sort()
    assert walls[len(walls) // 2] < 1.0 and walls[-1] < 5.0, (walls[len(walls) // 2], walls[-1])


def test_jobs_whose_nodes_the_hook_cannot_check_run_where_slurm_puts_them(bad_pald_lab):
    """A placement on gpu02 for a job that needs a feature only gpu01 has, or that excludes
    gpu02: pinning it made sbatch fail ("Requested node configuration is not available",
    "Invalid node name specified"). The hook places --constraint jobs only when pald says it
    judged them (it cannot see node features itself; this pald does not) and refuses a
    placement on an excluded node; every job runs."""
    lab, sock = bad_pald_lab
    env = lab.client_env()
    subprocess.run(["scontrol", "update", "nodename=gpu01", "AvailableFeatures=fast",
                    "ActiveFeatures=fast"], env=env, check=True, capture_output=True)
    place_gpu02 = _place({"gpu02": [1]}, "gres:gpu:s1:1")
    try:
        with TinyPald(sock, answer=lambda line: place_gpu02) as pald:
            ids = {}
            for args in [("--constraint=fast",)] * 5 + [("--exclude=gpu02",)] * 5:
                out = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--gres=gpu:1",
                                      "--comment=pal:class=resnet", *args, "--wrap", "true"],
                                     env=env, capture_output=True, text=True, timeout=30)
                assert out.returncode == 0, out.stderr
                ids[int(out.stdout.strip().split(";")[0])] = args[0]
            jobs = _wait_all_finished(lab, set(ids))
        assert len(pald.received) == 10
        for job_id, arg in ids.items():
            job = jobs[job_id]
            assert job.state == "COMPLETED", (arg, job)
            if arg == "--constraint=fast":
                assert job.admin_comment.startswith("pal:pass=constraint") and job.nodes == ("gpu01",)
            else:
                assert job.admin_comment.startswith("pal:pass=bad-reply;") and "gpu02" not in job.nodes
    finally:
        subprocess.run(["scontrol", "update", "nodename=gpu01", "AvailableFeatures=",
                        "ActiveFeatures="], env=env, capture_output=True)
