"""Named placements: each is an allocator plugged into a round skeleton."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pal_slurm.model import JobRequest, RoundPlan
from pal_slurm.policy import allocators
from pal_slurm.policy.skeletons import Allocator, nonsticky_round, sticky_round


@dataclass(frozen=True)
class NonStickyPlacement:
    """Re-places every job each round (jobs may move between rounds)."""

    name: str
    alloc: Allocator
    class_first: bool = False  # PAL / PM-First: sort the head window by class
    deterministic: bool = True  # False for allocators that draw from the RNG

    def plan(self, order: Sequence[JobRequest], ctx) -> RoundPlan:
        return nonsticky_round(order, ctx, self.alloc, reorder=self.class_first, deterministic=self.deterministic)

    def place_one(self, job: JobRequest, ctx) -> tuple[int, ...] | None:
        """Allocation for a single new job against ctx.cluster.free (pald's submit-time path)."""
        return self.alloc(job, sorted(ctx.cluster.free), ctx)


@dataclass(frozen=True)
class StickyPlacement:
    """Running jobs keep their GPUs; optional preemption from the tail of the queue."""

    name: str
    alloc: Allocator
    preempt: bool = True

    def plan(self, order: Sequence[JobRequest], ctx) -> RoundPlan:
        return sticky_round(order, ctx, self.alloc, preempt=self.preempt)

    def place_one(self, job: JobRequest, ctx) -> tuple[int, ...] | None:
        return self.alloc(job, sorted(ctx.cluster.free), ctx)


PAL = NonStickyPlacement("pal", allocators.pal, class_first=True)
PM_FIRST = NonStickyPlacement("pmfirst", allocators.pm_first, class_first=True)
PACKED_STICKY = StickyPlacement("packed-sticky", allocators.packed)
PACKED_NONSTICKY = NonStickyPlacement("packed-nonsticky", allocators.packed)
RANDOM_STICKY = StickyPlacement("random-sticky", allocators.random_pick)
RANDOM_NONSTICKY = NonStickyPlacement("random-nonsticky", allocators.random_pick, deterministic=False)
FIRST_FIT = StickyPlacement("firstfit", allocators.first_fit, preempt=False)
