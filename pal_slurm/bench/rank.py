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
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Sequence

from pal_slurm.bench.base import KIND_BENCH, Sample
from pal_slurm.model.classes import class_rank
from pal_slurm.model.cluster import ClusterView
from pal_slurm.ranking.binning import bin_scores
from pal_slurm.ranking.snapshot import ClassRanking, Ranking

MAD_K = 3.5  # robust z-score beyond which a value counts as an outlier (Iglewicz-Hoaglin)
MAD_SCALE = 1.4826  # MAD -> standard deviation for normal data


@dataclass(frozen=True)
class RankEntry:
    node: str
    slot: int
    perf_class: str
    score: float  # median slowness / class median (1.0 = median GPU, >1 slower)
    sf: float  # binned slowdown factor
    bin: int  # 0 = fastest bin of the class
    samples: int = 0  # samples used (0: not known, e.g. read back from the store)
    backend: str = ""  # backend whose samples ranked this class ("" when not known)
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankingSnapshot:
    version: int
    method: str
    created_at: float
    entries: tuple[RankEntry, ...] = ()

    def by_key(self) -> dict[tuple[str, str, int], RankEntry]:
        return {(e.perf_class, e.node, e.slot): e for e in self.entries}

    def classes(self) -> list[str]:
        return sorted({e.perf_class for e in self.entries}, key=lambda c: (class_rank(c), c))

    def to_ranking(self, cluster: ClusterView) -> Ranking:
        """A gpu_id-indexed Ranking for policies; GPUs without an entry get 1.0."""
        loc = cluster.gpu_by_location()
        out = {}
        for c in self.classes():
            scores = [1.0] * cluster.size
            sf = [1.0] * cluster.size
            for e in self.entries:
                if e.perf_class == c and (e.node, e.slot) in loc:
                    scores[loc[(e.node, e.slot)]] = e.score
                    sf[loc[(e.node, e.slot)]] = e.sf
            out[c] = ClassRanking(c, tuple(scores), tuple(sf))
        return Ranking(self.version, self.method, out)

    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "method": self.method,
            "created_at": self.created_at,
            "entries": [dict(asdict(e), flags=list(e.flags)) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "RankingSnapshot":
        entries = tuple(
            RankEntry(**{**e, "flags": tuple(e.get("flags", ()))}) for e in d.get("entries", ())
        )
        return cls(int(d["version"]), str(d["method"]), float(d.get("created_at", 0.0)), entries)


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
    entries: list[RankEntry] = []
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
            entries.append(RankEntry(key[0], key[1], c, float(score), float(s_f), b, n, backend, tuple(f)))
    return RankingSnapshot(version, method, now, tuple(entries))


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


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """'90', '30m', '12h', '7d', '2w' -> seconds; ValueError for anything else or <= 0."""
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:]) if t else None
    number = t[:-1] if unit else t
    try:
        value = float(number) * (unit or 1.0)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 3600, 30m, 12h, 7d)") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"a duration must be > 0, got {text!r}")
    return value
