"""Filter stage: the widest tier a waiting job accepts now.

Delay scheduling (Zaharia et al.; Dally): a job's preferred tier is the most consolidated one
its size allows. It accepts only that tier for `timer(sens, node)` seconds of waiting, then
also the rack tier for `timer(sens, rack)` more, then anything. With `cost_aware`, each wait is
also bounded by what consolidation saves the job (remaining ideal time x the factor gap,
"saving"): wait = min(saving, max(timer, patience x saving)), so a 9-hour GPT-2 job waits hours
for a rack and a 5-minute one waits minutes at most. Every job accepts any placement after
`max_wait_s`: no starvation. Timers come from the context (`delay_timers`, the auto-tuner) or
the stage's defaults. Without delay (`AnyTier`) a job accepts any tier at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from pal_slurm.model import JobRequest
from pal_slurm.model.network import LEVELS, NODE, SPINE, DelayTimers, sensitivity_class
from pal_slurm.policy.autotune import DEFAULT_TIMERS
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.estimates import _TABLE_LIMIT, _slowdown_table, _Table, tier_factor, topo, wanted_tier

Deadlines = tuple[tuple[float, int], ...]  # ((time, tier), ...): from `time` on, tiers up to `tier`


class Accept(Protocol):
    @property
    def tuned(self) -> bool:
        """Wants ctx.delay_timers from the delay-timer auto-tuner."""
        ...

    @property
    def delay_timers(self) -> DelayTimers:
        """Its own {(sensitivity, level): s}; {} without delay."""
        ...

    def deadline_table(self, ctx: PlacementContext) -> _Table:
        """The run's table a plan passes to `allowed_tier` (fetched once per plan)."""
        ...

    def tier_deadlines(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> Deadlines:
        """((time, tier), ...): from `time` on, the job accepts placements up to `tier`."""
        ...

    def allowed_tier(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> int:
        """The widest tier `job` accepts at ctx.now."""
        ...

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None:
        """Earliest future instant at which a waiting job's accepted tier widens (None: never)."""
        ...


@dataclass(frozen=True)
class AnyTier:
    """No delay: from its submission on a job accepts any tier."""

    tuned: bool = False

    @property
    def delay_timers(self) -> DelayTimers:
        return {}

    def deadline_table(self, ctx: PlacementContext) -> _Table:
        return {}

    def tier_deadlines(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> Deadlines:
        return ((job.waiting_since, SPINE),)

    def allowed_tier(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> int:
        return SPINE if ctx.now >= job.waiting_since else NODE

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None:
        return None


@dataclass(frozen=True)
class DelayScheduling:
    """Tier by tier, after per-sensitivity timers (see the module)."""

    timers: DelayTimers = field(default_factory=lambda: dict(DEFAULT_TIMERS))
    cost_aware: bool = True  # never wait longer than consolidation would save
    patience: float = 0.5  # cost-aware: wait up to this fraction of the saving (above the timer)
    max_wait_s: float = 24 * 3600.0  # hard cap: after this any placement is accepted
    tuned: bool = False  # the simulator/pald feed ctx.delay_timers from the tuner

    @property
    def delay_timers(self) -> DelayTimers:
        return self.timers

    def _timers(self, ctx: PlacementContext) -> DelayTimers:
        t = ctx.delay_timers
        return self.timers if not t else {**self.timers, **t}

    def deadline_table(self, ctx: PlacementContext) -> _Table:
        """The run's {job key: tier deadlines} under the timers in force now. A waiting job's
        deadlines stay the same plan after plan (they change with its wait, its length and the
        timers, all in the keys): kept per ranking and network model (the slowdown table) and
        per topology, timers and this stage's settings. A plan fetches it once."""
        t = topo(ctx.cluster)
        key = ("deadlines", t.gpus_per_node, t.rack_nodes, t.rack_cap, True, self.cost_aware, self.patience,
               self.max_wait_s, tuple(sorted(self._timers(ctx).items())))
        tables = _slowdown_table(ctx)
        table = tables.get(key)
        if table is None:
            if len(tables) >= _TABLE_LIMIT:
                tables.clear()
            table = tables[key] = {}
        return table  # type: ignore[no-any-return]

    def tier_deadlines(self, job: JobRequest, ctx: PlacementContext, table: _Table | None = None) -> Deadlines:
        """`table`: the plan's deadline_table (fetched here without one)."""
        table = self.deadline_table(ctx) if table is None else table
        key = (job.job_id, job.waiting_since, job.remaining_time, job.num_gpus, job.shape, job.app,
               job.net_sensitivity)
        hit = table.get(key)
        if hit is None:
            if len(table) >= _TABLE_LIMIT:
                table.clear()
            hit = table[key] = self._tier_deadlines(job, ctx)
        return hit  # type: ignore[no-any-return]

    def _tier_deadlines(self, job: JobRequest, ctx: PlacementContext) -> Deadlines:
        cluster = ctx.cluster
        want = wanted_tier(job, cluster)
        start = job.waiting_since
        out = [(start, want)]
        if want == SPINE:
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
