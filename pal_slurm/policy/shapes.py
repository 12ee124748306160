"""Placement for the shapes a Slurm job can express (model.shape.JobShape).

A total request (`--gpus=N`) is what every placement's own allocator answers. A per-node
request (`-N k --gres=gpu:g`) must get exactly `g` GPUs on each of `k` nodes; every placement
answers it the same way, with its own view of variability:

- choose `k` nodes with >= `g` free GPUs each and the best `g` GPUs on each. Variability first
  (PAL: the worst binned slowdown among the job's GPUs decides its speed), then best fit (the
  node with the fewest free GPUs, to keep whole nodes for big jobs), then node order.
  Placements blind to variability see every GPU as 1.0 (best fit, then node order);
- with `one_rack`, only `k` nodes under one leaf switch (the rack whose k-th best node is
  best; among racks whose k-th best is equally good, the one with the fewest free GPUs: best
  fit, as Slurm's topology/tree takes the leaf switch that fits a job most tightly, so whole
  leaves stay for later multi-node jobs). Locality between the nodes is the network-aware
  placements' business (their delay rule decides when a job stops waiting for one rack);
- without `one_rack`, a multi-node job takes, among the nodes as fast for it as its k best
  (its worst GPU decides), as few leaves as Slurm's topology/tree would (the leaf that holds
  all still needed with the fewest, else the fullest), so that ties do not scatter it over
  every leaf.

Two implementations of that one order, tested to agree: `per_node_pick` (vectorised, over any
free list: the placements' rounds) and `ShapeIndex` (per-node indexes updated in place: pald's
submit path, where one view answers a burst of requests in microseconds each).

`slurm_pick` is what stock Slurm (cons_tres, topology/tree) would pick for the per-node shape:
the simulator's model of stock Slurm places by it.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Callable, Collection, Iterable, Sequence

import numpy as np

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.shape import JobShape
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.cache import RunCache
from pal_slurm.policy.free import FreeGpus
from pal_slurm.policy.skeletons import Allocator


@dataclass(frozen=True, eq=False)
class ShapeChoice:
    """GPUs of a ClusterView in Slurm's terms: node name -> slots. The nodes are worked out
    when first read: the simulator's launches (sim.core.SimActuator) never read them."""

    gpu_ids: tuple[int, ...]
    cluster: ClusterView = field(repr=False)

    @cached_property
    def nodes(self) -> dict[str, tuple[int, ...]]:
        """Node name -> slots, in node order."""
        gpus = self.cluster.gpus
        nodes: dict[str, list[int]] = {}
        for g in sorted(self.gpu_ids):
            nodes.setdefault(gpus[g].node, []).append(gpus[g].slot)
        return {n: tuple(s) for n, s in nodes.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeChoice) and (self.gpu_ids, self.nodes) == (other.gpu_ids, other.nodes)

    def same_slots_everywhere(self) -> bool:
        return len({tuple(s) for s in self.nodes.values()}) == 1


def choice_of(gpu_ids: Sequence[int], cluster: ClusterView, keep_order: bool = False) -> ShapeChoice:
    """The GPUs in Slurm's terms, their ids sorted; `keep_order`: the ids in the order given
    (the simulator's launches: a job's GPUs are kept as its placement listed them, which its
    outcome and a non-sticky placement's next plan read)."""
    return ShapeChoice(tuple(gpu_ids) if keep_order else tuple(sorted(gpu_ids)), cluster)


def slurm_picks(gpu_ids: Sequence[int], cluster: ClusterView, free: Collection[int]) -> tuple[int, ...]:
    """The GPUs Slurm itself takes when a job is pinned only to the nodes of `gpu_ids` (it keeps
    its own per-node count): cons_tres gives it the lowest-index free GPUs of each node. `free`:
    the GPUs free for this job (the job's own chosen GPUs count as free, so every node has
    enough)."""
    chosen = set(gpu_ids)
    picked = _lowest_on_nodes(chosen, cluster, lambda g: g in free or g in chosen)
    return picked if picked is not None else tuple(sorted(chosen))


def slurm_picks_at_start(gpu_ids: Sequence[int], cluster: ClusterView, free: Collection[int]) -> tuple[int, ...] | None:
    """`slurm_picks` when Slurm's pass starts the job: the lowest of `free` (as the pass finds
    them) on each node of `gpu_ids`, as many as there, or None when a node has too few (the job
    waits for a later pass)."""
    return _lowest_on_nodes(gpu_ids, cluster, free.__contains__)


