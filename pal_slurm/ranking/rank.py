"""Samples -> a (node, slot)-keyed ranking snapshot, and what moved between bins. Pure.

Per (class, GPU): the median of the GPU's samples in the window; busy samples are dropped
unless the GPU has nothing else (then flagged `busy-only`); runs far from the GPU's own median
(MAD rule) flag it `noisy`. Per class: slowness is normalised by the class median (1.0 = the
median GPU, >1 slower), GPUs far above the fleet (MAD rule) are flagged `slow-outlier`, and
scores are binned with `pal_slurm.ranking.binning.bin_scores`. Only one backend's samples are
compared within a class (TFLOP/s and clock ratios do not mix): the backend with the most GPUs.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from pal_slurm.model.sample import KIND_BENCH, Sample
from pal_slurm.model.classes import class_rank
from pal_slurm.ranking.binning import bin_scores
from pal_slurm.ranking.snapshot import RankingEntry, RankingSnapshot, utc_from_epoch

MAD_K = 3.5  # robust z-score beyond which a value counts as an outlier (Iglewicz-Hoaglin)
MAD_SCALE = 1.4826  # MAD -> standard deviation for normal data


@dataclass(frozen=True)
class Move:
    perf_class: str
    node: str
    slot: int
    old_bin: int | None  # None: new GPU
    new_bin: int | None  # None: GPU gone
    old_sf: float | None
    new_sf: float | None


def robust_outliers(values: Sequence[float], k: float = MAD_K, upper_only: bool = False) -> list[bool]:
    """MAD rule: |x - median| > k * 1.4826 * MAD (MAD = 0: 1.2533 * mean abs deviation)."""
    if len(values) < 3:
        return [False] * len(values)
    med = statistics.median(values)
    dev = [abs(v - med) for v in values]
    mad = statistics.median(dev) * MAD_SCALE
    if mad <= 0:  # over half the values equal: fall back to the mean absolute deviation
        mad = 1.253314 * statistics.fmean(dev)
    if mad <= 0:
        return [False] * len(values)
    return [((v - med) if upper_only else abs(v - med)) > k * mad for v in values]


def _bins_index(sf: Sequence[float]) -> list[int]:
    levels = sorted(set(round(x, 12) for x in sf))
    return [levels.index(round(x, 12)) for x in sf]


def rank_samples(
    samples: Iterable[Sample],
    *,
    now: float,
    window_s: float,
    method: str = "optimal",
    version: int = 1,
    classes: Sequence[str] | None = None,
) -> RankingSnapshot:
    """Build a snapshot from the benchmark samples taken in (now - window_s, now]."""
    groups: dict[str, dict[str, dict[tuple[str, int], list[Sample]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for s in samples:
        if s.kind != KIND_BENCH or not (now - window_s < s.taken_at <= now):
            continue
        if classes is not None and s.perf_class not in classes:
            continue
        groups[s.perf_class][s.backend][(s.node, s.slot)].append(s)
    entries: list[RankingEntry] = []
    for c in sorted(groups, key=lambda c: (class_rank(c), c)):
        backend, per_gpu = max(groups[c].items(), key=lambda kv: (len(kv[1]), kv[0]))
        keys = sorted(per_gpu)
        medians, used, flags = [], [], []
        for key in keys:
            runs = per_gpu[key]
            quiet = [s for s in runs if not s.busy]
            f = []
            if not quiet:
                quiet = runs
                f.append("busy-only")
            vals = [s.slowness() for s in quiet]
            if any(robust_outliers(vals)):
                f.append("noisy")
            medians.append(statistics.median(vals))
            used.append(len(vals))
            flags.append(f)
        class_med = statistics.median(medians)
        scores = [m / class_med if class_med > 0 else 1.0 for m in medians]
        for i, out in enumerate(robust_outliers(scores, upper_only=True)):
            if out:
                flags[i].append("slow-outlier")
        sf = bin_scores(scores, method) if len(scores) > 1 else tuple(1.0 for _ in scores)
        idx = _bins_index(sf)
        for key, score, s_f, b, n, f in zip(keys, scores, sf, idx, used, flags):
            entries.append(RankingEntry(key[0], key[1], c, float(score), float(s_f), b, tuple(f), n, backend))
    return RankingSnapshot(version, method, utc_from_epoch(now), tuple(entries))


def diff(previous: RankingSnapshot | None, current: RankingSnapshot) -> list[Move]:
    """GPUs whose bin changed (or that appeared/disappeared), class by class."""
    old = previous.by_key() if previous else {}
    new = current.by_key()
    moves = []
    for key in sorted(set(old) | set(new), key=lambda k: (class_rank(k[0]), k)):
        o, n = old.get(key), new.get(key)
        if o and n and o.bin == n.bin:
            continue
        moves.append(
            Move(
                key[0], key[1], key[2],
                o.bin if o else None, n.bin if n else None,
                o.sf if o else None, n.sf if n else None,
            )
        )
    return moves
