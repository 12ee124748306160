"""A network-aware placement: named stages composed into one plan.

`NetAwarePlacement` holds one stage per step (stages/: locality, accept, score, preempt,
tier_wait, reserve, bin_wait, estimate, bound) and runs them for every waiting job in the order it is
given; each registered placement (netaware.named) is a list of those stages. Running jobs are
never moved (sticky), so a plan with nobody waiting changes nothing. What a placement lets its
callers rely on (its Traits) is declared by its stages.

Ablations swap a stage (`dataclasses.replace(PAL_FIT, bin_wait=None)`); the keywords in
netaware.keywords name the common swaps (`NetAwarePlacement("t", delay=False)`).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import InitVar, dataclass, field
from itertools import accumulate
from typing import Sequence

from pal_slurm.model import JobRequest, RoundPlan
from pal_slurm.model.decision import JobId
from pal_slurm.model.network import DelayTimers
from pal_slurm.policy.base import PlacementContext, Traits
from pal_slurm.policy.fragmentation import FragmentationCost
from pal_slurm.policy.netaware import keywords
from pal_slurm.policy.netaware.estimates import _slowdown_table, _Table, topo, wanted_tier
from pal_slurm.policy.netaware.reservations import _Allocations, _LazyEnds, _Releases
from pal_slurm.policy.netaware.round import Round
from pal_slurm.policy.netaware.stages.accept import Accept, DelayScheduling
from pal_slurm.policy.netaware.stages.backfill import Backfill, Easy
from pal_slurm.policy.netaware.stages.bound import StarvationBound
from pal_slurm.policy.netaware.stages.estimate import Estimate, Stretched
from pal_slurm.policy.netaware.stages.locality import Locality, Topology
from pal_slurm.policy.netaware.stages.preempt import Preemption
from pal_slurm.policy.netaware.stages.score import CheapestBin, Score
from pal_slurm.policy.netaware.stages.waits import ForFasterBins, ForTighterTier


@dataclass(frozen=True)
class NetAwarePlacement:
    name: str
    locality: Locality = Topology()  # how much of the network it sees
    accept: Accept = field(default_factory=DelayScheduling)  # filter: the widest tier a job accepts now
    score: Score = CheapestBin()  # the allocation within that tier
    preempt: Preemption | None = None  # stops less sensitive recent jobs for a sensitive one
    tier_wait: ForTighterTier | None = ForTighterTier()  # waits for a tighter tier when that is sooner
    reserve: Backfill = Easy()  # backfill: what a job that cannot start does to the ones behind it
    bin_wait: ForFasterBins | None = None  # waits for faster bins when that is sooner (needs Easy)
    estimate: Estimate = Stretched()  # how long a job runs on given GPUs
    bound: StarvationBound | None = None  # ends the other stages' waits at a job's starvation bound
    traits: Traits = field(init=False)
    # the keywords that name stage swaps (netaware.keywords; None: as the stages say)
    variability: InitVar[bool | None] = None
    delay: InitVar[bool | None] = None
    autotune: InitVar[bool | None] = None
    timers: InitVar[DelayTimers | None] = None
    max_wait_s: InitVar[float | None] = None
    cost_aware: InitVar[bool | None] = None
    patience: InitVar[float | None] = None
    finish_aware: InitVar[bool | None] = None
    topology_aware: InitVar[bool | None] = None
    fragmentation: InitVar[FragmentationCost | None] = None
    node_choice: InitVar[str | None] = None
    remaining_is_wall_limit: InitVar[bool | None] = None
    backfill: InitVar[str | None] = None
    reservations: InitVar[int | None] = None
    reserve_after_s: InitVar[float | None] = None
    grace_reservation: InitVar[bool | None] = None
    reserve_ready_last: InitVar[bool | None] = None
    will_run_window_s: InitVar[float | None] = None
    detour_finish_aware: InitVar[bool | None] = None
    waits_for_faster_node: InitVar[bool | None] = None
    waits_for_faster_nodes: InitVar[bool | None] = None

    def __post_init__(self, variability: bool | None, delay: bool | None, autotune: bool | None,
                      timers: DelayTimers | None, max_wait_s: float | None, cost_aware: bool | None,
                      patience: float | None, finish_aware: bool | None, topology_aware: bool | None,
                      fragmentation: FragmentationCost | None, node_choice: str | None,
                      remaining_is_wall_limit: bool | None, backfill: str | None, reservations: int | None, reserve_after_s: float | None,
                      grace_reservation: bool | None, reserve_ready_last: bool | None,
                      will_run_window_s: float | None, detour_finish_aware: bool | None,
                      waits_for_faster_node: bool | None, waits_for_faster_nodes: bool | None) -> None:
        swaps = keywords.swaps(
            self.accept, self.score, self.reserve, self.bin_wait, variability=variability, delay=delay, autotune=autotune, timers=timers, max_wait_s=max_wait_s,
            cost_aware=cost_aware, patience=patience, finish_aware=finish_aware, topology_aware=topology_aware,
            fragmentation=fragmentation, node_choice=node_choice, remaining_is_wall_limit=remaining_is_wall_limit,
            backfill=backfill, reservations=reservations, reserve_after_s=reserve_after_s, grace_reservation=grace_reservation,
            reserve_ready_last=reserve_ready_last, will_run_window_s=will_run_window_s,
            detour_finish_aware=detour_finish_aware, waits_for_faster_node=waits_for_faster_node,
            waits_for_faster_nodes=waits_for_faster_nodes)
        for slot, stage in swaps.items():
            object.__setattr__(self, slot, stage)
        # what callers may rely on, as the stages declare it: running jobs keep their GPUs; it
        # plans around them unless it may stop them
        object.__setattr__(self, "traits", Traits(
            sticky=True, tuned=self.accept.tuned, backfills=self.reserve.backfills,
            variability=self.score.variability, plans_around_running=self.preempt is None))

    # ---- the filter stage, as callers and tests ask it -----------------------------------------
    @property
    def delay_timers(self) -> DelayTimers:
        return self.accept.delay_timers

    def deadline_table(self, ctx: PlacementContext) -> _Table:
        return self.accept.deadline_table(ctx)

    def tier_deadlines(self, job: JobRequest, ctx: PlacementContext,
                       table: _Table | None = None) -> tuple[tuple[float, int], ...]:
        return self.accept.tier_deadlines(job, ctx, table)

    def allowed_tier(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> int:
        return self.accept.allowed_tier(job, ctx, table)

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None:
        """Earliest future instant at which a waiting job's accepted tier widens."""
        return self.accept.next_wakeup(order, ctx)

    def place_one(self, job: JobRequest, ctx: PlacementContext) -> tuple[int, ...] | None:
        """Allocation for one new job against ctx.cluster.free, or the shape index's free set
        when the context has one (pald's submit-time path): what a plan of that job alone
        gives (delay, finish-aware choice), or None (defer)."""
        got = self.plan([job], ctx).launch.get(job.job_id)
        return None if got is None else tuple(got)

    # ---- the plan ---------------------------------------------------------------------------
    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan:
        # with a shape index (pald's place_one), the allocations over the free set as the plan
        # begins read their per-node picks from it (_Allocations); the stages see the plain
        # context
        index_ctx = self.locality.view(ctx)
        ctx = index_ctx if ctx.shape_index is None else dataclasses.replace(index_ctx, shape_index=None)
        cluster = ctx.cluster
        now = ctx.now
        table = _slowdown_table(ctx)
        rack_idx = self.locality.rack_index(cluster)
        # the free GPUs: the index's where one is given (the truth: cluster.free may lag
        # behind it, PlacementContext.shape_index); nothing in a plan reads cluster.free. The
        # round copies them when it first changes them (Round.take)
        free = cluster.free if index_ctx.shape_index is None else index_ctx.shape_index.free
        running = {j.job_id: j for j in order if j.running_on}
        estimate, score, accept = self.estimate, self.score, self.accept

        def runtime(job: JobRequest, gpus: Sequence[int]) -> float:
            return estimate.runtime(job, gpus, ctx, table)

        def allocate(job: JobRequest, free_ids: Sequence[int], max_tier: int) -> tuple[tuple[int, ...], int, float] | None:
            return score.allocate(job, free_ids, ctx, max_tier, rack_idx)

        def allocate_indexed(job: JobRequest, free_ids: Sequence[int], max_tier: int) -> tuple[tuple[int, ...], int, float] | None:
            return score.allocate(job, free_ids, index_ctx, max_tier, rack_idx)

        deadlines = accept.deadline_table(ctx)

        def allowed(job: JobRequest) -> int:
            return accept.allowed_tier(job, ctx, deadlines)

        def end_of(jid: JobId) -> float:  # (a plan asks it of every running job: no call through `runtime`)
            job = running[jid]
            return now + estimate.runtime(job, job.running_on, ctx, table)

        ends = _LazyEnds(end_of)
        releases = _Releases({jid: tuple(j.running_on) for jid, j in running.items()}, ends, cluster,
                             ctx.cache.get("group-counts", topo(cluster), dict))
        allocations = _Allocations(free, allocate, allocate_indexed if index_ctx.shape_index is not None else None)
        rnd = Round(ctx, rack_idx, free, releases, allocations, allocate, runtime, allowed, score.variability)
        launch, res = rnd.launch, rnd.res
        preempt, tier_wait, backfill, bin_wait, bound = self.preempt, self.tier_wait, self.reserve, self.bin_wait, self.bound
        preemptible = preempt.candidates(running, now) if preempt is not None else None
        pending_before = 0  # jobs of `order` this plan looked at before this one and did not start
        waiting = [j for j in order if not j.running_on]
        fewest: list[int] | None = None  # _fewest_gpus_from(waiting), once a plan needs it (most end before)
        # each waiting job's latest start under its starvation bound, and [i]: a job of
        # waiting[i:] is past it (it may reserve beyond the others)
        if bound is None:
            latest, starved_from = [math.inf] * len(waiting), [False] * len(waiting)
        else:
            latest = [bound.latest_start(j, ctx) for j in waiting]
            starved_from = _any_from([now > t for t in latest])
        left = len(waiting)  # waiting jobs not looked at yet
        for at, job in enumerate(waiting):
            left -= 1
            if job.job_id in launch:
                continue
            # a job ahead of this one still waits: it comes first for whatever frees
            waiting_ahead = pending_before > len(launch)
            pending_before += 1
            if not rnd.free and not backfill.reserves:
                break  # nothing free and nothing to reserve: no later job can start
            if preempt is None and len(rnd.free) < job.num_gpus and not backfill.holds_more(rnd, starved_from[at]):
                # it cannot start (only preemption frees GPUs in a plan) and may not reserve:
                # what `blocked` would say, without its work; the plan ends once no later job fits
                if not backfill.backfills:
                    break
                if fewest is None:
                    fewest = _fewest_gpus_from(waiting)
                if len(rnd.free) < fewest[at]:
                    break
                continue
            n = job.num_gpus
            got = None
            # past its starvation bound a job waits only for what stock Slurm's backfill would
            # (and its consolidated placement, with a reservation); before it, no wait for
            # faster GPUs may plan its start past the bound
            until = latest[at]
            starved = now > until
            # the tier the filter allows, worked out only for a job that may start or reserve
            # (most of a long queue does neither while the cluster is full)
            tier = -1
            if len(rnd.free) >= n:
                tier = allowed(job)
                got = allocations.best(job, tier)
            if preempt is not None and preemptible is not None and (got is None or got[1] > wanted_tier(job, cluster)):
                if tier < 0:
                    tier = allowed(job)
                freed = preempt.stop_for(job, preemptible, rnd)
                for jid in freed:
                    ends.pop(jid, None)
                    releases.drop(jid)
                if freed:
                    allocations.changed()
                    got = allocations.best(job, tier)
            if got is not None and tier_wait is not None and got[1] > wanted_tier(job, cluster):
                taken, wait = tier_wait.check(job, got, rnd)
                if wait is None:
                    got = taken
                else:  # the consolidated placement finishes it sooner: it waits (see stages.bound)
                    if backfill.can_hold(rnd.starved_held if starved else len(res), ctx):
                        wait.holds_s = job.remaining_time
                        rnd.hold(job, wait)
                        rnd.starved_held += starved
                    continue
            if got is None:
                if backfill.blocked(job, tier, rnd, starved):
                    continue
                break
            if (bin_wait is not None and not waiting_ahead and backfill.reserves
                    and bin_wait.waits(job, got[0], rnd, until)):
                continue
            if res:
                got = backfill.around(job, got, tier, rnd, starved)
                if got is None:
                    continue
            gpus = got[0]
            launch[job.job_id] = tuple(gpus)
            if left:  # (after the last waiting job nothing reads the free GPUs)
                rnd.take(gpus)
            allocations.changed()
            ends[job.job_id] = now + runtime(job, gpus)
            releases.hold(job.job_id, tuple(gpus), ends[job.job_id])
        return RoundPlan(frozenset(rnd.suspend), launch, rnd.planned)


def _fewest_gpus_from(jobs: Sequence[JobRequest]) -> list[int]:
    """[i]: the fewest GPUs any of jobs[i:] asks for (a plan's free GPUs only shrink as it goes,
    unless it preempts, so once that exceeds them no later job can start)."""
    return list(accumulate(reversed([j.num_gpus for j in jobs]), min))[::-1]


def _any_from(flags: Sequence[bool]) -> list[bool]:
    """[i]: any of flags[i:]."""
    return list(accumulate(reversed(flags), operator.or_))[::-1]
