"""Slurm's numbers as its JSON prints them (pal_slurm.intake.slurm_numbers)."""

from __future__ import annotations

import json
from pathlib import Path

from pal_slurm.intake.durations import minutes_field
from pal_slurm.intake.slurm_numbers import INFINITE, NO_VAL, UNSET_FROM, count, is_unset, number

GOLDEN = json.loads((Path(__file__).parents[2] / "golden" / "slurm_durations.json").read_text())


def test_number_objects() -> None:
    assert number({"set": True, "infinite": False, "number": 5}) == 5
    assert number({"set": False, "infinite": False, "number": 0}) is None
    assert number({"set": True, "infinite": True, "number": 0}) is None
    assert number(7) == 7 and number("x") == "x"


def test_unset_values() -> None:
    assert is_unset(NO_VAL) and is_unset(INFINITE) and is_unset(UNSET_FROM)
    assert not is_unset(UNSET_FROM - 1) and not is_unset(0)


def test_counts_drop_unset_and_junk() -> None:
    assert count(5) == 5 and count(0) == 0
    assert count(NO_VAL) == 0 and count(INFINITE, -1) == -1 and count(-1) == 0
    assert count(True) == 0 and count("5") == 0 and count(None, 3) == 3


def test_the_minutes_golden_table_agrees_on_unset() -> None:
    """The shared table's unset minutes are unset here too (durations reads them through here)."""
    checked = 0
    for case in GOLDEN["minutes"]:
        value = case["value"]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            assert (minutes_field(value) is None) == is_unset(value), case
            checked += 1
    assert checked >= 3
