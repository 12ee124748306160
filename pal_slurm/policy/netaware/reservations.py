"""Reservations (EASY backfilling, topology-aware): when the running jobs free their GPUs
(`_Releases`), the group a blocked job will get first and when (`_Reservation`, its shadow),
and Slurm's own planning of per-node jobs (`slurm_will_run`), plus the per-plan memo of
allocations and reservations a deep queue asks for again and again (`_Allocations`)."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence, overload

import numpy as np

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.decision import JobId
from pal_slurm.model.network import NODE, RACK, SPINE
from pal_slurm.model.shape import JobShape
from pal_slurm.policy.netaware.estimates import _TABLE_LIMIT, _Table, topo
from pal_slurm.policy.shapes import fewest_leaves_among_ties, slurm_pick

class SortedIds(Sequence[int]):
    """A free set as the ascending id list an allocator reads, sorted when first read past its
    length: an allocation answered from a shape index reads only how many are free, and
    sorting tens of thousands of ids per request was most of pald's submit-path cost."""

    __slots__ = ("_free", "_ids")

    def __init__(self, free: Collection[int]):
        self._free = free
        self._ids: list[int] | None = None

    def _list(self) -> list[int]:
        if self._ids is None:
            self._ids = sorted(self._free)
        return self._ids

    def __len__(self) -> int:
        return len(self._free)

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> list[int]: ...

    def __getitem__(self, i: int | slice) -> int | list[int]:
        return self._list()[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self._list())

    def __contains__(self, g: object) -> bool:
        return g in self._free

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self._list(), dtype=dtype)


class _LazyEnds(dict[JobId, float]):
    """{job id: estimated end}, computed on first use (most plans never need them)."""

    def __init__(self, estimate: Callable[[JobId], float]) -> None:
        super().__init__()
        self._estimate = estimate

    def __missing__(self, jid: JobId) -> float:
        value = self[jid] = self._estimate(jid)
        return value


class _Allocations:
    """A plan's allocations over its free GPUs, and the consolidated reservations the
    finish-aware check compares them with, remembered until the free GPUs or the running jobs
    change (`changed`): the jobs of a deep queue ask the same questions (same size, class,
    model, shape and accepted tier) many times in one plan."""

    def __init__(self, free: set[int] | frozenset[int], allocate: Callable[[JobRequest, Sequence[int], int], Any],
                 indexed: Callable[[JobRequest, Sequence[int], int], Any] | None = None):
        self.free, self.allocate = free, allocate
        # the same allocation read from the caller's shape index (PlacementContext.shape_index)
        # while `free` is the set it indexes: until the first `changed`; None: no index
        self.indexed = indexed
        self.memo: dict[tuple[Any, ...], Any] = {}
        self.reservations: dict[tuple[Any, ...], _Reservation] = {}

    def best(self, job: JobRequest, max_tier: int) -> Any:
        key = (job.num_gpus, job.perf_class, job.shape, job.app, job.net_sensitivity, max_tier)
        if key not in self.memo:
            if self.indexed is not None:  # an answer from the index need not sort every free GPU
                self.memo[key] = self.indexed(job, SortedIds(self.free), max_tier)
            else:
                self.memo[key] = self.allocate(job, sorted(self.free), max_tier)
        return self.memo[key]

    def reservation(self, key: tuple[Any, ...], make: Callable[[], "_Reservation"]) -> "_Reservation":
        """`make()`'s reservation for `key`, a fresh copy each time (a plan uses its
        reservations up: `take`)."""
        r = self.reservations.get(key)
        if r is None:
            r = self.reservations[key] = make()
        return _Reservation(r.shadow, r.group, r.spare)

    def changed(self) -> None:
        self.memo.clear()
        self.reservations.clear()
        self.indexed = None  # `free` is no longer the set the index holds



