"""Wait stages: a job that could start now refuses a start that finishes it later than waiting
for the running jobs to free a better one, and holds what it waits for.

- `ForTighterTier` (finish-aware on tiers): a job whose delay timers ran out still refuses a
  spread placement when waiting for its consolidated one (the node/rack the running jobs free
  soonest, by their estimated ends) would finish it earlier. That wait is bounded by the
  running jobs' ends, so it cannot starve; it matters when a job reaches the head of a deep
  queue long after its timers expired (a cap counted from submission would otherwise push a
  network-bound job onto the spine at 10x the runtime).
- `ForFasterBins` (finish-aware on bins): a one-node job that could start now on a slower bin
  waits for GPUs of a faster one when the running jobs' ends free them soon enough to finish
  it sooner, and reserves them at once (`faster_node_later`); with `several`, a job of
  several nodes asks it of k nodes, their leaves' network factor counted
  (`faster_nodes_later`). A job that waited `max_wait_s` takes what it can.
- `consolidated_sooner`: the tier test for the placement a backfill detour falls back to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pal_slurm.model import JobRequest, PlannedStart
from pal_slurm.model.network import RACK, span
from pal_slurm.policy.netaware.estimates import Allocation, net_factor, tier_factor, topo, wanted_tier
from pal_slurm.policy.netaware.later import faster_node_later, faster_nodes_later
from pal_slurm.policy.netaware.reservations import _Reservation
from pal_slurm.policy.netaware.round import Round
from pal_slurm.policy.shapes import is_per_node, shape_of


@dataclass(frozen=True)
class ForTighterTier:
    """Finish-aware on tiers: refuse a spread placement that ends later than waiting would."""

    def check(self, job: JobRequest, got: Allocation, rnd: Round) -> tuple[Allocation | None, _Reservation | None]:
        """For a job whose allocation `got` is wider than its wanted tier: (the allocation it
        takes, None), or (None, the reservation of the consolidated placement it waits for)."""
        cluster, free, releases, rack_idx, now = rnd.cluster, rnd.free, rnd.releases, rnd.rack_idx, rnd.now
        allocations, n = rnd.allocations, job.num_gpus
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
            if tight_now is not None and rnd.runtime(job, tight_now[0]) < rnd.runtime(job, got[0]):
                return tight_now, None
        elif r.group is not None and r.shadow < math.inf:
            spread = rnd.runtime(job, got[0])
            tight = spread / got[2] * tier_factor(job, wanted_tier(job, cluster), cluster, rnd.ctx)
            if r.shadow + tight < now + spread:
                return None, r
        return got, None


@dataclass(frozen=True)
class ForFasterBins:
    """Finish-aware on bins, for per-node jobs: one node, and with `several` k nodes."""

    several: bool = True  # also jobs of several nodes (faster_nodes_later)
    max_wait_s: float = 24 * 3600.0  # a job that waited this long takes what it can

    def waits(self, job: JobRequest, now_gpus: tuple[int, ...], rnd: Round, until: float = math.inf) -> bool:
        """Whether a per-node job that could start on `now_gpus` waits for faster GPUs; if so it
        holds a reservation on those GPUs (`rnd.hold`). `until`: the latest start it may wait
        for (the starvation bound's, stages.bound)."""
        shape = shape_of(job)
        if not is_per_node(job) or not rnd.variability:
            return False
        k = shape.nodes or 1
        if k > 1 and not self.several:
            return False
        ctx, now = rnd.ctx, rnd.now
        if now - job.waiting_since >= self.max_wait_s:
            return False
        sf = ctx.ranking.sf(job.perf_class)
        if sf is None:
            return False
        g = shape.per_node or job.num_gpus
        now_bin = max(sf[x] for x in now_gpus)
        if k == 1:
            wait = faster_node_later(job, g, now_bin, rnd.free, rnd.releases, sf, ctx.cluster, now, rnd.res, ctx.cache)
        else:
            _tier, nodes, racks = span(now_gpus, ctx.cluster)
            wait = faster_nodes_later(job, k, g, now_bin * net_factor(job, nodes, racks, ctx), rnd.free,
                                      rnd.releases, sf, ctx, rnd.rack_idx, now, rnd.res)
        if wait is None or wait[0] > until:
            return False
        at, gpus = wait
        rnd.res.append(_Reservation(at, frozenset(gpus), 0))
        rnd.planned[job.job_id] = PlannedStart(at, frozenset(gpus))
        return True


def consolidated_sooner(job: JobRequest, spread: Allocation, rnd: Round) -> bool:
    """Whether `job`, whose only start now is `spread` (wider than its wanted tier: the GPUs
    the reservations ahead of it leave), finishes sooner waiting for its consolidated placement
    (the running jobs' ends, and for a job on whole nodes the nodes the reservations ahead hold
    until then, `rnd.reserved_nodes`). The finish-aware test the placement first chosen passed,
    for the detour backfill takes (the reservations' groups busy until their jobs end, where
    known: `holds_s`): without it pald put a 6-GPU GPT-2 job over two leaves, 8x its ideal time
    (145 h instead of 18), when its first choice in one leaf crossed a held job's reservation
    (the model of workload-5's 160 jobs at 150, seed 0)."""
    cluster, now, free, releases, rack_idx = rnd.cluster, rnd.now, rnd.free, rnd.releases, rnd.rack_idx
    want = wanted_tier(job, cluster)
    if is_per_node(job) and want == RACK:
        shape = shape_of(job)
        busy = dict(rnd.reserved_nodes)
        node_of = topo(cluster).node_of
        for held in rnd.res:
            if held.group is not None and held.shadow < math.inf and held.holds_s is not None:
                for nd in {node_of[x] for x in held.group}:
                    busy[nd] = max(busy.get(nd, now), held.shadow + held.holds_s)
        r = _Reservation.for_nodes(shape.nodes or 1, shape.per_node or job.num_gpus, free, releases, cluster,
                                   rack_idx, now, True, busy)
    else:
        r = _Reservation.make(job.num_gpus, want, free, releases, cluster, rack_idx, now)
    if r.group is None or r.shadow == math.inf:
        return False
    spread_s = rnd.runtime(job, spread[0])
    tight_s = spread_s / spread[2] * tier_factor(job, want, cluster, rnd.ctx)
    return max(r.shadow, now) + tight_s < now + spread_s
