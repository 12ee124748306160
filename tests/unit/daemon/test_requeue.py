"""A requeued PAL job is taken back into pald's queue and placed again (daemon/requeue.py)."""

from __future__ import annotations

from dataclasses import replace

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon import requeue
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.engine import ManualClock

from .builders import FakeActuator, FakeReader, held_job, node_info, view

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


def test_the_old_pin_is_dropped_unless_the_user_gave_the_nodelist():
    job = replace(requeued(), admin_comment=f"{PLACED} pal:defer;requeued=1")
    assert requeue.placement_record(job).required_nodes == ()
    own = replace(job, admin_comment=f"{PLACED};nodelist=own pal:defer;requeued=1")
    assert requeue.placement_record(own).required_nodes == ("gpu02",)
    assert requeue.placement_record(requeued()).required_nodes == ("gpu02",)  # not requeued: as it is


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
    assert act.calls == [] and pald.service.held_jobs == 0  # not ahead of new jobs while it may not start
    clock.t += 15.0
    pald.sync_and_cycle()
    assert [c[:3] for c in act.calls] == [("place", 5, ("gpu02",))]
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
