"""Locality stage: how much of the network a placement sees. The topology (racks under leaf
switches, the context's network model) or PAL's node locality only (one penalty for spanning
more than one node, every node under one rack: an ablation of what racks buy)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol, Sequence

from pal_slurm.model import ClusterView
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.estimates import NodeLocality, _rack_index


class Locality(Protocol):
    def view(self, ctx: PlacementContext) -> PlacementContext:
        """The context as the placement sees it."""
        ...

    def rack_index(self, cluster: ClusterView) -> Sequence[int]:
        """node -> rack index as the placement sees racks."""
        ...


@dataclass(frozen=True)
class Topology:
    """The cluster's racks and the context's network model, as they are."""

    def view(self, ctx: PlacementContext) -> PlacementContext:
        return ctx

    def rack_index(self, cluster: ClusterView) -> Sequence[int]:
        return _rack_index(cluster)


@dataclass(frozen=True)
class NodeOnly:
    """PAL's view: the context's locality penalty for more than one node, one rack."""

    def view(self, ctx: PlacementContext) -> PlacementContext:
        return dataclasses.replace(ctx, network=NodeLocality(ctx.locality_penalty))

    def rack_index(self, cluster: ClusterView) -> Sequence[int]:
        return (0,) * len(cluster.nodes)
