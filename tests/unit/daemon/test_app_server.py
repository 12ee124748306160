"""pald's app and socket server, in process: a real asyncio unix socket, fake Slurm, memory
or failing store. (The real Slurm + hook path is in tests/integration.)"""

import asyncio
import json
import socket
import threading
import time

import pytest

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.protocol import HealthRequest, ReloadRequest, encode_request
from pal_slurm.daemon.server import SocketServer
from pal_slurm.model import DecisionKind
from pal_slurm.slurm.errors import SlurmUnsupported
from pal_slurm.store.errors import StoreUnavailable
from pal_slurm.store.memory import MemoryRepository

from .builders import FakeActuator, acts, FakeReader, ServerThread, held_job, node_info, request, snapshot


def make_pald(tmp_path, store=None, jobs=(), leader=None):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info(f"gpu{i:02d}") for i in range(1, 5)], jobs)
    return Pald(cfg, store, reader, FakeActuator(), leader=leader)


class FlakyStore:
    """A memory repository that can be switched off (like a database going away)."""

    def __init__(self):
        self.repo = MemoryRepository()
        self.down = False

    def __getattr__(self, name):
        attr = getattr(self.repo, name)

        def call(*a, **k):
            if self.down:
                raise StoreUnavailable("database down")
            return attr(*a, **k)

        return call


def test_place_records_decisions_and_survives_the_store_going_down(tmp_path):
    store = FlakyStore()
    store.repo.write_ranking("optimal", snapshot({"A": {("gpu01", 0): (3.0, 3.0)}}).entries)
    pald = make_pald(tmp_path, store)
    pald.refresh_store()
    pald.sync_and_cycle()
    assert pald.service.rank_version >= 1
    r = pald.handle(request("resnet", gpn=4, rid="abc"))
    assert r.decision is DecisionKind.PLACE and "gpu01" not in r.nodes
    assert pald.flush_decisions() == 1
    assert store.repo.decisions("req:abc")[0].kind is DecisionKind.PLACE

    store.down = True
    pald.refresh_store()  # keeps the ranking it had
    r2 = pald.handle(request("resnet", gpn=4, rid="def"))
    assert r2.decision is DecisionKind.PLACE and "gpu01" not in r2.nodes
    assert pald.flush_decisions() == 0 and pald.link.buffered == 1
    health = pald.handle(HealthRequest())
    assert health.status == "degraded" and health.details["store"] == "unreachable"
    assert health.details["buffered_decisions"] == 1 and "database down" in health.details["store_error"]

    store.down = False
    pald.refresh_store()
    assert pald.flush_decisions() == 1  # nothing lost
    assert store.repo.decisions("req:def")
    assert pald.handle(HealthRequest()).status == "ok"


def test_slurm_failure_is_degraded_not_fatal(tmp_path):
    pald = make_pald(tmp_path)
    pald.sync_and_cycle()
    pald.reader.fail = RuntimeError("sinfo: connection refused")
    pald.sync_and_cycle()
    h = pald.health()
    assert h.status == "degraded" and h.details["slurm"] == "unreachable"
    # still answers from the last view
    assert pald.handle(request(gpn=1)).decision is DecisionKind.PLACE


def test_unsupported_slurm_is_reported_and_jobs_pass(tmp_path):
    """A Slurm whose JSON pal-slurm cannot read (an upgrade ahead of pal-slurm): pald keeps
    running, says so in its health, and PAL jobs pass to Slurm untouched (no view, no place)."""
    pald = make_pald(tmp_path)
    pald.reader.fail = SlurmUnsupported("Slurm 27.05.1 (data_parser default) printed JSON pal-slurm "
                                        "cannot read (scontrol --json has no 'nodes' field)")
    for _ in range(3):  # every cycle fails the same way; none raises
        pald.sync_and_cycle()
    h = pald.health()
    assert h.status == "degraded" and h.details["slurm"] == "unsupported"
    assert "Slurm 27.05.1" in h.details["slurm_error"]
    assert pald.handle(request(gpn=1)).decision is DecisionKind.PASS
    pald.reader.fail = None
    pald.sync_and_cycle()
    h = pald.health()
    assert h.status == "ok" and h.details["slurm_error"] is None
    assert h.details["slurm_release"] == "Slurm 22.05.8 (openapi v0.0.38)"
    assert pald.handle(request(gpn=1)).decision is DecisionKind.PLACE


