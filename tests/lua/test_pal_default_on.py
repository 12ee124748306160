"""Default-on partitions in the hook (PAL_DEFAULT_ON): a GPU job there without a pal: spec is
asked about with an empty spec (pald's rules give the class); a job elsewhere, without GPUs, or
whose user wrote pal:off is not touched and opens no socket."""

import json

import pytest

from hook_harness import Hook

PASS_REPLY = {"v": 1, "ok": True, "decision": "pass", "reason": "test"}
GPU_JOB = {"user_id": 1001, "partition": "gpu", "tres_per_node": "gres:gpu:2", "name": "train"}
PARTS = {"gpu": {"nodes": "gpu[01-04]", "flag_default": 1}, "debug": {"nodes": "dbg01", "flag_default": 0}}


def hook(default_on="gpu"):
    h = Hook(env={"PAL_DEFAULT_ON": default_on})
    h.reply(PASS_REPLY)
    return h


def test_a_gpu_job_of_a_default_on_partition_is_asked_about_with_no_class():
    h = hook()
    rc, job = h.submit(GPU_JOB, parts=PARTS)
    assert rc == 0 and h.sockets_created == 1
    assert h.sent["pal"] == {} and h.sent["job"]["partition"] == "gpu"
    from pal_slurm.daemon.protocol import decode_request
    from pal_slurm.model.comment_grammar import DEFAULT_ON_CLASS

    req = decode_request(json.dumps(h.sent))  # what pald reads of it
    assert req.pal.perf_class == DEFAULT_ON_CLASS and req.job.comment == ""
    assert job["admin_comment"].startswith("pal:pass=test")


@pytest.mark.parametrize("fields", [
    {**GPU_JOB, "partition": "debug"},  # not default-on
    {**GPU_JOB, "partition": "gpu,debug"},  # may run where it is not
    {**GPU_JOB, "tres_per_node": None},  # no GPUs
    {**GPU_JOB, "comment": "pal:off"},  # its user opted out
    {**GPU_JOB, "comment": "baseline run pal:off"},
], ids=["other partition", "partly default-on", "no GPUs", "opt out", "opt out after text"])
def test_other_jobs_are_not_touched(fields):
    h = hook()
    rc, job = h.submit(fields, parts=PARTS)
    assert rc == 0 and h.sockets_created == 0 and h.writes == []


def test_the_default_partition_and_every_partition():
    h = hook()
    rc, _ = h.submit({**GPU_JOB, "partition": None}, parts=PARTS)  # Slurm's default partition: gpu
    assert h.sockets_created == 1
    everywhere = hook("*")
    everywhere.submit({**GPU_JOB, "partition": "debug", "tres_per_node": None, "tres_per_job": "gres:gpu:1"},
                      parts=PARTS)
    assert everywhere.sockets_created == 1
    none = Hook()
    none.reply(PASS_REPLY)
    none.submit(GPU_JOB, parts=PARTS)
    assert none.sockets_created == 0  # without PAL_DEFAULT_ON: only pal: jobs


def test_a_job_with_a_spec_is_asked_about_with_its_spec_as_before():
    h = hook()
    h.submit({**GPU_JOB, "comment": "pal:class=bert"}, parts=PARTS)
    assert h.sent["pal"] == {"class": "bert"}
