"""What a user writes reaches pald's submit path (`Pald.answer` -> `PlacementService.place`,
on the event loop, under the decision lock). Each hostile field here once cost pald seconds to
hours of CPU, hundreds of MB, or a RecursionError traceback per submission; each now gets an
answer from the real in-process place path (a placement that honours it, or a pass with a reason
token), one log line at most, and the next ordinary request is placed as before.

Timings are not asserted here: benchmarks/hostile_place.py prints them."""

from __future__ import annotations

import logging

import pytest

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.error_log import MAX_ERROR_KINDS, OnceLogger
from pal_slurm.daemon.protocol import JobFields, PlaceRequest
from pal_slurm.model import DecisionKind
from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.model.site import NodeFacts, PartitionFacts, SiteView
from pal_slurm.intake.hostlist import MAX_HOSTLIST_CHARS

from .builders import FakeActuator, FakeReader, held_job, node_info, request

DISTINCT_RANGES = ",".join(f"n[{i * 10}-{i * 10 + 4}]" for i in range(4000))  # 57 kB
BIG_RANGES = ",".join(["n[1-99999]"] * 5957)  # 64 KiB
assert len(DISTINCT_RANGES) <= MAX_HOSTLIST_CHARS and len(BIG_RANGES) <= MAX_HOSTLIST_CHARS

# (case, the job's fields, what pald answers: a decision, and the pass reason when it passes)
HOSTILE = [
    ("exclude ten copies of n[0-99999]", dict(exc_nodes=",".join(["n[0-99999]"] * 10)), DecisionKind.PLACE, None),
    ("exclude a[0-999]b[0-1999]", dict(exc_nodes="a[0-999]b[0-1999]"), DecisionKind.PLACE, None),
    ("exclude 57 kB of distinct ranges", dict(exc_nodes=DISTINCT_RANGES), DecisionKind.PLACE, None),
    ("exclude 64 KiB of n[1-99999]", dict(exc_nodes=BIG_RANGES), DecisionKind.PLACE, None),
    ("exclude over 64 KiB", dict(exc_nodes="n1," * 30_000), DecisionKind.PASS, "input-too-large:exclude"),
    ("exclude with 65 names of two groups", dict(exc_nodes=",".join(f"a[{i}]b[0-9]" for i in range(65))),
     DecisionKind.PASS, "input-too-large:exclude"),
    ("exclude malformed", dict(exc_nodes="gpu[01-"), DecisionKind.PASS, "bad-input:exclude"),
    ("nodelist of a million names", dict(req_nodes=",".join(["n[0-99999]"] * 10)), DecisionKind.PASS,
     "nodelist_partial"),
    ("nodelist a[0-999]b[0-1999]", dict(req_nodes="a[0-999]b[0-1999]"), DecisionKind.PASS, "nodelist_partial"),
    ("nodelist over 64 KiB", dict(req_nodes="n1," * 30_000), DecisionKind.PASS, "input-too-large:nodelist"),
    ("constraint 600 deep", dict(features="(" * 600 + "f3" + ")" * 600), DecisionKind.PASS,
     "input-too-large:constraint"),
    ("constraint of 64 KiB", dict(features="f3&" * 21_000 + "f3"), DecisionKind.PASS, "input-too-large:constraint"),
    ("GRES index list of 3 million", dict(tres_per_node="gres:gpu:a100:1(IDX:0-2999999)"), DecisionKind.PASS,
     "input-too-large:gres"),
]


NAMES = ("gpu01", "gpu02", "gpu03", "gpu04")


def site() -> SiteView:
    """Features f3 on gpu03 (so a constraint is judged), one partition of the four nodes."""
    nodes = {n: NodeFacts(n, True, ("gpu",), frozenset({"f3"} if n == "gpu03" else ()), 16, 16, 4000, 4000, 4,
                          frozenset({"s0", "s1", "s2", "s3"})) for n in NAMES}
    return SiteView(nodes, {"gpu": PartitionFacts("gpu", frozenset(NAMES), default=True)}, {})


