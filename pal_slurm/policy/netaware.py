"""Network-aware placements: delay scheduling, network-sensitive preemption, backfilling.

One configurable placement (`NetAwarePlacement`) built from four components, so the named
policies are configurations and ablations are one flag away:

- **Allocation** (`best_allocation`): for each variability bin v of the job's class (PAL's
  binned slowdown factors; all 1.0 without variability) take the free GPUs with sf <= v and
  pack them as tightly as the topology allows (one node, else one rack with the fewest nodes,
  else the fewest racks); its cost is v x the network factor of that packing (the context's
  network model, or a per-sensitivity tier penalty when there is none). The cheapest option
  wins: PAL's locality x variability order, with real per-tier, per-model penalties.
- **Delay scheduling** (Zaharia et al.; Dally): a job's preferred tier is the most
  consolidated one its size allows. It accepts only that tier for `timer(sens, node)` seconds
  of waiting, then also the rack tier for `timer(sens, rack)` more, then anything. With
  `cost_aware`, each wait is also bounded by what consolidation saves the job (remaining
  ideal time x the factor gap, "saving"): wait = min(saving, max(timer, patience x saving)),
  so a 9-hour GPT-2 job waits hours for a rack and a 5-minute one waits minutes at most.
  With `finish_aware`, even a job whose timers ran out refuses a spread placement when waiting
  for its consolidated one (the node/rack the running jobs free soonest, by their estimated
  ends) would finish it earlier; it then holds that reservation. With `detour_finish_aware`
  (pal-fit), the same test for the placement EASY backfill falls back to around the
  reservations ahead, when that one spreads wider than the first choice. That wait is bounded by the
  running jobs' ends, so it cannot starve; it matters when a job reaches the head of a deep
  queue long after its timers expired (a cap counted from submission would otherwise push a
  network-bound job onto the spine at 10x the runtime). Every job accepts any placement after `max_wait_s`: no starvation.
  With `waits_for_faster_node`, the same question on bins: a one-node job that could start
  now on a slower bin waits for GPUs of a faster one when the running jobs' ends free them
  soon enough to finish it sooner, and reserves them at once (`faster_node_later`); with
  `waits_for_faster_nodes`, a job of several nodes asks it of k nodes, their leaves' network
  factor counted (`faster_nodes_later`).
  Timers come from the context (`delay_timers`, the auto-tuner) or the policy's defaults.
- **Preemption**: a sensitive job that cannot get its preferred tier may stop strictly less
  sensitive jobs that started less than `recent_s` ago and were preempted fewer than
  `max_preemptions` times, when that frees a node/rack for it and its saving exceeds the work
  the victims lose plus their restart cost. Victims keep their queue position.
- **Backfilling**: `easy` gives a reservation to each of the first `reservations` jobs that
  cannot start and have waited at least `reserve_after_s`: the node/rack/cluster (at the tier
  the job accepts now) that frees enough GPUs soonest by the running jobs' estimated ends (the
  shadow time). Later jobs start only if they end before every shadow time or use GPUs the
  reservations can spare. Until a job has waited `reserve_after_s`, later jobs pass it freely
  (short jobs are most of these traces), or with `grace_reservation` (pal-fit), a job on
  whole nodes, only those no longer than it (by their time limits): a long job that passes a
  short one can hold a node it needs for hours; after that it cannot be overtaken
  indefinitely, so nobody starves. `greedy` lets any later job that fits go (Dally's skip); `none` stops at
  the first job that does not fit (the artifact's rule).

Running jobs are never moved (sticky), so a plan with nobody waiting changes nothing.
Runtime estimates are `JobRequest.remaining_time` (ideal seconds) x the estimated slowdown
(ranking score x network factor); in the simulator that is the trace's true length, under
Slurm it would be the job's time limit.

Named configurations: `pal-net` (variability + locality + cost-aware delay + EASY backfill
with aging), `pal-net-tuned` (timers from the auto-tuner), `pal-net-preempt` (plus
network-sensitive preemption), `pal-net-nodelay` (ablation), `pal-backfill` (ablation: PAL's node-only locality
+ EASY backfill, no delay: what backfilling alone buys), `pal-fit` (PAL against a backfilling
Slurm: pack first, a better bin only when it beats the tier and fragmentation costs,
finish-aware on tiers and, for per-node jobs, on bins, no delay timers; policy.fragmentation), `dally` (no variability, greedy
skip, tuned timers, preemption: a Dally-like policy).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

from pal_slurm.model import ClusterView, JobRequest, PlannedStart, RoundPlan
from pal_slurm.model.cluster import Topology
from pal_slurm.model.decision import JobId
from pal_slurm.model.shape import JobShape
from pal_slurm.model.network import (LEVELS, NODE, RACK, SPINE, DelayTimers, declared_factor, sensitivity_class,
                                      sensitivity_rank)
from pal_slurm.model.network import span as span  # a GPU set's tier: the topology's one definition
from pal_slurm.policy.autotune import DEFAULT_TIMERS
from pal_slurm.policy.base import PlacementContext, Traits
from pal_slurm.policy.cache import RunCache
from pal_slurm.policy.fragmentation import FragmentationCost, packed_first_allocation
from pal_slurm.policy.shapes import fewest_leaves_among_ties, is_per_node, per_node_pick, shape_of, slurm_pick, uniform_sf


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


@dataclass(frozen=True)
class PreemptConfig:
    recent_s: float = 1800.0  # only jobs started less than this ago may be stopped
    max_preemptions: int = 2  # a job is stopped at most this many times
    restart_cost_s: float = 30.0  # the victims' restart cost the saving must beat


# ---------------------------------------------------------------------------------------------
# topology helpers


def topo(cluster: ClusterView) -> Topology:
    """The cluster's derived topology (computed once per layout: with_free copies share it)."""
    return cluster.topology


