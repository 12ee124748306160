"""The decision cycle: queue order -> eligible view -> placement (shape-aware) -> plan.

One `Engine` per run (a simulation, a pald process). It holds the run's context: the
placement and queue order picked by name from the registry, the RNG, the non-sticky memo and
the delay-timer auto-tuner's state. Both simulator modes and pald decide through it:

- `decide(jobs, cluster, ranking, now)`: one cycle over the jobs that wait (and, where
  running jobs may move, the running ones): the simulator's every event/round, pald's cycle
  over the jobs it holds;
- `place_new(job, ...)`: the submit path, a job that arrives when nobody waits before it; by
  the placements' contract equal to `decide([job])` (tested for every registered placement);
- `place_behind(job, waiting, ...)`: the submit path when older jobs wait: the new job starts
  now exactly when a cycle over them and it (`decide([*waiting, job])`) would start it, so a
  backfilling placement lets it pass them at once, as Slurm's backfill would, instead of
  holding it until pald's next cycle; past `submit_backfill_max` waiting jobs it is held;

Both return the GPUs the scheduler under the engine really starts a launch on, by the start
rule its caller names (engine.starts.StartRule: pald and a simulator of Slurm name Slurm's,
policy.slurm_starts), so pald reserves, and the simulator starts, those;
- `observe_start(...)`: what the auto-tuner learns from a job starting (one loss estimate);
- `next_wakeup(...)`: when a waiting job's options widen by time alone (delay scheduling).

Under Slurm a started job cannot be moved or stopped by us (`running_jobs_move=False`): the
engine then gives the placement only the waiting jobs, with the running jobs' GPUs busy in
the view, unless the placement plans around running jobs it never moves
(`Traits.plans_around_running`: their ends time its finish-aware choice and its backfill
reservations); a running job is never in what the cycle launches. The delay rule is the
placements' (network-aware ones wait for one node, then one leaf switch); the engine adds one
queue rule of its own: `backfill` lets later jobs pass one that does not fit, for placements
that do not backfill themselves.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.engine.starts import AS_PLANNED, StartRule
from pal_slurm.model.network import sensitivity_class
from pal_slurm.policy import PlacementContext, autotune, netaware
from pal_slurm.policy import placement as placement_by_name, queue_order
from pal_slurm.policy.registry import PROGRESS_READING_QUEUES, SITE_ORDER_QUEUES, SUBMIT_ORDER_QUEUES
from pal_slurm.policy.base import NetworkFactor, PlacementPolicy, QueueOrder
from pal_slurm.policy.cache import RunCache
from pal_slurm.policy.shapes import ShapeIndex
from pal_slurm.ranking import Ranking


Timers = Mapping[tuple[str, str], float]  # {(sensitivity, level): seconds}


@dataclass(frozen=True)
class EngineSettings:
    placement: str = "pal"  # a registered placement (policy.registry)
    queue: str = "fifo"  # a registered queue order
    locality_penalty: float = 1.7  # PAL's across-node weight
    running_jobs_move: bool = True  # False under Slurm: a started job keeps its GPUs
    backfill: bool = False  # later jobs may pass one that does not fit (placements without their own)
    delay_timers: Timers | None = None  # overrides the placement's delay timers {(sens, level): s}
    reserve_after_s: float | None = None  # overrides a backfilling placement's reserve_after_s
    starvation_bound_s: float | None = None  # overrides a placement's starvation bound
    submit_backfill_max: int = 64  # place_behind plans over at most this many waiting jobs
    tuner: autotune.TunerConfig = autotune.TunerConfig()


def eligible_view(cluster: ClusterView, jobs: Sequence[JobRequest]) -> ClusterView:
    """The one place where the view is restricted to the GPUs these jobs may use.

    A job that needs one GPU model (`JobRequest.gpu_model`, the simulator's mixed clusters) may
    use only that model's GPUs: when every job asked about needs the same model (the submit
    path asks about one job), the free set is narrowed to them here; a cycle over a mixed queue
    places those jobs one by one on their model's GPUs (`Engine._place_model_jobs`). On a site,
    pald narrows the view by partitions, features and GPU models before the engine sees it
    (policy.eligibility); its jobs carry no `gpu_model`."""
    model = jobs[0].gpu_model if jobs else None
    if model is None or not cluster.gpus_by_model or any(j.gpu_model != model for j in jobs):
        return cluster  # (a cluster that names no models: a model request is no restriction)
    return cluster.with_free(cluster.free & cluster.gpus_by_model.get(model, frozenset()))


def needs_one_model(jobs: Sequence[JobRequest]) -> bool:
    return any(j.gpu_model is not None for j in jobs)


@dataclass(frozen=True)
class Cycle:
    """One decision: the jobs in queue order, the context the placement saw, its plan."""

    order: list[JobRequest]
    ctx: PlacementContext
    plan: RoundPlan


class Engine:
    def __init__(self, settings: EngineSettings = EngineSettings(), rng: random.Random | None = None,
                 network: NetworkFactor | None = None, policy: PlacementPolicy | None = None,
                 start_rule: StartRule = AS_PLANNED):
        self.settings = settings
        self.start_rule = start_rule  # how the scheduler under the engine starts its launches
        self.policy: PlacementPolicy = policy if policy is not None else placement_by_name(settings.placement)
        self.order: QueueOrder = queue_order(settings.queue)
        self.rng = rng if rng is not None else random.Random(0)
        self.network = network  # the network model placements may consult (None: tier penalties)
        self.memo: dict[str, Any] = {}  # the non-sticky placements' reuse of the last plan (PlacementContext.memo)
        self.cache = RunCache()  # values derived from the run's inputs (PlacementContext.cache)
        self.tuner = autotune.initial_state(settings.tuner, {**self.policy.delay_timers,
                                                             **(settings.delay_timers or {})})

    @property
    def keeps_order(self) -> bool:
        """Whether the queue order is the site's priority order (the `slurm` order): a later
        job may start ahead of a waiting one only as Slurm's backfill would let it, so a
        backfilling placement reserves for every job that waits (PlacementContext.keep_order)
        and the engine's own `backfill`, which passes a blocked job without a reservation, is
        off."""
        return self.settings.queue in SITE_ORDER_QUEUES

    @property
    def backfills_freely(self) -> bool:
        """Whether later jobs pass one that waits with no reservation for it (the engine's
        `backfill` for a placement that does not backfill itself; never in the site's order)."""
        return self.settings.backfill and not self.keeps_order

    @property
    def reads_progress(self) -> bool:
        """Whether a cycle reads running jobs' progress: its placement or its queue order does,
        or the tuner learns from it. False lets the event clock leave a running job's request
        as it was built at its start."""
        traits = self.policy.traits
        return traits.reads_progress or traits.tuned or self.settings.queue in PROGRESS_READING_QUEUES

    # ---- context ---------------------------------------------------------------------------
    def delay_timers(self) -> Timers | None:
        """Timers the placement uses now: the tuner's when it is tuned, else the override."""
        if self.policy.traits.tuned:
            return autotune.timers(self.tuner)
        return self.settings.delay_timers or None

    def context(self, cluster: ClusterView, ranking: Ranking, now: float,
                shape_index: ShapeIndex | None = None) -> PlacementContext:
        return PlacementContext(
            cluster=cluster, ranking=ranking, rng=self.rng, locality_penalty=self.settings.locality_penalty,
            now=now, network=self.network, delay_timers=self.delay_timers(), memo=self.memo,
            reserve_after_s=self.settings.reserve_after_s, starvation_bound_s=self.settings.starvation_bound_s,
            keep_order=self.keeps_order, shape_index=shape_index, cache=self.cache,
        )

    # ---- the cycle -------------------------------------------------------------------------
    def order_jobs(self, jobs: Sequence[JobRequest], in_submit_order: bool = False) -> list[JobRequest]:
        """The jobs in queue order. `in_submit_order`: the caller hands them sorted by submit
        time, all of one priority (the simulator's clocks: jobs arrive in time order), so a
        queue order that keeps such a list as it is (SUBMIT_ORDER_QUEUES: FIFO) need not sort."""
        if not self.settings.running_jobs_move and not self.policy.traits.plans_around_running:
            jobs = [j for j in jobs if not j.running_on]
        if in_submit_order and self.settings.queue in SUBMIT_ORDER_QUEUES:
            return list(jobs)
        return self.order(jobs)

    def cycle(self, jobs: Sequence[JobRequest], cluster: ClusterView, ranking: Ranking, now: float,
              in_submit_order: bool = False) -> Cycle:
        """One cycle: queue order -> eligible view -> placement -> plan. `cluster.free` holds
        the GPUs no running job holds. `in_submit_order`: as in `order_jobs`."""
        order = self.order_jobs(jobs, in_submit_order)
        ctx = self.context(eligible_view(cluster, order), ranking, now)
        plan = self._plan(order, ctx)
        if self.start_rule.changes_launches:
            plan = self._as_started(order, ctx, plan)
        return Cycle(order, ctx, plan)

    def _plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan:
        # a one-model cluster (every pald view) has no model jobs: no walk over the queue
        mixed = bool(ctx.cluster.gpus_by_model) and needs_one_model(order)
        shared = [j for j in order if j.gpu_model is None] if mixed else order
        plan = self.policy.plan(shared, ctx)
        if self.backfills_freely and not self.policy.traits.backfills:
            plan = self._backfill(shared, ctx, plan)
        if mixed:
            plan = self._place_model_jobs(order, ctx, plan)
        return plan

    def _place_model_jobs(self, order: Sequence[JobRequest], ctx: PlacementContext, plan: RoundPlan) -> RoundPlan:
        """Jobs that need one GPU model, after the plan of the others: in queue order, each by
        the placement's `place_one` on its model's GPUs the plan left free. Without backfill
        the first that does not fit holds the ones behind it. Running ones keep their GPUs.

        Why after: a placement plans a queue on one free set; a job limited to part of it is
        a question of its own. pald places its restricted jobs (partitions, features, models)
        the same way after its shared cycle (engine/held.plan_and_book)."""
        launch = dict(plan.launch)
        free = set(ctx.cluster.free)
        free.update(g for j in order if j.job_id in plan.suspend for g in j.running_on)
        free.difference_update(g for gpus in launch.values() for g in gpus)
        backfills = self.backfills_freely or self.policy.traits.backfills
        by_model = ctx.cluster.gpus_by_model
        for job in order:
            if job.gpu_model is None or job.running_on:
                continue
            mine = free & by_model.get(job.gpu_model, frozenset())
            gpus = None
            if len(mine) >= job.num_gpus:
                view = ctx.cluster.with_free(mine)
                gpus = self.policy.place_one(job, replace(ctx, cluster=view, memo=None, shape_index=None))
            if gpus is None:
                if not backfills:
                    break
                continue
            launch[job.job_id] = tuple(gpus)
            free.difference_update(gpus)
        return _with_launch(plan, launch)

    def _as_started(self, order: Sequence[JobRequest], ctx: PlacementContext, plan: RoundPlan) -> RoundPlan:
        """The plan as the scheduler carries it out (`start_rule`). Where the rule changes a
        launch, the jobs after it are planned again on what is really left, so the cycle
        decides as the one-at-a-time submit path does (`place_new`)."""
        launch: dict[Any, tuple[int, ...]] = {}
        taken: set[int] = set()
        planned = dict(plan.planned)
        while True:
            changed_at = None
            left_free = set(ctx.cluster.free) - taken  # kept as launches take GPUs: no copy per job
            for pos, job in enumerate(order):
                gpus = plan.launch.get(job.job_id)
                if gpus is None or job.job_id in launch or job.running_on:  # a running job stays as it is
                    continue
                got = self.start_rule.start(job, gpus, ctx.cluster, left_free)
                if got is not gpus and set(got) != set(gpus):
                    changed_at, gpus = pos, tuple(got)
                launch[job.job_id] = tuple(gpus)
                taken.update(gpus)
                left_free.difference_update(gpus)
                if changed_at is not None:
                    break
            if changed_at is None:
                return RoundPlan(plan.suspend, launch, {k: v for k, v in planned.items() if k not in launch})
            # the jobs after it, around every job that holds GPUs: the running ones and those
            # launched so far (running from now): a plan without them saw no GPUs ever coming
            # free, and a finish-aware placement spread a 12-GPU job it would have waited for
            # (the replay's model of workload-3: a GPT2 job 7.8x slower)
            holding = [j for j in order if j.running_on] + [
                j.started_on(launch[j.job_id], ctx.now)
                for j in order if not j.running_on and j.job_id in launch
            ] if self.policy.traits.plans_around_running else []
            # in the site's order the jobs before it that wait are planned again too: their
            # reservations hold against the jobs after them (Engine.keeps_order)
            after = order if self.keeps_order else order[changed_at + 1:]
            rest = [j for j in after if j.job_id not in launch and not j.running_on]
            left = ctx.cluster.with_free(set(ctx.cluster.free) - taken)
            plan = self._plan([*holding, *rest], replace(ctx, cluster=left, memo=None, shape_index=None))
            for j in rest:  # the jobs planned again: their planned starts are the new plan's
                planned.pop(j.job_id, None)
            planned.update(plan.planned)

    def decide(self, jobs: Sequence[JobRequest], cluster: ClusterView, ranking: Ranking, now: float,
               in_submit_order: bool = False) -> RoundPlan:
        return self.cycle(jobs, cluster, ranking, now, in_submit_order).plan

    def _backfill(self, order: Sequence[JobRequest], ctx: PlacementContext, plan: RoundPlan) -> RoundPlan:
        """Give every job the plan left waiting a chance, in order, on what is still free."""
        launch = dict(plan.launch)
        free = set(ctx.cluster.free) - {g for gpus in launch.values() for g in gpus}
        free.update(g for j in order if j.job_id in plan.suspend for g in j.running_on)
        index = ShapeIndex(ctx.cluster.with_free(free))  # the free set from here on
        cur = replace(ctx, memo=None, shape_index=index)
        for job in order:
            if job.running_on or job.job_id in launch or len(index.free) < job.num_gpus:
                continue
            gpus = self.policy.place_one(job, cur)
            if gpus is None:
                continue
            launch[job.job_id] = tuple(gpus)
            index.take(gpus)
        return _with_launch(plan, launch)

    def place_new(self, job: JobRequest, cluster: ClusterView, ranking: Ranking, now: float,
                  shape_index: ShapeIndex | None = None) -> tuple[int, ...] | None:
        """The submit path: GPUs for a job nobody waits before (== decide([job])), or None."""
        if job.gpu_model is not None:
            shape_index = None  # pald's index is of the whole free set; the view is narrowed
        ctx = self.context(eligible_view(cluster, [job]), ranking, now, shape_index)
        gpus = self.policy.place_one(job, ctx)
        if gpus is not None and self.start_rule.changes_launches:
            gpus = tuple(self.start_rule.start(job, gpus, cluster,
                                               shape_index.free if shape_index is not None else cluster.free))
        return gpus

    def place_behind(self, job: JobRequest, waiting: Sequence[JobRequest], cluster: ClusterView, ranking: Ranking,
                     now: float, running: Sequence[JobRequest] = ()) -> tuple[int, ...] | None:
        """The submit path when `waiting` (older jobs, not started) wait: the GPUs a cycle over
        them and `job` would start `job` on now, or None (it waits with them). `running`: the
        running jobs, as the cycle gets them (a placement that plans around them reads their
        ends; the others never see them).

        Why: holding every newcomer behind a waiting job until the next cycle costs each one a
        cycle, where Slurm's backfill starts a job that fits at once when it does not delay the
        first blocked one. The answer is the cycle's own (same order, placement, backfill and
        Slurm slot rule), so the submit path and the cycle cannot disagree; the launches it
        plans for the waiting jobs are left to the cycle. Bounded: past `submit_backfill_max`
        waiting jobs a plan costs more than a hook may wait, and the job is held."""
        running = running if self.policy.traits.plans_around_running else ()
        if not waiting and not running:
            return self.place_new(job, cluster, ranking, now)
        if len(waiting) > self.settings.submit_backfill_max:
            return None
        order = self.order_jobs([*running, *waiting, job])
        # a plan of its own: the non-sticky memo is the cycle's, not this question's
        ctx = replace(self.context(eligible_view(cluster, order), ranking, now), memo=None)
        plan = self._plan(order, ctx)
        if self.start_rule.changes_launches:
            plan = self._as_started(order, ctx, plan)
        return plan.launch.get(job.job_id)

    def next_wakeup(self, cycle: Cycle) -> float | None:
        """When the jobs this cycle left waiting may get more options by time alone."""
        return self.policy.next_wakeup(cycle.order, cycle.ctx)

    # ---- learning --------------------------------------------------------------------------
    def observe_start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView, now: float,
                      factor: float | None = None, best_factor: float | None = None,
                      work_s: float | None = None) -> None:
        """Feed the auto-tuner one start (tuned placements only). The loss estimate, the one
        used everywhere: the job's work (`work_s`, default its remaining time) x how much
        slower its placement's network factor is than the most consolidated one it could have
        had. Factors default to the placements' own estimates (the context's network model,
        else per-sensitivity tier penalties); the simulator passes the ones it applies."""
        if not self.policy.traits.tuned:
            return
        wanted = netaware.wanted_tier(job, cluster)
        got, nodes, racks = netaware.span(gpus, cluster)
        if factor is None or best_factor is None:
            ctx = self.context(cluster, Ranking.uniform(cluster.size), now)
            factor = netaware.net_factor(job, nodes, racks, ctx) if factor is None else factor
            best_factor = netaware.tier_factor(job, wanted, cluster, ctx) if best_factor is None else best_factor
        work = job.remaining_time if work_s is None else work_s
        self.tuner = autotune.observe(
            self.tuner,
            autotune.Observation(sensitivity=sensitivity_class(job.net_sensitivity), wanted=wanted, got=got,
                                 waited_s=now - job.waiting_since, comm_loss_s=work * (factor - best_factor),
                                 time=now),
            self.settings.tuner,
        )


def _with_launch(plan: RoundPlan, launch: Mapping[Any, tuple[int, ...]]) -> RoundPlan:
    """`plan` with `launch` for its launches; a job now launched has no planned start."""
    return RoundPlan(plan.suspend, launch, {k: v for k, v in plan.planned.items() if k not in launch})
