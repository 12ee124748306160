"""PAL's mode per partition as pald applies it: `off` passes untouched, `shadow` decides as when
on, records it and keeps nothing, `on` places; `palctl mode` (a store switch) wins over pal.toml;
and where Slurm ran a shadow job is recorded for `palctl trial report`."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.protocol import PlaceRequest
from pal_slurm.model import DecisionKind
from pal_slurm.model.modes import PAL_STARTED, SHADOW_ENDED, SHADOW_PREFIX, SHADOW_STARTED
from pal_slurm.store.memory import MemoryRepository
from pal_slurm.store.switches import mode_switch

from .builders import FakeActuator, FakeReader, acts, held_job, node_info, request, snapshot

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def make(tmp_path, mode="on", partition_modes="", jobs=()):
    store = MemoryRepository()
    store.write_ranking("optimal", snapshot({"A": {("gpu01", 0): (3.0, 3.0)}}).entries)
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb"),
                                     mode=mode, partition_modes=partition_modes))
    pald = Pald(cfg, store, FakeReader([node_info(f"gpu{i:02d}") for i in range(1, 5)], jobs), FakeActuator())
    pald.refresh_store()
    pald.sync_and_cycle()
    return pald, store


def in_partition(req: PlaceRequest, partition: str) -> PlaceRequest:
    return replace(req, job=replace(req.job, partition=partition))


def decisions(pald, store):
    pald.flush_decisions()
    return list(reversed(store.decisions(limit=100)))


def test_a_job_whose_partitions_are_all_off_passes_untouched(tmp_path):
    pald, store = make(tmp_path, partition_modes="debug=off")
    reply = pald.handle(in_partition(request("resnet", gpn=1, nodes=1, rid="a"), "debug"))
    assert (reply.decision, reply.reason) == (DecisionKind.PASS, "partition_off") and not reply.nodes
    assert pald.counts["partition_off"] == 1 and not pald.service.reservations
    mixed = pald.handle(in_partition(request("resnet", gpn=1, nodes=1, rid="b"), "gpu,debug"))
    assert mixed.reason == "partition_off"  # the most cautious of its partitions
    on = pald.handle(in_partition(request("resnet", gpn=1, nodes=1, rid="c"), "gpu"))
    assert on.decision is DecisionKind.PLACE


def test_shadow_answers_pass_and_records_what_pald_would_have_done_keeping_nothing(tmp_path):
    pald, store = make(tmp_path, mode="shadow")
    first = pald.handle(request("resnet", gpn=2, nodes=1, rid="s1"))
    second = pald.handle(request("resnet", gpn=2, nodes=1, rid="s2"))
    assert [(r.decision, r.reason) for r in (first, second)] == [(DecisionKind.PASS, "shadow")] * 2
    assert not first.nodes and not second.nodes
    assert not pald.service.reservations  # nothing promised: Slurm places the job
    would = [d for d in decisions(pald, store) if d.reason.startswith(SHADOW_PREFIX)]
    assert [d.job_id for d in would] == ["req:s1", "req:s2"]
    assert all(d.kind is DecisionKind.PLACE and sum(map(len, d.nodes.values())) == 2 for d in would)
    assert would[0].nodes == would[1].nodes  # the first kept no GPUs from the second
    assert pald.counts["shadow"] == 2 and pald.counts["pass"] == 2 and pald.counts["place"] == 0


def test_the_stores_mode_switch_wins_and_releases_held_jobs_of_a_partition_turned_off(tmp_path):
    jobs = [replace(held_job(i, gpn=4, nodes=2, submit=i), partition="gpu") for i in (1, 2, 3, 4, 5)]
    pald, store = make(tmp_path, jobs=jobs)
    kinds = [c[0] for c in acts(pald.actuator.calls)]
    assert "release" not in kinds and kinds.count("place") < 5  # on: some wait held
    store.set_switch(mode_switch("gpu", "off", "root@ctl", NOW))
    pald.refresh_store()
    waiting = [c for c in jobs if ("place", c.job_id) not in {(k[0], k[1]) for k in acts(pald.actuator.calls)}]
    pald.reader._jobs = waiting
    pald.sync_and_cycle()
    assert acts(pald.actuator.calls)[-len(waiting):] == [("release", j.job_id) for j in waiting]
    reasons = {d.reason for d in decisions(pald, store)}
    assert "released:mode_off" in reasons
    reply = pald.handle(in_partition(request("resnet", gpn=1, nodes=1, rid="x"), "gpu"))
    assert reply.reason == "partition_off"


def test_where_slurm_ran_a_shadow_job_and_for_how_long_is_recorded(tmp_path):
    running = replace(held_job(42, gpn=2, tag="pal:pass=shadow;rank=v1;req=s9"), state="RUNNING", reason="None",
                      priority=1, gpu_slots={"gpu03": frozenset({1, 2})}, start_time=1000, submit_time=400,
                      partition="gpu")
    pald, store = make(tmp_path, mode="shadow", jobs=[running])
    pald.sync_and_cycle()  # seen running twice: recorded once
    started = [d for d in decisions(pald, store) if d.reason.startswith(SHADOW_STARTED)]
    assert [(d.job_id, d.reason, d.nodes) for d in started] == [
        ("42", f"{SHADOW_STARTED}req=s9;partition=gpu;wait_s=600", {"gpu03": (1, 2)})]
    pald.reader._jobs = [replace(running, state="COMPLETED", end_time=1600)]
    pald.sync_and_cycle()
    ended = [d.reason for d in decisions(pald, store) if d.reason.startswith(SHADOW_ENDED)]
    assert ended == [f"{SHADOW_ENDED}req=s9;run_s=600"]
    pald.sync_and_cycle()
    assert len([d for d in decisions(pald, store) if d.reason.startswith(SHADOW_ENDED)]) == 1


def test_a_job_pal_placed_is_recorded_as_pals_and_one_it_never_touched_not_at_all(tmp_path):
    placed = replace(held_job(43, gpn=2, tag="pal:placed=gpu01;req=p1"), state="RUNNING", reason="None",
                     priority=1, gpu_slots={"gpu01": frozenset({0, 1})}, start_time=1000, submit_time=940)
    failsafe = replace(placed, job_id=44, admin_comment="pal:defer;req=p2 pal:released;by=failsafe")
    untouched = replace(placed, job_id=45, admin_comment="")
    pald, store = make(tmp_path, jobs=[placed, failsafe, untouched])
    records = decisions(pald, store)
    assert not [d for d in records if d.reason.startswith(SHADOW_STARTED)]
    assert [(d.job_id, d.reason) for d in records if d.reason.startswith(PAL_STARTED)] == [
        ("43", f"{PAL_STARTED}req=p1;partition=;wait_s=60")]


# ---- default-on partitions -------------------------------------------------------------------
def default_on_request(rid, partition="gpu", name="train", comment=""):
    from pal_slurm.daemon.protocol import decode_request, encode_request

    req = in_partition(request("resnet", gpn=1, nodes=1, rid=rid), partition)
    wire = encode_request(replace(req, job=replace(req.job, comment=comment, name=name)))
    line = wire.replace(b'"pal":{"class":"resnet"}', b'"pal":{}')  # what the hook sends such a job
    assert b'"pal":{}' in line
    return decode_request(line)


def make_default_on(tmp_path, rules="name:bert*=B"):
    store = MemoryRepository()
    store.write_ranking("optimal", snapshot({"A": {("gpu01", 0): (3.0, 3.0)}}).entries)
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb"),
                                     default_on="gpu", class_rules=rules))
    pald = Pald(cfg, store, FakeReader([node_info(f"gpu{i:02d}") for i in range(1, 5)]), FakeActuator())
    pald.refresh_store()
    pald.sync_and_cycle()
    return pald, store


def test_a_job_of_a_default_on_partition_gets_its_class_from_the_sites_rules(tmp_path):
    pald, store = make_default_on(tmp_path)
    bert = pald.handle(default_on_request("d1", name="bert-large"))
    other = pald.handle(default_on_request("d2", name="whatever"))
    assert bert.decision is DecisionKind.PLACE and bert.perf_class == "B"
    assert other.decision is DecisionKind.PLACE and other.perf_class == "A"  # no rule: the default class


def test_pald_checks_the_partition_and_the_comment_of_a_default_on_request(tmp_path):
    pald, store = make_default_on(tmp_path)
    elsewhere = pald.handle(default_on_request("d3", partition="debug"))
    assert (elsewhere.decision, elsewhere.reason) == (DecisionKind.PASS, "bad_comment:not_default_on")
    opted = pald.handle(default_on_request("d4", comment="pal:off"))
    spec = pald.handle(default_on_request("d5", comment="pal:class=bert"))
    assert opted.reason == spec.reason == "bad_comment:mismatch"
    assert not pald.service.reservations