def test_cycle_releases_held_jobs_and_heartbeat_is_written(tmp_path):
    pald = make_pald(tmp_path, jobs=[held_job(7, gpn=2, submit=5)])
    pald.sync_and_cycle()
    assert pald.actuator.calls == [("place", 7, ("gpu01",), "gpu:s0:1,gpu:s1:1"),
                                   ("admin_comment", 7, "pal:defer;req=x pal:released")]
    pald.heartbeat()
    doc = json.loads((tmp_path / "hb").read_text())
    assert doc["pid"] > 0 and abs(doc["at"] - time.time()) < 60


@pytest.fixture
def running_server(tmp_path):
    pald = make_pald(tmp_path)
    pald.sync_and_cycle()
    path = str(tmp_path / "pald.sock")
    with ServerThread(pald.handle, path):
        yield path, pald


def ask(path, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(payload)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def test_socket_answers_place_health_reload_and_typed_errors(running_server):
    path, pald = running_server
    import os
    import stat

    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    r = ask(path, encode_request(request("bert", gpn=2, rid="x1")))
    assert r["ok"] and r["decision"] == "place" and r["gres"].startswith("gres:gpu:s")
    assert ask(path, encode_request(HealthRequest()))["status"] in ("ok", "degraded")
    assert ask(path, encode_request(ReloadRequest()))["ok"]
    assert ask(path, b"not json\n")["error"]["code"] == "not_json"
    assert ask(path, b'{"v":9,"op":"health"}\n')["error"]["code"] == "bad_version"
    assert ask(path, b"x" * 70000 + b"\n")["error"]["code"] == "too_long"
    # the server is still fine after all that
    assert ask(path, encode_request(request("bert", gpn=2)))["decision"] == "place"


def test_forbidden_peer(tmp_path):
    pald = make_pald(tmp_path)
    path = str(tmp_path / "p.sock")

    async def go():
        server = SocketServer(pald.handle, path, allowed_uids={123456})
        await server.start()
        reader, writer = await asyncio.open_unix_connection(path)
        writer.write(encode_request(HealthRequest()))
        await writer.drain()
        line = await reader.readline()
        writer.close()
        await server.close()
        return json.loads(line)

    assert asyncio.run(go())["error"]["code"] == "forbidden"


def test_place_request_whose_fields_disagree_with_the_raw_comment_is_passed(tmp_path):
    """Defence in depth: pald re-parses the raw comment (comment_grammar.verify_spec)."""
    from pal_slurm.model.comment_grammar import CommentSpec
    from pal_slurm.daemon.protocol import JobFields, PlaceRequest

    pald = make_pald(tmp_path)
    pald.sync_and_cycle()
    forged = PlaceRequest(JobFields(uid=1000, comment="pal:class=resnet,mode=later", gpus_per_node=1),
                          CommentSpec("resnet", mode="now"), request_id="x1")
    reply = pald.handle(forged)
    assert reply.decision is DecisionKind.PASS and reply.reason == "bad_comment:bad_mode"
    assert "mode='later'" in reply.warning
    mismatch = PlaceRequest(JobFields(uid=1000, comment="pal:class=bert", gpus_per_node=1),
                            CommentSpec("resnet"), request_id="x2")
    assert pald.handle(mismatch).reason == "bad_comment:mismatch"
    assert pald.handle(request(gpn=1, rid="x3")).decision is not DecisionKind.PASS


def test_standby_passes_and_does_not_release(tmp_path):
    from pal_slurm.store.leader import FileLockLeader

    lock = str(tmp_path / "pald.leader")
    first = make_pald(tmp_path, jobs=[held_job(7, gpn=2, submit=5)], leader=FileLockLeader(lock))
    second = make_pald(tmp_path, jobs=[held_job(7, gpn=2, submit=5)], leader=FileLockLeader(lock))
    first.sync_and_cycle()
    second.sync_and_cycle()
    assert first.leading and not second.leading
    assert first.actuator.calls and not second.actuator.calls
    r = second.handle(request(gpn=1))
    assert r.decision is DecisionKind.PASS and r.reason == "standby"
    assert second.health().details["leader"] is False
    assert second.health().details["counts"]["standby"] == 1  # standby passes are counted
    first.leadership.leader.release()  # the active pald dies
    second.sync_and_cycle()
    assert second.leading and second.handle(request(gpn=1)).decision is DecisionKind.PLACE


def test_a_failing_sync_is_logged_once_per_kind_and_stales_the_heartbeat(tmp_path, caplog):
    """Finding 1: the decode error's byte offset changed every cycle and flooded the log;
    and the heartbeat stayed fresh, so pal-failsafe never released the held jobs."""
    from pal_slurm.daemon.failsafe import heartbeat_age

    clock = [1000.0]
    pald = make_pald(tmp_path)
    pald.clock = lambda: clock[0]
    pald.sync_and_cycle()
    pald.heartbeat()
    assert heartbeat_age(str(tmp_path / "hb"), now=clock[0]) == 0.0
    caplog.set_level("ERROR", logger="pald")
    for offset in range(5):
        clock[0] += 1.0
        pald.reader.fail = UnicodeDecodeError("utf-8", b"caf\xe9", 1000 + offset, 1001 + offset,
                                              "invalid continuation byte")
        pald.sync_and_cycle()
        pald.heartbeat()
    assert len([r for r in caplog.records if r.name == "pald" and r.levelname == "ERROR"]) == 1
    assert heartbeat_age(str(tmp_path / "hb"), now=clock[0]) == 5.0  # age of the last good cycle
    assert pald.health().status == "degraded"
    pald.reader.fail = None
    pald.sync_and_cycle()
    pald.heartbeat()
    assert heartbeat_age(str(tmp_path / "hb"), now=clock[0]) == 0.0


def _with_deadline(req, deadline_ms):
    from dataclasses import replace

    return replace(req, deadline_ms=deadline_ms)


def test_a_request_read_after_its_deadline_records_reserves_and_counts_nothing(tmp_path):
    """Finding 3: a frozen pald answered requests the hook had given up on."""
    clock = [1000.0]
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    pald.clock = lambda: clock[0]
    pald.sync_and_cycle()
    late = pald.handle(_with_deadline(request(gpn=2, rid="late"), 999_999))  # 1 ms ago
    assert (late.decision, late.reason) == (DecisionKind.PASS, "late")
    assert pald.service.reservations == {} and pald.service.queue.held_jobs == 0
    assert pald.counts["place"] == 0 and pald.counts["late"] == 1
    ok = pald.handle(_with_deadline(request(gpn=2, rid="ok"), 1_000_150))
    assert ok.decision is DecisionKind.PLACE and list(pald.service.reservations) == ["req:ok"]
    pald.flush_decisions()
    assert store.decisions("req:late") == [] and [d.job_id for d in store.decisions("req:ok")] == ["req:ok"]


def test_a_deadline_passing_while_pald_decides_undoes_the_decision(tmp_path):
    """The second check, just before the reply is written: the reservation and the held-job
    count that `place` made are taken back."""
    from pal_slurm.model.comment_grammar import CommentSpec
    from pal_slurm.daemon.protocol import JobFields, PlaceRequest

    ticks = iter([1000.0, 1000.0])  # the first check and `now`; then the deadline has passed
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    pald.sync_and_cycle()
    pald.clock = lambda: next(ticks, 1000.2)
    req = PlaceRequest(JobFields(uid=1, comment="pal:class=resnet,mode=defer", gpus_per_node=2),
                       CommentSpec("resnet", mode="defer"), request_id="slow", deadline_ms=1_000_100)
    reply = pald.handle(req)
    assert reply.reason == "late"
    assert pald.service.queue.held_jobs == 0 and pald.service.reservations == {}
    pald.flush_decisions()
    assert store.decisions("req:slow") == []


def _defer_request(rid: str, deadline_ms: int):
    from pal_slurm.model.comment_grammar import CommentSpec
    from pal_slurm.daemon.protocol import JobFields, PlaceRequest

    return PlaceRequest(JobFields(uid=1, comment="pal:class=resnet,gpus=4", gpus_per_node=4),
                        CommentSpec("resnet", gpus=4), request_id=rid, deadline_ms=deadline_ms)


def test_an_answer_to_a_hook_that_gave_up_and_closed_is_taken_back_not_recorded(tmp_path):
    """Finding 3, the last window: pald passed both deadline checks, then froze before the
    server wrote the reply; the hook had given up, closed its socket and passed the job as
    submitted. Through the real socket server: the write fails, so what `answer` decided is
    taken back (no reservation), counted late and never recorded."""
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    pald.sync_and_cycle()
    gone = threading.Event()

    def frozen_before_the_write(request):
        reply = pald.answer(request)
        gone.wait(5)  # SIGSTOP between the answer and the write, until the hook has closed
        time.sleep(0.05)
        return reply

    path = str(tmp_path / "pald.sock")
    with ServerThread(frozen_before_the_write, path, settle=pald.settle):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(encode_request(_defer_request("gave-up", int(time.time() * 1000) + 60_000)))
        gone.set()  # the hook's deadline passed: it closed without a reply
        wait = time.monotonic() + 5
        while pald.counts["late"] == 0 and time.monotonic() < wait:
            time.sleep(0.01)
        assert pald.counts["late"] == 1 and pald.counts["place"] == 0
        assert pald.service.reservations == {}
    assert pald.requests.unsettled == {}
    pald.flush_decisions()
    assert store.decisions("req:gave-up") == []


def test_an_answer_written_just_past_its_deadline_and_read_keeps_its_gpus(tmp_path):
    """The hook still takes a reply that is waiting when it looks, and `deadline_ms` is the
    floor of its deadline: a placement written a little past `deadline_ms` (pald's clock read
    after the write) may be in the job. Taking it back let the next request double-book its
    GPUs (CI: a 2-GPU job placed on gpu01 beside a 4-GPU job there). It stays reserved, and
    is counted and recorded."""
    clock = [1000.0]
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    pald.clock = lambda: clock[0]
    pald.sync_and_cycle()

    def slow_write(request):
        reply = pald.answer(request)
        clock[0] += 0.01  # the write lands just past deadline_ms
        return reply

    path = str(tmp_path / "pald.sock")
    with ServerThread(slow_write, path, settle=pald.settle):
        first = ask(path, encode_request(_defer_request("first", int(clock[0] * 1000) + 5)))
        second = ask(path, encode_request(_defer_request("second", int(clock[0] * 1000) + 5)))
    assert first["decision"] == second["decision"] == "place"
    assert set(first["nodes"]).isdisjoint(second["nodes"])  # not the same node twice
    assert pald.counts["place"] == 2 and pald.counts["late"] == 0
    assert set(pald.service.reservations) == {"req:first", "req:second"}
    pald.flush_decisions()
    assert [d.kind for d in store.decisions("req:first")] == [DecisionKind.PLACE]


def test_an_answer_the_server_could_not_write_is_taken_back(tmp_path):
    """Settled once: a second settle of the same request changes nothing."""
    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    pald.sync_and_cycle()
    req = request(gpn=2, rid="gone")
    reply = pald.answer(req)
    assert reply.decision is DecisionKind.PLACE and list(pald.service.reservations) == ["req:gone"]
    pald.settle(req, reply, written=False)  # the hook closed its end first
    assert pald.service.reservations == {} and pald.counts["place"] == 0 and pald.counts["late"] == 1
    pald.settle(req, reply, written=True)  # settled once: a second call changes nothing
    assert pald.counts["place"] == 0
    pald.flush_decisions()
    assert store.decisions("req:gone") == []


def test_deferred_jobs_get_an_admin_hold_and_an_outside_release_is_recorded_once(tmp_path):
    """Finding 8: the hook's priority-0 hold is a user hold its owner can lift."""
    from dataclasses import replace
    store = MemoryRepository()
    names = [f"gpu{i:02d}" for i in range(1, 5)]
    # full: a running job holds every GPU (GPUs no job holds would free in a moment)
    full = replace(held_job(9, gpn=4, nodes=4), state="RUNNING", reason="None", priority=1, nodes=tuple(names),
                   gpu_slots={n: frozenset(range(4)) for n in names}, start_time=int(time.time()),
                   time_limit_s=86_400.0)
    jobs = [held_job(1, gpn=4, submit=1), held_job(2, gpn=4, submit=2), full]
    pald = make_pald(tmp_path, store=store, jobs=jobs)
    pald.reader._nodes = [node_info(n, used=range(4)) for n in names]
    pald.sync_and_cycle()
    assert pald.actuator.calls == [("hold", (1, 2))]  # nothing fits: both made admin holds
    pald.reader._jobs = [held_job(1, gpn=4, submit=1).__class__(
        **{**held_job(1, gpn=4, submit=1).__dict__, "reason": "JobHeldAdmin"}),
        held_job(2, gpn=4, submit=2).__class__(**{**held_job(2).__dict__, "state": "RUNNING", "priority": 1}), full]
    pald.sync_and_cycle()  # job 2 was released by someone else and runs
    assert pald.actuator.calls == [("hold", (1, 2))]  # admin-held already: no second hold
    assert pald.counts["released_outside"] == 1 and pald.held.deferred == {1}
    pald.flush_decisions()
    reasons = [d.reason for d in store.decisions("2")]  # newest first; before it, the first cycle's plan
    assert reasons[0] == "released_outside_pal" and reasons.count("released_outside_pal") == 1
    pald.sync_and_cycle()
    assert pald.counts["released_outside"] == 1  # once


def test_a_job_whose_placement_slurm_keeps_refusing_is_released_as_submitted(tmp_path):
    from pal_slurm.daemon.held_jobs import MAX_RELEASE_FAILURES

    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store, jobs=[held_job(7, gpn=2)])
    refusing = pald.actuator
    refusing.place_held_job = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("Invalid node name specified"))
    for _ in range(MAX_RELEASE_FAILURES - 1):
        pald.sync_and_cycle()
    assert ("release", 7) not in refusing.calls
    pald.sync_and_cycle()
    assert ("release", 7) in refusing.calls and pald.held.release_failures == {}
    pald.flush_decisions()
    assert [d.reason for d in store.decisions("7")] == ["released:placement_refused"]


