"""Which GPUs root's hooks measure: only what Slurm wrote (JSON fields, slurmd's environment).

The hostile records are real: captured with `squeue --json` inside a 22.05 lab's prolog and
epilog for a job named ``x JOB_GRES=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1`` whose comment holds
a newline and a ``Nodes=gpu01 ... GRES=gpu:s3:1(IDX:3)`` line, run on GPU 0 of gpu01 beside
another user's job on GPUs 1 and 2.
"""

import copy
import json
from pathlib import Path

import pytest

from pal_slurm.bench.gpuset import (
    class_from_comment,
    expand_hostlist,
    gpus_from_env,
    gpus_from_scontrol,
    held_gpus,
)
from pal_slurm.slurm.dialects import LEGACY_22_05, SlurmVersion, dialect_for
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.intake.gres import MAX_GPU_INDEX, parse_index_list
from pal_slurm.slurm.readers import parse_squeue

DATA = Path(__file__).resolve().parents[1] / "slurm" / "data"
DIALECT_24_11 = dialect_for(SlurmVersion(24, 11, 5), ["v0.0.40", "v0.0.41", "v0.0.42"])


def _doc(release: str, name: str) -> dict:
    return json.loads((DATA / release / name).read_text())


def _job(doc: dict, job_id: int, dialect=LEGACY_22_05, **changes):
    doc = copy.deepcopy(doc)
    for raw in doc["jobs"]:
        if raw["job_id"] == job_id:
            raw.update(changes)
    (job,) = [j for j in parse_squeue(doc, dialect) if j.job_id == job_id]
    return job


RUNNING = _doc("22.05", "squeue_hostile_running.json")
ENDED = _doc("22.05", "squeue_hostile_ended.json")
NEIGHBOUR = 1  # the other user's job: gpu01 GPUs 1 and 2 (gres:gpu:s1:1,gres:gpu:s2:1)
HOSTILE = 2  # the job with the forged-looking name and comment: gpu01 GPU 0


def test_the_captured_name_and_comment_carry_the_injection():
    job = _job(ENDED, HOSTILE)
    assert "JOB_GRES=gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1" in job.name
    assert "\nNodes=gpu01 CPU_IDs=0 Mem=0 GRES=gpu:s3:1(IDX:3)" in job.comment


def test_prolog_reads_gres_detail_not_the_name_or_comment():
    held = held_gpus(_job(RUNNING, HOSTILE), "gpu01", {"SLURM_JOB_GPUS": "0"})
    assert (held.gpus, held.source, held.known) == ((0,), "gres_detail", True)


def test_epilog_of_an_ended_job_reads_the_per_slot_request_not_the_name():
    job = _job(ENDED, HOSTILE)
    assert job.gpu_slots == {} and job.state == "COMPLETING"  # Slurm empties gres_detail
    held = held_gpus(job, "gpu01", {"SLURM_JOB_GPUS": "0"})
    assert (held.gpus, held.source) == ((0,), "per-slot GRES types")


def test_ended_typed_job_gets_every_slot_although_slurmd_shows_only_the_last():
    held = held_gpus(_job(ENDED, NEIGHBOUR), "gpu01", {"SLURM_JOB_GPUS": "2", "CUDA_VISIBLE_DEVICES": "2"})
    assert held.gpus == (1, 2)


def test_environment_outside_the_requested_slots_means_nothing_is_measured():
    held = held_gpus(_job(ENDED, HOSTILE), "gpu01", {"SLURM_JOB_GPUS": "3"})
    assert held.gpus == () and not held.known and "not among the requested slots 0" in held.source


def test_untyped_request_uses_the_environment_only_when_it_shows_every_gpu():
    job = _job(ENDED, 3)  # --gpus=2 on gpu02, single node
    assert job.tres_per_job == "gres:gpu:2"
    assert held_gpus(job, "gpu02", {"SLURM_JOB_GPUS": "0,1"}).gpus == (0, 1)
    short = held_gpus(job, "gpu02", {"SLURM_JOB_GPUS": "1"})
    assert short.gpus == () and not short.known and "1 GPU(s) (1) of the 2" in short.source
    per_node = _job(ENDED, 3, tres_per_job="", tres_per_node="gres:gpu:2")
    assert held_gpus(per_node, "gpu02", {"CUDA_VISIBLE_DEVICES": "2,3"}).gpus == (2, 3)
    across = _job(ENDED, 3, node_count=2, nodes="gpu[02-03]",
                  job_resources={"allocated_nodes": [{"nodename": "gpu02"}, {"nodename": "gpu03"}]})
    assert held_gpus(across, "gpu02", {"SLURM_JOB_GPUS": "0,1"}).known is False


