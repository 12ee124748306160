"""One-dimensional k-means, two ways.

- `artifact_kmeans`: what the PAL artifact gets from scikit-learn 1.2's
  `KMeans(n_clusters=K, init='k-means++', algorithm='lloyd', random_state=1, n_init=10)`
  on a column of per-GPU values: greedy k-means++ seeding from a NumPy `RandomState(1)`
  shared by the ten restarts, Lloyd iterations with sklearn's tolerance, best inertia kept.
  Re-implemented in NumPy so that reproducing the artifact needs no scikit-learn.
- `optimal_kmeans`: the exact optimum for 1-D data by dynamic programming over the sorted
  values (clusters are contiguous in sorted order), with a divide-and-conquer row minimum.
  Deterministic, no seeds; used by the project's default binning.

Both return (labels, centers) with labels indexing centers, in input order.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

Floats = NDArray[np.float64]
Labels = NDArray[np.intp]  # what np.argmin and np.unique's inverse give


def _kmeans_plusplus(x: Floats, k: int, rng: np.random.RandomState) -> Floats:
    n = x.shape[0]
    trials = 2 + int(np.log(k))
    centers = np.empty(k)
    centers[0] = x[rng.randint(n)]
    closest = (x - centers[0]) ** 2
    pot = closest.sum()
    for c in range(1, k):
        rand_vals = rng.uniform(size=trials) * pot
        cand = np.searchsorted(np.cumsum(closest, dtype=np.float64), rand_vals)
        np.clip(cand, None, n - 1, out=cand)
        dist = (x[cand][:, None] - x[None, :]) ** 2
        np.minimum(closest, dist, out=dist)
        pots = dist.sum(axis=1)
        best = int(np.argmin(pots))
        pot = pots[best]
        closest = dist[best]
        centers[c] = x[cand[best]]
    return centers


def _lloyd(x: Floats, centers: Floats, tol: float, max_iter: int = 300) -> tuple[Labels, Floats, float]:
    k = centers.shape[0]
    for _ in range(max_iter):
        labels = np.argmin((x[:, None] - centers[None, :]) ** 2, axis=1)
        new = centers.copy()
        for j in range(k):
            members = x[labels == j]
            if members.size:
                new[j] = members.mean()
            else:  # relocate an empty cluster to the farthest point (sklearn does the same idea)
                far = int(np.argmax(np.min((x[:, None] - new[None, :]) ** 2, axis=1)))
                new[j] = x[far]
        shift = float(((new - centers) ** 2).sum())
        centers = new
        if shift <= tol:
            break
    labels = np.argmin((x[:, None] - centers[None, :]) ** 2, axis=1)
    inertia = float(((x - centers[labels]) ** 2).sum())
    return labels, centers, inertia


def artifact_kmeans(values: ArrayLike, k: int, random_state: int = 1, n_init: int = 10) -> tuple[Labels, Floats]:
    """scikit-learn-1.2-style k-means on 1-D data (see module docstring)."""
    x = np.asarray(values, dtype=np.float64)
    if k < 1 or k > x.size:
        raise ValueError(f"k={k} needs 1..{x.size} points")
    mean = x.mean()
    xc = x - mean  # sklearn centres the data before fitting
    tol = float(np.var(xc)) * 1e-4
    rng = np.random.RandomState(random_state)
    best = None
    for _ in range(n_init):
        init = _kmeans_plusplus(xc, k, rng)
        labels, centers, inertia = _lloyd(xc, init, tol)
        if best is None or inertia < best[2]:
            best = (labels, centers, inertia)
    assert best is not None, "n_init must be >= 1"
    labels, centers, _ = best
    return labels, centers + mean


def optimal_kmeans(values: ArrayLike, k: int) -> tuple[Labels, Floats]:
    """Exact 1-D k-means (minimum within-cluster sum of squares).

    Runs over the *distinct* values weighted by their counts: an optimal clustering never splits
    equal values, so the optimum is the same, and a simulated cluster whose GPUs are drawn from a
    few hundred measured ones costs what those few hundred cost (8,192 GPUs: seconds -> ms).
    """
    x = np.asarray(values, dtype=np.float64)
    n_points = x.size
    if k < 1 or k > n_points:
        raise ValueError(f"k={k} needs 1..{n_points} points")
    s, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    n = s.size
    k_asked, k = k, min(k, n)  # more clusters than distinct values: the extra ones stay empty
    w = counts.astype(np.float64)
    p0 = np.concatenate(([0.0], np.cumsum(w)))
    p1 = np.concatenate(([0.0], np.cumsum(w * s)))
    p2 = np.concatenate(([0.0], np.cumsum(w * s * s)))

    def cost(i: NDArray[np.int64], j: int) -> Floats:  # weighted SSE of s[i:j] (vectorised in i)
        m = p0[j] - p0[i]
        tot = p1[j] - p1[i]
        sse: Floats = (p2[j] - p2[i]) - tot * tot / m
        return sse

    inf = math.inf
    prev = np.full(n + 1, inf)
    prev[0] = 0.0
    splits = []
    for _layer in range(k):
        cur = np.full(n + 1, inf)
        arg = np.zeros(n + 1, dtype=np.int64)

        def solve(lo: int, hi: int, olo: int, ohi: int) -> None:
            # compute cur[j] for j in [lo, hi] with optimal split in [olo, ohi]
            stack = [(lo, hi, olo, ohi)]
            while stack:
                lo_, hi_, olo_, ohi_ = stack.pop()
                if lo_ > hi_:
                    continue
                mid = (lo_ + hi_) // 2
                i = np.arange(olo_, min(mid, ohi_ + 1))
                if i.size:
                    vals = prev[i] + cost(i, mid)
                    b = int(np.argmin(vals))
                    cur[mid] = vals[b]
                    arg[mid] = i[b]
                    best_i = int(i[b])
                else:
                    best_i = olo_
                stack.append((lo_, mid - 1, olo_, best_i))
                stack.append((mid + 1, hi_, best_i, ohi_))

        solve(1, n, 0, n - 1)
        splits.append(arg)
        prev = cur
    # backtrack
    bounds = []
    j = n
    for layer in range(k - 1, -1, -1):
        i = int(splits[layer][j])
        bounds.append((i, j))
        j = i
    bounds.reverse()
    labels_distinct = np.empty(n, dtype=np.int64)
    centers = np.full(k_asked, np.nan)
    for c, (i, j) in enumerate(bounds):
        labels_distinct[i:j] = c
        centers[c] = (p1[j] - p1[i]) / (p0[j] - p0[i]) if j > i else np.nan
    return labels_distinct[inverse], centers


def silhouette_1d(values: ArrayLike, labels: ArrayLike) -> float:
    """Mean silhouette coefficient for 1-D data in O(n log n) (sorted prefix sums)."""
    x = np.asarray(values, dtype=np.float64)
    label_of = np.asarray(labels)
    ks = np.unique(label_of)
    if ks.size < 2 or ks.size >= x.size:
        return -1.0
    groups: dict[int, tuple[Floats, Floats]] = {}
    for c in ks:
        v = np.sort(x[label_of == c])
        groups[c] = (v, np.concatenate(([0.0], np.cumsum(v))))

    def mean_abs(v: Floats, pref: Floats, pt: Floats, exclude_self: bool) -> Floats:
        m = v.size
        idx = np.searchsorted(v, pt)
        left = pt * idx - pref[idx]
        right = (pref[m] - pref[idx]) - pt * (m - idx)
        denom = m - 1 if exclude_self else m
        mean: Floats = (left + right) / np.maximum(denom, 1)
        return mean

    total = 0.0
    for c in ks:
        v, pref = groups[c]
        if v.size == 1:
            continue  # silhouette of a singleton is 0
        a = mean_abs(v, pref, v, True)
        b = np.full(v.size, np.inf)
        for o in ks:
            if o == c:
                continue
            ov, opref = groups[o]
            b = np.minimum(b, mean_abs(ov, opref, v, False))
        denom = np.maximum(a, b)
        sil = np.where(denom > 0, (b - a) / np.where(denom > 0, denom, 1), 0.0)
        total += float(sil.sum())
    return total / x.size