def _lowest_on_nodes(gpu_ids: Iterable[int], cluster: ClusterView, is_free: Callable[[int], bool]) -> tuple[int, ...] | None:
    counts: dict[int, int] = {}
    for g in gpu_ids:
        node = cluster.gpus[g].node_index
        counts[node] = counts.get(node, 0) + 1
    out: list[int] = []
    for node, count in counts.items():
        lowest = [g for g in cluster.nodes[node].gpu_ids if is_free(g)][:count]
        if len(lowest) < count:
            return None
        out += lowest
    return tuple(sorted(out))


def slurm_picks_slots(job: JobRequest, gpu_ids: Sequence[int], cluster: ClusterView, binds_slots: bool = True) -> bool:
    """Whether Slurm, not PAL, picks the slots of a per-node job answered with `gpu_ids`: pald
    binds exact slots only when they are the same on every node (one Gres= for all) and the
    nodes type their slots (`binds_slots`); otherwise it pins the nodes and Slurm takes the
    lowest free GPUs there (`slurm_picks`). A total request (`--gpus=N`) is left as PAL chose:
    Slurm-shaped traces (the replay) ask per node.

    Reserving PAL's own slots where Slurm takes others hands the slots Slurm really took to the
    next job, which then waits behind a job it was meant to avoid (seen in a replay on the lab:
    13.5 trace hours), so pald reserves, and the simulator starts, Slurm's pick."""
    if not is_per_node(job):
        return False
    return not (binds_slots and choice_of(gpu_ids, cluster).same_slots_everywhere())


def shape_of(job: JobRequest) -> JobShape:
    """A job's shape; jobs built without one ask for `num_gpus` anywhere."""
    return job.shape if job.shape is not None else JobShape.anywhere(job.num_gpus)


def is_per_node(job: JobRequest) -> bool:
    return job.shape is not None and job.shape.is_per_node


def uniform_sf(cluster: ClusterView) -> tuple[float, ...]:
    """Every GPU 1.0 (placements blind to variability); one tuple per size, so it has one id."""
    return _uniform(cluster.size)


@lru_cache(maxsize=8)
def _uniform(size: int) -> tuple[float, ...]:
    return (1.0,) * size


def best_fit_rack_to_collect(scored: Iterable[tuple[float, int]], rack_of: Callable[[int], int | str], k: int,
                             free_in_rack: Callable[[int | str], int]) -> list[int] | None:
    """The `k` candidates of one rack for a job that must stay under one leaf switch.
    `scored`: (cost, candidate) in preference order, cost never falling (a node's worst binned
    slowdown for the job). Walking it, the racks that collect k candidates at the cost of the
    first rack to collect k are equally fast for the job; of those, the one with the fewest
    free GPUs (`free_in_rack`): a tie (K-means bins make many) goes to the tightest fit, not
    to the lowest node names, which break up an emptier leaf while a tighter one would do; a
    later multi-node job then finds no leaf with its nodes free and spreads (1.33x slower for
    a PointNet job over two leaves in the replay's model, where stock Slurm had kept a leaf
    whole). None: no rack has k."""
    per_rack: dict[int | str, list[int]] = {}
    best: tuple[int | str, list[int]] | None = None  # (rack, its k candidates)
    best_fit: int | None = None  # its free GPUs, counted once a second rack ties with it
    best_cost = 0.0
    for cost, c in scored:
        if best is not None and cost > best_cost:
            break  # every rack still to complete costs more
        rack = rack_of(c)
        got = per_rack.setdefault(rack, [])
        if len(got) == k:
            continue
        got.append(c)
        if len(got) < k:
            continue
        if best is None:
            best, best_cost = (rack, got), cost
            continue
        if best_fit is None:
            best_fit = free_in_rack(best[0])
        fit = free_in_rack(rack)
        if fit < best_fit:
            best, best_fit = (rack, got), fit
    return None if best is None else best[1]


