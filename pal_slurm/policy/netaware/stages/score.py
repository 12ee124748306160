"""Score stage: the allocation a job gets within the tier it accepts, as (gpus, tier,
estimated network factor), or None when none fits.

- `CheapestBin`: PAL's locality x variability order with real per-tier, per-model network
  factors (netaware.allocation.best_allocation);
- `PackedFirst`: the packed, topology-aware choice unless a better bin beats the locality and
  fragmentation costs (policy.fragmentation); per-node requests keep PAL's per-node pick:
  packing them first won in the event simulator but lost on real Slurm (workload-3 replay:
  1.04 of stock, against 0.70 with this pick; docs/results/slurm/);
- `SlurmNodes`: what stock Slurm's cons_tres with topology/tree picks for a per-node request
  (shapes.slurm_pick: the model of a site without pal-slurm), another scorer for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from pal_slurm.model import JobRequest
from pal_slurm.model.network import span
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.fragmentation import FragmentationCost, packed_first_allocation
from pal_slurm.policy.netaware.allocation import _pack, best_allocation
from pal_slurm.policy.netaware.estimates import Allocation, net_factor
from pal_slurm.policy.shapes import is_per_node, shape_of, slurm_pick


class Score(Protocol):
    @property
    def variability(self) -> bool:
        """Whether it reads the ranking's bins (False: every GPU is the same to it)."""
        ...

    def allocate(self, job: JobRequest, free: Sequence[int], ctx: PlacementContext, max_tier: int,
                 rack_idx: Sequence[int]) -> Allocation | None:
        """(gpus, tier, network factor) for `job` from `free` within `max_tier`, or None."""
        ...


@dataclass(frozen=True)
class CheapestBin:
    """PAL's cheapest (bin x network factor) allocation."""

    variability: bool = True  # use PAL's per-class bins

    def allocate(self, job: JobRequest, free: Sequence[int], ctx: PlacementContext, max_tier: int,
                 rack_idx: Sequence[int]) -> Allocation | None:
        return best_allocation(job, free, ctx, self.variability, max_tier, rack_idx)


@dataclass(frozen=True)
class PackedFirst:
    """Pack first; a better bin only when its gain beats the locality and fragmentation costs."""

    cost: FragmentationCost = FragmentationCost()
    variability: bool = True

    def allocate(self, job: JobRequest, free: Sequence[int], ctx: PlacementContext, max_tier: int,
                 rack_idx: Sequence[int]) -> Allocation | None:
        if is_per_node(job):
            return best_allocation(job, free, ctx, self.variability, max_tier, rack_idx)
        return packed_first_allocation(job, free, ctx, self.variability, max_tier, rack_idx, self.cost, _pack,
                                       net_factor)


@dataclass(frozen=True)
class SlurmNodes:
    """Stock Slurm's node choice for per-node requests; `rest` scores the others."""

    rest: CheapestBin | PackedFirst = CheapestBin(variability=False)

    @property
    def variability(self) -> bool:
        return self.rest.variability

    def allocate(self, job: JobRequest, free: Sequence[int], ctx: PlacementContext, max_tier: int,
                 rack_idx: Sequence[int]) -> Allocation | None:
        if not is_per_node(job):
            return self.rest.allocate(job, free, ctx, max_tier, rack_idx)
        gpus = slurm_pick(shape_of(job), free, ctx.cluster)
        if gpus is None:
            return None
        tier, nodes, racks = span(gpus, ctx.cluster)
        return (gpus, tier, net_factor(job, nodes, racks, ctx)) if tier <= max_tier else None
