"""Rankings, in the two keys they are used with. Pure: no store, no clock.

- `RankingSnapshot` / `RankingEntry`: the ranking as measured and stored, keyed by (node, slot)
  - what Slurm and the prolog know. The one snapshot type: `palctl rank` makes it from samples
  (`pal_slurm.ranking.rank`), the store keeps it, pald and the simulator read it.
- `Ranking` / `ClassRanking`: per class, each GPU's score and binned slowdown factor (sf),
  indexed by the gpu_id of one ClusterView (`RankingSnapshot.to_ranking`). Policies only read it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from pal_slurm.model.classes import CLASS_ORDER, class_rank
from pal_slurm.ranking.binning import bin_scores

if TYPE_CHECKING:
    from pal_slurm.model.cluster import ClusterView


@dataclass(frozen=True)
class ClassRanking:
    perf_class: str
    scores: tuple[float, ...]  # per gpu_id: normalised performance, 1.0 = median, >1 slower
    sf: tuple[float, ...]  # per gpu_id: binned slowdown factor


@dataclass(frozen=True)
class Ranking:
    version: int
    method: str
    classes: Mapping[str, ClassRanking] = field(default_factory=dict)

    @classmethod
    def from_scores(
        cls, scores: Mapping[str, Sequence[float]], method: str = "optimal", version: int = 1
    ) -> "Ranking":
        """Bin each class's per-GPU scores with `method` ('artifact' or 'optimal')."""
        out = {}
        for c, vals in scores.items():
            vals = tuple(float(v) for v in vals)
            out[c] = ClassRanking(c, vals, bin_scores(vals, method))
        return cls(version, method, out)

    @classmethod
    def uniform(cls, num_gpus: int, version: int = 0) -> "Ranking":
        """No knowledge: every GPU scores 1.0 in every class."""
        ones = tuple(1.0 for _ in range(num_gpus))
        return cls(version, "uniform", {c: ClassRanking(c, ones, ones) for c in CLASS_ORDER})

    def sf(self, perf_class: str) -> tuple[float, ...]:
        """Binned factors for a class; an unknown class falls back to the most sensitive one."""
        if perf_class in self.classes:
            return self.classes[perf_class].sf
        for c in CLASS_ORDER:
            if c in self.classes:
                return self.classes[c].sf
        raise KeyError(f"ranking v{self.version} has no classes")

    def scores(self, perf_class: str) -> tuple[float, ...]:
        if perf_class in self.classes:
            return self.classes[perf_class].scores
        return self.classes[next(c for c in CLASS_ORDER if c in self.classes)].scores


@dataclass(frozen=True)
class RankingEntry:
    """One GPU's place in one class's ranking."""

    node: str
    slot: int
    perf_class: str
    score: float  # median slowness / class median (1.0 = median GPU, >1 slower)
    sf: float  # binned slowdown factor
    bin: int  # 0 = fastest bin of the class
    flags: tuple[str, ...] = ()  # e.g. ("slow-outlier",), ("busy-only",), ("noisy",)
    samples: int = 0  # samples used (0: not known, e.g. read back from the store)
    backend: str = ""  # backend whose samples ranked this class ("" when not known)


@dataclass(frozen=True)
class RankingSnapshot:
    """A versioned ranking of every measured GPU; `created_at` is aware UTC."""

    version: int
    method: str  # binning method: optimal | artifact | imported ...
    created_at: datetime
    entries: tuple[RankingEntry, ...] = ()

    def by_key(self) -> dict[tuple[str, str, int], RankingEntry]:
        return {(e.perf_class, e.node, e.slot): e for e in self.entries}

    def classes(self) -> list[str]:
        return sorted({e.perf_class for e in self.entries}, key=lambda c: (class_rank(c), c))

    def to_ranking(self, view: ClusterView) -> Ranking:
        """The gpu_id-indexed Ranking policies read. GPUs the snapshot does not know score as a
        median GPU (1.0): an unmeasured GPU is neither preferred nor avoided. Only classes with
        a GPU in `view` are kept; none (or no entries): uniform."""
        if not self.entries:
            return Ranking.uniform(view.size, version=0)
        where = view.gpu_by_location()
        scores: dict[str, list[float]] = {}
        sf: dict[str, list[float]] = {}
        for e in self.entries:
            gid = where.get((e.node, e.slot))
            if gid is None:
                continue
            if e.perf_class not in scores:
                scores[e.perf_class] = [1.0] * view.size
                sf[e.perf_class] = [1.0] * view.size
            scores[e.perf_class][gid] = e.score
            sf[e.perf_class][gid] = e.sf
        if not scores:
            return Ranking.uniform(view.size, version=self.version)
        order = [c for c in CLASS_ORDER if c in scores] + [c for c in scores if c not in CLASS_ORDER]
        return Ranking(self.version, self.method, {c: ClassRanking(c, tuple(scores[c]), tuple(sf[c])) for c in order})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (created_at as epoch seconds)."""
        return {
            "version": self.version,
            "method": self.method,
            "created_at": self.created_at.timestamp(),
            "entries": [dict(asdict(e), flags=list(e.flags)) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankingSnapshot:
        entries = tuple(
            RankingEntry(**{**e, "flags": tuple(e.get("flags", ()))}) for e in d.get("entries", ())
        )
        return cls(int(d["version"]), str(d["method"]), utc_from_epoch(float(d.get("created_at", 0.0))), entries)


def utc_from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)
