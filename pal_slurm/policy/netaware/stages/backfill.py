"""Backfill (reserve) stage: what a job that cannot start does to the jobs behind it.

- `StopAtFirst`: nothing passes it (the artifact's rule), unless it is only held by its own
  delay timer (delay scheduling lets others go meanwhile);
- `SkipBlocked`: any later job that fits goes (Dally's skip);
- `Easy`: EASY backfilling, topology-aware. Each of the first `reservations` jobs that cannot
  start and have waited at least `reserve_after_s` holds a reservation: the node/rack/cluster
  (at the tier the job accepts now) that frees enough GPUs soonest by the running jobs'
  estimated ends (the shadow time). Later jobs start only if they end before every shadow time
  or use GPUs the reservations can spare. Until a job has waited `reserve_after_s`, later jobs
  pass it freely (short jobs are most of these traces), or with `grace_reservation`, a job on
  whole nodes, only those no longer than it (by their time limits): a long job that passes a
  short one can hold a node it needs for hours; after that it cannot be overtaken
  indefinitely, so nobody starves. In the site's priority order (PlacementContext.keep_order)
  every job that cannot start reserves at once, however many wait: a later job passes it only
  where Slurm's backfill would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from pal_slurm.model import JobRequest
from pal_slurm.model.network import RACK
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.estimates import Allocation, topo, wanted_tier
from pal_slurm.policy.netaware.reservations import _Reservation
from pal_slurm.policy.netaware.round import Round
from pal_slurm.policy.netaware.stages.waits import consolidated_sooner
from pal_slurm.policy.shapes import is_per_node, shape_of


class Backfill(Protocol):
    @property
    def backfills(self) -> bool:
        """Lets later jobs pass one that does not fit (Traits.backfills)."""
        ...

    @property
    def reserves(self) -> bool:
        """Holds reservations for jobs that wait (the wait stages hold theirs only then)."""
        ...

    def can_hold(self, held: int, ctx: PlacementContext) -> bool:
        """Whether a job that waits may hold a reservation when `held` are held already."""
        ...

    def holds_more(self, rnd: Round, starved: bool) -> bool:
        """Whether a job that cannot start may still take a reservation in `rnd`, `starved`:
        some job yet to be looked at is past its starvation bound (False: for every later job
        `blocked` changes nothing, so a plan whose free GPUs no later job fits in ends)."""
        ...

    def blocked(self, job: JobRequest, allowed: int, rnd: Round, starved: bool = False) -> bool:
        """A job that cannot start: True to go on with the next job, False to end the plan.
        `allowed`: the tier it accepts now (-1: not worked out yet); `starved`: past its
        starvation bound (stages.bound), it reserves as stock Slurm's backfill would."""
        ...

    def around(self, job: JobRequest, got: Allocation, allowed: int, rnd: Round,
               starved: bool = False) -> Allocation | None:
        """With reservations held: the allocation that keeps them (None: the job waits);
        `starved`: it waits only for the reservations, not for a consolidated placement."""
        ...


@dataclass(frozen=True)
class StopAtFirst:
    """No backfill: the first job that cannot start ends the plan."""

    backfills = False
    reserves = False

    def can_hold(self, held: int, ctx: PlacementContext) -> bool:
        return False

    def holds_more(self, rnd: Round, starved: bool) -> bool:
        return False

    def blocked(self, job: JobRequest, allowed: int, rnd: Round, starved: bool = False) -> bool:
        return len(rnd.free) >= job.num_gpus  # delayed by its own timer: others may go (delay scheduling)

    def around(self, job: JobRequest, got: Allocation, allowed: int, rnd: Round,
               starved: bool = False) -> Allocation | None:
        return got  # it holds no reservation to go around


@dataclass(frozen=True)
class SkipBlocked:
    """Greedy: every later job that fits goes."""

    backfills = True
    reserves = False

    def can_hold(self, held: int, ctx: PlacementContext) -> bool:
        return False

    def holds_more(self, rnd: Round, starved: bool) -> bool:
        return False

    def blocked(self, job: JobRequest, allowed: int, rnd: Round, starved: bool = False) -> bool:
        return True

    def around(self, job: JobRequest, got: Allocation, allowed: int, rnd: Round,
               starved: bool = False) -> Allocation | None:
        return got