def test_a_deferred_job_released_by_its_user_before_pald_ever_saw_it_is_held_again_once(tmp_path):
    """Finding 8's window: the hook's hold is a user hold until pald's first cycle makes it an
    admin hold. A job its user released in that window and that has not started is held again
    (once) and waits its turn; one that already runs is recorded, never placed."""
    from dataclasses import replace

    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store)
    pald.reader._nodes = [node_info(f"gpu{i:02d}", used=range(4)) for i in range(1, 5)]  # full
    pald.state.started = 100.0
    mine = replace(held_job(3, submit=150), state="PENDING", priority=1, reason="Priority")  # user-released
    ran = replace(held_job(5, submit=160), state="RUNNING", priority=1)  # released and started at once
    old = replace(held_job(4, submit=50), state="RUNNING", priority=1)  # an earlier pald's release
    pald.reader._jobs = [mine, ran, old]
    pald.sync_and_cycle()
    assert pald.actuator.calls == [("hold", 3)]
    assert pald.counts["reheld"] == 1 and pald.counts["released_outside"] == 1 and pald.held.noticed == {5}
    # Slurm now shows it under pald's admin hold: an ordinary deferred job, placed when room comes
    pald.reader._jobs = [replace(mine, priority=0, reason="JobHeldAdmin"), ran, old]
    pald.sync_and_cycle()
    assert pald.actuator.calls == [("hold", 3)] and pald.held.deferred == {3}
    pald.reader._nodes = [node_info(f"gpu{i:02d}") for i in range(1, 5)]  # room
    pald.sync_and_cycle()
    assert [c[:2] for c in acts(pald.actuator.calls)[1:]] == [("place", 3)]
    # released again behind pald's back (an operator, after the admin hold): that release stands
    pald.reader._jobs = [replace(mine, job_id=6, submit_time=170)]
    pald.held.admin_held.add(6)
    pald.held.deferred.add(6)
    pald.sync_and_cycle()
    assert pald.counts["reheld"] == 1 and pald.held.noticed == {6}
    pald.flush_decisions()
    assert [d.reason for d in reversed(store.decisions("3"))] == ["reheld:released_by_user", "released:pal-fit"]
    assert [d.reason for d in store.decisions("5")] == ["released_outside_pal"]


