"""Per-class binning of per-GPU scores into slowdown factors (sf).

A score is a GPU's normalised performance for one class (1.0 = median GPU, >1 slower). PAL
does not use raw scores: it groups GPUs into a few bins and treats every GPU in a bin as the
bin's centre, so that small noise does not reorder placements.

Methods:
- `artifact`: exactly the PAL artifact: K = 2 + number of slow outliers (> mean + 3 sd,
  sample sd), scikit-learn-style k-means++ (random_state=1, 10 restarts), and
  sf = centre / median(centres).
- `optimal` (default): exact 1-D k-means with K in 2..10 chosen by silhouette (a slow outlier
  still gets its own bin because it maximises separation), sf = centre / median(scores), so
  1.0 means "a typical GPU".
"""

from __future__ import annotations

import statistics

import numpy as np
from numpy.typing import ArrayLike

from pal_slurm.ranking.kmeans import artifact_kmeans, optimal_kmeans, silhouette_1d

METHODS = ("artifact", "optimal")


def slow_outliers(values: ArrayLike) -> int:
    """Count of values above mean + 3 * sample standard deviation (one-sided, as PAL)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return 0
    return int((x > x.mean() + 3 * x.std(ddof=1)).sum())


def artifact_bins(values: ArrayLike) -> tuple[float, ...]:
    """PAL artifact binning; returns sf per value, in input order."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return ()
    distinct = np.unique(x).size
    k = min(2 + slow_outliers(x), distinct)
    if k < 2:
        return tuple(1.0 for _ in x)
    labels, centers = artifact_kmeans(x, k)
    med = float(np.median(centers))
    return tuple(float(centers[l] / med) for l in labels)


def choose_k(values: ArrayLike, k_max: int = 10) -> int:
    """K in 2..k_max with the best silhouette on the exact clustering (ties: smaller K)."""
    x = np.asarray(values, dtype=np.float64)
    distinct = np.unique(x).size
    upper = min(k_max, distinct - 1 if distinct > 2 else distinct)
    if distinct < 2:
        return 1
    best_k, best_s = 2, -np.inf
    for k in range(2, max(upper, 2) + 1):
        labels, _ = optimal_kmeans(x, k)
        s = silhouette_1d(x, labels)
        if s > best_s + 1e-12:
            best_k, best_s = k, s
    return best_k


def optimal_bins(values: ArrayLike, k: int | None = None) -> tuple[float, ...]:
    """Exact k-means binning with silhouette-chosen K; sf = centre / median(values)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return ()
    k = choose_k(x) if k is None else k
    if k < 2:
        return tuple(1.0 for _ in x)
    labels, centers = optimal_kmeans(x, k)
    med = statistics.median(x.tolist())
    return tuple(float(centers[l] / med) for l in labels)


def bin_scores(values: ArrayLike, method: str = "optimal") -> tuple[float, ...]:
    if method == "artifact":
        return artifact_bins(values)
    if method == "optimal":
        return optimal_bins(values)
    raise ValueError(f"unknown binning method {method!r}; choose one of {', '.join(METHODS)}")
