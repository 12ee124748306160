"""GPU allocators: given a job and the round's free GPUs (policy.free.FreeGpus), pick exactly
`num_gpus` of them.

Each mirrors one placement of the PAL artifact (or stock Slurm for `first_fit`), tie-breaks
included, because the simulator's compat mode must reproduce the artifact's numbers.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence, cast

import numpy as np

from pal_slurm.model import JobRequest
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.cache import RunCache
from pal_slurm.policy.free import FreeGpus


def group_by_node(free: Iterable[int], node_of: Sequence[int]) -> dict[int, list[int]]:
    """{node index: [free GPU ids ascending]} in node order (free must be sorted)."""
    out: dict[int, list[int]] = {}
    for g in free:
        out.setdefault(node_of[g], []).append(g)
    return dict(sorted(out.items()))


def packed(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    """Consolidated placement: an exact-fit node, else the tightest node that fits, else
    fill from the nodes with the most free GPUs (ties: lowest node)."""
    n = job.num_gpus
    by_node = group_by_node(free.ids(), ctx.cluster.node_of)
    for gpus in by_node.values():
        if len(gpus) == n:
            return tuple(gpus)
    best = None
    for gpus in by_node.values():
        if len(gpus) >= n and (best is None or len(gpus) < len(best)):
            best = gpus
    if best is not None:
        return tuple(best[:n])
    if len(free) < n:
        return None
    counts = Counter({node: len(g) for node, g in by_node.items()})
    out: list[int] = []
    while len(out) < n:
        node, count = counts.most_common(1)[0]
        take = min(count, n - len(out))
        out.extend(by_node[node][:take])
        counts[node] -= take
    return tuple(out)


def random_pick(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    """Uniform sample of the free GPUs (in id order) from the context's RNG."""
    if len(free) < job.num_gpus:
        return None
    return tuple(ctx.rng.sample(free.ids(), job.num_gpus))


def _arrays(values: tuple[float, ...], cache: RunCache) -> tuple[np.ndarray, np.ndarray]:
    """(values as an array, each value's rank among the distinct values), once per run."""
    hit = cache.lookup("arrays", values)
    if hit is not None:
        return hit  # type: ignore[return-value]
    arr = np.asarray(values)
    codes = np.unique(arr, return_inverse=True)[1].astype(np.int64).reshape(arr.shape)
    arr.setflags(write=False)
    codes.setflags(write=False)
    return cache.put("arrays", values, (arr, codes))


def _as_array(values: tuple[float, ...], cache: RunCache) -> np.ndarray:
    return _arrays(values, cache)[0]


def _bin_codes(values: tuple[float, ...], cache: RunCache) -> np.ndarray:
    """Each GPU's bin as a small integer (index of its sf among the distinct values)."""
    return _arrays(values, cache)[1]


def _node_array(node_of: tuple[int, ...], cache: RunCache) -> np.ndarray:
    return _as_array(node_of, cache).astype(np.int64, copy=False)


def pm_first_pick(candidates: Sequence[int], n: int, sf: Sequence[float], node_of: Sequence[int], cache: RunCache) -> tuple[int, ...]:
    """PM-First: lowest slowdown bin first; within a bin prefer GPUs whose (bin, node) group
    size best matches the request; ties by GPU id (`candidates` come in id order).

    Vectorised: the artifact's stable sort by (sf, |group size - n|) is a sort by
    (sf, |group size - n|, GPU id).
    """
    c = np.asarray(candidates, dtype=np.int64)
    nodes = _node_array(tuple(node_of), cache)
    return _pm_first_arrays(c, _bin_codes(tuple(sf), cache)[c], nodes[c], n, len(nodes))


def _pm_first_arrays(c: np.ndarray, codes: np.ndarray, nodes: np.ndarray, n: int, size: int) -> tuple[int, ...]:
    """pm_first_pick on arrays already gathered for the candidates (ids ascending, all below
    `size`): one integer key per GPU, (bin, |group size - n|, id), of which the n smallest are
    found by a partition and sorted (no sort of every candidate)."""
    group = codes * (int(nodes.max()) + 1) + nodes
    counts = np.bincount(group)[group]  # GPUs in each candidate's (bin, node) group
    span = len(c) + n + 1  # above any |group size - n|
    key = (codes * span + np.abs(counts - n)) * size + c
    if n < len(key):
        key = np.partition(key, n - 1)[:n]
    key.sort()
    return tuple((key % size).tolist())


