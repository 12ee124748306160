"""ClusterView's layout caches and the Topology's group tables (used by the network-aware
placements' reservations)."""

import dataclasses

import pytest

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.network import NODE, RACK, SPINE


def test_free_set_copies_share_the_layout_caches():
    base = ClusterView.uniform(6, 4, nodes_per_rack=2)
    a = base.with_free({0, 1})
    b = a.with_free({5})
    assert a.topology is base.topology is b.topology  # made once, not once per copy
    assert b.node_of is base.node_of
    assert b.free == frozenset({5})


def test_group_tables_per_level():
    c = ClusterView.uniform(6, 2, nodes_per_rack=2)  # 12 GPUs, 3 racks of 2 nodes
    t = c.topology
    assert t.group_of(NODE) == c.node_of
    assert t.group_of(RACK) == (0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2)
    assert set(t.group_of(SPINE)) == {0}
    assert t.members(NODE)[1] == frozenset({2, 3})
    assert t.members(RACK)[2] == frozenset(range(8, 12))
    assert t.members(SPINE) == {0: frozenset(range(12))}
    assert t.members(RACK) is t.members(RACK)  # made once per layout


def test_evolved_equals_replace_and_refuses_other_fields():
    job = JobRequest(job_id=7, num_gpus=2, perf_class="B", app="BERT", submit_time=3.0, net_sensitivity="low")
    changes = dict(running_on=(4, 5), attained_service=10.0, remaining_time=90.0, waiting_since=12.0, preemptions=1)
    got = job.evolved(**changes)
    assert got == dataclasses.replace(job, **changes)
    assert got.num_gpus == 2 and job.running_on == ()  # the original is untouched
    with pytest.raises(TypeError, match="num_gpus"):
        job.evolved(num_gpus=3)