def _rack_index(cluster: ClusterView) -> tuple[int, ...]:
    return topo(cluster).rack_idx


def rack_capacity(cluster: ClusterView) -> int:
    return topo(cluster).rack_cap


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


# ---------------------------------------------------------------------------------------------
# allocation


def _pack(eligible: list[int], n: int, cluster: ClusterView, rack_idx: Sequence[int], max_tier: int,
          key: Callable[[int], Any]) -> Packing | None:
    """Tightest packing of n GPUs from `eligible`: (gpus, tier, nodes, racks) or None.

    `key(g)` orders GPUs inside a node (best first)."""
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
    if (shape.nodes or 1) == 1:
        picks = [per_node_pick(shape, free, sf, cluster)]
    elif max_tier < RACK:
        return None
    else:
        picks = [per_node_pick(shape, free, sf, cluster, one_rack=True)]
        if max_tier >= SPINE:
            picks.append(per_node_pick(shape, free, sf, cluster))
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


# ---------------------------------------------------------------------------------------------
# reservations (EASY backfilling, topology-aware)


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

    def __init__(self, free: set[int], allocate: Callable[[JobRequest, Sequence[int], int], Any]):
        self.free, self.allocate = free, allocate
        self.memo: dict[tuple[Any, ...], Any] = {}
        self.reservations: dict[tuple[Any, ...], _Reservation] = {}

    def best(self, job: JobRequest, max_tier: int) -> Any:
        key = (job.num_gpus, job.perf_class, job.shape, job.app, job.net_sensitivity, max_tier)
        if key not in self.memo:
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


class _Preemptible:
    """A plan's running jobs preemption may stop, with what every blocked job asks of them
    worked out once: their sensitivity ranks, and per network level the one group (node or
    rack) holding all their GPUs (None when they span several)."""

    def __init__(self, jobs: dict[JobId, JobRequest]) -> None:
        self.jobs = jobs
        self.ranks = {jid: sensitivity_rank(v.net_sensitivity) for jid, v in jobs.items()}
        self._groups: dict[tuple[int, JobId], int | None] = {}

    def below(self, rank: int, suspend: set[JobId]) -> list[JobRequest]:
        """The jobs less network-sensitive than `rank` that this plan has not stopped yet."""
        ranks = self.ranks
        return [v for jid, v in self.jobs.items() if ranks[jid] < rank and jid not in suspend]

    def group(self, level: int, job: JobRequest, group_of: Callable[[int], int]) -> int | None:
        key = (level, job.job_id)
        if key not in self._groups:
            groups = {group_of(g) for g in job.running_on}
            self._groups[key] = groups.pop() if len(groups) == 1 else None
        return self._groups[key]


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
            for jid, gpus in self.holding.items():
                end = self.ends[jid]
                for grp, cnt in self._spread(level, gpus):
                    out.setdefault(grp, []).append((end, cnt))
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


def faster_node_later(job: JobRequest, g: int, now_bin: float, free: Iterable[int], releases: "_Releases",
                      sf: Sequence[float], cluster: ClusterView, now: float,
                      reservations: Sequence["_Reservation"], cache: RunCache) -> tuple[float, tuple[int, ...]] | None:
    """(when, GPUs): the wait for `g` GPUs on one node of a faster bin than `now_bin` (the
    worst bin of what the job can take now) that finishes it soonest, when that is sooner than
    starting now (remaining time x bin); None when starting now is as soon.

    A long job that arrives while short ones hold the fast nodes would otherwise take the one
    node left for all its hours (workload-4: a 7.4-hour ResNet-50 job 8.7% slower on the only
    whole node free, where the nodes short jobs freed minutes later were in the best bin).
    The running jobs' ends are estimates (pald: their time limits, so waits look long); an
    end already past (a job running over its estimate) frees nothing. Candidates must leave
    the plan's earlier `reservations` whole. Only the nodes that could beat `now_bin` and the
    ends early enough to pay are looked at: this runs on pald's submit path."""
    left = job.remaining_time
    if left <= 0:
        return None
    t = topo(cluster)
    by_best = _gth_best_by_node(sf, g, t, cache)
    if not by_best or by_best[0][0] >= now_bin:
        return None
    candidates = {nd for _bin, nd in itertools.takewhile(lambda b: b[0] < now_bin, by_best)}
    latest = now + left * (now_bin - by_best[0][0])  # a wait ending later cannot pay
    node_of = t.node_of
    frees: dict[int, list[tuple[float, int]]] = {}
    for jid, gpus in releases.holding.items():
        if not any(nd in candidates for nd, _ in releases.nodes_of(gpus)):
            continue
        end = releases.ends[jid]
        if now < end < latest:
            for x in gpus:
                if node_of[x] in candidates:
                    frees.setdefault(node_of[x], []).append((end, x))
    if not frees:
        return None
    free_on = _free_by_node(free, node_of, frees.keys())
    best_finish = now + left * now_bin
    best: tuple[float, tuple[int, ...]] | None = None
    for nd, node_frees in frees.items():
        avail = free_on.get(nd, [])
        for end, x in sorted(node_frees):
            avail.append(x)
            if len(avail) < g:
                continue
            pick = sorted(avail, key=lambda y: (sf[y], y))[:g]
            finish = end + left * max(sf[y] for y in pick)
            if finish < best_finish - 1e-9 and all(r.admits(finish, pick, job.remaining_time) for r in reservations):
                best_finish, best = finish, (end, tuple(sorted(pick)))
    return best