def fewest_leaves_among_ties(scored: Iterable[tuple[float, int]], rack_of: Callable[[int], int | str],
                             k: int) -> list[int] | None:
    """The `k` candidates for a job free to span leaf switches, as fast as the `k` best and
    under as few leaves as ties allow. `scored`: (cost, candidate) in preference order, cost
    never falling. The job's speed is its worst GPU's, so every candidate that costs no more
    than the k-th best is as good for it as the k best; among those, the leaves are taken as
    Slurm's topology/tree takes them (while candidates are still needed: the leaf with the
    fewest that holds all still needed, else the one with the most; ties to the leaf whose
    best candidate comes first), each leaf's best first. Taking the k best regardless spread
    a 12-node job over all four leaves of the replay's lab where three would do as fast, and a
    later one-leaf job waited a day for a whole leaf (workload-3 at 80 jobs). None: fewer
    than k candidates."""
    leaves: dict[int | str, list[int]] = {}
    taken = 0
    kth_cost = 0.0
    for cost, c in scored:
        if taken >= k and cost > kth_cost:
            break
        leaves.setdefault(rack_of(c), []).append(c)
        taken += 1
        if taken == k:
            kth_cost = cost
    if taken < k:
        return None
    first = {rack: i for i, rack in enumerate(leaves)}
    chosen: list[int] = []
    while len(chosen) < k:
        need = k - len(chosen)
        fits = [r for r, cs in leaves.items() if len(cs) >= need]
        rack = (min(fits, key=lambda r: (len(leaves[r]), first[r])) if fits
                else min(leaves, key=lambda r: (-len(leaves[r]), first[r])))
        chosen += leaves.pop(rack)[:need]
    return chosen


# ---- the vectorised pick -------------------------------------------------------------------
def _array_of(values: Sequence[float], dtype: str, cache: RunCache | None) -> np.ndarray:
    """`values` as a read-only array, kept in the run's cache while the tuple is (a view's
    node_of and a ranking's factors are tuples of every GPU: converting them per request
    costs O(GPUs) on every placement)."""
    if cache is None or not isinstance(values, tuple):
        return np.asarray(values, dtype=dtype)
    kind = ("array", dtype)
    hit = cache.lookup(kind, values)
    if hit is not None:
        return hit  # type: ignore[return-value]
    arr = np.asarray(values, dtype=dtype)
    arr.flags.writeable = False
    return cache.put(kind, values, arr)


def per_node_pick(shape: JobShape, free: "Sequence[int] | np.ndarray", sf: Sequence[float], cluster: ClusterView,
                  one_rack: bool = False, cache: RunCache | None = None) -> tuple[int, ...] | None:
    """The best `per_node` GPUs on each of `nodes` nodes among `free` (see module docstring);
    `cache`: the run's, where the arrays of `sf` and the view's node_of are kept."""
    k, g = shape.nodes or 1, shape.per_node or shape.total
    if len(free) < k * g:
        return None
    c = np.asarray(free, dtype=np.int64)
    s = _array_of(sf, "float64", cache)[c]
    nd = _array_of(cluster.node_of, "int64", cache)[c]
    order = np.lexsort((c, s, nd))  # by node, then sf, then id
    c, s, nd = c[order], s[order], nd[order]
    nodes, starts, counts = np.unique(nd, return_index=True, return_counts=True)
    ok = counts >= g
    if int(ok.sum()) < k:
        return None
    nodes, starts, counts = nodes[ok], starts[ok], counts[ok]
    worst = s[starts + g - 1]
    pref = np.lexsort((nodes, counts, worst))  # (worst of best g, free count, node)
    if one_rack and k > 1:
        rack_idx = cluster.topology.rack_idx
        free_per_rack = np.bincount(np.asarray(rack_idx, dtype=np.int64)[nd])
        chosen = best_fit_rack_to_collect(((float(worst[i]), int(i)) for i in pref), lambda i: rack_idx[int(nodes[i])],
                                          k, lambda r: int(free_per_rack[int(r)]))
        if chosen is None:
            return None
    elif k > 1:
        rack_idx = cluster.topology.rack_idx
        chosen = fewest_leaves_among_ties(((float(worst[i]), int(i)) for i in pref),
                                          lambda i: rack_idx[int(nodes[i])], k)
        if chosen is None:
            return None
    else:
        chosen = pref[:k].tolist()
    return tuple(sorted(int(x) for i in chosen for x in c[starts[i]: starts[i] + g]))


def shape_aware(alloc: Allocator, variability: bool = True) -> Allocator:
    """An allocator that answers per-node requests by shape and the rest with `alloc`."""

    def allocate(job: JobRequest, free: FreeGpus, ctx: PlacementContext) -> tuple[int, ...] | None:
        shape = job.shape
        if shape is None or shape.per_node is None:  # (is_per_node, inlined: the hot path)
            return alloc(job, free, ctx)
        sf = ctx.ranking.sf(job.perf_class) if variability else uniform_sf(ctx.cluster)
        return per_node_pick(shape_of(job), free.array(), sf, ctx.cluster, cache=ctx.cache)

    allocate.__name__ = allocate.__qualname__ = f"shape_aware({getattr(alloc, '__name__', alloc)})"
    return allocate


