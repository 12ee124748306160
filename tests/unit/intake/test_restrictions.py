"""A job's restrictions from the hook's fields and from squeue (pal_slurm/intake/restrictions.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pal_slurm.daemon.protocol import JobFields
from pal_slurm.intake.restrictions import (
    restrictions_from_fields,
    restrictions_from_squeue,
    traits_from_fields,
)
from pal_slurm.intake.refusals import JobTraits
from pal_slurm.intake.hostlist import HostSet
from pal_slurm.slurm.readers import parse_squeue

DATA = Path(__file__).resolve().parents[1] / "slurm" / "data"


def fields(**kw):
    return JobFields(uid=1000, comment="pal:class=resnet", **kw)


def test_site_fields_become_restrictions():
    r = restrictions_from_fields(fields(partition="one,gpu", features="f4|big", exc_nodes="gpu[01-02]",
                                        req_nodes="gpu03", reservation="r1", account="phys", qos="normal",
                                        shared=0, time_limit=30, usable_partitions=("gpu", "one")),
                                 nodes=1, gpus_per_node=2)
    assert r.partitions == ("one", "gpu") and r.usable_partitions == {"gpu", "one"}
    assert r.constraint == "f4|big" and r.exclude == HostSet.from_expr("gpu[01-02]")
    assert "gpu02" in r.exclude and "gpu03" not in r.exclude and r.required == HostSet.from_expr("gpu03")
    assert r.reservation == "r1" and r.account == "phys" and r.qos == "normal"
    assert r.exclusive and r.time_limit_min == 30 and r.nodes == 1


def test_cpus_and_memory_per_node_the_way_slurm_counts_them():
    assert restrictions_from_fields(fields(), 1, 1).cpus_per_node == 1
    assert restrictions_from_fields(fields(cpus_per_task=4, ntasks_per_node=2), 1, 1).cpus_per_node == 8
    assert restrictions_from_fields(fields(cpus_per_task=2, num_tasks=6), 2, 1).cpus_per_node == 6
    assert restrictions_from_fields(fields(cpus_per_tres="gres:gpu:4"), 1, 2).cpus_per_node == 8
    assert restrictions_from_fields(fields(min_mem_per_node=500), 1, 1).memory_per_node_mb == 500
    assert restrictions_from_fields(fields(min_mem_per_cpu=100, cpus_per_task=3), 1, 1).memory_per_node_mb == 300
    assert restrictions_from_fields(fields(mem_per_tres="gres:gpu:2048"), 1, 4).memory_per_node_mb == 8192
    assert not restrictions_from_fields(fields(shared=1), 1, 1).exclusive


def test_traits():
    assert traits_from_fields(fields(), now=100) == JobTraits()
    assert traits_from_fields(fields(array_inx="1-8"), 100).array
    assert traits_from_fields(fields(het_job_offset=0), 100).het_job
    assert traits_from_fields(fields(priority=0), 100).user_hold
    assert not traits_from_fields(fields(priority=4000), 100).user_hold
    assert traits_from_fields(fields(begin_time=200), 100).begins_later
    assert not traits_from_fields(fields(begin_time=0), 100).begins_later
    assert traits_from_fields(fields(tres_per_task="gres:gpu:1"), 100).gpus_per_task
    assert traits_from_fields(fields(tres_per_socket="gres:gpu:1"), 100).gpus_per_socket
    assert traits_from_fields(fields(ntasks_per_tres=2), 100).ntasks_per_gpu
    assert traits_from_fields(fields(dependency="afterok:5"), 100).dependency
    assert restrictions_from_fields(fields(tres_per_node="gres:gpu:a100:2"), 1, 2).gpu_model == "a100"
    assert restrictions_from_fields(fields(tres_per_job="gres:gpu:v100:1"), None, 1).gpu_model == "v100"
    assert restrictions_from_fields(fields(tres_per_node="gres:gpu:2"), 1, 2).gpu_model is None


def test_23_02_tres_spelling_reads_the_same():
    """24.11's job_desc spells TRES items gres/gpu:... (seen in the hook on Slurm 24.11): the
    passed shapes and the GPU model are found as in 22.05's gres:gpu:..."""
    assert traits_from_fields(fields(tres_per_task="gres/gpu:1"), 100).gpus_per_task
    assert traits_from_fields(fields(tres_per_task="cpu=1,gres/gpu=1"), 100).gpus_per_task
    assert not traits_from_fields(fields(tres_per_task="cpu=2"), 100).gpus_per_task
    assert traits_from_fields(fields(tres_per_socket="gres/gpu:1"), 100).gpus_per_socket
    assert restrictions_from_fields(fields(tres_per_job="gres/gpu:v100:1"), None, 1).gpu_model == "v100"


def test_held_job_restrictions_from_squeue():
    jobs = {j.job_id: j for j in parse_squeue(json.loads((DATA / "squeue_restricted_held.json").read_text()))}
    r = restrictions_from_squeue(jobs[12], nodes=1, gpus_per_node=1)
    assert r.partitions == ("one", "gpu") and r.constraint == "f4|big" and r.exclude == HostSet.from_expr("gpu01")
    assert r.reservation == "r1" and r.exclusive and r.account == "xx" and r.time_limit_min == 5
    assert r.cpus_per_node == 2 and r.memory_per_node_mb == 100 and r.usable_partitions is None
    r14 = restrictions_from_squeue(jobs[14], nodes=2, gpus_per_node=2)
    assert r14.cpus_per_node == 2 and r14.memory_per_node_mb == 20