def faster_nodes_later(job: JobRequest, k: int, g: int, now_cost: float, free: Iterable[int],
                       releases: "_Releases", sf: Sequence[float], ctx: PlacementContext, rack_idx: Sequence[int],
                       now: float, reservations: Sequence["_Reservation"]) -> tuple[float, tuple[int, ...]] | None:
    """(when, GPUs): for a job of `k` >= 2 nodes x `g` GPUs that could start now at `now_cost`
    (its worst bin there x the network factor of that span), the wait for k nodes of faster
    bins that finishes it soonest (ready time + remaining x worst bin x network factor of the
    k nodes' span), when that is sooner than starting now; None when starting now is as soon.

    `faster_node_later` for jobs on several nodes. A job as large as half the cluster is
    placed on whatever k nodes are free when it could start, and runs at its slowest GPU's
    pace for all its hours: workload-4's 32-GPU, 30-hour ResNet-50 job took the only eight
    free nodes, one with a GPU at 1.113x, when a short job freed four fast nodes 750 trace
    seconds later (a lab replay at 150: it ran 2.4% longer than under stock and set a
    makespan 1.024 of stock's). The ends are the running jobs' estimates (pald: their time
    limits); an end already past frees nothing; only nodes whose g-th best GPU could beat the
    job's pace now and ends early enough to pay are looked at, and the sweep stops once no
    later start could pay (pald's submit path). A candidate set must leave the plan's
    earlier `reservations` whole. Nodes are taken as `fewest_leaves_among_ties` takes them:
    the k fastest, under as few leaf switches as ties allow."""
    left = job.remaining_time
    if left <= 0 or k < 2:
        return None
    cluster = ctx.cluster
    t = topo(cluster)
    by_best = _gth_best_by_node(sf, g, t, ctx.cache)
    if len(by_best) < k:
        return None
    fewest_racks = math.ceil(k / max(1, t.rack_nodes))
    floor_net = net_factor(job, k, fewest_racks, ctx)
    floor = by_best[k - 1][0] * floor_net  # the fastest any k nodes could run it
    if floor >= now_cost:
        return None
    candidates = {nd for b, nd in by_best if b * floor_net < now_cost}
    latest = now + left * (now_cost - floor)  # a wait ending later cannot pay
    node_of = t.node_of
    frees: list[tuple[float, int]] = []
    for jid, gpus in releases.holding.items():
        if not any(nd in candidates for nd, _ in releases.nodes_of(gpus)):
            continue
        end = releases.ends[jid]
        if now < end < latest:
            frees.extend((end, x) for x in gpus if node_of[x] in candidates)
    if not frees:
        return None
    frees.sort()
    avail = _free_by_node(free, node_of, candidates)
    best_finish = now + left * now_cost
    best: tuple[float, tuple[int, ...]] | None = None
    i = 0
    while i < len(frees):
        end = frees[i][0]
        if end + left * floor >= best_finish - 1e-9:
            break  # no later start can finish sooner
        while i < len(frees) and frees[i][0] == end:
            avail.setdefault(node_of[frees[i][1]], []).append(frees[i][1])
            i += 1
        picks = {nd: sorted(xs, key=lambda y: (sf[y], y))[:g] for nd, xs in avail.items() if len(xs) >= g}
        if len(picks) < k:
            continue
        scored = sorted((sf[p[-1]], nd) for nd, p in picks.items())
        nodes = fewest_leaves_among_ties(scored, rack_idx.__getitem__, k)
        assert nodes is not None  # None only for fewer than k candidates
        pick = tuple(sorted(x for nd in nodes for x in picks[nd]))
        racks = len({rack_idx[nd] for nd in nodes})
        finish = end + left * max(sf[y] for y in pick) * net_factor(job, k, racks, ctx)
        if finish < best_finish - 1e-9 and all(r.admits(finish, pick, left) for r in reservations):
            best_finish, best = finish, (end, pick)
    return best


def _free_by_node(free: Iterable[int], node_of: Sequence[int], nodes: Collection[int]) -> dict[int, list[int]]:
    """{node: its free GPUs} for the free GPUs on `nodes` (the nodes a wait looks at)."""
    out: dict[int, list[int]] = {}
    for x in free:
        if node_of[x] in nodes:
            out.setdefault(node_of[x], []).append(x)
    return out


def _gth_best_by_node(sf: Sequence[float], g: int, t: Topology, cache: RunCache) -> list[tuple[float, int]]:
    """[(the g-th best bin among a node's GPUs, node), ...] ascending: the best bin a one-node
    job of g GPUs could have there (kept for the run, per ranking and size)."""
    table: dict[int, tuple[Topology, list[tuple[float, int]]]] = cache.get("gth-best-by-node", sf, dict)
    hit = table.get(g)
    if hit is None or hit[0] is not t:  # (a layout's topology is one object: ClusterView.topology)
        hit = table[g] = (t, sorted((sorted(sf[x] for x in gpus)[g - 1], nd)
                                    for nd, gpus in t.members(NODE).items() if len(gpus) >= g))
    return hit[1]


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


