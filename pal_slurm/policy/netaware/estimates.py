"""What a network-aware placement estimates: the tiers a job can get, the network factor of a
span (the context's network model, or per-sensitivity tier penalties without one), and the
per-run tables that keep those answers (policy.cache: made once per run, bounded)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.cluster import Topology
from pal_slurm.model.network import NODE, RACK, SPINE, declared_factor, span
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.shapes import is_per_node, shape_of

Packing = tuple[tuple[int, ...], int, int, int]  # (gpus, tier, nodes, racks)
Allocation = tuple[tuple[int, ...], int, float]  # (gpus, tier, estimated network factor)

# Tier penalties when the context has no network model (pald's engine): (node, rack, spine) per
# sensitivity. Low and medium are close to the bundled data's VGG and ResNet50 across racks (1.1-1.3x,
# 1.4-1.5x); high's spine penalty is BERT's, the data's curve for every model without one of
# its own (GPT2, the traces' transformers): 8.4-8.5x across racks (pal_slurm/data/network).
# At 4.0 pald spread a GPT2 job over two leaves where waiting for one was sooner.
FALLBACK_PENALTY: Mapping[str, tuple[float, float, float]] = {
    "none": (1.0, 1.0, 1.0),
    "low": (1.0, 1.01, 1.15),
    "medium": (1.0, 1.03, 1.35),
    "high": (1.0, 1.5, 8.0),
}
# A numeric sensitivity (`net=2.2`, model.network) declares its spine factor; its leaf penalty is
# read off the classes' (spine -> leaf) points above, linearly between them and on the last
# segment beyond (DCGAN's 2.2x across the spine: 1.09x in a leaf).
_LEAF_BY_SPINE = ((1.0, 1.0), (1.15, 1.01), (1.35, 1.03), (8.0, 1.5))


def fallback_penalty(net: str) -> tuple[float, float, float]:
    """(node, rack, spine) penalties of a job's network sensitivity without a network model:
    a class's (FALLBACK_PENALTY), a numeric one's spine factor with its leaf penalty
    interpolated, and `high`'s for anything else (an unknown name: assume the worst)."""
    pen = FALLBACK_PENALTY.get(net)
    if pen is not None:
        return pen
    spine = declared_factor(net)
    if spine is None:
        return FALLBACK_PENALTY["high"]
    points = _LEAF_BY_SPINE
    i = next((k for k in range(1, len(points)) if spine <= points[k][0]), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return 1.0, min(spine, y0 + (spine - x0) * (y1 - y0) / (x1 - x0)), spine


# ---------------------------------------------------------------------------------------------
# topology helpers


def topo(cluster: ClusterView) -> Topology:
    """The cluster's derived topology (computed once per layout: with_free copies share it)."""
    return cluster.topology


def _rack_index(cluster: ClusterView) -> tuple[int, ...]:
    return topo(cluster).rack_idx


def preferred_tier(n: int, cluster: ClusterView) -> int:
    """The most consolidated tier a job of n GPUs can ever get on this cluster."""
    t = topo(cluster)
    if n <= t.gpus_per_node:
        return NODE
    return RACK if n <= t.rack_cap else SPINE


def wanted_tier(job: JobRequest, cluster: ClusterView) -> int:
    """The most consolidated tier this job can ever get: by its size, or for a per-node
    request (-N k) by its node count (one node; k nodes under one leaf; else the spine)."""
    if is_per_node(job):
        k = shape_of(job).nodes or 1
        return NODE if k == 1 else RACK if k <= topo(cluster).rack_nodes else SPINE
    return preferred_tier(job.num_gpus, cluster)


def net_factor(job: JobRequest, nodes: int, racks: int, ctx: PlacementContext) -> float:
    net = ctx.network
    if net is not None:
        return net.factor(job.app, job.num_gpus, nodes, racks)
    pen = fallback_penalty(job.net_sensitivity)
    return pen[0] if nodes <= 1 else pen[1] if racks <= 1 else pen[2]


@dataclass(frozen=True)
class NodeLocality:
    """PAL's view of the network: one penalty for spanning more than one node, no racks."""

    penalty: float = 1.7

    def factor(self, app: str, num_gpus: int, nodes: int, racks: int) -> float:
        return self.penalty if nodes > 1 else 1.0


def tier_factor(job: JobRequest, tier: int, cluster: ClusterView, ctx: PlacementContext) -> float:
    """Estimated network factor of the tightest placement of `job` at `tier` (kept per run:
    every waiting job's delay deadlines ask for it at every plan)."""
    shape = job.shape
    key = ("tier", tier, job.app, job.num_gpus, job.net_sensitivity, shape.nodes if shape is not None else None,
           cluster.gpus_per_node)
    table = _slowdown_table(ctx)
    hit = table.get(key)
    if hit is None:
        if len(table) >= _TABLE_LIMIT:
            table.clear()
        hit = table[key] = _tier_factor(job, tier, cluster, ctx)
    return hit


def _tier_factor(job: JobRequest, tier: int, cluster: ClusterView, ctx: PlacementContext) -> float:
    gpn = max(1, cluster.gpus_per_node)
    nodes = (shape_of(job).nodes or 1) if is_per_node(job) else max(1, math.ceil(job.num_gpus / gpn))
    if tier == NODE:
        return 1.0
    if tier == RACK:
        return net_factor(job, max(2, nodes), 1, ctx)
    return net_factor(job, max(2, nodes), 2, ctx)


def _slowdowns(job: JobRequest, gpus: Sequence[int], ctx: PlacementContext, table: _Table | None = None) -> tuple[float, float]:
    """(worst ranking score of `gpus` for the job's class, network factor of their span).

    A plan estimates every running job's end: the same jobs on the same GPUs, plan after plan,
    so the pair is kept in the run's cache (per ranking and network model; bounded)."""
    key = (job.perf_class, job.app, job.num_gpus, job.net_sensitivity, tuple(gpus))
    table = _slowdown_table(ctx) if table is None else table  # (a plan passes its own: fetched once)
    hit = table.get(key)
    if hit is None:
        scores = ctx.ranking.scores(job.perf_class)
        pm = max(map(scores.__getitem__, gpus)) if gpus else 1.0
        _tier, nodes, racks = span(gpus, ctx.cluster)
        if len(table) >= _TABLE_LIMIT:
            table.clear()
        hit = table[key] = (pm, net_factor(job, nodes, racks, ctx))
    return hit


_TABLE_LIMIT = 100_000  # entries of a per-run table before it starts afresh
_Table = dict[tuple[Any, ...], Any]  # a per-run table of derived values


def _slowdown_table(ctx: PlacementContext) -> _Table:
    """The run's {job key: (score, factor)} for the context's ranking and network model."""
    by_net: dict[object, tuple[object, _Table]] = ctx.cache.get("slowdowns", ctx.ranking, dict)
    net = ctx.network
    # NodeLocality is a value (a new one per plan, equal by its penalty); other models are
    # the run's own object: kept with its table, so its id is not reused while cached.
    key = net if isinstance(net, NodeLocality) else id(net)
    hit = by_net.get(key)
    if hit is None or hit[0] is not net and not isinstance(net, NodeLocality):
        if len(by_net) >= 8:
            by_net.clear()
        hit = by_net[key] = (net, {})
    return hit[1]