class _Releases:
    """When the running jobs free their GPUs, per group of a network level: {group: [(estimated
    end, GPUs it frees there), ...] ascending}, made on first use in a plan and kept in step as
    the plan starts jobs (`hold`) and preempts them (`drop`). Every reservation of a plan reads
    it; how a job's GPUs spread over the groups is kept for the run (`counts`: running jobs hold
    the same GPUs plan after plan)."""

    def __init__(self, holding: dict[JobId, tuple[int, ...]], ends: Mapping[JobId, float], cluster: ClusterView,
                 counts: _Table):
        self.holding, self.ends, self.topology, self.counts = holding, ends, topo(cluster), counts
        self.levels: dict[int, dict[int, list[tuple[float, int]]]] = {}

    def nodes_of(self, gpus: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        """((node, GPUs there), ...) of a running job's GPUs (kept for the run)."""
        return self._spread(NODE, gpus)

    def _spread(self, level: int, gpus: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        spread = self.counts.get((level, gpus))
        if spread is None:
            if len(self.counts) >= _TABLE_LIMIT:
                self.counts.clear()
            grp_of = self.topology.group_of(level)
            spread = self.counts[(level, gpus)] = tuple(Counter(map(grp_of.__getitem__, gpus)).items())
        return spread

    def at(self, level: int) -> dict[int, list[tuple[float, int]]]:
        out = self.levels.get(level)
        if out is None:
            out = self.levels[level] = {}
            ends, holding = self.ends, self.holding
            if level >= SPINE:  # one group (topology.group_of): each job frees all its GPUs there
                spine = [(ends[jid], len(gpus)) for jid, gpus in holding.items() if gpus]
                if spine:
                    out[0] = spine
            else:  # (a plan reads every running job at the node or rack level: no call per job)
                known, spread = self.counts.get, self._spread
                for jid, gpus in holding.items():
                    end = ends[jid]
                    for grp, cnt in known((level, gpus)) or spread(level, gpus):
                        lst = out.get(grp)
                        if lst is None:
                            out[grp] = [(end, cnt)]
                        else:
                            lst.append((end, cnt))
            for lst in out.values():
                lst.sort()
        return out

    def hold(self, jid: JobId, gpus: tuple[int, ...], end: float) -> None:
        self.holding[jid] = gpus
        for level, out in self.levels.items():
            for grp, cnt in self._spread(level, gpus):
                bisect.insort(out.setdefault(grp, []), (end, cnt))

    def drop(self, jid: JobId) -> None:
        self.holding.pop(jid, None)
        self.levels.clear()


def slurm_will_run(k: int, g: int, ready_nodes: Sequence[tuple[float, int]], cluster: ClusterView, now: float,
                   window_s: float) -> tuple[float, frozenset[int]]:
    """(start, GPUs of the nodes) Slurm's backfill plans for a blocked k-node x g-GPU job, as its
    select plugin's will-run test finds them (Slurm 22.05, select/cons_common `_will_run_test`):
    the running jobs are taken off in end-time order in batches, the first up to its end
    rounded up to a multiple of `window_s` (30 wall seconds) plus one window, each next batch a
    doubled window further; after each batch the job is tried on every node free by then (the
    nodes topology/tree takes: shapes.slurm_pick), and it starts at the last end taken off.
    `ready_nodes`: (when g GPUs are free on the node, node). Why: taking nodes off one by one
    planned a 12-node job on a node of the fourth leaf switch at the first instant twelve were
    ready; Slurm's batch freed three whole leaves, planned it there a little later and
    backfilled a long job on the fourth (a lab replay of workload-3 at 150x: stock's avg JCT
    predicted 10% long). A compressed replay multiplies the window by its scale."""
    shape = JobShape(k * g, nodes=k, per_node=g)
    node_of = cluster.node_of
    ends = sorted({t for t, _nd in ready_nodes if t > now})

    def fit(until: float) -> tuple[float, frozenset[int]] | None:
        ready = {nd for t, nd in ready_nodes if t <= until}
        if len(ready) < k:
            return None
        picked = slurm_pick(shape, [x for x, nd in enumerate(node_of) if nd in ready], cluster)
        if picked is None:
            return None
        start = max([now, *(t for t, _nd in ready_nodes if t <= until)])
        nodes = {node_of[y] for y in picked}
        return start, frozenset(x for x, nd in enumerate(node_of) if nd in nodes)

    got = fit(now)
    if got is not None or not ends:
        return got if got is not None else (math.inf, frozenset())
    window = window_s
    end_time = ends[0] + (window - ends[0] % window)
    limit = end_time + window
    while True:
        got = fit(limit)
        if got is not None:
            return got
        later = [t for t in ends if t > limit]
        if not later:
            return math.inf, frozenset()
        while later[0] > end_time + window:
            window *= 2
        limit = end_time + window


def _ready_last(ready: Sequence[tuple[float, int]], k: int, rack_idx: Sequence[int], now: float) -> list[int]:
    """The `k` nodes a per-node reservation holds, of those `ready` (ready_at, node) by its
    shadow: first the nodes busy now (their jobs end by the shadow; under as few leaves as
    they allow), then nodes free now, in the leaves already chosen first, then the leaves
    with the fewest free (best fit). The nodes free now are what a job passing the blocked
    one can start on; holding the ones that free last leaves them to it without moving the
    shadow (the blocked job needs k nodes ready by then, whichever). Holding the nodes ready
    first kept a whole free leaf from a 29-hour one-leaf job for 13 hours beside a 48-GPU
    reservation that needed only the other three (workload-3, 80 jobs)."""
    later = [nd for at, nd in sorted(ready, key=lambda r: r[1]) if at > now]
    if len(later) >= k:
        picked = fewest_leaves_among_ties(((0.0, nd) for nd in later), rack_idx.__getitem__, k)
        assert picked is not None  # None only for fewer than k candidates
        return picked
    chosen = list(later)
    free_now = [nd for at, nd in ready if at <= now]
    free_in: Counter[int] = Counter(rack_idx[nd] for nd in free_now)
    leaves = {rack_idx[nd] for nd in chosen}
    free_now.sort(key=lambda nd: (rack_idx[nd] not in leaves, free_in[rack_idx[nd]], rack_idx[nd], nd))
    return chosen + free_now[:k - len(chosen)]


class _Reservation:
    """A reservation for one blocked job: a GPU group (one node, one rack, or the cluster)
    that will hold enough GPUs for it at `shadow`, and how many of the group's GPUs it does
    not need then (`spare`). Backfilled jobs must end before `shadow` or fit in the spare."""

    def __init__(self, shadow: float, group: frozenset[int] | None, spare: int) -> None:
        self.shadow = shadow
        self.group = group  # GPU ids; None = the whole cluster
        self.spare = spare
        # a job no longer than this (JobRequest.remaining_time) passes whatever it takes: the
        # reservation of a job in its grace (`grace_reservation`); -inf: none passes so
        self.passes_up_to = -math.inf
        # how long its job then holds the group (its remaining time), where the plan that
        # keeps it says (`_consolidated_sooner` counts the group busy until shadow + this)
        self.holds_s: float | None = None

    @classmethod
    def make(cls, n: int, tier: int, free: Iterable[int], releases: "_Releases", cluster: ClusterView,
             rack_idx: Sequence[int], now: float) -> "_Reservation":
        t = topo(cluster)
        if tier == SPINE:
            level = SPINE
        elif tier == RACK:  # the policy's racks: the cluster's, or one (it sees node locality only)
            if rack_idx is not t.rack_idx and tuple(rack_idx) != t.rack_idx and len(set(rack_idx)) > 1:
                raise ValueError("rack_idx must be the cluster's racks or a single rack")
            level = RACK if len(set(rack_idx)) > 1 or rack_idx is t.rack_idx else SPINE
        else:
            level = NODE
        grp_of = t.group_of(level)
        have = Counter(map(grp_of.__getitem__, free))
        by_group = releases.at(level)
        best = None
        for grp in set(have) | set(by_group):
            avail, shadow = have.get(grp, 0), now
            for end, cnt in by_group.get(grp, ()):
                if avail >= n:
                    break
                avail += cnt
                shadow = end
            if avail >= n and (best is None or (shadow, grp) < (best[0], best[1])):
                best = (shadow, grp, avail - n)
        if best is None:
            if tier != SPINE:
                return cls.make(n, SPINE, free, releases, cluster, rack_idx, now)
            return cls(math.inf, None, 0)
        shadow, grp, spare = best
        group = None if tier == SPINE else t.members(level)[grp]
        return cls(shadow, group, spare)

    @classmethod
    def for_nodes(cls, k: int, g: int, free: Iterable[int], releases: "_Releases", cluster: ClusterView,
                  rack_idx: Sequence[int], now: float, within_rack: bool = True,
                  busy_until: Mapping[int, float] | None = None,
                  will_run_window_s: float = 0.0, ready_last: bool = False) -> "_Reservation":
        """The reservation of a per-node job (k nodes x g GPUs): a node is ready when g of its
        GPUs are free (now, or as its running jobs end). Under one leaf switch (`within_rack`)
        a rack is ready when k of its nodes are, and the rack ready first is the group;
        anywhere, the group is the k nodes ready first, as Slurm's backfill reserves whole
        nodes for the job it plans (of the nodes ready by then, the first ones, as its node
        selection takes them). Counting GPUs alone would say "now" while no k nodes have g
        free each, and would let a backfilled job take the nodes the blocked one needs. No
        spare: a job backfilled into the group ends before the shadow. `busy_until`: node ->
        when the blocked jobs reserved before this one release it (Slurm plans them in turn).
        `will_run_window_s` > 0 (anywhere): Slurm's own planning (`slurm_will_run`).
        """
        t = topo(cluster)
        node_of = t.node_of
        have = Counter(node_of[x] for x in free)
        by_node = releases.at(NODE)
        ready: dict[int, list[float]] = {}
        ready_nodes: list[tuple[float, int]] = []
        for nd in range(len(cluster.nodes)):
            avail, shadow = have.get(nd, 0), now
            for end, cnt in by_node.get(nd, ()):
                if avail >= g:
                    break
                avail += cnt
                shadow = end
            if avail >= g:
                if busy_until and nd in busy_until:
                    shadow = max(shadow, busy_until[nd])
                ready.setdefault(rack_idx[nd], []).append(shadow)
                ready_nodes.append((shadow, nd))
        if not within_rack:
            if len(ready_nodes) < k:
                return cls(math.inf, None, 0)
            if will_run_window_s > 0:
                return cls(*slurm_will_run(k, g, ready_nodes, cluster, now, will_run_window_s), 0)
            shadow = sorted(ready_nodes)[k - 1][0]  # when k nodes are ready
            by_shadow = [(ready_at, nd) for ready_at, nd in ready_nodes if ready_at <= shadow]
            if ready_last:
                chosen = set(_ready_last(by_shadow, k, rack_idx, now))
            else:  # of those, the first k
                chosen = set(sorted(nd for _, nd in by_shadow)[:k])
            return cls(shadow, frozenset(x for x, nd in enumerate(node_of) if nd in chosen), 0)
        best = None
        for rack, times in ready.items():
            if len(times) >= k:
                shadow = sorted(times)[k - 1]
                if best is None or (shadow, rack) < best:
                    best = (shadow, rack)
        if best is None:
            return cls(math.inf, None, 0)
        group = frozenset(x for x, nd in enumerate(node_of) if rack_idx[nd] == best[1])
        return cls(best[0], group, 0)

    def covers(self, g: int) -> bool:
        return self.group is None or g in self.group

    def _inside(self, gpus: Sequence[int]) -> int:
        return len(gpus) if self.group is None else sum(1 for g in gpus if g in self.group)

    def admits(self, end: float, gpus: Sequence[int], remaining: float) -> bool:
        """Whether a job ending at `end` on `gpus` (its own estimate of its length:
        `remaining`) may start now without breaking this reservation."""
        return end <= self.shadow or remaining <= self.passes_up_to or self._inside(gpus) <= self.spare

    def take(self, end: float, gpus: Sequence[int], remaining: float) -> None:
        if end > self.shadow and remaining > self.passes_up_to:
            self.spare -= self._inside(gpus)
