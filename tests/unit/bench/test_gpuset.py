from datetime import datetime

import pytest

from pal_slurm.bench.gpuset import (
    class_from_comment,
    end_time_from_scontrol,
    slots_from_typed_gres,
    expand_hostlist,
    gpus_from_env,
    gpus_from_scontrol,
    parse_index_list,
    start_time_from_scontrol,
)

TYPED = """JobId=41 JobName=wrap
   JobState=RUNNING Reason=None Dependency=(null)
   RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A
   SubmitTime=2026-11-23T09:00:00 EligibleTime=2026-11-23T09:00:00
   StartTime=2026-11-23T09:00:01 EndTime=Unknown Deadline=N/A
   NodeList=n1 BatchHost=n1
   TRES=cpu=1,node=1,billing=1,gres/gpu=2
     Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:s2:1(IDX:2),gpu:s3:1(IDX:3)
   Comment=pal:class=resnet50
"""

MULTI = """JobId=7
     Nodes=n[1-2] CPU_IDs=0-1 Mem=0 GRES=gpu(IDX:0-2)
     Nodes=n3 CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:1,3),mps:100(0/100)
"""


def test_typed_gres_gives_every_index_not_just_the_last():
    assert gpus_from_scontrol(TYPED) == {"n1": (2, 3)}


def test_ranges_hostlists_and_other_gres():
    assert gpus_from_scontrol(MULTI) == {"n1": (0, 1, 2), "n2": (0, 1, 2), "n3": (1, 3)}
    assert gpus_from_scontrol("JobId=1 JobState=PENDING") == {}


def test_hostlist_and_index_list():
    assert expand_hostlist("gpu[01-03,07],login") == ["gpu01", "gpu02", "gpu03", "gpu07", "login"]
    assert parse_index_list("0-2,5") == (0, 1, 2, 5)
    with pytest.raises(ValueError):
        parse_index_list("3-1")


def test_env_fallback_order():
    assert gpus_from_env({"SLURM_JOB_GPUS": "3", "CUDA_VISIBLE_DEVICES": "0,1"}) == (3,)
    assert gpus_from_env({"CUDA_VISIBLE_DEVICES": "GPU-abc", "GPU_DEVICE_ORDINAL": "1"}) == (1,)
    assert gpus_from_env({}) == ()


def test_start_time_and_class():
    assert start_time_from_scontrol(TYPED) == datetime(2026, 11, 23, 9, 0, 1).timestamp()
    assert start_time_from_scontrol("StartTime=Unknown") is None
    assert class_from_comment("team x pal:class=B,gpus=2 more", "A") == "B"
    assert class_from_comment("no marker", "A") == "A"
    assert class_from_comment(None, "C") == "C"


@pytest.mark.parametrize("bad", ["gpu[01-", "gpu[3-1]", "gpu[a-b]", "gpu]"])
def test_malformed_hostlists(bad):
    with pytest.raises(ValueError):
        expand_hostlist(bad)


ENDED = """JobId=9 JobState=COMPLETED
   StartTime=2026-11-23T09:20:34 EndTime=2026-11-23T09:20:37 Deadline=N/A
   JOB_GRES=gpu:s1:1,gpu:s3:1
     Nodes=gpu02 CPU_IDs=0 Mem=0 GRES=
   TresPerNode=gres:gpu:s1:1,gres:gpu:s3:1
"""


def test_ended_job_slots_come_from_typed_job_gres():
    """Captured from the lab: once the job ended, the per-node GRES is empty."""
    assert not gpus_from_scontrol(ENDED).get("gpu02")
    assert slots_from_typed_gres(ENDED) == (1, 3)
    assert slots_from_typed_gres("JOB_GRES=gpu:2") == ()
    assert slots_from_typed_gres("JOB_GRES=gpu:s1:1,gpu:a100:1") == ()
    assert end_time_from_scontrol(ENDED) - start_time_from_scontrol(ENDED) == 3.0