@dataclass(frozen=True)
class Easy:
    """EASY backfilling with topology-aware reservations (see the module)."""

    reservations: int = 4  # how many blocked jobs hold a reservation
    # a blocked job holds one once it waited this long (a site's `[policy] reserve_after_s`
    # overrides it through PlacementContext.reserve_after_s)
    reserve_after_s: float = 3600.0
    # a blocked per-node job (`-N k --gres=gpu:g`) still within its `reserve_after_s` grace
    # holds a reservation too, which jobs no longer than it (their JobRequest.remaining_time:
    # time limits under Slurm) pass freely and longer ones respect: a longer job on one of the
    # whole nodes it needs would hold it for all its length. A job that takes GPUs anywhere
    # (`--gpus=N`) keeps the free pass: what one passer holds, other GPUs' ends make up (the
    # event benchmark, workload-6: 0.52 of stock's avg JCT with the pass, 1.01 with this
    # reservation for count jobs too). False: later jobs pass freely.
    grace_reservation: bool = False
    # a per-node job's reservation anywhere holds, of the nodes ready by its shadow, those that
    # free last (reservations._ready_last); False: the k ready first, lowest names first
    ready_last: bool = False
    # the stock model's per-node reservations as Slurm's backfill plans them (slurm_will_run):
    # its will-run window in this placement's seconds (30 wall s x a replay's scale); 0: the k
    # nodes ready first
    will_run_window_s: float = 0.0
    # finish-aware on the detour: a job whose first choice crosses a reservation, and which
    # around the reservations would spread wider, waits when its consolidated placement (after
    # the reservations' jobs) finishes it sooner (waits.consolidated_sooner). On in pal-fit
    # (pald's default); on the event goldens' synthetic traces pal-net's family went both ways
    # (-6% to +3% avg JCT), not pursued.
    detour_finish_aware: bool = False

    backfills = True
    reserves = True

    def can_hold(self, held: int, ctx: PlacementContext) -> bool:
        return ctx.keep_order or held < self.reservations

    def _reserve_after(self, ctx: PlacementContext) -> float:
        return self.reserve_after_s if ctx.reserve_after_s is None else ctx.reserve_after_s

    def holds_more(self, rnd: Round, starved: bool) -> bool:
        return (rnd.ctx.keep_order or len(rnd.res) < self.reservations
                or (starved and rnd.starved_held < self.reservations))

    def blocked(self, job: JobRequest, allowed: int, rnd: Round, starved: bool = False) -> bool:
        # a starved job reserves at once, whatever the others hold, among the first
        # `reservations` starved ones (the jobs stock Slurm's backfill would reserve for); in the
        # site's order every job reserves at once (PlacementContext.keep_order)
        keep = rnd.ctx.keep_order
        in_grace = not starved and not keep and rnd.now - job.waiting_since < self._reserve_after(rnd.ctx)
        room = keep or (rnd.starved_held < self.reservations if starved else len(rnd.res) < self.reservations)
        if room and (not in_grace or (self.grace_reservation and is_per_node(job))):
            if allowed < 0:
                allowed = rnd.allowed(job)
            r = self._reserve(job, allowed, rnd)
            if in_grace:  # shorter jobs still pass it (an unknown length: any job)
                r.passes_up_to = job.remaining_time if job.remaining_time > 0 else math.inf
            rnd.hold(job, r)
            rnd.starved_held += starved
        return True

    def _reserve(self, job: JobRequest, allowed: int, rnd: Round) -> _Reservation:
        """The reservation of a job that cannot start: a per-node job's on whole nodes (under
        one leaf switch when only that is allowed), after those reserved before it, whose nodes
        it then holds for its remaining time (`rnd.reserved_nodes`, updated), planned as
        Slurm's will-run test plans it when `will_run_window_s` is set; any other's on a GPU
        count."""
        free, releases, cluster, rack_idx, now = rnd.free, rnd.releases, rnd.cluster, rnd.rack_idx, rnd.now
        busy_until = rnd.reserved_nodes
        if is_per_node(job):
            shape = shape_of(job)
            k, g = shape.nodes or 1, shape.per_node or job.num_gpus
            window = self.will_run_window_s
            last = self.ready_last
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

    def around(self, job: JobRequest, got: Allocation, allowed: int, rnd: Round,
               starved: bool = False) -> Allocation | None:
        res, now = rnd.res, rnd.now
        end = now + rnd.runtime(job, got[0])
        left = job.remaining_time
        if job.num_gpus > 0 and any(r.group is None and end > r.shadow and left > r.passes_up_to and r.spare < 1
                                    for r in res):
            # a reservation on a GPU count that this job would overrun with none to spare
            # refuses every free GPU: no detour (what the lines below conclude, from no GPUs;
            # most of a deep queue, in a plan that holds such a reservation, ends here)
            return None
        if not all(r.admits(end, got[0], left) for r in res):
            # the free GPUs no reservation refuses to a job ending at `end`: a reservation
            # refuses its group's GPUs when the job ends after its shadow and it has none to spare
            refusing = [r for r in res if end > r.shadow and left > r.passes_up_to and r.spare < 1]
            if any(r.group is None for r in refusing):
                outside = []
            else:
                outside = sorted(rnd.free.difference(*[r.group for r in refusing if r.group is not None]))
            detour = rnd.allocate(job, outside, allowed)
            if detour is None or not all(r.admits(now + rnd.runtime(job, detour[0]), detour[0], left) for r in res):
                return None
            if (self.detour_finish_aware and not starved and detour[1] > max(got[1], wanted_tier(job, rnd.cluster))
                    and consolidated_sooner(job, detour, rnd)):
                return None  # around the reservations it would spread: waiting finishes it sooner
            got = detour
            end = now + rnd.runtime(job, got[0])
        for r in res:
            r.take(end, got[0], left)
        return got