def test_a_released_job_that_does_not_start_is_placed_anew_then_unpinned(tmp_path):
    """A job pald pinned and released that has not started `release_start_s` later (its node
    drained after the release): its node pin is dropped and it is held again, so the next
    cycle places it on what is free then; stuck a second time it is left to Slurm unpinned."""
    from dataclasses import replace

    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store, jobs=[held_job(7, gpn=2, submit=1)])
    bound = pald.config.daemon.release_start_s
    t = [1000.0]
    pald.clock = lambda: t[0]
    pald.sync_and_cycle()
    assert [c[:2] for c in acts(pald.actuator.calls)] == [("place", 7)]
    first = acts(pald.actuator.calls)[0][2]
    released = replace(held_job(7, gpn=2, submit=1), priority=1, reason="ReqNodeNotAvail", required_nodes=first)
    pald.reader._jobs = [released]
    t[0] += bound - 1
    pald.sync_and_cycle()  # not yet
    assert len(acts(pald.actuator.calls)) == 1
    t[0] += 2
    pald.sync_and_cycle()
    # tagged and held before its pin is dropped: unheld and unpinned, Slurm would start it at once
    assert acts(pald.actuator.calls)[1:] == [("hold", 7), ("unpin", 7)] and pald.counts["unstuck"] == 1
    assert pald.actuator.calls[-3] == ("admin_comment", 7, "pal:defer;req=x pal:defer;unstuck=1")  # pald's hold
    pald.reader._jobs = [replace(held_job(7, gpn=2, submit=1), reason="JobHeldAdmin")]
    pald.reader._nodes = [node_info(n.name, used=range(4) if n.name in first else ()) for n in pald.reader._nodes]
    t[0] += 1
    pald.sync_and_cycle()  # placed anew, away from the node it was stuck on
    assert [c[:2] for c in acts(pald.actuator.calls)[3:]] == [("place", 7)]
    assert not set(acts(pald.actuator.calls)[3][2]) & set(first)
    pald.reader._jobs = [replace(released, required_nodes=acts(pald.actuator.calls)[3][2])]
    t[0] += bound + 1
    pald.sync_and_cycle()  # stuck again: no second try, Slurm runs it wherever it can
    assert acts(pald.actuator.calls)[4:] == [("unpin", 7)] and pald.counts["unstuck"] == 2
    t[0] += bound + 1
    pald.sync_and_cycle()
    assert len(acts(pald.actuator.calls)) == 5  # once
    pald.flush_decisions()
    assert [d.reason for d in reversed(store.decisions("7"))] == [
        "released:pal-fit", "unstuck:replace", "released:pal-fit", "unstuck:unpinned"]


