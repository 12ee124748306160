"""pald's decision state has one owner: submissions answered on the socket thread and the
cycle running in its worker thread never promise the same GPU twice."""

import re
import sys
import threading
from dataclasses import replace

import pytest

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.model import DecisionKind

from .builders import held_job, node_info, request

NODES = [f"gpu{i:02d}" for i in range(1, 9)]  # 8 nodes x 4 GPUs


class FakeSlurm:
    """Reader and actuator in one: a released job runs on the slots it was given (its GPUs
    busy in the next view); no job ever ends, so every GPU can be promised at most once."""

    def __init__(self, held):
        self.lock = threading.Lock()
        self.held = {j.job_id: j for j in held}
        self.running = {}  # job id -> {node: slots}
        self.promises = []  # (who, node, slot)

    def nodes(self):
        with self.lock:
            used = {}
            for alloc in self.running.values():
                for node, slots in alloc.items():
                    used.setdefault(node, set()).update(slots)
            return [node_info(n, used=sorted(used.get(n, ()))) for n in NODES]

    def site(self, nodes, partitions=None):
        return None  # no partitions: every GPU node is eligible

    def jobs(self):
        with self.lock:
            out = list(self.held.values())
            for jid, alloc in self.running.items():
                out.append(replace(held_job(jid), state="RUNNING", reason="None", priority=1,
                                   nodes=tuple(alloc), gpu_slots={n: frozenset(s) for n, s in alloc.items()}))
            return out

    def place_held_job(self, job_id, nodes, gres_spec, release=True, partition=None):
        slots = tuple(int(s) for s in re.findall(r"s(\d+)", gres_spec))
        with self.lock:
            self.held.pop(job_id)
            self.running[job_id] = {n: slots for n in nodes}
            self.promises += [(f"job:{job_id}", n, s) for n in nodes for s in slots]

    def place_nodes(self, job_id, nodes, release=True, partition=None):
        raise AssertionError("per-node jobs with equal slots are pinned to slots")

    def release(self, job_id):
        raise AssertionError("every held job here has a shape")


@pytest.fixture
def busy_switching():
    """Switch threads every microsecond, so a missing lock shows: with pald's lock replaced by a
    no-op, a round failed 8 times in 30 (measured), so 8 rounds catch it in ~9 runs of 10."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


@pytest.mark.parametrize("round_", range(8))
def test_submissions_racing_the_cycle_never_share_a_gpu(tmp_path, busy_switching, round_):
    held = [held_job(100 + i, gpn=2, submit=i) for i in range(8)]  # 16 GPUs wanted by held jobs
    slurm = FakeSlurm(held)
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb"),
                                     reservation_ttl_s=3600, user_reservations_max=1000))  # one user asks 48 times
    pald = Pald(cfg, None, slurm, slurm)
    pald.sync_and_cycle()  # a view, and leadership
    slurm.held = {j.job_id: j for j in held}  # the first cycle released them: hold them again
    slurm.running.clear()
    slurm.promises.clear()
    pald.service.clear_reservations()
    pald.service.observe_cluster(pald.service.view.with_free(range(32)), now=pald.clock())

    replies = []
    start = threading.Barrier(5)

    def submit(t):
        start.wait()
        for i in range(12):
            r = pald.handle(request("resnet", gpn=1, mode="now", rid=f"t{t}-{i}"))
            replies.append(r)

    def cycle():
        start.wait()
        for _ in range(20):
            pald.sync_and_cycle()

    threads = [threading.Thread(target=submit, args=(t,)) for t in range(4)] + [threading.Thread(target=cycle)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    placed = [r for r in replies if r.decision is DecisionKind.PLACE]
    promised = [(n, s) for r in placed for n, slots in r.nodes.items() for s in slots]
    promised += [(n, s) for _who, n, s in slurm.promises]
    assert len(replies) == 48
    assert len(promised) == len(set(promised)), "a GPU was promised twice"
    assert len(promised) == 32  # 48 one-GPU asks + 16 held GPUs > 32: every GPU went, once
    assert all(r.decision is DecisionKind.PASS and r.reason == "no_room" for r in replies if r not in placed)
