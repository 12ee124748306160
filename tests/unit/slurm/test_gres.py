"""Per-slot typed GRES generation (pure)."""

from __future__ import annotations

import pytest

from pal_slurm.slurm import gres


def test_gres_conf_has_one_typed_line_per_slot() -> None:
    assert gres.gres_conf_lines("gpu[01-04]", 4) == [
        "AutoDetect=off",
        "NodeName=gpu[01-04] Name=gpu Type=s0 File=/dev/nvidia0",
        "NodeName=gpu[01-04] Name=gpu Type=s1 File=/dev/nvidia1",
        "NodeName=gpu[01-04] Name=gpu Type=s2 File=/dev/nvidia2",
        "NodeName=gpu[01-04] Name=gpu Type=s3 File=/dev/nvidia3",
    ]


def test_gres_conf_accepts_node_list_and_device_pattern() -> None:
    lines = gres.gres_conf_lines(["b02", "b01"], 2, "/lab/dev/gpu{slot}", autodetect_off=False)
    assert lines == [
        "NodeName=b[01-02] Name=gpu Type=s0 File=/lab/dev/gpu0",
        "NodeName=b[01-02] Name=gpu Type=s1 File=/lab/dev/gpu1",
    ]


def test_node_gres_field_and_tres_strings() -> None:
    assert gres.node_gres_field(4) == "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1"
    assert gres.tres_per_node([3, 2]) == "gres:gpu:s2:1,gres:gpu:s3:1"
    assert gres.gres_update_spec([3, 2, 3]) == "gpu:s2:1,gpu:s3:1"


@pytest.mark.parametrize(
    "call",
    [
        lambda: gres.gres_conf_lines("gpu[01-02]", 0),
        lambda: gres.gres_conf_lines("gpu[01-02]", True),
        lambda: gres.gres_conf_lines("", 4),
        lambda: gres.gres_conf_lines("gpu01", 2, "/dev/nvidia"),
        lambda: gres.gres_conf_lines("gpu01", 2, "/dev/nvidia{slot}{x}"),
        lambda: gres.node_gres_field(-1),
        lambda: gres.tres_per_node([]),
        lambda: gres.slot_type(-1),
    ],
)
def test_bad_input_is_a_value_error(call) -> None:
    with pytest.raises(ValueError):
        call()
