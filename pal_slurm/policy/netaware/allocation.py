"""Allocation: the cheapest placement of a job's GPUs within a tier, PAL's locality x
variability order with real per-tier, per-model network factors.

For each variability bin v of the job's class (PAL's binned slowdown factors; all 1.0 without
variability) take the free GPUs with sf <= v and pack them as tightly as the topology allows
(one node, else one rack with the fewest nodes, else the fewest racks); its cost is v x the
network factor of that packing. The cheapest option wins."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.network import NODE, RACK, SPINE, span
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.estimates import Allocation, Packing, _rack_index, net_factor, topo
from pal_slurm.policy.shapes import is_per_node, per_node_pick, shape_of, uniform_sf

# from this many eligible GPUs on, a packing counts them per node in arrays (_pack_arrays):
# grouping tens of thousands of GPUs one by one was most of a `--gpus=N` plan at a large site,
# while on a small cluster the arrays' set-up costs more than the loop
ARRAYS_FROM = 1024


def _pack(eligible: Sequence[int], n: int, cluster: ClusterView, rack_idx: Sequence[int], max_tier: int,
          key: Callable[[int], Any]) -> Packing | None:
    """Tightest packing of n GPUs from `eligible`: (gpus, tier, nodes, racks) or None.

    `key(g)` orders GPUs inside a node (best first). One node: the one with the fewest
    eligible GPUs that suffice (then the lowest index); else one rack: the rack whose fullest
    nodes first hold n on the fewest nodes (then the fewest eligible GPUs, then the lowest
    rack); else, from the spine tier, the fullest racks first. Two implementations of that
    order, tested to agree: by arrays for a long `eligible`, else by dicts."""
    if len(eligible) >= ARRAYS_FROM:
        return _pack_arrays(eligible, n, cluster, rack_idx, max_tier, key)
    return _pack_lists(list(eligible), n, cluster, rack_idx, max_tier, key)


def _pack_lists(eligible: list[int], n: int, cluster: ClusterView, rack_idx: Sequence[int], max_tier: int,
                key: Callable[[int], Any]) -> Packing | None:
    """_pack by grouping the GPUs in dicts, one by one."""
    node_of = topo(cluster).node_of
    by_node: dict[int, list[int]] = {}
    for g in eligible:
        by_node.setdefault(node_of[g], []).append(g)
    # one node: best fit (fewest eligible GPUs that suffice), then lowest node index
    best = None
    for nd, gs in by_node.items():
        if len(gs) >= n and (best is None or (len(gs), nd) < (len(by_node[best]), best)):
            best = nd
    if best is not None:
        return tuple(sorted(by_node[best], key=key)[:n]), NODE, 1, 1
    if max_tier < RACK:
        return None
    by_rack: dict[int, list[int]] = {}
    for nd in by_node:
        by_rack.setdefault(rack_idx[nd], []).append(nd)

    def fill(nodes: list[int]) -> list[int]:
        out: list[int] = []
        for nd in sorted(nodes, key=lambda d: (-len(by_node[d]), d)):
            gs = sorted(by_node[nd], key=key)
            out.extend(gs[: n - len(out)])
            if len(out) == n:
                break
        return out

    best_r = None
    for r, nodes in by_rack.items():
        total = sum(len(by_node[d]) for d in nodes)
        if total < n:
            continue
        picked = fill(nodes)
        score = (len({node_of[g] for g in picked}), total, r)
        if best_r is None or score < best_r[0]:
            best_r = (score, picked)
    if best_r is not None:
        picked = best_r[1]
        return tuple(picked), RACK, best_r[0][0], 1
    if max_tier < SPINE or len(eligible) < n:
        return None
    out: list[int] = []
    racks_used = 0
    for r in sorted(by_rack, key=lambda r: (-sum(len(by_node[d]) for d in by_rack[r]), r)):
        racks_used += 1
        for nd in sorted(by_rack[r], key=lambda d: (-len(by_node[d]), d)):
            gs = sorted(by_node[nd], key=key)
            out.extend(gs[: n - len(out)])
            if len(out) == n:
                break
        if len(out) == n:
            break
    return tuple(out), SPINE, len({node_of[g] for g in out}), racks_used


def _pack_arrays(eligible: Sequence[int], n: int, cluster: ClusterView, rack_idx: Sequence[int], max_tier: int,
                 key: Callable[[int], Any]) -> Packing | None:
    """_pack with the eligible GPUs counted per node and per rack in arrays: Python touches
    only the nodes it takes."""
    e = np.asarray(eligible, dtype=np.int64)
    node_e = topo(cluster).node_of_array[e]
    counts = np.bincount(node_e, minlength=len(cluster.nodes))
    by_node = np.argsort(node_e, kind="stable")  # the eligible GPUs grouped by node
    ends = np.cumsum(counts)

    def on(nd: int, take: int) -> list[int]:
        """The best `take` eligible GPUs of node `nd`."""
        return sorted(e[by_node[ends[nd] - counts[nd]: ends[nd]]].tolist(), key=key)[:take]

    fits = np.flatnonzero((counts >= n) & (counts > 0))
    if fits.size:  # best fit: fewest eligible GPUs that suffice, then the lowest node index
        best = int(fits[np.argmin(counts[fits])])
        return tuple(on(best, n)), NODE, 1, 1
    if max_tier < RACK:
        return None
    present = np.flatnonzero(counts)
    racks = _rack_array(rack_idx, cluster)[present]
    cnt = counts[present]
    order = np.lexsort((present, -cnt, racks))  # by rack, then fullest node, then node index
    nodes, racks, cnt = present[order], racks[order], cnt[order]
    rack_ids, starts = np.unique(racks, return_index=True)
    totals = np.add.reduceat(cnt, starts) if starts.size else cnt[:0]
    cum = np.cumsum(cnt)
    # nodes each rack's fullest-first fill takes for n: the first where its running sum reaches n
    used = np.searchsorted(cum, cum[starts] - cnt[starts] + n) - starts + 1
    full = np.flatnonzero(totals >= n)

    def fill(rack_order: Sequence[int]) -> tuple[list[int], int, int]:
        """(GPUs, nodes, racks) of filling the racks in `rack_order`, each fullest node first."""
        out: list[int] = []
        taken_nodes = taken_racks = 0
        for r in rack_order:
            taken_racks += 1
            stop = starts[r + 1] if r + 1 < len(starts) else len(nodes)
            for nd in nodes[starts[r]: stop].tolist():
                out.extend(on(nd, n - len(out)))
                taken_nodes += 1
                if len(out) == n:
                    return out, taken_nodes, taken_racks
        return out, taken_nodes, taken_racks

    if full.size:  # the fewest nodes, then the fewest eligible GPUs, then the lowest rack
        r = int(full[np.lexsort((rack_ids[full], totals[full], used[full]))[0]])
        picked, k, _ = fill([r])
        return tuple(picked), RACK, k, 1
    if max_tier < SPINE or len(e) < n:
        return None
    out, k, racks_used = fill(np.lexsort((rack_ids, -totals)).tolist())  # the fullest racks first
    return tuple(out), SPINE, k, racks_used


def _rack_array(rack_idx: Sequence[int], cluster: ClusterView) -> np.ndarray:
    """`rack_idx` as an array: the topology's own, made once per layout, where it is the
    layout's (per packing, converting it would cost a pass over every node); else converted
    here (an ablation's one-rack index)."""
    t = topo(cluster)
    return t.rack_idx_array if rack_idx is t.rack_idx else np.asarray(rack_idx, dtype=np.int64)


def best_allocation(job: JobRequest, free: Sequence[int], ctx: PlacementContext, variability: bool = True,
                    max_tier: int = SPINE, rack_idx: Sequence[int] | None = None) -> Allocation | None:
    """Cheapest (variability bin x network factor) allocation with tier <= max_tier.

    Returns (gpus, tier, estimated factor) or None."""
    n = job.num_gpus
    if len(free) < n:
        return None
    if is_per_node(job):
        return _per_node_allocation(job, free, ctx, variability, max_tier)
    cluster = ctx.cluster
    rack_idx = rack_idx if rack_idx is not None else _rack_index(cluster)
    sf = ctx.ranking.sf(job.perf_class) if variability else None
    if sf is None:
        levels = [1.0]
        key = lambda g: g  # noqa: E731
    else:
        levels = sorted({sf[g] for g in free})
        key = lambda g: (sf[g], g)  # noqa: E731
    best = None
    for v in levels:
        if best is not None and v >= best[0]:
            break  # cost >= v: no later bin can win
        eligible = sorted(free) if sf is None else sorted(g for g in free if sf[g] <= v)
        if len(eligible) < n:
            continue
        got = _pack(eligible, n, cluster, rack_idx, max_tier, key)
        if got is None:
            continue
        gpus, tier, nodes, racks = got
        cost = v * net_factor(job, nodes, racks, ctx)
        if best is None or cost < best[0] - 1e-12:
            best = (cost, gpus, tier, cost / v)
    if best is None:
        return None
    return best[1], best[2], best[3]


def _per_node_allocation(job: JobRequest, free: Sequence[int], ctx: PlacementContext, variability: bool,
                         max_tier: int) -> Allocation | None:
    """A per-node request (k nodes x g GPUs): the best k nodes under one leaf, or (from the
    spine tier on) anywhere when that is cheaper. Same result shape as best_allocation."""
    cluster = ctx.cluster
    shape = shape_of(job)
    sf = ctx.ranking.sf(job.perf_class) if variability else uniform_sf(cluster)
    index = ctx.shape_index  # given, `free` is its free set: the same pick, read from the index

    def pick(one_rack: bool = False) -> tuple[int, ...] | None:
        if index is not None:
            return index.pick(shape, sf, one_rack)
        return per_node_pick(shape, free, sf, cluster, one_rack=one_rack, cache=ctx.cache)

    if (shape.nodes or 1) == 1:
        picks = [pick()]
    elif max_tier < RACK:
        return None
    else:
        picks = [pick(one_rack=True)]
        if max_tier >= SPINE:
            picks.append(pick())
    best = None
    for gpus in picks:
        if gpus is None:
            continue
        tier, nodes, racks = span(gpus, cluster)
        factor = net_factor(job, nodes, racks, ctx)
        cost = max(sf[g] for g in gpus) * factor
        if best is None or cost < best[0] - 1e-12:
            best = (cost, gpus, tier, factor)
    return None if best is None else best[1:]
