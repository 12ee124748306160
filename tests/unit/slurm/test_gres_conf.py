"""A site's gres.conf -> the per-slot one (pal_slurm/slurm/gres_conf.py). The inputs are written
in the forms gres.conf(5) documents for Slurm 22.05-24.11 (whole-cluster files with NodeName
ranges, per-device lines with Cores=, other GRES next to the GPUs, AutoDetect)."""

from __future__ import annotations

import pytest

from pal_slurm.slurm.gres_conf import GresConfUnsupported, device_files, slot_conf

WHOLE_CLUSTER = """\
# one gres.conf for the whole cluster
NodeName=tux[0-15]  Name=gpu File=/dev/nvidia[0-3]
NodeName=tux[16-31] Name=gpu File=/dev/nvidia[0-7]
"""

PER_DEVICE = """\
AutoDetect=off
Name=gpu File=/dev/nvidia0 Cores=0,1
Name=gpu File=/dev/nvidia1 Cores=0,1
Name=gpu File=/dev/nvidia2 Cores=2,3
Name=gpu File=/dev/nvidia3 Cores=2,3   # the second socket
Name=mps Count=200 File=/dev/nvidia0
Name=bandwidth Type=lustre Count=4G Flags=CountOnly
"""


def test_device_ranges():
    assert device_files("/dev/nvidia[0-3]") == [f"/dev/nvidia{i}" for i in range(4)]
    assert device_files("/dev/nvidia[0,2-3]") == ["/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia3"]
    assert device_files("/dev/nvidia0,/dev/nvidia1") == ["/dev/nvidia0", "/dev/nvidia1"]
    assert device_files("/dev/dri/card[00-01]") == ["/dev/dri/card00", "/dev/dri/card01"]


def test_whole_cluster_file_with_node_ranges():
    conf = slot_conf(WHOLE_CLUSTER)
    assert conf.lines[0] == "AutoDetect=off"
    assert "NodeName=tux[0-15] Name=gpu Type=s3 File=/dev/nvidia3" in conf.lines
    assert "NodeName=tux[16-31] Name=gpu Type=s7 File=/dev/nvidia7" in conf.lines
    assert not any("tux[0-15]" in line and "Type=s4" in line for line in conf.lines)
    assert conf.gres_fields == {"tux[0-15]": "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1",
                                "tux[16-31]": ",".join(f"gpu:s{i}:1" for i in range(8))}


def test_per_device_lines_keep_cores_and_other_gres():
    conf = slot_conf(PER_DEVICE, nodes="gpu[01-02]")
    assert "NodeName=gpu[01-02] Name=gpu Type=s0 File=/dev/nvidia0 Cores=0,1" in conf.lines
    assert "NodeName=gpu[01-02] Name=gpu Type=s3 File=/dev/nvidia3 Cores=2,3" in conf.lines
    assert conf.lines[-2:] == ["Name=mps Count=200 File=/dev/nvidia0",
                               "Name=bandwidth Type=lustre Count=4G Flags=CountOnly"]
    assert conf.gres_fields == {"gpu[01-02]": "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1"}


def test_case_insensitive_keys_and_count_that_agrees():
    conf = slot_conf("nodename=n1 name=gpu count=2 file=/dev/nvidia[0-1]\n")
    assert conf.lines[1:] == ["NodeName=n1 Name=gpu Type=s0 File=/dev/nvidia0",
                              "NodeName=n1 Name=gpu Type=s1 File=/dev/nvidia1"]


@pytest.mark.parametrize("text, why", [
    ("AutoDetect=nvml\n", "AutoDetect takes GPU types"),
    ("NodeName=tux[0-7] AutoDetect=nvml\nNodeName=tux[8-9] Name=gpu File=/dev/nvidia[0-3]\n", "AutoDetect"),
    ("NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-1]\nNodeName=n1 Name=gpu Type=v100 File=/dev/nvidia[2-3]\n",
     "n1 has GPUs of two models (a100 and v100)"),
    ("NodeName=n1 Name=gpu Type=a100@x File=/dev/nvidia0\n", "cannot be a node feature"),
    ("NodeName=n1 Name=gpu Count=4\n", "without File="),
    ("NodeName=n1 Name=gpu File=/dev/nvidia[0-3] Count=2\n", "Count=2 but 4 device file(s)"),
    ("NodeName=n1 Name=gpu File=/dev/nvidia0 Links=-1,0\n", "links is not carried over"),
    ("Name=gpu File=/dev/nvidia0\n", "no NodeName="),
    ("NodeName=n1 Name=gpu File=/dev/nvidia0\nNodeName=n1 Name=gpu File=/dev/nvidia0\n", "listed twice"),
    ("# nothing\nName=mps Count=100\n", "no GPU lines"),
    ("NodeName=n1 Name=gpu File\n", "not Key=Value"),
])
def test_what_is_not_carried_over_is_refused_with_the_line(text, why):
    with pytest.raises(GresConfUnsupported) as err:
        slot_conf(text)
    assert why in str(err.value)


TWO_MODELS = """\
AutoDetect=off
NodeName=gpu[01-02] Name=gpu Type=a100 File=/dev/nvidia[0-3]
NodeName=gpu[03-04] Name=gpu Type=v100 File=/dev/nvidia[0-3]
"""


def test_gpu_models_become_node_features_and_the_slots_types():
    conf = slot_conf(TWO_MODELS)
    assert "NodeName=gpu[01-02] Name=gpu Type=s3 File=/dev/nvidia3" in conf.lines
    assert "NodeName=gpu[03-04] Name=gpu Type=s0 File=/dev/nvidia0" in conf.lines
    assert not any("a100" in line or "v100" in line for line in conf.lines)
    assert conf.models == {"gpu[01-02]": "a100", "gpu[03-04]": "v100"}
    assert conf.model_names == ["a100", "v100"]
    assert set(conf.gres_fields) == {"gpu[01-02]", "gpu[03-04]"}
    assert slot_conf(WHOLE_CLUSTER).models == {}
