"""When pald reads what from Slurm (daemon.read_plan): the pure decisions."""

from __future__ import annotations

import dataclasses

from pal_slurm.daemon.read_plan import (
    JobReadMarks,
    ReadPeriods,
    job_read_due,
    next_expected_end,
    node_read_due,
    nodes_differ,
    read_straddles,
    site_read_due,
)

from .builders import held_job, node_info

PERIODS = ReadPeriods(floor_s=2.0, jobs_every_s=30.0, site_every_s=60.0, nodes_every_s=5.0)
QUIET = JobReadMarks(now=110.0, tried_at=100.0, failed=False, nodes_changed=False, answered=False,
                     promises=False, held_waiting=False, next_end=None)


def test_a_quiet_turn_reads_no_jobs_until_the_period():
    assert job_read_due(PERIODS, QUIET) is None
    assert job_read_due(PERIODS, dataclasses.replace(QUIET, now=129.9)) is None
    assert job_read_due(PERIODS, dataclasses.replace(QUIET, now=130.0)) == "period"


def test_the_first_read_is_due_at_once():
    assert job_read_due(PERIODS, dataclasses.replace(QUIET, tried_at=None, now=0.0)) == "first"


def test_each_event_calls_for_a_read():
    for field, value, why in (("failed", True, "retry"), ("nodes_changed", True, "nodes"),
                              ("answered", True, "answered"), ("promises", True, "promises"),
                              ("held_waiting", True, "held"), ("next_end", 109.0, "end"),
                              ("straddled", True, "settle")):
        assert job_read_due(PERIODS, dataclasses.replace(QUIET, **{field: value})) == why, field


def test_events_wait_for_the_floor():
    busy = dataclasses.replace(QUIET, now=101.9, failed=True, nodes_changed=True, answered=True,
                               promises=True, held_waiting=True, next_end=101.0)
    assert job_read_due(PERIODS, busy) is None
    assert job_read_due(PERIODS, dataclasses.replace(busy, now=102.0)) == "retry"


def test_an_end_still_ahead_calls_for_nothing():
    assert job_read_due(PERIODS, dataclasses.replace(QUIET, next_end=111.0)) is None


def test_the_site_is_read_first_on_its_period_and_when_the_node_list_changes():
    nodes = [node_info("gpu01"), node_info("gpu02")]
    names = frozenset({"gpu01", "gpu02"})
    assert site_read_due(PERIODS, 100.0, None, frozenset(), nodes) == "first"
    assert site_read_due(PERIODS, 159.0, 100.0, names, nodes) is None
    assert site_read_due(PERIODS, 160.0, 100.0, names, nodes) == "period"
    assert site_read_due(PERIODS, 110.0, 100.0, names, [*nodes, node_info("gpu03")]) == "nodes"
    assert site_read_due(PERIODS, 110.0, 100.0, names, nodes[:1]) == "nodes"


def running(job_id, end, state="RUNNING"):
    return dataclasses.replace(held_job(job_id), state=state, reason="None", priority=1, end_time=end)


def test_next_expected_end_is_the_earliest_limit_after_the_read_of_jobs_that_hold_resources():
    jobs = [running(1, 150), running(2, 120), running(3, 90), running(4, 110, state="PENDING"),
            running(5, 115, state="COMPLETING")]
    assert next_expected_end(jobs, after=100.0) == 115.0
    assert next_expected_end(jobs[2:4], after=100.0) is None


def test_nodes_differ_on_allocation_state_and_list():
    a = (node_info("gpu01"), node_info("gpu02"))
    assert not nodes_differ(a, [node_info("gpu01"), node_info("gpu02")])
    assert nodes_differ(None, a)
    assert nodes_differ(a, [node_info("gpu01", used=(0,)), node_info("gpu02")])
    assert nodes_differ(a, [dataclasses.replace(a[0], state_flags=("DRAIN",)), a[1]])
    assert nodes_differ(a, a[:1])


def test_nodes_are_read_first_and_then_every_node_period():
    assert node_read_due(PERIODS, 100.0, None)
    assert not node_read_due(PERIODS, 104.9, 100.0)
    assert node_read_due(PERIODS, 105.0, 100.0)


def test_half_a_cycle_of_slack_keeps_a_period_of_one_cycle_on_every_turn():
    periods = ReadPeriods(floor_s=1.0, jobs_every_s=30.0, site_every_s=60.0, nodes_every_s=1.0, slack_s=0.5)
    assert node_read_due(periods, 100.98, 100.02)  # the read was stamped late in its turn
    assert not node_read_due(periods, 100.4, 100.0)
    late = dataclasses.replace(QUIET, now=100.98, tried_at=100.02, held_waiting=True)
    assert job_read_due(periods, late) == "held"


def test_a_read_straddles_a_job_that_ended_or_started_between_squeue_and_sinfo():
    running = dataclasses.replace(held_job(7, gpn=2), state="RUNNING", reason="None", nodes=("gpu01",),
                                  gpu_slots={"gpu01": frozenset({0, 1})})
    assert not read_straddles([node_info("gpu01", used=(0, 1)), node_info("gpu02")], [running])
    # squeue saw it running, sinfo (after) the node free: it ended in between
    assert read_straddles([node_info("gpu01"), node_info("gpu02")], [running])
    # sinfo shows GPUs no job in the read holds: a job started in between
    assert read_straddles([node_info("gpu01", used=(0, 1)), node_info("gpu02", used=(0,))], [running])
    # a job holding GPUs without slot detail: its node is not judged
    vague = dataclasses.replace(running, gpu_slots={})
    assert not read_straddles([node_info("gpu01")], [vague])
