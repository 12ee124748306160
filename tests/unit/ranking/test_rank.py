import pytest

from pal_slurm.model.sample import KIND_WALLTIME, Sample
from pal_slurm.ranking.rank import diff, rank_samples, robust_outliers
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.model.cluster import ClusterView


def smp(node, slot, v, cls="A", t=50.0, busy=False, backend="replay", rate=False, kind="bench"):
    return Sample(node, slot, cls, backend, v, rate, taken_at=t, busy=busy, kind=kind)


def fleet(values, cls="A", **kw):
    return [smp("n1", i, v, cls, **kw) for i, v in enumerate(values)]


def test_scores_are_normalised_by_the_class_median():
    snap = rank_samples(fleet([1.0, 1.0, 2.0]), now=100, window_s=100)
    assert [e.score for e in snap.entries] == [1.0, 1.0, 2.0]
    assert [e.bin for e in snap.entries] == [0, 0, 1]
    assert snap.entries[2].sf > snap.entries[0].sf


def test_rates_become_median_over_this():
    # kernel TFLOP/s: 100, 100, 50 -> score = median/this = 1, 1, 2
    snap = rank_samples(fleet([100.0, 100.0, 50.0], backend="kernel", rate=True), now=100, window_s=100)
    assert [round(e.score, 9) for e in snap.entries] == [1.0, 1.0, 2.0]


def test_window_busy_and_walltime_samples():
    samples = [
        smp("n1", 0, 1.0), smp("n1", 0, 9.0, busy=True),  # busy dropped
        smp("n1", 1, 1.0), smp("n1", 1, 5.0, t=-10.0),  # outside the window
        smp("n1", 2, 1.2, busy=True),  # only busy: used, flagged
        smp("n1", 0, 99.0, kind=KIND_WALLTIME),
    ]
    snap = rank_samples(samples, now=100, window_s=100)
    by = {e.slot: e for e in snap.entries}
    assert by[0].score == pytest.approx(1.0) and by[0].samples == 1
    assert by[1].samples == 1
    assert "busy-only" in by[2].flags and by[2].score == pytest.approx(1.2)


def test_noisy_gpu_and_slow_outlier_flags():
    samples = fleet([1.0] * 6) + fleet([1.01] * 6) + [smp("n2", 0, v) for v in (1.0, 1.0, 1.01, 1.0, 3.0)]
    samples += [smp("n3", i, 1.0 + i * 0.01) for i in range(6)] + [smp("n4", 0, 2.5)]
    snap = rank_samples(samples, now=100, window_s=100)
    by = {(e.node, e.slot): e for e in snap.entries}
    assert "noisy" in by[("n2", 0)].flags and "noisy" not in by[("n1", 0)].flags
    assert "slow-outlier" in by[("n4", 0)].flags
    assert "slow-outlier" not in by[("n1", 0)].flags


def test_one_backend_per_class():
    samples = fleet([1.0, 1.2]) + [smp("n9", 0, 300.0, backend="kernel", rate=True)]
    snap = rank_samples(samples, now=100, window_s=100)
    assert {e.backend for e in snap.entries} == {"replay"} and len(snap.entries) == 2


def test_robust_outliers():
    assert robust_outliers([1, 1, 1, 1]) == [False] * 4
    assert robust_outliers([1, 1.1, 0.9, 1.0, 5.0]) == [False, False, False, False, True]
    assert robust_outliers([1, 1.1, 0.9, 1.0, -5.0], upper_only=True)[-1] is False


def test_diff_reports_moves_new_and_gone():
    old = rank_samples(fleet([1.0, 1.0, 2.0, 2.0]), now=100, window_s=100, version=1)
    new = rank_samples(fleet([1.0, 2.0, 2.0]) + [smp("n5", 0, 1.0)], now=100, window_s=100, version=2)
    moves = {(m.node, m.slot): m for m in diff(old, new)}
    assert set(moves) == {("n1", 1), ("n1", 3), ("n5", 0)}
    assert (moves[("n1", 1)].old_bin, moves[("n1", 1)].new_bin) == (0, 1)
    assert moves[("n1", 3)].new_bin is None and moves[("n5", 0)].old_bin is None
    assert diff(new, new) == []


def test_snapshot_round_trip_and_policy_view():
    snap = rank_samples(fleet([1.0, 1.0, 2.0]) + fleet([1.0, 1.5, 1.0], cls="D"), now=100, window_s=100, version=3)
    again = RankingSnapshot.from_dict(snap.to_dict())
    assert again == snap
    view = ClusterView.from_layout([("n1", 4)])
    r = snap.to_ranking(view)
    assert r.version == 3 and r.sf("A")[2] > r.sf("A")[0] and r.sf("A")[3] == 1.0
    assert set(r.classes) == {"A", "D"}
