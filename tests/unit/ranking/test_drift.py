"""Drift between two rankings: slower beyond a threshold or another bin; new/gone GPUs are not drift."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pal_slurm.ranking.drift import find_drift
from pal_slurm.store.records import RankingEntry


def e(node, slot, score, b=0, cls="A"):
    return RankingEntry(node, slot, cls, score, 1.0 + 0.1 * b, b)


def test_slower_beyond_threshold_and_bin_moves_are_reported_worst_first():
    old = [e("n1", 0, 1.00), e("n1", 1, 1.00), e("n2", 0, 1.00), e("n2", 1, 1.10, b=1)]
    new = [e("n1", 0, 1.03), e("n1", 1, 1.20, b=1), e("n2", 0, 1.08), e("n2", 1, 1.00, b=0)]
    drifts = find_drift(old, new, threshold=0.05)
    assert [(d.node, d.slot) for d in drifts] == [("n1", 1), ("n2", 0), ("n2", 1)]
    assert drifts[0].change == pytest.approx(0.20)
    assert drifts[0].old_bin == 0 and drifts[0].new_bin == 1
    assert not drifts[2].slower  # faster but moved bins: still reported
    assert "n1:1 class A" in drifts[0].describe() and "+20.0%" in drifts[0].describe()


def test_new_and_gone_gpus_and_other_classes_are_not_drift():
    old = [e("n1", 0, 1.0), e("gone", 0, 1.0)]
    new = [e("n1", 0, 1.0), e("new", 0, 3.0), e("n1", 0, 2.0, cls="B")]
    assert find_drift(old, new, threshold=0.05) == []


def test_threshold_must_be_positive():
    with pytest.raises(ValueError):
        find_drift([], [], threshold=0)


@given(st.lists(st.floats(0.5, 3.0), min_size=1, max_size=20), st.floats(0.01, 0.5))
def test_reported_iff_worse_than_threshold_when_bins_stay(scores, threshold):
    old = [e("n", i, 1.0) for i in range(len(scores))]
    new = [e("n", i, s) for i, s in enumerate(scores)]
    reported = {d.slot for d in find_drift(old, new, threshold)}
    assert reported == {i for i, s in enumerate(scores) if s / 1.0 - 1.0 > threshold}
