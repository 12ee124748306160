"""GPU allocators: given a job and the round's free GPUs (policy.free.FreeGpus), pick exactly
`num_gpus` of them.

Each mirrors one placement of the PAL artifact (or stock Slurm for `first_fit`), tie-breaks
included, because the simulator's compat mode must reproduce the artifact's numbers.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Callable, Hashable, Iterable, Protocol, Sequence, TypeVar, cast

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


_NOT_FREE = np.iinfo(np.int64).max


def _node_gpus(node_of: tuple[int, ...], cache: RunCache) -> np.ndarray:
    """Each node's GPU ids as one row (padded with the cluster's size), once per run."""
    hit = cache.lookup("node-gpus", node_of)
    if hit is not None:
        return hit  # type: ignore[return-value]
    rows: dict[int, list[int]] = {}
    for g, nd in enumerate(node_of):
        rows.setdefault(nd, []).append(g)
    out = np.full((max(rows, default=-1) + 1, max(map(len, rows.values()), default=0)), len(node_of), dtype=np.int64)
    for nd, gpus in rows.items():
        out[nd, :len(gpus)] = gpus
    out.setflags(write=False)
    return cache.put("node-gpus", node_of, out)


class PmFirstKeys:
    """PM-First's key of every free GPU for one class's bins, kept over one round's free set.

    `_pm_first_arrays` builds, per allocation, the key (bin, |group size - n|, id) of every
    free GPU, a group being one node's free GPUs of one bin: a scan of every free GPU each
    time. For n = 1 the key orders as (bin, group size, id), and for n at least the largest
    group (a node's GPUs) as (bin, -group size, id), whatever n is: those two orders are kept
    here, one key per GPU (not free: the largest int64), and an allocation takes the smallest
    (n = 1) or the n smallest keys. Taking GPUs changes only the groups of their nodes, so the
    view re-keys those nodes' free GPUs, from `FreeGpus.taken`, when next read.
    """

    __slots__ = ("codes", "keys", "_cnt", "_group", "_base", "_step", "_nodes", "_node_gpus", "_padded", "_size",
                 "_seen")

    def __init__(self, origin: np.ndarray, codes: np.ndarray, nodes: np.ndarray, node_gpus: np.ndarray, single: bool):
        """The keys of the free set `origin` (a mask); `update` brings them to a FreeGpus made
        from it. A key is (bin x span + group-size term) x GPUs + id, kept as a per-GPU base
        plus its group's size x `_step` (`_cnt` holds the groups' sizes already times it)."""
        self.codes, self._nodes, self._node_gpus = codes, nodes, node_gpus
        self._size = size = len(nodes)
        num_nodes, most = node_gpus.shape
        self._padded = bool((node_gpus == size).any())  # nodes of fewer GPUs than the largest
        span = most + 2  # above any group-size term: cnt - 1 (n = 1) or most - cnt
        self._group = codes * num_nodes + nodes
        self._step = size if single else -size
        self._base = codes * (span * size) + np.arange(size, dtype=np.int64) + (-size if single else most * size)
        c = np.flatnonzero(origin)
        self._cnt = np.bincount(self._group[c], minlength=(int(codes.max()) + 1) * num_nodes if size else 0) * self._step
        self.keys = np.full(size, _NOT_FREE, dtype=np.int64)
        self._rekey(c)
        self._seen = 0

    def copy(self) -> "PmFirstKeys":
        """A copy to update (the per-GPU constants shared)."""
        out = copy.copy(self)
        out._cnt, out.keys = self._cnt.copy(), self.keys.copy()
        return out

    def _rekey(self, c: np.ndarray) -> None:
        self.keys[c] = self._base[c] + self._cnt[self._group[c]]

    def update(self, free: FreeGpus) -> "PmFirstKeys":
        """The keys of `free` as it is now (the GPUs taken since the last read re-keyed)."""
        if len(free.taken) > self._seen:
            gone = np.array(free.taken[self._seen:], dtype=np.int64)
            self._seen = len(free.taken)
            self.keys[gone] = _NOT_FREE
            np.subtract.at(self._cnt, self._group[gone], self._step)
            near = self._node_gpus[self._nodes[gone]].ravel()
            if self._padded:
                near = near[near < self._size]
            self._rekey(near[free.mask[near]])
        return self

    def pick(self, n: int) -> tuple[int, ...]:
        """The n free GPUs PM-First picks (n = 1, or n at least a node's GPUs; n <= free)."""
        if n == 1:
            return (int(self.keys.argmin()),)
        key = np.partition(self.keys, n - 1)[:n] if n < self._size else self.keys.copy()
        key.sort()
        return tuple((key % self._size).tolist())


def _pm_first_keys(job: JobRequest, free: FreeGpus, ctx: PlacementContext, codes: np.ndarray) -> PmFirstKeys | None:
    """The round's PmFirstKeys for this job's class and size, or None for a size it does not
    order (2 <= n < a node's GPUs: the group-size term depends on n)."""
    node_gpus = _node_gpus(ctx.cluster.node_of, ctx.cache)
    single = job.num_gpus == 1
    if not single and job.num_gpus < node_gpus.shape[1]:
        return None
    return _round_view(free, ctx, ("pm-first", single), codes, lambda origin: PmFirstKeys(
        origin, codes, _node_array(ctx.cluster.node_of, ctx.cache), node_gpus, single))


class _RoundView(Protocol):
    codes: np.ndarray

    def copy(self: _View) -> _View: ...

    def update(self: _View, free: FreeGpus) -> _View: ...


_View = TypeVar("_View", bound=_RoundView)


def _round_view(free: FreeGpus, ctx: PlacementContext, name: Hashable, codes: np.ndarray,
                make: Callable[[np.ndarray], _View]) -> _View:
    """The round's view `name` of its free GPUs for one class's bins (`codes`), up to date.
    Every round of a run starts from the same free set, mostly: the view made from it
    (`make(origin mask)`) is kept for the run (the last set only), and each round updates a
    copy of it, kept in the round's FreeGpus."""
    kind = (name, id(codes))
    view = free.views.get(kind)
    if view is not None and cast("_View", view).codes is codes:
        return cast("_View", view).update(free)
    start = cast("tuple[bytes, _View] | None", ctx.cache.lookup((name, "start"), codes))
    if start is None or start[0] != free.origin:
        start = ctx.cache.put((name, "start"), codes, (free.origin, make(np.frombuffer(free.origin, dtype=bool))))
    fresh = start[1].copy()
    free.views[kind] = fresh
    return fresh.update(free)


def pm_first(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    if len(free) < job.num_gpus:
        return None
    codes = _bin_codes(ctx.ranking.sf(job.perf_class), ctx.cache)
    view = _pm_first_keys(job, free, ctx, codes)
    if view is not None:
        return view.pick(job.num_gpus)
    c = free.array()
    nodes = _node_array(ctx.cluster.node_of, ctx.cache)
    return _pm_first_arrays(c, codes[c], nodes[c], job.num_gpus, len(nodes))


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


class PalNodes:
    """Per node, its free GPUs of each class's bin or a lower one (`le[bin, node]`), kept over
    one round's free set: what PAL's within-node options read, updated for the nodes a take
    touches when next read (from `FreeGpus.taken`) instead of counted over every free GPU at
    every allocation."""

    __slots__ = ("codes", "le", "_nodes", "_seen")

    def __init__(self, origin: np.ndarray, codes: np.ndarray, nodes: np.ndarray, num_nodes: int):
        self.codes, self._nodes = codes, nodes
        c = np.flatnonzero(origin)
        bins = int(codes.max()) + 1 if len(codes) else 0
        per_bin = np.bincount(codes[c] * num_nodes + nodes[c], minlength=bins * num_nodes).reshape(bins, num_nodes)
        self.le = np.cumsum(per_bin, axis=0)
        self._seen = 0

    def copy(self) -> "PalNodes":
        out = copy.copy(self)
        out.le = self.le.copy()
        return out

    def update(self, free: FreeGpus) -> "PalNodes":
        if len(free.taken) > self._seen:
            gone = np.array(free.taken[self._seen:], dtype=np.int64)
            self._seen = len(free.taken)
            at_or_above = np.arange(self.le.shape[0])[:, None] >= self.codes[gone][None, :]
            np.subtract.at(self.le.T, self._nodes[gone], at_or_above.T.astype(np.int64))  # (a view: le changes)
        return self

    def best_node(self, b: int, n: int) -> tuple[int, int] | None:
        """PAL's node for n GPUs of bins up to b, and the bin of its n-th best free GPU: the
        minimum of (n-th best bin, -GPUs of bins up to b, node), or None."""
        idx = np.flatnonzero(self.le[b] >= n)
        if not len(idx):
            return None
        nth = (self.le[:, idx] < n).sum(axis=0)  # the lowest bin with n free GPUs at or below it
        low = nth.min()
        idx = idx[nth == low]
        count = self.le[b, idx]
        return int(idx[count == count.max()][0]), int(low)


def _pal_nodes(free: FreeGpus, ctx: PlacementContext, codes: np.ndarray) -> PalNodes:
    """The round's PalNodes for this class's bins (_round_view)."""
    return _round_view(free, ctx, "pal-nodes", codes, lambda origin: PalNodes(
        origin, codes, _node_array(ctx.cluster.node_of, ctx.cache), len(ctx.cluster.nodes)))


def _code_of(sf: tuple[float, ...], cache: RunCache) -> dict[float, int]:
    """Each factor's bin code (its rank among the distinct factors), once per run."""
    hit = cache.lookup("code-of", sf)
    if hit is not None:
        return hit  # type: ignore[return-value]
    return cache.put("code-of", sf, {v: int(k) for v, k in zip(sf, _bin_codes(sf, cache).tolist())})


def pal(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
    """PAL: for jobs of 2..gpus_per_node GPUs walk the L x V order and take the first option
    that fits (best single node by worst GPU bin, or PM-First across nodes); other sizes use
    PM-First directly."""
    n = job.num_gpus
    if len(free) < n:
        return None
    sf = ctx.ranking.sf(job.perf_class)
    node_of = ctx.cluster.node_of
    all_codes = _bin_codes(sf, ctx.cache)
    if not (1 < n <= ctx.cluster.gpus_per_node):
        view = _pm_first_keys(job, free, ctx, all_codes)
        if view is not None:
            return view.pick(n)
    all_s = _as_array(sf, ctx.cache)
    all_nodes = _node_array(node_of, ctx.cache)
    size = len(all_nodes)
    if not (1 < n <= ctx.cluster.gpus_per_node):
        c = free.array()
        return _pm_first_arrays(c, all_codes[c], all_nodes[c], n, size)
    nodes_view = _pal_nodes(free, ctx, all_codes)
    code_of = _code_of(sf, ctx.cache)
    for v, within, _cost in lxv_order(sf, ctx.locality_penalty, ctx.cache):
        b = code_of[v]
        if within:
            # The artifact scans nodes by (GPUs with sf <= v, descending; node id) and keeps the
            # first node with the smallest n-th best sf: the minimum of (n-th sf, -count, node).
            best = nodes_view.best_node(b, n)
            if best is not None:
                node, worst_bin = best
                mask = free.mask
                pick = [g for g in ctx.cluster.nodes[node].gpu_ids if mask[g] and all_codes[g] <= worst_bin][:n]
                return tuple(pick)
        else:
            if int(nodes_view.le[b].sum()) >= n:
                # PM-First on the GPUs of bins up to v: whole (bin, node) groups left out, and
                # the n smallest keys are in the lowest bins, so the same as on every free GPU
                view = _pm_first_keys(job, free, ctx, all_codes)
                if view is not None:
                    return view.pick(n)
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
