"""Placement for the shapes a Slurm job can express.

A Slurm job asks either for `g` GPUs on each of `k` nodes (`--gres=gpu:g`, `-N k`; the common
case, k = 1) or for `N` GPUs in total (`--gpus=N`) on any nodes. With per-slot GRES types the
hook can bind exact slots, but only the *same* slots on every node of a job (tres_per_node is
per node). So:

- per-node shape: choose `k` nodes with >= `g` free GPUs each and the best `g` GPUs on each.
  Variability first (PAL: the worst binned slowdown among the job's GPUs decides its speed),
  then best fit (the node with the fewest free GPUs, to keep whole nodes for big jobs), then
  node order. Locality is the user's choice (k nodes), so PAL's L x V trade-off does not apply.
- total shape: the configured placement's own allocator (PAL may trade locality for speed).

`stock_slurm_choice` is what Slurm's cons_tres would pick for the per-node shape (nodes by
weight then name, lowest free slots): the baseline pald reports next to its own choice.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from pal_slurm.model import JobRequest


@dataclass(frozen=True)
class ShapeChoice:
    gpu_ids: tuple[int, ...]
    nodes: dict  # node name -> tuple of slots
    worst_sf: float  # the job's expected slowdown (max binned sf over its GPUs)

    def same_slots_everywhere(self) -> bool:
        return len({tuple(s) for s in self.nodes.values()}) == 1


def _to_choice(gpu_ids, ctx, sf) -> ShapeChoice:
    gpus = ctx.cluster.gpus
    nodes: dict[str, list[int]] = {}
    for g in sorted(gpu_ids):
        nodes.setdefault(gpus[g].node, []).append(gpus[g].slot)
    return ShapeChoice(tuple(sorted(gpu_ids)), {n: tuple(s) for n, s in nodes.items()},
                       max((sf[g] for g in gpu_ids), default=1.0))


class FreeIndex:
    """Free GPUs of one class's view, indexed for the per-node shape.

    For each node: its free GPUs sorted by (sf, id). For each per-node count g: the nodes
    that can give g GPUs, sorted by (worst sf of their best g, free count, node index), which
    is exactly the per-node preference order. `take` updates only the touched nodes, so a
    burst of placements on a 1,000-node cluster costs microseconds each instead of a rescan.
    """

    def __init__(self, cluster, free, sf):
        self.sf = sf
        self.node_of = cluster.node_of
        self.max_g = max((len(n.gpu_ids) for n in cluster.nodes), default=0)
        by_node: dict[int, list[int]] = {}
        for gid in free:
            by_node.setdefault(self.node_of[gid], []).append(gid)
        self.free: dict[int, list[int]] = {n: sorted(g, key=lambda x: (sf[x], x)) for n, g in by_node.items()}
        self.orders: dict[int, list[tuple]] = {g: [] for g in range(1, self.max_g + 1)}
        for n in self.free:
            for g, key in self._keys(n).items():
                self.orders[g].append(key)
        for lst in self.orders.values():
            lst.sort()

    def _keys(self, node: int) -> dict[int, tuple]:
        fl = self.free.get(node, [])
        return {g: (self.sf[fl[g - 1]], len(fl), node) for g in range(1, len(fl) + 1)}

    def take(self, gpu_ids) -> None:
        touched: dict[int, set[int]] = {}
        for gid in gpu_ids:
            touched.setdefault(self.node_of[gid], set()).add(gid)
        for node, gone in touched.items():
            for g, key in self._keys(node).items():
                lst = self.orders[g]
                i = bisect.bisect_left(lst, key)
                if i < len(lst) and lst[i] == key:
                    del lst[i]
            self.free[node] = [x for x in self.free.get(node, []) if x not in gone]
            for g, key in self._keys(node).items():
                bisect.insort(self.orders[g], key)

    def choose(self, k: int, g: int, rack_of_node=None, allowed=None) -> list[int] | None:
        """The best `k` nodes for `g` GPUs each; with `rack_of_node`, all in one rack (the rack
        whose k-th best node is best: walking the global order, the first rack to collect k).
        `allowed`: node indices the job may use (None: all); the walk skips the others, so a
        restricted job costs no rebuilt index."""
        if g > self.max_g:
            return None
        lst = self.orders[g]
        if len(lst) < k:
            return None
        if allowed is None:
            candidates = lst
        else:
            candidates = (entry for entry in lst if entry[2] in allowed)
        if rack_of_node is None or k == 1:
            picked = [node for (_c, _n, node) in itertools.islice(candidates, k)]
            if len(picked) < k:
                return None
        else:
            per_rack: dict[str, list[int]] = {}
            picked = None
            for _c, _n, node in candidates:
                nodes = per_rack.setdefault(rack_of_node[node], [])
                nodes.append(node)
                if len(nodes) == k:
                    picked = nodes
                    break
            if picked is None:
                return None
        return [gid for node in picked for gid in self.free[node][:g]]


def per_node_choice(k: int, g: int, perf_class: str, ctx, index: FreeIndex | None = None,
                    one_rack: bool = False, allowed=None) -> ShapeChoice | None:
    """Best `g` GPUs on each of `k` nodes (see module docstring); None if it does not fit.
    `one_rack`: only placements whose nodes share a leaf switch (network-sensitive jobs).
    `allowed`: the node indices the job may use (None: all)."""
    if k <= 0 or g <= 0:
        raise ValueError("a job needs at least one node and one GPU per node")
    sf = ctx.ranking.sf(perf_class)
    index = index or FreeIndex(ctx.cluster, ctx.cluster.free, sf)
    chosen = index.choose(k, g, ctx.cluster.rack_of_node if one_rack else None, allowed)
    return None if chosen is None else _to_choice(chosen, ctx, sf)


def stock_slurm_choice(k: int, g: int, perf_class: str, ctx) -> ShapeChoice | None:
    """What Slurm's cons_tres picks: nodes by (weight, name), the lowest free slots on each."""
    sf = ctx.ranking.sf(perf_class)
    by_node: dict[int, list[int]] = {}
    for gid in sorted(ctx.cluster.free):
        by_node.setdefault(ctx.cluster.node_of[gid], []).append(gid)
    nodes = ctx.cluster.nodes
    order = sorted((n for n, f in by_node.items() if len(f) >= g), key=lambda n: (nodes[n].weight, nodes[n].name))
    if len(order) < k:
        return None
    chosen = [gid for n in order[:k] for gid in by_node[n][:g]]
    return _to_choice(chosen, ctx, sf)


def total_choice(n: int, perf_class: str, ctx, placement) -> ShapeChoice | None:
    """`n` GPUs anywhere, chosen by the placement's own allocator."""
    job = JobRequest(job_id="_", num_gpus=n, perf_class=perf_class)
    gpus = placement.place_one(job, ctx)
    return None if gpus is None else _to_choice(gpus, ctx, ctx.ranking.sf(perf_class))
