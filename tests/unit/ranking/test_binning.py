import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pal_slurm.ranking.binning import artifact_bins, choose_k, optimal_bins, slow_outliers
from pal_slurm.ranking.kmeans import optimal_kmeans, silhouette_1d
from pal_slurm.ranking.profiles import artifact_profiles


def test_artifact_binning_reproduces_the_artifacts_classA_bins():
    # The PAL artifact's 64-GPU Sia cluster: class A gets K=3 with sf {0.9128, 1.0, 2.5946}.
    perfvar, _ = artifact_profiles(64)
    sf = artifact_bins(perfvar["A"])
    assert sorted({round(v, 4) for v in sf}) == [0.9128, 1.0, 2.5946]
    # the one outlier GPU (35, PerfVar 2.83) is alone in the slow bin
    slow = [g for g, v in enumerate(sf) if v > 2]
    assert slow == [35]
    assert max(perfvar["A"]) == pytest.approx(2.828, abs=1e-3)


def test_artifact_binning_gives_two_bins_without_outliers():
    perfvar, _ = artifact_profiles(64)
    for cls in "BCD":
        assert len(set(artifact_bins(perfvar[cls]))) == 2


def test_slow_outliers_is_one_sided():
    values = [1.0] * 30 + [0.1, 5.0]
    assert slow_outliers(values) == 1


def _brute_force_sse(x, k):
    s = sorted(x)
    best = np.inf
    for cuts in itertools.combinations(range(1, len(s)), k - 1):
        bounds = (0, *cuts, len(s))
        sse = sum(np.var(s[a:b]) * (b - a) for a, b in zip(bounds, bounds[1:]))
        best = min(best, sse)
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 3.0, allow_nan=False), min_size=3, max_size=9), st.integers(1, 3))
def test_optimal_kmeans_matches_brute_force(values, k):
    k = min(k, len(values))
    labels, centers = optimal_kmeans(values, k)
    x = np.asarray(values)
    sse = sum(((x[labels == c] - centers[c]) ** 2).sum() for c in range(k) if (labels == c).any())
    assert sse == pytest.approx(_brute_force_sse(values, k), rel=1e-9, abs=1e-12)


def test_silhouette_picks_the_planted_number_of_groups():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(1.0, 0.005, 40), rng.normal(1.1, 0.005, 20), rng.normal(1.4, 0.005, 4)])
    assert choose_k(x) == 3
    sf = optimal_bins(x)
    assert len(set(sf)) == 3
    # the median GPU's bin is ~1.0 and the slow group is ~1.4x
    assert min(sf) == pytest.approx(1.0, abs=0.01)
    assert max(sf) == pytest.approx(1.4, abs=0.02)


def test_silhouette_of_perfect_split_is_high_and_of_bad_split_low():
    x = [1.0, 1.01, 1.02, 2.0, 2.01]
    good = silhouette_1d(x, [0, 0, 0, 1, 1])
    bad = silhouette_1d(x, [0, 1, 0, 1, 0])
    assert good > 0.9 and bad < 0


def test_optimal_bins_keep_the_order_of_gpus():
    x = [1.0, 2.0, 1.01, 2.02, 0.99]
    sf = optimal_bins(x, k=2)
    assert sf[0] == sf[2] == sf[4] < sf[1] == sf[3]


def test_constant_scores_give_one_bin():
    assert set(optimal_bins([1.0] * 8)) == {1.0}
    assert set(artifact_bins([1.0] * 8)) == {1.0}


def test_unknown_method_is_a_clear_error():
    from pal_slurm.ranking.binning import bin_scores

    with pytest.raises(ValueError, match="unknown binning method"):
        bin_scores([1.0, 2.0], "magic")