# ---- the incremental index (pald's submit path) --------------------------------------------
class FreeIndex:
    """Free GPUs of one class's view, indexed for the per-node shape.

    For each node: its free GPUs sorted by (sf, id). For each per-node count g: the nodes
    that can give g GPUs, sorted by (worst sf of their best g, free count, node index), which
    is exactly the per-node preference order. `take` updates only the touched nodes, so a
    burst of placements on a 1,000-node cluster costs microseconds each instead of a rescan.
    """

    def __init__(self, cluster: ClusterView, free: Iterable[int], sf: Sequence[float]) -> None:
        self.sf = sf
        self.node_of = cluster.node_of
        self.max_g = max((len(n.gpu_ids) for n in cluster.nodes), default=0)
        by_node: dict[int, list[int]] = {}
        for gid in free:
            by_node.setdefault(self.node_of[gid], []).append(gid)
        self.free: dict[int, list[int]] = {n: sorted(g, key=lambda x: (sf[x], x)) for n, g in by_node.items()}
        self.orders: dict[int, list[tuple[float, int, int]]] = {g: [] for g in range(1, self.max_g + 1)}
        for n in self.free:
            for g, key in self._keys(n).items():
                self.orders[g].append(key)
        for lst in self.orders.values():
            lst.sort()

    def _free_in_rack(self, rack_of_node: Sequence[str], allowed: frozenset[int] | None) -> Callable[[int | str], int]:
        """Free GPUs per rack (on the allowed nodes), counted when a one-rack choice first has
        a tie to break."""
        counts: dict[int | str, int] | None = None

        def free_in(rack: int | str) -> int:
            nonlocal counts
            if counts is None:
                counts = {}
                for node, gpus in self.free.items():
                    if allowed is None or node in allowed:
                        counts[rack_of_node[node]] = counts.get(rack_of_node[node], 0) + len(gpus)
            return counts.get(rack, 0)

        return free_in

    def _keys(self, node: int) -> dict[int, tuple[float, int, int]]:
        fl = self.free.get(node, [])
        return {g: (self.sf[fl[g - 1]], len(fl), node) for g in range(1, len(fl) + 1)}

    def _by_node(self, gpu_ids: Iterable[int]) -> dict[int, set[int]]:
        touched: dict[int, set[int]] = {}
        for gid in gpu_ids:
            touched.setdefault(self.node_of[gid], set()).add(gid)
        return touched

    def _restate(self, node: int, free: list[int]) -> None:
        """`node`'s free GPUs are now `free` (sorted by (sf, id)): its keys moved in the orders."""
        for g, key in self._keys(node).items():
            lst = self.orders[g]
            i = bisect.bisect_left(lst, key)
            if i < len(lst) and lst[i] == key:
                del lst[i]
        self.free[node] = free
        for g, key in self._keys(node).items():
            bisect.insort(self.orders[g], key)

    def take(self, gpu_ids: Iterable[int]) -> None:
        for node, gone in self._by_node(gpu_ids).items():
            self._restate(node, [x for x in self.free.get(node, []) if x not in gone])

    def give(self, gpu_ids: Iterable[int]) -> None:
        """`gpu_ids` (taken ones) are free again: `take` undone, node by node."""
        sf = self.sf
        for node, back in self._by_node(gpu_ids).items():
            self._restate(node, sorted(back.union(self.free.get(node, [])), key=lambda x: (sf[x], x)))

    def choose(self, k: int, g: int, rack_of_node: Sequence[str] | None = None, allowed: frozenset[int] | None = None,
               one_rack: bool = False) -> tuple[int, ...] | None:
        """The best `k` nodes for `g` GPUs each (with `rack_of_node`: under as few leaves as
        ties allow); with `one_rack`, all in one rack (the rack whose k-th best node is best:
        walking the global order, the first rack to collect k). `allowed`: the node indices
        the job may use (None: all); the walk skips the others, so a restricted job costs no
        rebuilt index."""
        if g > self.max_g:
            return None
        lst = self.orders[g]
        if len(lst) < k:
            return None
        scored = ((cost, node) for (cost, _n, node) in lst) if allowed is None else (
            (cost, node) for (cost, _n, node) in lst if node in allowed)
        if rack_of_node is None or k == 1:
            picked = [node for _cost, node in itertools.islice(scored, k)]
            if len(picked) < k:
                return None
        else:
            found = (best_fit_rack_to_collect(scored, lambda n: rack_of_node[n], k,
                                              self._free_in_rack(rack_of_node, allowed)) if one_rack
                     else fewest_leaves_among_ties(scored, lambda n: rack_of_node[n], k))
            if found is None:
                return None
            picked = found
        return tuple(sorted(gid for node in picked for gid in self.free[node][:g]))


