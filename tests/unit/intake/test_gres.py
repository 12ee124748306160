"""GRES strings as Slurm prints them (pal_slurm.intake.gres): both releases' spellings of a
job's TRES items, index lists and their caps, and the GPU slot types."""

from __future__ import annotations

import pytest

from pal_slurm.intake.gres import (
    GresItem,
    gpu_indices,
    gpus_in,
    parse_gres,
    parse_index_list,
    parse_slot_type,
    slash_spelled,
    slots_named,
    unprefixed,
)
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.gres import slot_type


@pytest.mark.parametrize(
    "text, items",
    [
        ("gpu:4", [GresItem("gpu", None, 4)]),
        ("gpu:a100:4(S:0-1)", [GresItem("gpu", "a100", 4)]),
        ("gpu:2(IDX:0-1)", [GresItem("gpu", None, 2, frozenset({0, 1}))]),
        ("gpu:3(IDX:0,2-3)", [GresItem("gpu", None, 3, frozenset({0, 2, 3}))]),
        (
            "gpu:s0:0(IDX:N/A),gpu:s2:1(IDX:2)",
            [GresItem("gpu", "s0", 0), GresItem("gpu", "s2", 1, frozenset({2}))],
        ),
        ("gpu:s2:0(IDX:)", [GresItem("gpu", "s2", 0, frozenset())]),
        ("gres:gpu:s2:1,gres:gpu:s3:1", [GresItem("gpu", "s2", 1), GresItem("gpu", "s3", 1)]),
        # 23.02+ spells a job's TRES items gres/...: the same items
        ("gres/gpu:s2:1,gres/gpu:s3:1", [GresItem("gpu", "s2", 1), GresItem("gpu", "s3", 1)]),
        ("gres/gpu:v100:1", [GresItem("gpu", "v100", 1)]),
        ("gres/gpu:2", [GresItem("gpu", None, 2)]),
        # 24.11's tres_per_task (--gpus-per-task=1 -n 2, seen in the hook): name=count items
        ("cpu=1,gres/gpu=1", [GresItem("cpu", None, 1), GresItem("gpu", None, 1)]),
        ("gres/gpu:a100=2", [GresItem("gpu", "a100", 2)]),
        ("gpu:a100", [GresItem("gpu", "a100", 1)]),
        ("(null)", []),
        ("", []),
        (None, []),
    ],
)
def test_parse_gres(text, items) -> None:
    assert list(parse_gres(text)) == items


@pytest.mark.parametrize("bad", ["gpu:s0:x", ":4", "gpu:a:b:c:d", "gpu:2(IDX:0-x)"])
def test_parse_gres_rejects_garbage(bad: str) -> None:
    with pytest.raises(SlurmParseError):
        parse_gres(bad)


def test_index_lists() -> None:
    assert parse_index_list("0-1,3") == {0, 1, 3}
    assert parse_index_list("") == frozenset()
    assert gpu_indices(parse_gres("gpu:3")) is None  # a count without indices: unknown
    assert gpu_indices(parse_gres("gpu:0")) == frozenset()


@pytest.mark.parametrize("text", ["0-2999999", "1024", "5," * 3000, "0-1x", "-1"])
def test_index_list_is_capped_before_it_is_built(text: str) -> None:
    """A user's `gpu:a100:1(IDX:0-2999999)` was 3 million indices: refused unbuilt."""
    with pytest.raises(SlurmParseError):
        parse_index_list(text)
    assert parse_index_list("0-1023") == frozenset(range(1024))


def test_gres_string_length_is_capped() -> None:
    with pytest.raises(SlurmParseError):
        parse_gres("gpu:a100:1(IDX:" + ",".join("1" for _ in range(20_000)) + ")")
    assert parse_gres("gpu:2(IDX:0,1)")[0].indices == {0, 1}


def test_one_prefix_rule_for_both_spellings() -> None:
    assert unprefixed("gres:gpu:2") == unprefixed("gres/gpu:2") == unprefixed("gpu:2") == "gpu:2"
    assert unprefixed("gres") == "gres" and unprefixed("license/x") == "license/x"


def test_gpus_and_slots_named() -> None:
    assert gpus_in(parse_gres("gpu:s0:1,gpu:s1:2,nic:4")) == 3
    assert slots_named("gres/gpu:s3:1,gpu:s1:1") == (1, 3)
    assert slots_named("gpu:s1:1,gpu:2") == ()  # an untyped item: the slots are not all known
    assert slots_named("gpu:s0:x") == ()


def test_slot_types_round_trip() -> None:
    assert [parse_slot_type(slot_type(s)) for s in range(10)] == list(range(10))
    assert parse_slot_type("a100") is None
    assert parse_slot_type("sx") is None
    assert parse_slot_type(None) is None


def test_slash_spelling_is_seen_per_item() -> None:
    assert slash_spelled("cpu=1,gres/gpu=1") and slash_spelled("gres/gpu:2")
    assert not slash_spelled("gres:gpu:2") and not slash_spelled("")