@pytest.mark.parametrize("field", ["tres_per_task", "tres_per_socket"])
def test_gpus_per_task_or_socket_are_not_guessed(field):
    job = _job(ENDED, 3, tres_per_job="", **{field: "gres:gpu:1"})
    held = held_gpus(job, "gpu02", {"SLURM_JOB_GPUS": "0,1"})
    assert held.gpus == () and not held.known and "per task or socket" in held.source


def test_no_record_or_another_node_measures_nothing():
    every = {"SLURM_JOB_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert held_gpus(None, "gpu01", every) == held_gpus(None, "gpu01", {})
    assert held_gpus(None, "gpu01", every).gpus == () and not held_gpus(None, "gpu01", every).known
    elsewhere = held_gpus(_job(ENDED, HOSTILE), "gpu03", every)
    assert elsewhere.gpus == () and "gpu03 is not among its nodes (gpu01)" in elsewhere.source


def test_a_job_without_gpus_is_known_to_have_none():
    job = _job(ENDED, 3, tres_per_job="")
    held = held_gpus(job, "gpu02", {})
    assert held.gpus == () and held.known


def test_index_lists_at_the_cap():
    assert parse_index_list(f"0-{MAX_GPU_INDEX}") == frozenset(range(MAX_GPU_INDEX + 1))
    for bad in (str(MAX_GPU_INDEX + 1), "0-4294967294", f"3,{MAX_GPU_INDEX + 1}-{MAX_GPU_INDEX + 2}"):
        with pytest.raises(SlurmParseError):
            parse_index_list(bad)
    huge = _job(RUNNING, HOSTILE, gres_detail=["gpu:s0:1(IDX:0-4294967294)"])
    held = held_gpus(huge, "gpu01", {"SLURM_JOB_GPUS": "0"})
    assert held.gpus == () and not held.known and "does not parse" in held.source
    assert gpus_from_env({"SLURM_JOB_GPUS": "0-99999999", "CUDA_VISIBLE_DEVICES": "1"}) == (1,)


@pytest.mark.parametrize("tag", ["", ".v0.0.40", ".v0.0.41", ".v0.0.42"])
def test_slurm_24_11_records_read_the_same(tag):
    doc = _doc("24.11", f"squeue_typed_busy{tag}.json")
    raw = doc["jobs"][0]
    job_id = raw["job_id"]
    running = _job(doc, job_id, DIALECT_24_11)
    (node,) = running.nodes
    assert held_gpus(running, node, {"SLURM_JOB_GPUS": "3"}).gpus == (2, 3)
    ended = _job(doc, job_id, DIALECT_24_11, gres_detail=[])
    assert held_gpus(ended, node, {"SLURM_JOB_GPUS": "3"}).gpus == (2, 3)
    assert ended.end_time == raw["end_time"]["number"]


def test_one_job_argv_per_release():
    assert LEGACY_22_05.job_argv("41") == ["squeue", "--json", "--jobs=41"]
    assert DIALECT_24_11.job_argv(41) == ["squeue", "--json=v0.0.42", "--states=all", "--jobs=41"]


def test_env_order_and_class():
    assert gpus_from_env({"SLURM_JOB_GPUS": "3", "CUDA_VISIBLE_DEVICES": "0,1"}) == (3,)
    assert gpus_from_env({"CUDA_VISIBLE_DEVICES": "GPU-abc", "GPU_DEVICE_ORDINAL": "1"}) == (1,)
    assert gpus_from_env({}) == ()
    assert class_from_comment("team x pal:class=B,gpus=2 more", "A") == "B"
    assert class_from_comment("no marker", "A") == "A"
    assert class_from_comment(None, "C") == "C"


def test_payload_reader_of_scontrol_text():
    text = "JobId=7\n     Nodes=n[1-2] CPU_IDs=0-1 Mem=0 GRES=gpu(IDX:0-2)\n" \
           "     Nodes=n3 CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:1,3),mps:100(0/100)\n"
    assert gpus_from_scontrol(text) == {"n1": (0, 1, 2), "n2": (0, 1, 2), "n3": (1, 3)}
    with pytest.raises(ValueError):
        gpus_from_scontrol("   Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:x)\n")


@pytest.mark.parametrize("bad", ["gpu[01-", "gpu[3-1]", "gpu[a-b]", "gpu]"])
def test_malformed_hostlists(bad):
    with pytest.raises(ValueError):
        expand_hostlist(bad)
    assert expand_hostlist("gpu[01-03,07],login") == ["gpu01", "gpu02", "gpu03", "gpu07", "login"]