# ---------------------------------------------------------------------------------------------
# the placement


@dataclass(frozen=True)
class NetAwarePlacement:
    name: str
    variability: bool = True  # use PAL's per-class bins
    delay: bool = True  # delay scheduling
    backfill: str = "easy"  # easy | greedy | none
    preempt: PreemptConfig | None = None
    autotune: bool = False  # the simulator/pald feed ctx.delay_timers from the tuner
    timers: DelayTimers = field(default_factory=lambda: dict(DEFAULT_TIMERS))
    max_wait_s: float = 24 * 3600.0  # hard cap: after this any placement is accepted
    reservations: int = 4  # easy backfill: how many blocked jobs hold a reservation
    # easy backfill: a blocked job holds one once it waited this long (a site's `[policy]
    # reserve_after_s` overrides it through PlacementContext.reserve_after_s)
    reserve_after_s: float = 3600.0
    cost_aware: bool = True  # never wait longer than consolidation would save
    patience: float = 0.5  # cost-aware: wait up to this fraction of the saving (above the timer)
    finish_aware: bool = True  # refuse a spread placement that ends later than waiting would
    topology_aware: bool = True  # False: see only PAL's node locality (penalty for > 1 node)
    # pack first (policy.fragmentation): take a better bin only when its gain beats the locality
    # and fragmentation costs; None: PAL's cheapest (bin x network factor) allocation
    fragmentation: FragmentationCost | None = None
    keeps_running: bool = True  # sticky: running jobs are never moved
    # a job's remaining time is a wall-clock bound (Slurm's time limit, as Slurm's backfill reads
    # it): it ends by now + remaining, whatever its GPUs and network; False: work on median
    # GPUs, stretched by the placement's slowdown estimate
    remaining_is_wall_limit: bool = False
    # whose node choice answers a per-node request: "pal" (per_node_pick: bins, best fit,
    # the placement's tiers) or "slurm" (shapes.slurm_pick: stock Slurm's cons_tres with
    # topology/tree, the model of a site without pal-slurm)
    node_choice: str = "pal"
    # the stock model's per-node reservations as Slurm's backfill plans them (slurm_will_run):
    # its will-run window in this placement's seconds (30 wall s x a replay's scale); 0: the k
    # nodes ready first
    will_run_window_s: float = 0.0
    # a per-node job's reservation anywhere holds, of the nodes ready by its shadow, those that
    # free last (`_ready_last`); False: the k ready first, lowest names first
    reserve_ready_last: bool = False
    # finish-aware on bins: a one-node job that could start now on a slower bin waits for a
    # node of a faster one when the running jobs' ends free it soon enough to finish sooner,
    # and holds a reservation on those GPUs from then on (`faster_node_later`)
    waits_for_faster_node: bool = False
    # the same for a per-node job on several nodes (`faster_nodes_later`: k nodes of faster
    # bins, network factor of their span included); only with `waits_for_faster_node`
    waits_for_faster_nodes: bool = False
    # easy backfill: a blocked per-node job (`-N k --gres=gpu:g`) still within its
    # `reserve_after_s` grace holds a reservation too, which jobs no longer than it (their
    # JobRequest.remaining_time: time limits under Slurm) pass freely and longer ones respect: a
    # longer job on one of the whole nodes it needs would hold it for all its length. A job
    # that takes GPUs anywhere (`--gpus=N`) keeps the free pass: what one passer holds, other
    # GPUs' ends make up (the event benchmark, workload-6: 0.52 of stock's avg JCT with the
    # pass, 1.01 with this reservation for count jobs too). False: later jobs pass freely.
    grace_reservation: bool = False
    # finish-aware on the backfill detour: a job whose first choice crosses a reservation, and
    # which around the reservations would spread wider, waits when its consolidated placement
    # (after the reservations' jobs) finishes it sooner (`_consolidated_sooner`). On in pal-fit
    # (pald's default); on the event goldens' synthetic traces pal-net's family went both ways
    # (-6% to +3% avg JCT), not pursued.
    detour_finish_aware: bool = False

    def __post_init__(self) -> None:
        if self.backfill not in ("easy", "greedy", "none"):
            raise ValueError(f"backfill must be easy, greedy or none, not {self.backfill!r}")
        if self.node_choice not in ("pal", "slurm"):
            raise ValueError(f"node_choice must be pal or slurm, not {self.node_choice!r}")

    # ---- delay scheduling ------------------------------------------------------------------
    def _timers(self, ctx: PlacementContext) -> DelayTimers:
        t = ctx.delay_timers
        return self.timers if not t else {**self.timers, **t}

    def deadline_table(self, ctx: PlacementContext) -> _Table:
        """The run's {job key: tier deadlines} under the timers in force now. A waiting job's
        deadlines stay the same plan after plan (they change with its wait, its length and the
        timers, all in the keys): kept per ranking and network model (the slowdown table) and
        per topology, timers and this placement's delay settings. A plan fetches it once."""
        t = topo(ctx.cluster)
        key = ("deadlines", t.gpus_per_node, t.rack_nodes, t.rack_cap, self.delay, self.cost_aware, self.patience,
               self.max_wait_s, tuple(sorted(self._timers(ctx).items())))
        tables = _slowdown_table(ctx)
        table = tables.get(key)
        if table is None:
            if len(tables) >= _TABLE_LIMIT:
                tables.clear()
            table = tables[key] = {}
        return table

    def tier_deadlines(self, job: JobRequest, ctx: PlacementContext,
                       table: _Table | None = None) -> tuple[tuple[float, int], ...]:
        """((time, tier), ...): from `time` on, the job accepts placements up to `tier`.
        `table`: the plan's deadline_table (fetched here without one)."""
        table = self.deadline_table(ctx) if table is None else table
        key = (job.job_id, job.waiting_since, job.remaining_time, job.num_gpus, job.shape, job.app,
               job.net_sensitivity)
        hit = table.get(key)
        if hit is None:
            if len(table) >= _TABLE_LIMIT:
                table.clear()
            hit = table[key] = self._tier_deadlines(job, ctx)
        return hit  # type: ignore[no-any-return]

    def _tier_deadlines(self, job: JobRequest, ctx: PlacementContext) -> tuple[tuple[float, int], ...]:
        cluster = ctx.cluster
        want = wanted_tier(job, cluster)
        start = job.waiting_since
        out = [(start, want)]
        if not self.delay or want == SPINE:
            return ((start, SPINE),)
        timers = self._timers(ctx)
        t = start
        for tier in range(want, SPINE):
            wait = float(timers.get((sensitivity_class(job.net_sensitivity), LEVELS[tier]), 0.0))
            if self.cost_aware and job.remaining_time > 0:  # unknown length (0): class timer only
                # the class timer, stretched to `patience` x the saving for jobs that would lose
                # much by spreading, and never longer than the saving itself
                saving = job.remaining_time * max(0.0, tier_factor(job, tier + 1, cluster, ctx) - tier_factor(job, tier, cluster, ctx))
                wait = min(saving, max(wait, self.patience * saving))
            t += max(0.0, wait)
            out.append((min(t, start + self.max_wait_s), tier + 1))
        return tuple(out)

    def allowed_tier(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> int:
        allowed = NODE
        for when, tier in self.tier_deadlines(job, ctx, table):
            if ctx.now >= when:
                allowed = tier
        if ctx.now >= job.waiting_since + self.max_wait_s:
            allowed = SPINE
        return allowed

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None:
        """Earliest future instant at which a waiting job's accepted tier widens."""
        if not self.delay:
            return None
        table = self.deadline_table(ctx)
        now = ctx.now
        soon = math.inf
        for job in order:
            if job.running_on:
                continue
            for when, _tier in self.tier_deadlines(job, ctx, table):
                if now < when < soon:
                    soon = when
                    break
        return soon if soon < math.inf else None

    def place_one(self, job: JobRequest, ctx: PlacementContext) -> tuple[int, ...] | None:
        """Allocation for one new job against ctx.cluster.free (pald's submit-time path): what
        a plan of that job alone gives (delay, finish-aware choice), or None (defer)."""
        if ctx.shape_index is not None:  # its free set is the truth; plan() reads cluster.free
            ctx = dataclasses.replace(ctx, cluster=ctx.cluster.with_free(ctx.shape_index.free), shape_index=None)
        got = self.plan([job], ctx).launch.get(job.job_id)
        return None if got is None else tuple(got)

    @property
    def traits(self) -> Traits:
        return Traits(sticky=self.keeps_running, tuned=self.autotune, backfills=self.backfill != "none",
                      variability=self.variability,
                      plans_around_running=self.keeps_running and self.preempt is None)

    @property
    def delay_timers(self) -> DelayTimers:
        return self.timers if self.delay else {}

    # ---- estimates --------------------------------------------------------------------------
    def _runtime(self, job: JobRequest, gpus: Sequence[int], ctx: PlacementContext, table: _Table | None = None) -> float:
        if self.remaining_is_wall_limit:
            return job.remaining_time
        pm, net = _slowdowns(job, gpus, ctx, table)
        return job.remaining_time * pm * net

    # ---- the plan ---------------------------------------------------------------------------
    def _reserve(self, job: JobRequest, allowed: int, free: Iterable[int], releases: "_Releases",
                 cluster: ClusterView, rack_idx: Sequence[int], now: float,
                 busy_until: dict[int, float]) -> _Reservation:
        """The reservation of a job that cannot start: a per-node job's on whole nodes (under
        one leaf switch when only that is allowed), after those reserved before it, whose nodes
        it then holds for its remaining time (`busy_until`, updated), planned as Slurm's will-run
        test plans it when `will_run_window_s` is set; any other's on a GPU count."""
        if is_per_node(job):
            shape = shape_of(job)
            k, g = shape.nodes or 1, shape.per_node or job.num_gpus
            window = self.will_run_window_s
            last = self.reserve_ready_last
            r = _Reservation.for_nodes(k, g, free, releases, cluster, rack_idx, now, allowed == RACK, busy_until,
                                       window, last)
            if r.shadow == math.inf and allowed == RACK:  # no one rack can hold it: anywhere
                r = _Reservation.for_nodes(k, g, free, releases, cluster, rack_idx, now, False, busy_until, window,
                                           last)
            if r.group is not None and r.shadow < math.inf:
                node_of = topo(cluster).node_of
                for nd in {node_of[x] for x in r.group}:
                    busy_until[nd] = max(busy_until.get(nd, now), r.shadow + job.remaining_time)
            return r
        return _Reservation.make(job.num_gpus, allowed, free, releases, cluster, rack_idx, now)

    def _allocate(self, job: JobRequest, free: Sequence[int], ctx: PlacementContext, max_tier: int,
                  rack_idx: Sequence[int]) -> tuple[tuple[int, ...], int, float] | None:
        """(gpus, tier, network factor) for `job` within `max_tier`, or None: PAL's cheapest
        bin x network factor, or with `fragmentation` the packed choice unless a better bin pays."""
        # per-node requests keep PAL's per-node pick: packing them first (packed_first_per_node)
        # won in the event simulator but lost on real Slurm (workload-3 replay: 1.04 of stock,
        # against 0.70 with this pick; docs/results/slurm/)
        if self.node_choice == "slurm" and is_per_node(job):
            gpus = slurm_pick(shape_of(job), free, ctx.cluster)
            if gpus is None:
                return None
            tier, nodes, racks = span(gpus, ctx.cluster)
            return (gpus, tier, net_factor(job, nodes, racks, ctx)) if tier <= max_tier else None
        if self.fragmentation is None or is_per_node(job):
            return best_allocation(job, free, ctx, self.variability, max_tier, rack_idx)
        return packed_first_allocation(job, free, ctx, self.variability, max_tier, rack_idx, self.fragmentation,
                                       _pack, net_factor)

    def _view(self, ctx: PlacementContext) -> PlacementContext:
        """The context as this policy sees it (node-only locality when not topology-aware)."""
        if self.topology_aware:
            return ctx
        return dataclasses.replace(ctx, network=NodeLocality(ctx.locality_penalty))

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan:
        ctx = self._view(ctx)
        cluster = ctx.cluster
        now = ctx.now
        table = _slowdown_table(ctx)
        rack_idx = _rack_index(cluster) if self.topology_aware else (0,) * len(cluster.nodes)
        free = set(cluster.free)
        running = {j.job_id: j for j in order if j.running_on}
        ends = _LazyEnds(lambda jid: now + self._runtime(running[jid], running[jid].running_on, ctx, table))
        releases = _Releases({jid: tuple(j.running_on) for jid, j in running.items()}, ends, cluster,
                             ctx.cache.get("group-counts", topo(cluster), dict))
        launch: dict[JobId, tuple[int, ...]] = {}
        suspend: set[JobId] = set()
        res: list[_Reservation] = []  # for the first jobs that cannot start (EASY: one)
        planned: dict[JobId, PlannedStart] = {}  # their planned starts, as the plan reports them
        reserved_nodes: dict[int, float] = {}  # node -> until when the per-node reservations hold it
        allocations = _Allocations(free, lambda job, free_ids, max_tier: self._allocate(job, free_ids, ctx, max_tier, rack_idx))
        deadlines = self.deadline_table(ctx)
        reserve_after = self.reserve_after_s if ctx.reserve_after_s is None else ctx.reserve_after_s
        # the running jobs preemption may stop (started recently, not stopped too often): made
        # once per plan, not once per blocked job
        cfg = self.preempt
        preemptible = _Preemptible({} if cfg is None else {
            jid: v for jid, v in running.items()
            if now - v.waiting_since < cfg.recent_s and v.preemptions < cfg.max_preemptions})
        pending_before = 0  # jobs of `order` this plan looked at before this one and did not start
        for job in order:
            if job.running_on or job.job_id in launch:
                continue
            # a job ahead of this one still waits: it comes first for whatever frees
            waiting_ahead = pending_before > len(launch)
            pending_before += 1
            if not free and self.backfill != "easy":
                break
            n = job.num_gpus
            got = None
            # the tier its delay timers allow, worked out only for a job that may start or
            # reserve (most of a long queue does neither while the cluster is full)
            allowed = -1
            if len(free) >= n:
                allowed = self.allowed_tier(job, ctx, deadlines)
                got = allocations.best(job, allowed)
            if self.preempt is not None and (got is None or got[1] > wanted_tier(job, cluster)):
                if allowed < 0:
                    allowed = self.allowed_tier(job, ctx, deadlines)
                freed = self._preempt(job, free, preemptible, suspend, launch, ctx, rack_idx)
                for jid in freed:
                    ends.pop(jid, None)
                    releases.drop(jid)
                if freed:
                    allocations.changed()
                    got = allocations.best(job, allowed)
            if got is not None and self.finish_aware and got[1] > wanted_tier(job, cluster):
                # a spread placement now, or the consolidated one when the running jobs free it?
                want = wanted_tier(job, cluster)
                if is_per_node(job) and want == RACK:
                    shape = shape_of(job)
                    k, g = shape.nodes or 1, shape.per_node or n
                    r = allocations.reservation(("nodes", k, g), lambda: _Reservation.for_nodes(
                        k, g, free, releases, cluster, rack_idx, now))
                else:
                    r = allocations.reservation(("gpus", n, want), lambda: _Reservation.make(
                        n, want, free, releases, cluster, rack_idx, now))
                if r.group is not None and r.shadow <= now:
                    # consolidated GPUs are free now but cost more by variability: take the faster
                    tight_now = allocations.best(job, want)
                    if tight_now is not None and self._runtime(job, tight_now[0], ctx, table) < self._runtime(job, got[0], ctx, table):
                        got = tight_now
                elif r.group is not None and r.shadow < math.inf:
                    spread = self._runtime(job, got[0], ctx, table)
                    tight = spread / got[2] * tier_factor(job, wanted_tier(job, cluster), cluster, ctx)
                    if r.shadow + tight < now + spread:
                        got = None
                        if self.backfill == "easy" and len(res) < self.reservations:
                            res.append(r)
                            r.holds_s = job.remaining_time
                            planned[job.job_id] = PlannedStart(r.shadow, r.group)
                        continue
            if got is None:
                if self.backfill == "none":
                    if len(free) >= n:
                        continue  # delayed by its own timer: others may go (delay scheduling)
                    break
                in_grace = now - job.waiting_since < reserve_after
                if (self.backfill == "easy" and len(res) < self.reservations
                        and (not in_grace or (self.grace_reservation and is_per_node(job)))):
                    if allowed < 0:
                        allowed = self.allowed_tier(job, ctx, deadlines)
                    res.append(self._reserve(job, allowed, free, releases, cluster, rack_idx, now, reserved_nodes))
                    if in_grace:  # shorter jobs still pass it (an unknown length: any job)
                        res[-1].passes_up_to = job.remaining_time if job.remaining_time > 0 else math.inf
                    if res[-1].shadow < math.inf:
                        planned[job.job_id] = PlannedStart(res[-1].shadow, res[-1].group)
                continue
            if (self.waits_for_faster_node and not waiting_ahead and self.backfill == "easy"
                    and self._wait_for_faster_node(job, got[0], free, releases, ctx, now, res, planned, rack_idx)):
                continue
            if res:
                end = now + self._runtime(job, got[0], ctx, table)
                left = job.remaining_time
                if not all(r.admits(end, got[0], left) for r in res):
                    # the free GPUs no reservation refuses to a job ending at `end`: a reservation
                    # refuses its group's GPUs when the job ends after its shadow and it has none to spare
                    refusing = [r for r in res if end > r.shadow and left > r.passes_up_to and r.spare < 1]
                    if any(r.group is None for r in refusing):
                        outside = []
                    else:
                        outside = sorted(free.difference(*[r.group for r in refusing if r.group is not None]))
                    detour = self._allocate(job, outside, ctx, allowed, rack_idx)
                    if detour is None or not all(r.admits(now + self._runtime(job, detour[0], ctx, table), detour[0],
                                                          left) for r in res):
                        continue
                    if (self.detour_finish_aware and detour[1] > max(got[1], wanted_tier(job, cluster))
                            and self._consolidated_sooner(job, detour, free, releases, ctx, table, rack_idx,
                                                          reserved_nodes, res)):
                        continue  # around the reservations it would spread: waiting finishes it sooner
                    got = detour
                    end = now + self._runtime(job, got[0], ctx, table)
                for r in res:
                    r.take(end, got[0], left)
            gpus = got[0]
            launch[job.job_id] = tuple(gpus)
            free.difference_update(gpus)
            allocations.changed()
            ends[job.job_id] = now + self._runtime(job, gpus, ctx, table)
            releases.hold(job.job_id, tuple(gpus), ends[job.job_id])
        return RoundPlan(frozenset(suspend), launch, planned)

    def _consolidated_sooner(self, job: JobRequest, spread: Allocation, free: set[int], releases: "_Releases",
                             ctx: PlacementContext, table: _Table, rack_idx: Sequence[int],
                             reserved_nodes: Mapping[int, float], res: Sequence[_Reservation]) -> bool:
        """Whether `job`, whose only start now is `spread` (wider than its wanted tier: the
        GPUs the reservations ahead of it leave), finishes sooner waiting for its consolidated
        placement (the running jobs' ends, and for a job on whole nodes the nodes the
        reservations ahead hold until then, `reserved_nodes`). The finish-aware test the
        placement first chosen passed, for the detour backfill takes (the reservations'
        groups busy until their jobs end, where known: `holds_s`): without it pald put a
        6-GPU GPT-2 job over two leaves, 8x its ideal time (145 h instead of 18), when its
        first choice in one leaf crossed a held job's reservation (the model of workload-5's
        160 jobs at 150, seed 0)."""
        cluster, now = ctx.cluster, ctx.now
        want = wanted_tier(job, cluster)
        if is_per_node(job) and want == RACK:
            shape = shape_of(job)
            busy = dict(reserved_nodes)
            node_of = topo(cluster).node_of
            for held in res:
                if held.group is not None and held.shadow < math.inf and held.holds_s is not None:
                    for nd in {node_of[x] for x in held.group}:
                        busy[nd] = max(busy.get(nd, now), held.shadow + held.holds_s)
            r = _Reservation.for_nodes(shape.nodes or 1, shape.per_node or job.num_gpus, free, releases, cluster,
                                       rack_idx, now, True, busy)
        else:
            r = _Reservation.make(job.num_gpus, want, free, releases, cluster, rack_idx, now)
        if r.group is None or r.shadow == math.inf:
            return False
        spread_s = self._runtime(job, spread[0], ctx, table)
        tight_s = spread_s / spread[2] * tier_factor(job, want, cluster, ctx)
        return max(r.shadow, now) + tight_s < now + spread_s

    def _wait_for_faster_node(self, job: JobRequest, now_gpus: Sequence[int], free: set[int], releases: "_Releases",
                              ctx: PlacementContext, now: float, res: list[_Reservation],
                              planned: dict[JobId, PlannedStart], rack_idx: Sequence[int]) -> bool:
        """Whether a per-node job that could start on `now_gpus` waits for a faster node
        (`faster_node_later`), or with `waits_for_faster_nodes` a job of several nodes for
        faster ones (`faster_nodes_later`); if so it holds a reservation on those GPUs (`res`,
        `planned`)."""
        shape = shape_of(job)
        if not is_per_node(job) or not self.variability:
            return False
        k = shape.nodes or 1
        if k > 1 and not self.waits_for_faster_nodes:
            return False
        if now - job.waiting_since >= self.max_wait_s:
            return False
        sf = ctx.ranking.sf(job.perf_class)
        if sf is None:
            return False
        g = shape.per_node or job.num_gpus
        now_bin = max(sf[x] for x in now_gpus)
        if k == 1:
            wait = faster_node_later(job, g, now_bin, free, releases, sf, ctx.cluster, now, res, ctx.cache)
        else:
            _tier, nodes, racks = span(now_gpus, ctx.cluster)
            wait = faster_nodes_later(job, k, g, now_bin * net_factor(job, nodes, racks, ctx), free, releases, sf,
                                      ctx, rack_idx, now, res)
        if wait is None:
            return False
        at, gpus = wait
        res.append(_Reservation(at, frozenset(gpus), 0))
        planned[job.job_id] = PlannedStart(at, frozenset(gpus))
        return True

    def _preempt(self, job: JobRequest, free: set[int], preemptible: "_Preemptible", suspend: set[JobId],
                 launch: dict[JobId, tuple[int, ...]], ctx: PlacementContext, rack_idx: Sequence[int]) -> list[JobId]:
        """Stop victims so that `job` gets its preferred tier; returns the victims' ids.
        `preemptible`: the running jobs recent and seldom stopped enough to be victims."""
        cfg = self.preempt
        if cfg is None:
            return []
        cluster = ctx.cluster
        want = wanted_tier(job, cluster)
        if want == SPINE:
            return []
        rank = sensitivity_rank(job.net_sensitivity)
        now = ctx.now
        victims = preemptible.below(rank, suspend)
        if not victims:
            return []
        node_of = topo(cluster).node_of
        group_of: Callable[[int], int] = (lambda g: node_of[g]) if want == NODE else (lambda g: rack_idx[node_of[g]])
        free_in: dict[int, int] = {}
        for g in free:
            free_in[group_of(g)] = free_in.get(group_of(g), 0) + 1
        by_group: dict[int, list[JobRequest]] = {}
        for v in victims:
            grp = preemptible.group(want, v, group_of)
            if grp is not None:  # only victims wholly inside one group free it for us
                by_group.setdefault(grp, []).append(v)
        saving = job.remaining_time * max(0.0, tier_factor(job, want + 1, cluster, ctx) - 1.0)
        best = None
        for grp, vs in by_group.items():
            have = free_in.get(grp, 0)
            chosen, lost = [], 0.0
            for v in sorted(vs, key=lambda v: ((now - v.waiting_since) * v.num_gpus, v.job_id)):
                if have >= job.num_gpus:
                    break
                chosen.append(v)
                have += v.num_gpus
                lost += ((now - v.waiting_since) + cfg.restart_cost_s) * v.num_gpus
            if have >= job.num_gpus and chosen and lost < saving * job.num_gpus:
                if best is None or lost < best[0]:
                    best = (lost, chosen)
        if best is None:
            return []
        for v in best[1]:
            suspend.add(v.job_id)
            free.update(v.running_on)
        return [v.job_id for v in best[1]]


# ---------------------------------------------------------------------------------------------
# named configurations

PAL_NET = NetAwarePlacement("pal-net")
PAL_NET_PREEMPT = NetAwarePlacement("pal-net-preempt", preempt=PreemptConfig())
PAL_NET_TUNED = NetAwarePlacement("pal-net-tuned", autotune=True)
PAL_NET_NODELAY = NetAwarePlacement("pal-net-nodelay", delay=False)  # ablation: no delay timers
DALLY = NetAwarePlacement(
    "dally", variability=False, backfill="greedy", preempt=PreemptConfig(), autotune=True, cost_aware=False,
    finish_aware=False,
)
# ablation: PAL's allocation (variability bins, node locality only) + EASY backfill, no delay
PAL_BACKFILL = NetAwarePlacement("pal-backfill", delay=False, finish_aware=False, topology_aware=False)
# PAL for a backfilling Slurm: the packed, topology-aware choice unless a better bin
# beats the locality and fragmentation costs (policy.fragmentation); a spread placement only
# when waiting for the consolidated one would not finish the job sooner; a one-node job on a
# slower bin only when waiting for a faster node would not finish it sooner (a job of several
# nodes: for faster nodes, network factor counted); EASY backfill, in
# which a held job on whole nodes lets only jobs no longer than itself pass in its grace
PAL_FIT = NetAwarePlacement("pal-fit", delay=False, finish_aware=True, fragmentation=FragmentationCost(),
                           reserve_ready_last=True, waits_for_faster_node=True, waits_for_faster_nodes=True,
                           grace_reservation=True, detour_finish_aware=True)
NAMED = (PAL_NET, PAL_NET_PREEMPT, PAL_NET_TUNED, PAL_NET_NODELAY, PAL_BACKFILL, PAL_FIT, DALLY)