def pm_first(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    if len(free) < job.num_gpus:
        return None
    c = free.array()
    nodes = _node_array(ctx.cluster.node_of, ctx.cache)
    return _pm_first_arrays(c, _bin_codes(ctx.ranking.sf(job.perf_class), ctx.cache)[c], nodes[c], job.num_gpus,
                            len(nodes))


def lxv_order(sf: Sequence[float], locality_penalty: float, cache: RunCache | None = None) -> list[tuple[float, bool, float]]:
    """PAL's locality x variability order for these binned factors (once per run)."""
    penalty = float(locality_penalty)
    if cache is None:
        return list(_lxv_order(tuple(sf), penalty))
    hit = cast("tuple[tuple[float, bool, float], ...] | None", cache.lookup(("lxv", penalty), sf))
    if hit is None:
        hit = cache.put(("lxv", penalty), sf, _lxv_order(tuple(sf), penalty))
    return list(hit)


def _lxv_order(sf: tuple[float, ...], locality_penalty: float) -> tuple[tuple[float, bool, float], ...]:
    """PAL's locality x variability matrix as an ordered list of (bin sf, within-node?, cost).

    Every bin value v gives two options, within one node (cost v) and across nodes
    (cost v x penalty); options are tried in increasing cost, within-node first on ties.
    """
    seen: list[float] = []
    for v in sf:
        if v not in seen:
            seen.append(v)
    options: list[tuple[float, bool, float]] = []
    for v in seen:
        options.append((v, True, v * 1.0))
        options.append((v, False, v * locality_penalty))
    options.sort(key=lambda o: o[2])
    return tuple(options)


def _by_node_then_sf(sf: tuple[float, ...], node_of: tuple[int, ...], cache: RunCache) -> np.ndarray:
    """Every GPU id ordered by (node, sf, id), once per run: a round's free GPUs in that order
    are this order's free entries (no sort per allocation)."""
    kind = ("by-node-then-sf", id(node_of))
    hit = cast("tuple[tuple[int, ...], np.ndarray] | None", cache.lookup(kind, sf))
    if hit is not None and hit[0] is node_of:
        return hit[1]
    order = np.lexsort((_as_array(sf, cache), _node_array(node_of, cache)))
    order.setflags(write=False)
    return cache.put(kind, sf, (node_of, order))[1]


def pal(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    """PAL: for jobs of 2..gpus_per_node GPUs walk the L x V order and take the first option
    that fits (best single node by worst GPU bin, or PM-First across nodes); other sizes use
    PM-First directly."""
    n = job.num_gpus
    if len(free) < n:
        return None
    sf = ctx.ranking.sf(job.perf_class)
    node_of = ctx.cluster.node_of
    all_s = _as_array(sf, ctx.cache)
    all_nodes = _node_array(node_of, ctx.cache)
    all_codes = _bin_codes(sf, ctx.cache)
    size = len(all_nodes)
    if not (1 < n <= ctx.cluster.gpus_per_node):
        c = free.array()
        return _pm_first_arrays(c, all_codes[c], all_nodes[c], n, size)
    num_nodes = len(ctx.cluster.nodes)
    by_node = _by_node_then_sf(sf, node_of, ctx.cache)
    p = by_node[free.mask[by_node]]  # the free GPUs by node (ascending), then sf
    sorted_s = all_s[p]
    nodes = all_nodes[p]
    seg_len = np.bincount(nodes, minlength=num_nodes)
    seg_start = np.cumsum(seg_len) - seg_len
    has_n = seg_len >= n
    nth = np.full(num_nodes, np.inf)
    nth[has_n] = sorted_s[seg_start[has_n] + n - 1]
    for v, within, _cost in lxv_order(sf, ctx.locality_penalty, ctx.cache):
        if within:
            # The artifact scans nodes by (GPUs with sf <= v, descending; node id) and keeps the
            # first node with the smallest n-th best sf: the minimum of (n-th sf, -count, node).
            count = np.bincount(nodes[sorted_s <= v], minlength=num_nodes)
            ok = has_n & (count >= n)
            if ok.any():
                idx = np.flatnonzero(ok)
                idx = idx[nth[idx] == nth[idx].min()]
                idx = idx[count[idx] == count[idx].max()]
                node = int(idx[0])
                worst = float(nth[node])
                mask = free.mask
                pick = [g for g in ctx.cluster.nodes[node].gpu_ids if mask[g] and sf[g] <= worst][:n]
                return tuple(pick)
        else:
            if int(np.count_nonzero(sorted_s <= v)) >= n:
                c = free.array()
                c = c[all_s[c] <= v]
                return _pm_first_arrays(c, all_codes[c], all_nodes[c], n, size)
    return None


def first_fit(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    """Stock Slurm cons_tres, roughly: nodes by (weight, name); a job that fits one node gets
    the first such node's lowest free GPUs; a bigger job fills whole nodes in that order."""
    n = job.num_gpus
    if len(free) < n:
        return None
    by_node = group_by_node(free.ids(), ctx.cluster.node_of)
    nodes = ctx.cluster.nodes
    order = sorted(by_node, key=lambda nd: (nodes[nd].weight, nodes[nd].name))
    if n <= ctx.cluster.gpus_per_node:
        for nd in order:
            if len(by_node[nd]) >= n:
                return tuple(by_node[nd][:n])
        return None
    out: list[int] = []
    for nd in order:
        out.extend(by_node[nd][: n - len(out)])
        if len(out) == n:
            return tuple(out)
    return None
