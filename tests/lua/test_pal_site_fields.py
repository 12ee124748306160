"""The hook tells pald where a job may run (partitions Slurm lets the user use, constraint,
exclusions, nodelist, reservation, CPUs/memory) and what shape it is, and narrows a
multi-partition job to the partition pald chose."""

import json

from hook_harness import NO_VAL, Hook
from pal_slurm.daemon.protocol import decode_request

NO_VAL16 = 65534
PLACE = {"v": 1, "ok": True, "decision": "place", "reason": "pal", "nodes": {"gpu04": [0]},
         "gres": "gres:gpu:s0:1", "rank": 1}
JOB = {"comment": "pal:class=resnet", "user_id": 1001, "tres_per_node": "gres:gpu:1"}
PARTS = {"gpu": {"nodes": "gpu[01-04]", "flag_default": 1}, "one": {"nodes": "gpu04", "flag_default": 0}}


def test_site_and_shape_fields_reach_pald():
    hook = Hook()
    hook.reply(PLACE)
    hook.submit({**JOB, "partition": "one,gpu", "features": "f4|big", "exc_nodes": "gpu[01-02]",
                 "req_nodes": "gpu04", "reservation": "r1", "account": "phys", "qos": "normal", "shared": 0,
                 "time_limit": 30, "cpus_per_task": 2, "ntasks_per_node": 3, "num_tasks": 3, "pn_min_cpus": 6,
                 "min_cpus": 6, "cpus_per_tres": "gres:gpu:2", "min_mem_per_node": 100,
                 "mem_per_tres": "gres:gpu:64", "dependency": "afterok:3", "begin_time": 0,
                 "array_inx": "1-8", "het_job_offset": 1, "ntasks_per_tres": 2}, part_list=PARTS)
    job = decode_request(json.dumps(hook.sent)).job
    assert job.usable_partitions == ("gpu", "one")
    assert (job.partition, job.features, job.exc_nodes, job.req_nodes) == ("one,gpu", "f4|big", "gpu[01-02]", "gpu04")
    assert (job.reservation, job.account, job.qos, job.shared, job.time_limit) == ("r1", "phys", "normal", 0, 30)
    assert (job.cpus_per_task, job.ntasks_per_node, job.num_tasks, job.pn_min_cpus, job.min_cpus) == (2, 3, 3, 6, 6)
    assert (job.cpus_per_tres, job.min_mem_per_node, job.mem_per_tres) == ("gres:gpu:2", 100, "gres:gpu:64")
    assert (job.dependency, job.begin_time, job.array_inx, job.het_job_offset, job.ntasks_per_tres) == (
        "afterok:3", 0, "1-8", 1, 2)


def test_unset_values_are_not_sent():
    hook = Hook()
    hook.reply(PLACE)
    hook.submit({**JOB, "shared": NO_VAL16, "cpus_per_task": NO_VAL16, "num_tasks": NO_VAL, "time_limit": NO_VAL,
                 "het_job_offset": NO_VAL, "ntasks_per_tres": NO_VAL16, "min_mem_per_node": None})
    sent = hook.sent["job"]
    for name in ("shared", "cpus_per_task", "num_tasks", "time_limit", "het_job_offset", "ntasks_per_tres",
                 "min_mem_per_node", "usable_partitions"):
        assert name not in sent or sent[name] == [], name
    assert decode_request(json.dumps(hook.sent)).job.priority is None  # NO_VAL: not held


def test_a_held_submission_says_so():
    hook = Hook()
    hook.reply({"v": 1, "ok": True, "decision": "pass", "reason": "user_hold"})
    _, job = hook.submit({**JOB, "priority": 0})
    assert hook.sent["job"]["priority"] == 0
    assert job["priority"] == 0 and job["admin_comment"].startswith("pal:pass=user_hold")


def test_place_narrows_several_partitions_to_the_one_pald_used():
    hook = Hook()
    hook.reply({**PLACE, "partition": "one"})
    _, job = hook.submit({**JOB, "partition": "one,gpu"}, part_list=PARTS)
    assert job["partition"] == "one" and job["req_nodes"] == "gpu04"


def test_place_without_partition_keeps_the_users():
    hook = Hook()
    hook.reply(PLACE)
    _, job = hook.submit({**JOB, "partition": "one"})
    assert job["partition"] == "one"


def test_a_bad_partition_in_the_reply_passes_the_job_untouched():
    hook = Hook()
    hook.reply({**PLACE, "partition": "one;rm"})
    _, job = hook.submit({**JOB, "partition": "one,gpu"})
    assert job["partition"] == "one,gpu" and "req_nodes" not in job
    assert job["admin_comment"].startswith("pal:pass=bad-reply")