class ShapeIndex:
    """A free set (`free`, the truth) and per-class FreeIndexes over it, built on first use and
    kept in step by `take` and `give` (`follow`: onto a new free set of the same layout). Whoever owns the free set owns its ShapeIndex (pald's
    PlacementService) and passes it in the context (PlacementContext.shape_index).
    `narrowed(allowed)` is the same index seen by a job that may use only some nodes: it
    shares the indexes and the free set (a take through either is seen by both)."""

    # `follow` moves the index node by node while at most 1/REBUILD_SHARE of the nodes changed
    # (a node costs about what building the whole index costs per 600 nodes)
    REBUILD_SHARE = 16

    def __init__(self, cluster: ClusterView, allowed: frozenset[int] | None = None,
                 _shared: _Shared | None = None):
        self.cluster = cluster  # layout (node_of, racks)
        self.allowed = allowed  # node indices this view of the index may use (None: all)
        self._shared = _shared if _shared is not None else _Shared(set(cluster.free))

    @property
    def free(self) -> set[int]:
        """The free GPUs (on the allowed nodes). Read it, never change it: narrowed, the set
        is made once per set of allowed nodes and kept in step by `take` and `give` (_Shared.on_nodes),
        as each request of a burst reads it (its plan's free set, Slurm's start rule) and
        each making is a pass over every free GPU (tens of thousands at a large site)."""
        if self.allowed is None:
            return self._shared.free
        kept = self._shared.kept_on(self.allowed)
        if kept is not None:
            return kept
        allowed, nodes = self.allowed, self.cluster.nodes
        if 2 * len(allowed) < len(nodes):
            node_of = self.cluster.node_of
            out = {g for g in self._shared.free if node_of[g] in allowed}
        else:
            # most nodes allowed (a few drained or reserved): take the others' GPUs out, in C,
            # rather than test every free GPU one by one
            out = set(self._shared.free)
            for n in set(range(len(nodes))).difference(allowed):
                out.difference_update(nodes[n].gpu_ids)
        return self._shared.keep(allowed, out)

    def narrowed(self, allowed: frozenset[int] | None) -> "ShapeIndex":
        return self if allowed is None else ShapeIndex(self.cluster, allowed, self._shared)

    def pick(self, shape: JobShape, sf: Sequence[float], one_rack: bool = False) -> tuple[int, ...] | None:
        by_sf = self._shared.by_sf
        hit = by_sf.get(id(sf))
        if hit is None or hit[0] is not sf:
            hit = by_sf[id(sf)] = (sf, FreeIndex(self.cluster, self._shared.free, sf))
        return hit[1].choose(shape.nodes or 1, shape.per_node or shape.total,
                             self.cluster.rack_of_node, self.allowed, one_rack)

    def take(self, gpu_ids: Iterable[int]) -> None:
        gpu_ids = tuple(gpu_ids)
        self._shared.free.difference_update(gpu_ids)
        for _allowed, kept in self._shared.on_nodes.values():
            kept.difference_update(gpu_ids)
        for _sf, idx in self._shared.by_sf.values():
            idx.take(gpu_ids)

    def give(self, gpu_ids: Iterable[int]) -> None:
        """`gpu_ids` (taken ones) are free again."""
        gpu_ids = tuple(gpu_ids)
        self._shared.free.update(gpu_ids)
        node_of = self.cluster.node_of
        for allowed, kept in self._shared.on_nodes.values():  # each kept set gets its nodes' back
            kept.update(g for g in gpu_ids if node_of[g] in allowed)
        for _sf, idx in self._shared.by_sf.values():
            idx.give(gpu_ids)

    def follow(self, free: Collection[int]) -> None:
        """The free set is now `free` (same layout): the GPUs no longer free taken, those free
        again given back. Why: building a class's index is a sort of every free GPU (tens of
        milliseconds at 65,536 GPUs), which the first request after each Slurm read paid;
        a read changes a few nodes, and following it costs what changed."""
        shared = self._shared.free
        gone, back = shared.difference(free), frozenset(free).difference(shared)
        node_of = self.cluster.node_of
        if len({node_of[g] for g in itertools.chain(gone, back)}) * self.REBUILD_SHARE > len(self.cluster.nodes):
            # many nodes changed (a cycle's releases): each class's index is built again when
            # next asked, cheaper than moving it node by node
            shared.difference_update(gone)
            shared.update(back)
            self._shared.by_sf.clear()
            self._shared.on_nodes.clear()
            return
        if gone:
            self.take(gone)
        if back:
            self.give(back)