def make_pald(tmp_path):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info(n) for n in NAMES])
    reader.site_view = site()
    pald = Pald(cfg, None, reader, FakeActuator())
    pald.sync_and_cycle()
    assert pald.handle(request("resnet", gpn=1, rid="warm-up")).decision is DecisionKind.PLACE  # leadership taken
    pald.service.clear_reservations()
    return pald


def hostile_request(rid: str, **fields) -> PlaceRequest:
    job = JobFields(uid=1000, comment="pal:class=resnet", gpus_per_node=1, min_nodes=1, **fields)
    return PlaceRequest(job=job, pal=CommentSpec("resnet"), request_id=rid)


@pytest.mark.parametrize("case, fields, decision, reason", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_field_gets_an_answer_and_the_next_request_is_placed(tmp_path, caplog, case, fields,
                                                                   decision, reason):
    pald = make_pald(tmp_path)
    caplog.set_level(logging.DEBUG, logger="pald")
    caplog.clear()
    reply = pald.handle(hostile_request("hostile", **fields))
    assert reply.decision is decision, (case, reply)
    if reason is not None:
        assert reply.reason == reason
    if decision is DecisionKind.PLACE:
        assert set(reply.nodes) <= set(NAMES)
    assert not any(r.exc_info for r in caplog.records), "no traceback for what a user wrote"
    lines = [r for r in caplog.records if r.name == "pald" and r.levelno >= logging.WARNING]
    assert len(lines) <= 1 and all(len(r.getMessage()) < 500 for r in lines)
    if reason is not None and reason.startswith(("input-too-large:", "bad-input:")):
        assert len(lines) == 1 and reason in lines[0].getMessage()
    assert pald.counts["errors"] == 0
    after = pald.handle(request("resnet", gpn=2, rid="ordinary"))
    assert after.decision is DecisionKind.PLACE and len(next(iter(after.nodes.values()))) == 2


def test_exclude_read_as_a_matcher_keeps_pald_off_the_excluded_nodes(tmp_path):
    """Same answers as before for what users really write, however it is spelled."""
    pald = make_pald(tmp_path)
    for i, spelled in enumerate(["gpu[01-03]", "gpu01,gpu02,gpu03", "gpu[1-3],gpu[01-03]", "gpu0[1-3]"]):
        reply = pald.handle(hostile_request(f"r{i}", exc_nodes=spelled))
        assert reply.decision is DecisionKind.PLACE and set(reply.nodes) == {"gpu04"}, spelled
        pald.service.clear_reservations()
    reply = pald.handle(hostile_request("w", req_nodes="gpu0[2]"))
    assert reply.decision is DecisionKind.PLACE and set(reply.nodes) == {"gpu02"}


def test_held_seen_keeps_only_jobs_slurm_still_shows(tmp_path):
    """A set that grew with every deferred job for the life of pald."""
    from pal_slurm.store.memory import MemoryRepository

    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info(f"gpu{i:02d}", used=range(4)) for i in range(1, 5)],
                        [held_job(i, gpn=1) for i in range(1, 51)])
    pald = Pald(cfg, MemoryRepository(), reader, FakeActuator())
    pald.sync_and_cycle()
    assert pald.held.held_seen == set(range(1, 51))
    reader._jobs = [held_job(i, gpn=1) for i in range(40, 61)]
    pald.sync_and_cycle()
    assert pald.held.held_seen == set(range(40, 61))


def test_error_kinds_are_bounded_whatever_the_messages(caplog):
    """Error kinds are built from messages; messages can quote user text."""
    errors = OnceLogger()
    caplog.set_level(logging.ERROR, logger="pald")
    for i in range(3 * MAX_ERROR_KINDS):
        errors.error("request", ValueError(f"bad {'x' * (i % 50)} " + "y" * 10_000 + chr(0x4E00 + i)))
    assert len(errors.seen) <= MAX_ERROR_KINDS + 1
    assert all(len(k) < 300 for k in errors.seen)
    assert all(len(r.getMessage()) < 300 for r in caplog.records)
