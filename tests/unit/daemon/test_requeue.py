"""A requeued PAL job is taken back into pald's queue and placed again (daemon/requeue.py)."""

from __future__ import annotations

from dataclasses import replace

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon import requeue
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.engine import ManualClock

from .builders import FakeActuator, acts, FakeReader, held_job, node_info, snapshot, view

PLACED = "pal:placed=gpu02;rank=v1;req=ab"


def requeued(job_id=5, tag=PLACED, restarts=1, eligible=0, held=False, slots="gres:gpu:s3:1", pin=("gpu02",)):
    """A PAL job as squeue shows it after `scontrol requeue`: pending, its old pin kept."""
    job = held_job(job_id, gpn=1, tag=tag)
    return replace(job, reason="JobHeldAdmin" if held else "BeginTime", priority=0 if held else 4000,
                   restart_count=restarts, eligible_time=eligible, tres_per_node=slots, required_nodes=pin)


def test_only_requeued_pal_jobs_not_taken_back_yet_are_taken_back():
    assert requeue.to_take_back(requeued())
    assert requeue.to_take_back(requeued(tag="note pal:defer;rank=v1;req=ab"))  # released by the cycle
    assert not requeue.to_take_back(requeued(restarts=0))  # never requeued
    assert not requeue.to_take_back(requeued(tag="pal:pass=array;req=ab"))  # not placed by PAL
    assert not requeue.to_take_back(requeued(tag=""))
    assert not requeue.to_take_back(requeued(held=True))  # requeuehold / a user's hold: theirs
    assert not requeue.to_take_back(replace(requeued(), state="RUNNING"))
    taken = replace(requeued(), admin_comment=requeue.tagged_comment(requeued()))
    assert not requeue.to_take_back(taken)  # once per requeue
    assert requeue.to_take_back(replace(taken, restart_count=2))  # ... and again after the next


def test_the_tag_keeps_the_comment_and_counts_restarts():
    job = requeued(tag=PLACED, restarts=3)
    assert requeue.tagged_comment(job) == f"{PLACED} pal:defer;requeued=3"
    assert requeue.requeues_taken(f"{PLACED} pal:defer;requeued=1 pal:defer;requeued=2") == 2
    assert requeue.requeues_taken("pal:pass=x;requeued=4") == 0  # only pald's defer tag counts
    assert requeue.tagged_comment(requeued(tag="")) == "pal:defer;requeued=1"


def test_the_cycle_places_a_requeued_job_again_away_from_its_busy_old_slot():
    s = PlacementService(ServiceSettings())
    s.observe_cluster(view(nodes=2, busy=range(4)), now=0)  # gpu01 full: the old slots are busy
    job = replace(requeued(tag=f"{PLACED} pal:defer;requeued=1", held=True, pin=("gpu01",)),
                  eligible_time=100)
    early = s.plan_cycle([job], now=50)
    assert early.releases == [] and early.waiting == 1 and s.reservations == {}  # Slurm's requeue delay
    plan = s.plan_cycle([job], now=100)
    [rel] = plan.releases
    assert rel.choice is not None and list(rel.choice.nodes) == ["gpu02"]
    assert rel.gres_spec is not None and rel.gres_spec.startswith("gpu:s")


def test_pald_takes_a_requeued_job_back_and_places_it_again(tmp_path):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info("gpu01", used=range(4)), node_info("gpu02")])
    act = FakeActuator()
    clock = ManualClock(100.0)
    pald = Pald(cfg, None, reader, act, clock=clock)
    reader._jobs = [requeued(pin=("gpu01",), eligible=110)]
    pald.sync_and_cycle()
    assert act.calls == [("admin_comment", 5, f"{PLACED} pal:defer;requeued=1"), ("hold", 5)]
    assert pald.counts["requeued"] == 1
    # Slurm now shows it tagged and held; it waits out the requeue delay, then goes to gpu02
    reader._jobs = [requeued(tag=f"{PLACED} pal:defer;requeued=1", held=True, pin=("gpu01",), eligible=110)]
    act.calls.clear()
    pald.sync_and_cycle()
    assert act.calls == [] and pald.service.queue.held_jobs == 0  # not ahead of new jobs while it may not start
    clock.t += 15.0
    pald.sync_and_cycle()
    assert [c[:3] for c in acts(act.calls)] == [("place", 5, ("gpu02",))]
    assert pald.counts["requeued"] == 1 and pald.counts["released"] == 1


def test_a_failed_take_back_leaves_the_job_to_slurm_and_is_retried(tmp_path):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info("gpu01"), node_info("gpu02")], [requeued()])
    act = FakeActuator(fail_for={5})
    pald = Pald(cfg, None, reader, act, clock=ManualClock(100.0))
    pald.sync_and_cycle()
    assert pald.counts["requeued"] == 0 and pald.counts["errors"] == 1
    act.fail_for.clear()
    pald.sync_and_cycle()
    assert pald.counts["requeued"] == 1


def multi_node_requeued(slots="gres:gpu:s0:1,gpu:s1:1"):
    """A 2-node x 2-GPU PAL job Slurm requeued, taken back (tagged, held): its request still
    names the slot types of its first placement."""
    job = requeued(tag=f"{PLACED} pal:defer;requeued=1", held=True, slots=slots, pin=("gpu01", "gpu02"))
    return replace(job, node_count=2)


def test_a_requeued_job_is_placed_again_on_its_own_slots_wherever_they_are_free():
    """Slurm 22.05 keeps a retyped job's old slot types (count 0) and will not start it where
    they are busy, so a job bound to slots s0,s1 goes where s0,s1 are free on two nodes
    (gpu02 and gpu03 here), not on PAL's otherwise best GPUs (gpu01's and gpu02's s2,s3 ...)."""
    s = PlacementService(ServiceSettings())
    # gpu01: s0,s1 busy; gpu02, gpu03: all free. Ranking: s2, s3 best everywhere
    s.set_snapshot(snapshot({"A": {(f"gpu0{n}", k): (1.0 + 0.1 * (k < 2), 1.0 + 0.1 * (k < 2))
                                   for n in (1, 2, 3) for k in range(4)}}, nodes=3))
    s.observe_cluster(view(nodes=3, busy={0, 1}), now=0)
    [rel] = s.plan_cycle([multi_node_requeued()], now=100).releases
    assert rel.gres_spec == "gpu:s0:1,gpu:s1:1" and set(rel.choice.nodes) == {"gpu02", "gpu03"}, rel.choice
    assert set(s.reservations[rel.key].gpu_ids) == {4, 5, 8, 9}
    # a fresh (untyped) job of the same shape gets PAL's best: s2, s3
    fresh = replace(multi_node_requeued(slots="gres:gpu:2"), job_id=6)
    s.clear_reservations()
    [rel] = s.plan_cycle([fresh], now=100).releases
    assert rel.gres_spec == "gpu:s2:1,gpu:s3:1"


def test_a_bound_job_waits_while_its_slots_are_free_on_too_few_nodes():
    s = PlacementService(ServiceSettings())
    s.observe_cluster(view(nodes=3, busy={0, 5, 10}), now=0)  # s0 and s1 both free on gpu03 only
    out = s.plan_cycle([multi_node_requeued()], now=100)
    assert out.releases == [] and out.waiting == 1 and s.reservations == {}
    s.observe_cluster(view(nodes=3, busy={0}), now=200)  # gpu02 and gpu03 have s0,s1
    [rel] = s.plan_cycle([multi_node_requeued()], now=200).releases
    assert rel.gres_spec == "gpu:s0:1,gpu:s1:1" and set(rel.choice.nodes) == {"gpu02", "gpu03"}