class _Shared:
    """What every view of one ShapeIndex shares: the free set, the per-class indexes, and the
    free set on each set of allowed nodes asked about (a read's node groups: a few)."""

    MAX_KEPT = 16  # sets of allowed nodes kept (each is taken from at every take)

    def __init__(self, free: set[int]):
        self.free = free
        self.by_sf: dict[int, tuple[object, FreeIndex]] = {}
        # id(allowed) -> (allowed, its free set): keyed by identity, as by_sf is. Why: the
        # kept sets outlive a read (follow), while each read makes its node groups' allowed
        # sets anew; keyed by the set itself, every request's lookup compared the new set
        # with the kept one element by element (8,188 nodes: 0.18 ms, twice per request)
        self.on_nodes: dict[int, tuple[frozenset[int], set[int]]] = {}

    def kept_on(self, allowed: frozenset[int]) -> set[int] | None:
        """The free set kept for `allowed`, or None. A kept set of the same nodes under an
        earlier read's object is moved under this one (one comparison per read and set)."""
        hit = self.on_nodes.get(id(allowed))
        if hit is not None and hit[0] is allowed:
            return hit[1]
        for key, (other, kept) in list(self.on_nodes.items()):
            if len(other) == len(allowed) and other == allowed:
                del self.on_nodes[key]
                self.on_nodes[id(allowed)] = (allowed, kept)
                return kept
        return None

    def keep(self, allowed: frozenset[int], free: set[int]) -> set[int]:
        if len(self.on_nodes) >= self.MAX_KEPT:
            self.on_nodes.clear()
        self.on_nodes[id(allowed)] = (allowed, free)
        return free


def place_one_per_node(job: JobRequest, ctx: PlacementContext, variability: bool = True) -> tuple[int, ...] | None:
    """A per-node request against ctx.cluster.free (the submit path): through the context's
    ShapeIndex when it has one, else a vectorised pick. Same answer either way."""
    sf = ctx.ranking.sf(job.perf_class) if variability else uniform_sf(ctx.cluster)
    if ctx.shape_index is not None:
        return ctx.shape_index.pick(shape_of(job), sf)
    return per_node_pick(shape_of(job), sorted(ctx.cluster.free), sf, ctx.cluster, cache=ctx.cache)


def slurm_pick(shape: JobShape, free: Iterable[int], cluster: ClusterView) -> tuple[int, ...] | None:
    """What stock Slurm picks for a per-node shape (cons_tres with topology/tree), the lowest
    free slots on each node it takes. Nodes qualify with `per_node` free GPUs and are taken by
    (weight, name) within a leaf switch (a rack); the leaves by best fit, as the tree plugin
    chooses them: while nodes are still needed, the leaf with the fewest qualifying nodes that
    holds all of them, else the leaf with the most (ties: the first leaf). So a 2-node job goes
    to the rack with exactly 2 free nodes, not the first rack with 4, and a job larger than any
    rack fills whole racks first. Measured on the lab (slurmctld's backfill log, workload-3)."""
    k, g = shape.nodes or 1, shape.per_node or shape.total
    by_node: dict[int, list[int]] = {}
    for gid in sorted(free):
        by_node.setdefault(cluster.node_of[gid], []).append(gid)
    nodes = cluster.nodes
    racks = cluster.rack_of_node
    leaves: dict[str, list[int]] = {}
    for n in sorted((n for n, f in by_node.items() if len(f) >= g), key=lambda n: (nodes[n].weight, nodes[n].name)):
        leaves.setdefault(racks[n], []).append(n)
    first = {rack: i for i, rack in enumerate(dict.fromkeys(racks))}
    chosen: list[int] = []
    while len(chosen) < k and leaves:
        need = k - len(chosen)
        fits = [r for r, ns in leaves.items() if len(ns) >= need]
        if fits:
            rack = min(fits, key=lambda r: (len(leaves[r]), first[r]))
        else:
            rack = min(leaves, key=lambda r: (-len(leaves[r]), first[r]))
        chosen += leaves.pop(rack)[:need]
    if len(chosen) < k:
        return None
    return tuple(sorted(gid for n in chosen for gid in by_node[n][:g]))
