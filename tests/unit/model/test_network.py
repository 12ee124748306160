"""The network vocabulary (model.network)."""

import math

from hypothesis import given, strategies as st

from pal_slurm.model.network import (
    HIGH_AT,
    MAX_DECLARED_FACTOR,
    MEDIUM_AT,
    Sensitivity,
    class_of_factor,
    declared_factor,
    is_known_sensitivity,
    sensitivity_class,
    sensitivity_rank,
)


def test_sensitivity_rank_reads_names_and_members_and_counts_unknown_as_high():
    assert [sensitivity_rank(s) for s in ("none", "low", "medium", "high")] == [0, 1, 2, 3]
    assert [sensitivity_rank(s) for s in Sensitivity] == [0, 1, 2, 3]  # members hash by name, not value
    assert sensitivity_rank("extreme") == sensitivity_rank("HIGH") == 3


def test_a_numeric_sensitivity_is_a_spread_factor_in_the_class_it_defines():
    assert declared_factor("2.2") == 2.2 and declared_factor("1") == 1.0 and declared_factor(".5") is None
    assert [sensitivity_class(x) for x in ("1.1", "1.33", "2.22", "3", "7.78")] == ["low", "medium", "medium", "high", "high"]
    assert [sensitivity_rank(x) for x in ("1.1", "2.22", "7.78")] == [1, 2, 3]
    assert sensitivity_class("medium") == "medium" and sensitivity_class("loud") == "loud"


def test_what_is_no_factor_is_unknown_and_ranks_as_high():
    for bad in ("0.99", "0", "nan", "inf", "1e400", str(MAX_DECLARED_FACTOR * 2), "2.2.2", "2,2", "loud"):
        assert declared_factor(bad) is None, bad
        assert not is_known_sensitivity(bad) and sensitivity_rank(bad) == 3
    assert all(is_known_sensitivity(x) for x in ("low", "medium", "high", "1", "2.2", str(MAX_DECLARED_FACTOR)))


@given(st.floats(1.0, MAX_DECLARED_FACTOR))
def test_every_factor_in_range_reads_back_and_falls_in_its_class(x):
    text = repr(x)
    assert math.isclose(declared_factor(text), x)
    expect = "high" if x >= HIGH_AT else "medium" if x >= MEDIUM_AT else "low"
    assert sensitivity_class(text) == class_of_factor(x) == expect
