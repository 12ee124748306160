"""A ranking snapshot: per class, each GPU's score and binned slowdown factor (sf).

Indexed by the gpu_id of one ClusterView. pald builds it from the store's (node, slot)-keyed
rankings; the simulator from drawn or replayed profiles. Policies only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.ranking.binning import bin_scores


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
