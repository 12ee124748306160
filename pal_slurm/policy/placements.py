"""Named placements: each is an allocator plugged into a round skeleton. Every allocator is
made shape-aware (policy.shapes): per-node requests get g GPUs on each of k nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from pal_slurm.model import JobRequest, RoundPlan
from pal_slurm.model.network import DelayTimers
from pal_slurm.policy import allocators
from pal_slurm.policy.base import PlacementContext, Traits
from pal_slurm.policy.shapes import is_per_node, place_one_per_node, shape_aware
from pal_slurm.policy.skeletons import Allocator, nonsticky_round, sticky_round


class _RoundPlacement:
    """What the two round skeletons' placements share: one new job, and no wake-ups."""

    alloc: Allocator
    traits: Traits

    def place_one(self, job: JobRequest, ctx: PlacementContext) -> tuple[int, ...] | None:
        """Allocation for a single new job against the free GPUs (pald's submit-time path)."""
        if is_per_node(job):
            return place_one_per_node(job, ctx, self.traits.variability)
        return self.alloc(job, sorted(ctx.free_gpus()), ctx)

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None:
        return None


@dataclass(frozen=True)
class NonStickyPlacement(_RoundPlacement):
    """Re-places every job each round (jobs may move between rounds)."""

    name: str
    alloc: Allocator
    class_first: bool = False  # PAL / PM-First: sort the head window by class
    traits: Traits = Traits()
    delay_timers: DelayTimers = field(default_factory=dict)

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan:
        return nonsticky_round(order, ctx, self.alloc, reorder=self.class_first,
                               deterministic=not self.traits.randomised)


@dataclass(frozen=True)
class StickyPlacement(_RoundPlacement):
    """Running jobs keep their GPUs; optional preemption from the tail of the queue."""

    name: str
    alloc: Allocator
    preempt: bool = True
    traits: Traits = Traits(sticky=True)
    delay_timers: DelayTimers = field(default_factory=dict)

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan:
        return sticky_round(order, ctx, self.alloc, preempt=self.preempt)


# what the round placements read: the jobs' sizes, classes and GPUs, never their progress
# (the queue order may: the engine renews running jobs' requests for one that does)
_ROUND = Traits(reads_progress=False)
_BLIND = Traits(variability=False, reads_progress=False)
_BLIND_STICKY = Traits(sticky=True, variability=False, reads_progress=False)

PAL = NonStickyPlacement("pal", shape_aware(allocators.pal), class_first=True, traits=_ROUND)
PM_FIRST = NonStickyPlacement("pmfirst", shape_aware(allocators.pm_first), class_first=True, traits=_ROUND)
PACKED_STICKY = StickyPlacement("packed-sticky", shape_aware(allocators.packed, False), traits=_BLIND_STICKY)
PACKED_NONSTICKY = NonStickyPlacement("packed-nonsticky", shape_aware(allocators.packed, False), traits=_BLIND)
RANDOM_STICKY = StickyPlacement("random-sticky", shape_aware(allocators.random_pick, False),
                                traits=Traits(sticky=True, randomised=True, variability=False, reads_progress=False))
RANDOM_NONSTICKY = NonStickyPlacement("random-nonsticky", shape_aware(allocators.random_pick, False),
                                      traits=Traits(randomised=True, variability=False, reads_progress=False))
FIRST_FIT = StickyPlacement("firstfit", shape_aware(allocators.first_fit, False), preempt=False,
                            traits=Traits(sticky=True, variability=False, reads_progress=False))
