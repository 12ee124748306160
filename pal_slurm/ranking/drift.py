"""GPU drift: which GPUs got slower, or changed bin, between two rankings.

A GPU whose thermal paste dried out or whose clocks were capped is exactly what PAL exists to
notice, and an operator wants to hear about it rather than find it in a table. This compares two
ranking snapshots entry by entry (node, slot, class) and reports the GPUs whose score worsened
by more than a threshold (scores are time-like: 1.0 = the median GPU, larger = slower) or that
moved to another bin. Pure: it takes the entries, it does not read a store or a clock.

Takes the entries of two `RankingSnapshot`s (the one snapshot type, whether ranked just now or
read from the store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from pal_slurm.ranking.snapshot import RankingEntry


@dataclass(frozen=True)
class Drift:
    node: str
    slot: int
    perf_class: str
    old_score: float
    new_score: float
    old_bin: int
    new_bin: int

    @property
    def change(self) -> float:
        """Relative change of the score: +0.12 = 12% slower than in the previous ranking."""
        return self.new_score / self.old_score - 1.0 if self.old_score > 0 else 0.0

    @property
    def slower(self) -> bool:
        return self.new_score > self.old_score

    def describe(self) -> str:
        bins = f"bin {self.old_bin} -> {self.new_bin}" if self.old_bin != self.new_bin else f"bin {self.new_bin}"
        return (f"{self.node}:{self.slot} class {self.perf_class}: score {self.old_score:.3f} -> "
                f"{self.new_score:.3f} ({self.change:+.1%}), {bins}")


def find_drift(previous: Iterable[RankingEntry], current: Iterable[RankingEntry], threshold: float) -> list[Drift]:
    """GPUs present in both rankings whose score got worse by more than `threshold` (a fraction)
    or whose bin changed, ordered worst first. GPUs new or gone are not drift (nothing to
    compare); `palctl rank` lists them as new/gone."""
    if threshold <= 0:
        raise ValueError(f"drift threshold must be > 0, got {threshold}")
    old = {(e.node, e.slot, e.perf_class): e for e in previous}
    out = []
    for e in current:
        o = old.get((e.node, e.slot, e.perf_class))
        if o is None:
            continue
        d = Drift(e.node, e.slot, e.perf_class, float(o.score), float(e.score), int(o.bin), int(e.bin))
        if d.change > threshold or d.old_bin != d.new_bin:
            out.append(d)
    out.sort(key=lambda d: (-d.change, d.perf_class, d.node, d.slot))
    return out
