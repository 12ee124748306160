"""Job arrays: held as one record, each element placed by pald's cycle."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.sync import started_keys
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.engine import ManualClock
from pal_slurm.slurm.actuator import job_ref
from pal_slurm.slurm.errors import SlurmError, SlurmParseError
from pal_slurm.slurm.readers import array_task_ids, task_string

from .builders import FakeActuator, FakeReader, held_job, node_info, view


def array_record(array_id=10, tasks="1-8", gpn=1):
    """The one squeue record of an array's pending elements, held by the hook."""
    return replace(held_job(array_id, gpn=gpn), array_job_id=array_id, array_tasks=tasks)


def element(job_id, array_id=10, task=1, state="RUNNING"):
    return replace(held_job(job_id, gpn=1), array_job_id=array_id, array_task_id=task, state=state,
                   reason="None", priority=1000)


def test_task_strings_and_element_names():
    assert array_task_ids("1,3-5") == [1, 3, 4, 5]
    assert array_task_ids("0-9:4%2") == [0, 4, 8]
    for bad in ("", "1-", "5-1", "a", "1-3:0", "0-99999999"):
        with pytest.raises(SlurmParseError):
            array_task_ids(bad)
    assert array_record(tasks="2,4").element_refs() == ["10_2", "10_4"]
    assert element(12, task=3).ref == "10_3" and element(12, task=3).element_refs() == ["10_3"]
    assert held_job(7).ref == 7  # not an array
    assert job_ref("10_3") == "10_3" and job_ref(7) == "7"
    for bad in ("10_", "7;rm", "x", True):
        with pytest.raises(SlurmError):
            job_ref(bad)


def test_the_cycle_places_each_element_on_its_own_gpus():
    s = PlacementService(ServiceSettings())
    s.observe_cluster(view(nodes=4), now=0)
    plan = s.plan_cycle([array_record(tasks="1-8")], now=1)
    assert [r.job_id for r in plan.releases] == [f"10_{i}" for i in range(1, 9)]
    gpus = [g for r in plan.releases for g in r.choice.gpu_ids]
    assert len(set(gpus)) == 8 and all(r.gres_spec for r in plan.releases)


def test_only_as_many_elements_as_could_start_are_planned():
    s = PlacementService(ServiceSettings())
    s.observe_cluster(view(nodes=1, busy=(0,)), now=0)  # 3 free GPUs
    plan = s.plan_cycle([array_record(tasks="1-1000", gpn=1)], now=1)
    assert [r.job_id for r in plan.releases] == ["10_1", "10_2", "10_3"]
    # the rest of the record waits for the next cycles, and counts as waiting: the submit path
    # does not plan a newcomer past elements it has not seen (it holds it, as before)
    assert plan.waiting == 997 and s.queue.waiting is None
    bad = s.plan_cycle([array_record(array_id=20, tasks="1-x")], now=1)
    assert [(r.job_id, r.choice, r.reason) for r in bad.releases] == [(20, None, "bad_array_tasks")]


def test_element_names_of_what_a_record_still_holds():
    """`own_ref`: how pald names the elements a record still stands for in `scontrol hold`
    (the array's job id would name every pending element, released ones too)."""
    assert array_record(tasks="1-8").own_ref() == "10_[1-8]"
    assert array_record(tasks="1-8").own_ref(without={"10_1", "10_2", "10_5"}) == "10_[3-4,6-8]"
    assert array_record(tasks="1-2").own_ref(without={"10_1", "10_2"}) is None
    assert array_record(tasks="0-9:4%2").own_ref() == "10_[0,4,8]"
    assert element(12, task=3, state="PENDING").own_ref() == "10_3"
    assert element(12, task=3, state="PENDING").own_ref(without={"10_3"}) is None
    assert held_job(7).own_ref() == 7 and held_job(7).own_ref(without={7}) is None
    assert job_ref("10_[3-4,6-8]") == "10_[3-4,6-8]"
    for bad in ("10_[", "10_[]", "10_[1;2]", "10_[1-2]x"):
        with pytest.raises(SlurmError):
            job_ref(bad)


@given(st.sets(st.integers(0, 200), min_size=1, max_size=40))
def test_task_strings_read_back(ids):
    assert array_task_ids(task_string(ids)) == sorted(ids)


def test_pald_holds_only_the_elements_its_cycle_did_not_release(tmp_path):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info("gpu01", used=(0,))], [array_record(tasks="1-6"), held_job(3, gpn=4)])
    act = FakeActuator()
    pald = Pald(cfg, None, reader, act, clock=ManualClock(100.0))
    pald.sync_and_cycle()
    assert [c[1] for c in act.calls if c[0] == "place"] == ["10_1", "10_2", "10_3"]  # 3 GPUs free
    assert [c for c in act.calls if c[0] == "hold"] == [("hold", ("10_[4-6]", 3))]
    # every element released: the record is not held again (the array's id would hold them all)
    reader._jobs, act.calls = [array_record(tasks="1-2")], []
    pald = Pald(cfg, None, reader, act, clock=ManualClock(100.0))
    reader._nodes = [node_info("gpu01")]
    pald.sync_and_cycle()
    assert [c[1] for c in act.calls if c[0] == "place"] == ["10_1", "10_2"]
    assert [c for c in act.calls if c[0] == "hold"] == []


def test_pald_releases_elements_and_does_not_count_them_as_released_outside(tmp_path):
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info("gpu01"), node_info("gpu02")], [array_record(tasks="1-2")])
    act = FakeActuator()
    pald = Pald(cfg, None, reader, act, clock=ManualClock(100.0))
    pald.sync_and_cycle()
    assert [c[:2] for c in act.calls if c[0] == "place"] == [("place", "10_1"), ("place", "10_2")]
    # Slurm split them off under job ids of their own; they run
    reader._jobs = [element(11, task=1), element(12, task=2)]
    pald.sync_and_cycle()
    assert pald.counts["released"] == 2 and pald.counts["released_outside"] == 0
    assert {"job:10_1", "job:10_2"} <= started_keys(reader._jobs)


def test_the_last_element_pald_released_still_shown_as_the_array_s_record_is_not_held_again(tmp_path):
    """pald releases every element; at its next read Slurm (26.05, before its scheduler looks
    again) shows one element split off, pending, and the last one still as the array's record
    (the array's id, task string "2"), no longer held. pald released both: neither counts as
    released by the user, and the array is not held again (its id would hold every element)."""
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    reader = FakeReader([node_info("gpu01"), node_info("gpu02")], [array_record(tasks="1-2")])
    act = FakeActuator()
    pald = Pald(cfg, None, reader, act, clock=ManualClock(100.0))
    pald.sync_and_cycle()
    assert [c[1] for c in act.calls if c[0] == "place"] == ["10_1", "10_2"]
    released_record = replace(array_record(tasks="2"), reason="None", priority=1000)
    reader._jobs, act.calls = [element(11, task=1, state="PENDING"), released_record], []
    pald.sync_and_cycle()
    assert [c for c in act.calls if c[0] == "hold"] == []
    assert pald.counts["reheld"] == 0 and pald.counts["released_outside"] == 0
    reader._jobs = [element(11, task=1), element(12, task=2)]  # then they run
    pald.sync_and_cycle()
    assert [c for c in act.calls if c[0] == "hold"] == [] and pald.counts["released_outside"] == 0
