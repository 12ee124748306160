"""Named round placements, each a list of three stages: the order a round takes the jobs in
(as given, or PAL's head window sorted by class), the allocator that chooses a job's GPUs
(policy.allocators, made shape-aware by policy.shapes: per-node requests get g GPUs on each of
k nodes), and the round (policy.skeletons): re-place every job, or keep running jobs where they
are, optionally stopping them from the tail of the queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from pal_slurm.model import JobRequest, RoundPlan
from pal_slurm.model.network import DelayTimers
from pal_slurm.policy import allocators
from pal_slurm.policy.base import PlacementContext, Traits
from pal_slurm.policy.free import FreeGpus
from pal_slurm.policy.shapes import is_per_node, place_one_per_node, shape_aware
from pal_slurm.policy.skeletons import Allocator, class_first, nonsticky_round, sticky_round

# the order of a round's jobs given the queue order and the cluster's size (None: as given)
RoundOrder = Callable[[Sequence[JobRequest], int], list[JobRequest]]


@dataclass(frozen=True)
class Repack:
    """Every round re-places every job (jobs may move between rounds), in `order`."""

    order: RoundOrder | None = None

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext, alloc: Allocator, traits: Traits) -> RoundPlan:
        return nonsticky_round(order, ctx, alloc, reorder=self.order, deterministic=not traits.randomised)


@dataclass(frozen=True)
class Keep:
    """Running jobs keep their GPUs; with `preempt_from_tail`, a job that does not fit stops
    running jobs from the tail of the queue until it does (the artifact's Packed-S/Random-S)."""

    preempt_from_tail: bool = True

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext, alloc: Allocator, traits: Traits) -> RoundPlan:
        return sticky_round(order, ctx, alloc, preempt=self.preempt_from_tail)


@dataclass(frozen=True)
class RoundPlacement:
    """A round placement: its allocator plugged into its round; one new job, and no wake-ups."""

    name: str
    alloc: Allocator
    round: Repack | Keep
    traits: Traits = Traits()
    delay_timers: DelayTimers = field(default_factory=dict)

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan:
        return self.round.plan(order, ctx, self.alloc, self.traits)

    def place_one(self, job: JobRequest, ctx: PlacementContext) -> tuple[int, ...] | None:
        """Allocation for a single new job against the free GPUs (pald's submit-time path)."""
        if is_per_node(job):
            return place_one_per_node(job, ctx, self.traits.variability)
        return self.alloc(job, FreeGpus(ctx.cluster.size, ctx.free_gpus()), ctx)

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None:
        return None


# what the round placements read: the jobs' sizes, classes and GPUs, never their progress
# (the queue order may: the engine renews running jobs' requests for one that does)
_ROUND = Traits(reads_progress=False)
_BLIND = Traits(variability=False, reads_progress=False)
_BLIND_STICKY = Traits(sticky=True, variability=False, reads_progress=False)

PAL = RoundPlacement("pal", shape_aware(allocators.pal), Repack(class_first), traits=_ROUND)
PM_FIRST = RoundPlacement("pmfirst", shape_aware(allocators.pm_first), Repack(class_first), traits=_ROUND)
PACKED_STICKY = RoundPlacement("packed-sticky", shape_aware(allocators.packed, False), Keep(), traits=_BLIND_STICKY)
PACKED_NONSTICKY = RoundPlacement("packed-nonsticky", shape_aware(allocators.packed, False), Repack(), traits=_BLIND)
RANDOM_STICKY = RoundPlacement("random-sticky", shape_aware(allocators.random_pick, False), Keep(),
                               traits=Traits(sticky=True, randomised=True, variability=False, reads_progress=False))
RANDOM_NONSTICKY = RoundPlacement("random-nonsticky", shape_aware(allocators.random_pick, False), Repack(),
                                  traits=Traits(randomised=True, variability=False, reads_progress=False))
FIRST_FIT = RoundPlacement("firstfit", shape_aware(allocators.first_fit, False), Keep(preempt_from_tail=False),
                           traits=Traits(sticky=True, variability=False, reads_progress=False))