def test_a_held_job_s_reservation_is_logged_recorded_and_shown_once_until_its_nodes_change(tmp_path, caplog):
    """A held per-node job that waited `reserve_after_s` holds a backfill reservation: pald
    logs it and records it for `palctl explain` when it first holds one and again only when it
    holds other nodes (not every cycle), and its health reply names the nodes and when."""
    import logging
    from dataclasses import replace

    from pal_slurm.config import PolicyConfig
    from pal_slurm.engine import ManualClock

    store = MemoryRepository()
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb")),
                 policy=PolicyConfig(placement="pal-fit", reserve_after_s=10.0))
    busy = {"gpu01": 3000, "gpu02": 3000, "gpu03": 500}  # node -> the time limit of the job running there
    running = [replace(held_job(i, gpn=4), state="RUNNING", reason="None", priority=1, nodes=(node,),
                       gpu_slots={node: frozenset(range(4))}, start_time=50, time_limit_s=limit)
               for i, (node, limit) in enumerate(busy.items(), start=1)]
    nodes = [node_info(f"gpu{i:02d}", used=range(4) if f"gpu{i:02d}" in busy else ()) for i in range(1, 5)]
    wide = held_job(10, gpn=4, nodes=2, submit=0, tag="pal:defer;req=w", time_limit_s=3600)
    clock = ManualClock(100.0)
    pald = Pald(cfg, store, FakeReader(nodes, [*running, wide]), FakeActuator(), clock=clock)
    with caplog.at_level(logging.INFO, logger="pald"):
        pald.sync_and_cycle()
        clock.t = 150.0
        pald.sync_and_cycle()  # the same nodes: nothing new to say
    assert [c for c in pald.actuator.calls if c[0] != "hold"] == []  # one node free, two wanted: it waits
    said = [r.getMessage() for r in caplog.records if "reservation" in r.getMessage()]
    assert said == ["job 10 waits with a reservation on gpu[03-04], planned start in 450 s"]
    planned = pald.health().details["planned_starts"]
    assert planned == {"10": {"nodes": "gpu[03-04]", "in_s": 400.0}}
    # gpu03's job now runs longer than gpu01's: the reservation moves (to the lowest names ready by
    # then, as Slurm's node selection takes them), and says so once more
    pald.reader._jobs = [replace(running[2], time_limit_s=9000), *running[:2], wide]
    pald.sync_and_cycle()
    pald.flush_decisions()
    reasons = [(d.kind, d.reason, sorted(d.nodes)) for d in reversed(store.decisions("10"))]
    assert reasons == [(DecisionKind.DEFER, "reserved:start_in_s=450", ["gpu03", "gpu04"]),
                       (DecisionKind.DEFER, "reserved:start_in_s=2900", ["gpu01", "gpu02"])]
    # a cycle that leaves it without a reservation for a moment, then the same nodes again: not
    # news; once it is no longer held, pald forgets what it said about it
    planned, said_before = dict(pald.service.planned), len(pald.state.reserved_on)
    pald.service.planned = {}
    pald.held_cycle.note_planned_starts(200.0, {"10"})
    pald.service.planned = planned
    with caplog.at_level(logging.INFO, logger="pald"):
        caplog.clear()
        pald.held_cycle.note_planned_starts(201.0, {"10"})
        assert not [r for r in caplog.records if "reservation" in r.getMessage()]
    pald.service.planned = {}
    pald.held_cycle.note_planned_starts(202.0, set())
    assert said_before == 1 and pald.state.reserved_on == {}


