"""A job's GPU request from its TRES strings (pal_slurm.intake.tres)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pal_slurm.intake.gres import gres_name
from pal_slurm.intake.refusals import RefusedInput
from pal_slurm.intake.tres import (
    accounting_gpus,
    asks_for_gpus,
    canonical_tres,
    gpu_count,
    gpu_model,
    is_gpu,
    per_gpu,
    requested_model,
)

CASES = json.loads((Path(__file__).parents[2] / "golden" / "gpu_count.json").read_text())["cases"]


@pytest.mark.parametrize("tres, count", [(c["tres"], c["gpus"]) for c in CASES])
def test_gpu_count_matches_the_golden_table_the_lua_hook_uses(tres, count):
    assert gpu_count(tres) == count


def test_gpu_models_are_not_slot_types():
    assert gpu_model("gres:gpu:a100:2") == "a100"
    assert gpu_model("gres:gpu:s2:1,gres:gpu:s3:1") is None
    assert gpu_model("gres/gpu:s2:1,gres/gpu:s3:1") is None
    assert gpu_model("gres:gpu:2", None, "gres:gpu:v100:1") == "v100"


def test_a_gres_string_over_its_cap_is_refused_input():
    with pytest.raises(RefusedInput) as caught:
        gpu_model("gpu:a100:1," * 2000)
    assert caught.value.reason == "input-too-large:gres"


def test_per_gpu_amounts():
    assert per_gpu("gres:gpu:2") == 2 and per_gpu("gres/gpu:4") == 4 and per_gpu("gpu:3") == 3
    assert per_gpu("") == 0 and per_gpu(None) == 0 and per_gpu("gres:gpu:a100:2") == 0
    assert per_gpu("cpu:1,gres/gpu:5") == 5 and per_gpu("nic:gpu:2") == 0


def test_canonical_tres_and_asks_for_gpus():
    assert canonical_tres("gres/gpu:s2:1,gres/gpu:s3:1") == "gres:gpu:s2:1,gres:gpu:s3:1"
    assert canonical_tres("gres:gpu:2") == "gres:gpu:2" and canonical_tres("") == ""
    assert asks_for_gpus("cpu=1,gres/gpu=1") and not asks_for_gpus("cpu=2") and not asks_for_gpus(None)


def test_accounting_counts_and_models():
    assert accounting_gpus([("gpu", 4), ("gpu:a100", 4), ("nic", 1)]) == 4  # the plain total wins
    assert accounting_gpus([("gpu:a100", 2), ("gpu:v100", 1)]) == 3  # typed only: summed
    assert accounting_gpus([("cpu", 8)]) == 0
    assert requested_model(["gpu", "gpu:s2", "gpu:a100"]) == "a100"  # slot types are no model
    assert requested_model(["gpu:", "nic:x"]) is None
    assert gres_name("gres/gpu:a100") == "gpu:a100" and gres_name("cpu") is None and gres_name("gres:gpu") is None
    assert is_gpu("gpu") and is_gpu("gpu:a100") and not is_gpu("gpux")
