"""GPU allocators: given a job and the sorted free GPU ids, pick exactly `num_gpus` of them.

Each mirrors one placement of the PAL artifact (or stock Slurm for `first_fit`), tie-breaks
included, because the simulator's compat mode must reproduce the artifact's numbers.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter

from pal_slurm.model import JobRequest


def group_by_node(free: list, node_of) -> dict[int, list[int]]:
    """{node index: [free GPU ids ascending]} in node order (free must be sorted)."""
    out: dict[int, list[int]] = {}
    for g in free:
        out.setdefault(node_of[g], []).append(g)
    return dict(sorted(out.items()))


def packed(job: JobRequest, free: list, ctx) -> tuple[int, ...] | None:
    """Consolidated placement: an exact-fit node, else the tightest node that fits, else
    fill from the nodes with the most free GPUs (ties: lowest node)."""
    n = job.num_gpus
    by_node = group_by_node(free, ctx.cluster.node_of)
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


def random_pick(job: JobRequest, free: list, ctx) -> tuple[int, ...] | None:
    """Uniform sample of the free GPUs (in id order) from the context's RNG."""
    if len(free) < job.num_gpus:
        return None
    return tuple(ctx.rng.sample(free, job.num_gpus))


def pm_first_pick(candidates: list, n: int, sf, node_of) -> tuple[int, ...]:
    """PM-First: lowest slowdown bin first; within a bin prefer GPUs whose (bin, node) group
    size best matches the request; ties by GPU id.

    The artifact stable-sorts every candidate by (sf, |group size - n|). All GPUs of a
    (bin, node) group share that key and GPU ids are contiguous per node, so sorting the
    groups by (sf, |size - n|, node) and reading them in order gives the same list while
    computing one key per group instead of one per GPU.
    """
    groups: dict[tuple, list[int]] = {}
    for g in candidates:
        groups.setdefault((sf[g], node_of[g]), []).append(g)
    out: list[int] = []
    for (v, node), members in sorted(groups.items(), key=lambda kv: (kv[0][0], abs(len(kv[1]) - n), kv[0][1])):
        out.extend(members)
        if len(out) >= n:
            break
    return tuple(out[:n])


def pm_first(job: JobRequest, free: list, ctx) -> tuple[int, ...] | None:
    if len(free) < job.num_gpus:
        return None
    return pm_first_pick(free, job.num_gpus, ctx.ranking.sf(job.perf_class), ctx.cluster.node_of)


def lxv_order(sf, locality_penalty: float) -> list[tuple[float, bool, float]]:
    """PAL's locality x variability matrix as an ordered list of (bin sf, within-node?, cost).

    Every bin value v gives two options, within one node (cost v) and across nodes
    (cost v x penalty); options are tried in increasing cost, within-node first on ties.
    """
    seen: list[float] = []
    for v in sf:
        if v not in seen:
            seen.append(v)
    options = []
    for v in seen:
        options.append((v, True, v * 1.0))
        options.append((v, False, v * locality_penalty))
    options.sort(key=lambda o: o[2])
    return options


def pal(job: JobRequest, free: list, ctx) -> tuple[int, ...] | None:
    """PAL: for jobs of 2..gpus_per_node GPUs walk the L x V order and take the first option
    that fits (best single node by worst GPU bin, or PM-First across nodes); other sizes use
    PM-First directly."""
    n = job.num_gpus
    if len(free) < n:
        return None
    sf = ctx.ranking.sf(job.perf_class)
    node_of = ctx.cluster.node_of
    if not (1 < n <= ctx.cluster.gpus_per_node):
        return pm_first_pick(free, n, sf, node_of)
    by_node = group_by_node(free, node_of)
    node_sf = {node: sorted(sf[g] for g in gpus) for node, gpus in by_node.items()}  # once per call
    for v, within, _cost in lxv_order(sf, ctx.locality_penalty):
        if within:
            # The artifact scans nodes by (GPUs with sf <= v, descending; node id) and keeps the
            # first node with the smallest n-th best sf: the same as the minimum of this key.
            best = None
            for node, vals in node_sf.items():
                count = bisect.bisect_right(vals, v)
                if count >= n:
                    key = (vals[n - 1], -count, node)
                    if best is None or key < best:
                        best = key
            if best is not None:
                worst, _, node = best
                return tuple(g for g in by_node[node] if sf[g] <= worst)[:n]
        else:
            cand = [g for g in free if sf[g] <= v]
            if len(cand) >= n:
                return pm_first_pick(cand, n, sf, node_of)
    return None


def first_fit(job: JobRequest, free: list, ctx) -> tuple[int, ...] | None:
    """Stock Slurm cons_tres, roughly: nodes by (weight, name); a job that fits one node gets
    the first such node's lowest free GPUs; a bigger job fills whole nodes in that order."""
    n = job.num_gpus
    if len(free) < n:
        return None
    by_node = group_by_node(free, ctx.cluster.node_of)
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