def test_palds_loop_runs_its_cycles_at_the_multiples_of_cycle_s_on_the_epoch_clock(tmp_path):
    """Whatever a cycle costs (here 0-60 ms) and whenever pald started (here half a cycle past
    a multiple), each cycle after the first starts at a multiple of cycle_s: the phase a
    replay's prediction runs pald's cycle on (replay.harness.pald_clock). A loop that waited
    out the rest of each cycle would keep the start's phase, 0.1 s past the multiples."""
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb"),
                                     cycle_s=0.2))
    pald = Pald(cfg, None, FakeReader([node_info("gpu01")], ()), FakeActuator())
    starts: list[float] = []

    def cycle():
        starts.append(time.time())
        time.sleep(0.06 * (len(starts) % 2))

    pald.turn = cycle  # type: ignore[method-assign]

    async def main():
        stop = asyncio.Event()
        task = asyncio.create_task(pald.run_loops(stop))
        await asyncio.sleep(1.5)
        stop.set()
        await task

    time.sleep((0.1 - time.time() % 0.2) % 0.2)  # start 0.1 s past a multiple of 0.2
    asyncio.run(main())
    assert 0.05 < starts[0] % 0.2 < 0.15  # the first cycle at once, half a cycle off
    assert len(starts) >= 6
    late = sorted(t % 0.2 for t in starts[1:])
    # most cycles start on a multiple (a loaded host wakes some late: 3 of 8 by 0.07 s or more
    # on a 2-core host running three lab suites beside it); a loop that kept the start's phase
    # would have every one 0.1 s or more past, so the median tells them apart
    assert late[len(late) // 2] < 0.05, late


def test_a_stuck_release_held_again_whose_unpin_slurm_refuses_still_waits_for_its_new_placement(tmp_path):
    """The hold comes first; an unpin Slurm then refuses leaves the job held on its old pin,
    which the next placement replaces: it is counted and recorded as held again, the refusal
    as an error."""
    from dataclasses import replace

    from pal_slurm.slurm.errors import SlurmError

    store = MemoryRepository()
    pald = make_pald(tmp_path, store=store, jobs=[held_job(7, gpn=2, submit=1)])
    t = [1000.0]
    pald.clock = lambda: t[0]
    pald.sync_and_cycle()
    first = acts(pald.actuator.calls)[0][2]
    pald.reader._jobs = [replace(held_job(7, gpn=2, submit=1), priority=1, reason="ReqNodeNotAvail",
                                 required_nodes=first)]

    def refuse(job_id):  # type: ignore[no-untyped-def]
        raise SlurmError(f"scontrol refused job {job_id}")

    pald.actuator.unpin = refuse
    t[0] += pald.config.daemon.release_start_s + 1
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls)[1:] == [("hold", 7)] and pald.counts["unstuck"] == 1
    pald.flush_decisions()
    assert [d.reason for d in reversed(store.decisions("7"))] == ["released:pal-fit", "unstuck:replace"]
    assert pald.counts["errors"] == 1
