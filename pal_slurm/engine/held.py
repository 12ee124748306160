"""pald's cycle decision on a Slurm site, one call from the service (`plan_and_book`): which
held PAL jobs (read by intake.held) to release now, and where, each release checked, booked in
the service's reservations (engine/reservations.py) and carrying the Launch pald's actuator
starts. No I/O: pald's service hands it its last Slurm read (engine.site.Seen) and its
reservations; the cycle acts on the answer.

The order a reader follows: where each held job may run (engine/where.held_group); the jobs
that may use every node in one engine cycle (`plan_held`), each launch checked in the plan's
order; then each restricted job, in queue order, on its own nodes (`place_eligible`, a
requeued job on its old slot types: `on_bound_slots`); every release booked as it is made, so
each one is checked on what the ones before it left.

Slurm's job-count limits (intake.job_limits): a held job that one more running job would put
over its association's or QOS's limit is not released, and waits without a pin, a
reservation or a place in the plan; the jobs behind it are planned as if it were not there.
Each release counts against the limits of the ones after it; where one of the shared cycle's
launches turns out over a limit so, the cycle is planned again without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from pal_slurm.engine.actuator import Launch
from pal_slurm.engine.cycle import Engine
from pal_slurm.engine.reservations import Reservations
from pal_slurm.engine.site import Facts, Found, Seen, facts_of, place_eligible, planning_running
from pal_slurm.engine.where import Promised, Released, Where, held_group, release_on
from pal_slurm.intake.held import HeldRead
from pal_slurm.intake.job_limits import LimitCount, Owner, owner_of
from pal_slurm.intake.job import Pass
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model import ClusterView, JobRequest, PlannedStart, RoundPlan
from pal_slurm.model.decision import JobId
from pal_slurm.model.site import SiteView
from pal_slurm.policy.eligibility import NodeGroup
from pal_slurm.policy.registry import SLURM_PRIORITY_QUEUE
from pal_slurm.policy.shapes import ShapeChoice, choice_of
from pal_slurm.ranking import Ranking
from pal_slurm.slurm.priority import SitePriorityRead, held_priority


@dataclass(frozen=True)
class Release:
    """A held job the cycle releases: started by `launch` (where and how: Actuator.start),
    or, without one, released untouched as submitted (the `reason` says why)."""

    job_id: int | str  # a job id, or ``A_I``: one element of an array's pending record
    perf_class: str
    reason: str
    launch: Launch | None = None  # None: release untouched (fail open)

    @property
    def key(self) -> str:
        """Its reservation's key."""
        return f"job:{self.job_id}"

    @property
    def choice(self) -> ShapeChoice | None:
        return None if self.launch is None else self.launch.choice

    @property
    def request(self) -> JobRequest | None:
        """The engine's view of the job (None when released untouched)."""
        return None if self.launch is None else self.launch.job

    @property
    def gres_spec(self) -> str | None:
        """scontrol Gres= value, or None to keep the job's own."""
        return None if self.launch is None else self.launch.gres_spec

    @property
    def partition(self) -> str | None:
        """The one partition to set (a job that asked for several)."""
        return None if self.launch is None else self.launch.partition


@dataclass
class CycleResult:
    releases: list[Release] = field(default_factory=list)
    waiting: int = 0  # held jobs the plan leaves waiting
    # the held jobs that wait with a backfill reservation: job -> when and where the engine
    # plans to start them, and the job's class (what an admin asks about a job that stays held)
    planned: dict[JobId, tuple[PlannedStart, str]] = field(default_factory=dict)
    # the jobs left waiting as the submit path plans a newcomer behind them (HeldQueue.planned);
    # None: unknown (some wait for other reasons, or may use only some nodes)
    behind: list[JobRequest] | None = None
    # held jobs not released because one more running job would put its user, account or QOS
    # over a job-count limit: job -> the reason Slurm would show (intake.job_limits)
    limited: dict[JobId, str] = field(default_factory=dict)
    # in the site's order (Engine.keeps_order): the held jobs planned, highest priority first,
    # each with the priority pald computed for it (what an admin reads to see who passed whom)
    ranked: list[tuple[JobId, float]] = field(default_factory=list)


def plan_and_book(engine: Engine, where: Where, book: Reservations, seen: Seen, held: Sequence[HeldRead], now: float,
                  site_priority: SitePriorityRead | None = None, counted: LimitCount | None = None) -> CycleResult:
    """The releases of the held jobs `held` on `seen` less `book`'s reservations, each one's
    GPUs (and CPUs/memory) booked in `book` before this returns: the caller acts on Slurm and
    drops the booking (`book.drop(release.key)`) of a release that failed. `site_priority`:
    the inputs of Slurm's multifactor priority, for the queue order `slurm`; `counted`: the
    jobs the read counts against the site's job-count limits (None: no limit known)."""
    out = CycleResult()
    count = counted.copy() if counted is not None else None  # this cycle's releases added as made
    owners: dict[JobId, Owner] = {}  # whose limits each planned job counts against
    view, site = seen.view, seen.site
    requests: list[JobRequest] = []  # may use every node: one engine cycle over them all
    restricted: list[JobRequest] = []  # placed after, each on its nodes
    groups: dict[JobId, NodeGroup] = {}
    limits: dict[JobId, JobRestrictions] = {}  # where each may run, what it needs per node
    by_id = {}
    not_yet = 0  # requeued jobs in Slurm's requeue delay: planned once they may start
    unexpanded = 0  # array elements beyond what could start now (not planned this cycle)
    # held jobs share few restrictions (the intake hands out one value for equal fields):
    # where each may run is judged once per cycle, found by identity (hashing a job's
    # restrictions costs more than judging them again)
    wheres: dict[int, tuple[JobRestrictions, NodeGroup | None | str]] = {}
    bound: dict[JobId, tuple[int, ...]] = {}  # jobs already bound to slot types
    promised = book.promised()  # (the loop books nothing)
    free = len(book.available(view).free)
    by_priority = engine.settings.queue == SLURM_PRIORITY_QUEUE
    for h in held:
        j, got, slots = h.job, h.read, h.slots
        if got is None:  # Slurm would not start it yet
            not_yet += 1
            continue
        if isinstance(got, Pass):
            out.releases.append(Release(j.job_id, got.perf_class, got.reason))
            continue
        shape, perf_class, restrictions = got.shape, got.perf_class, got.restrictions
        owner = owner_of(j) if count is not None else None
        why = count.reason(owner) if count is not None and owner is not None else None
        if why is not None:  # Slurm would keep it waiting on a pin: it waits here, unplanned
            out.limited[j.job_id] = why
            continue
        request = got.request
        if by_priority:
            request = replace(request, site_priority=held_priority(j, site_priority, now))
        if id(restrictions) not in wheres:  # the entry holds the value: its id is not reused
            wheres[id(restrictions)] = (restrictions, held_group(where, view, site, restrictions, now, promised))
        group = wheres[id(restrictions)][1]
        if isinstance(group, str):  # eligibility passed it to Slurm
            out.releases.append(Release(j.job_id, perf_class, group))
            continue
        if not shape.is_per_node:
            slots = None
        if slots is not None:
            group = None  # placed after the shared cycle, on its own slots (on_bound_slots)
        every = h.elements
        if every is None:
            out.releases.append(Release(j.job_id, perf_class, "bad_array_tasks"))
            continue
        refs = every[:max(1, free // max(1, shape.total))]
        unexpanded += len(every) - len(refs)  # an array's later elements wait too
        for ref in refs:  # an array's pending elements: as many as could start now, in order
            req = request if ref == request.job_id else replace(request, job_id=ref)
            by_id[ref], limits[ref] = req, restrictions
            if owner is not None:
                owners[ref] = owner
            if slots is not None:
                bound[ref] = slots
            if group is not None:
                requests.append(req)
                groups[ref] = group
            else:
                restricted.append(req)
    if by_priority:
        out.ranked = [(r.job_id, r.site_priority) for r in engine.order_jobs([*requests, *restricted])]
    launched = 0
    started: set[JobId] = set()
    planning = requests
    for _ in range(len(requests)):  # planned again only when a launch went over a limit: one fewer each time
        plan, checked = plan_held(engine, view, site, book.available(view), seen.ranking, book.promised(),
                                  planning_running(engine, book, seen), planning, limits, now)
        out.planned = {job_id: (p, by_id[job_id].perf_class) for job_id, p in plan.planned.items() if job_id in by_id}
        over = False
        for job_id, release in checked:
            why = _over_limit(count, owners, job_id) if release is not None else None
            if why is not None:
                out.limited[job_id] = why
                over = True
            elif _book(out, book, engine, by_id[job_id], release, groups[job_id], limits[job_id], now):
                launched += 1
                started.add(job_id)
                _count(count, owners, job_id)
        if not over:
            break
        done = {r.job_id for r in out.releases}
        planning = [r for r in planning if r.job_id not in done and r.job_id not in out.limited]
        if not planning:
            break
    left_waiting = [r for r in requests if r.job_id not in started and r.job_id not in out.limited]
    for req in restricted_in_turn(engine, restricted, left_waiting):
        # in queue order, on what the cycle left (GPUs, and CPUs/memory promised meanwhile);
        # without backfill the first that waits holds the ones behind it (one over a limit
        # does not: Slurm would not start it whatever pald left it)
        why = _over_limit(count, owners, req.job_id)
        if why is not None:
            out.limited[req.job_id] = why
            continue
        job = limits[req.job_id]
        facts = facts_of(engine, book, seen, running=False)
        eligibility = where.eligibility(job, view, site, now, facts.promised)
        found = place_eligible(engine, where, facts, req, eligibility, job.exclusive, now, ())
        if found is not None and req.job_id in bound:
            found = on_bound_slots(engine, where, facts, req, found, bound[req.job_id], now)
        if found is None or not _book(out, book, engine, req, release_on(
                view, site, book.available(view).free, req, found[0], job, book.promised()), found[1], job, now):
            if not engine.backfills_freely:
                break
            continue
        launched += 1
        _count(count, owners, req.job_id)
    planned_ids = {r.job_id for r in requests} | {r.job_id for r in restricted}
    out.waiting = (len(requests) + len(restricted) - launched + not_yet + unexpanded
                   + sum(1 for job_id in out.limited if job_id not in planned_ids))
    released = {r.job_id for r in out.releases}
    if not (restricted or not_yet or unexpanded):
        out.behind = [r for r in requests if r.job_id not in released and r.job_id not in out.limited]
    return out


def _over_limit(count: LimitCount | None, owners: Mapping[JobId, Owner], job_id: JobId) -> str | None:
    """The limit one more release of `job_id` would put its owner over, counting the releases
    booked before it (None: none, or no limit known)."""
    owner = owners.get(job_id)
    return None if count is None or owner is None else count.reason(owner)


def _count(count: LimitCount | None, owners: Mapping[JobId, Owner], job_id: JobId) -> None:
    """A release of `job_id` booked: it holds a job slot from now on."""
    owner = owners.get(job_id)
    if count is not None and owner is not None:
        count.add(owner)


def restricted_in_turn(engine: Engine, restricted: Sequence[JobRequest], waiting: Sequence[JobRequest]
                        ) -> list[JobRequest]:
    """The restricted jobs in queue order, placed after the shared cycle. In the site's order
    (Engine.keeps_order) only those ahead of every job the shared cycle left waiting: a
    restricted job is placed on what the cycle left, blind to the reservations of the jobs
    that wait there, so one of lower priority waits for the next cycle rather than take
    GPUs a higher-priority job was promised."""
    if not restricted:
        return []
    if not engine.keeps_order or not waiting:
        return engine.order_jobs(restricted)
    mine = {r.job_id for r in restricted}
    out = []
    for req in engine.order_jobs([*restricted, *waiting]):
        if req.job_id not in mine:
            break
        out.append(req)
    return out


def plan_held(engine: Engine, view: ClusterView, site: SiteView | None, available: ClusterView, ranking: Ranking,
              promised: Promised, running: Sequence[JobRequest], jobs: Sequence[JobRequest],
              limits: Mapping[JobId, JobRestrictions], now: float
              ) -> tuple[RoundPlan, list[tuple[JobId, Released | str | None]]]:
    """The engine's cycle over the held `jobs` that may use every node (with the `running`
    jobs a placement plans around), and each launch checked in the plan's order
    (`release_on`: None waits for the next cycle, a `doubt:` reason is released as
    submitted), each on what the launches before it left (GPUs, CPUs/memory per node)."""
    plan = engine.decide([*running, *jobs], available, ranking, now)
    by_id = {j.job_id: j for j in jobs}
    free = set(available.free)
    left = dict(promised)
    out: list[tuple[JobId, Released | str | None]] = []
    for job_id, gpus in plan.launch.items():
        need = limits[job_id]
        got = release_on(view, site, free, by_id[job_id], gpus, need, left)
        if isinstance(got, Released):
            free.difference_update(got.gpus)
            for node in got.choice.nodes:
                cpus, memory = left.get(node, (0, 0))
                left[node] = (cpus + need.cpus_per_node, memory + need.memory_per_node_mb)
        out.append((job_id, got))
    return plan, out


def on_bound_slots(engine: Engine, where: Where, facts: Facts, req: JobRequest, found: Found,
                   slots: tuple[int, ...], now: float) -> Found | None:
    """A job whose request already names slot types (intake.held.bound_slots: a requeued PAL
    job, or one released before that did not start) is placed again on those same slots,
    on whichever nodes have them free (PAL's choice among them), or waits (None).

    Why not new slots: Slurm 22.05 keeps a retyped job's old slot types with count 0
    (`GRES=gpu:s0:0(IDX:),gpu:s1:1(IDX:1)`) and does not start it on a node where those
    old slots are busy (Reason=Resources, found on the lab), and refuses an untyped count
    over typed ones. The same types on other nodes start (tests/integration/test_site_compat.py)."""
    view = facts.view
    gpus, group = found
    choice = choice_of(gpus, view)
    wanted = set(slots)
    if all(set(s) == wanted for s in choice.nodes.values()):
        return found
    if len(gpus) != len(slots) * len(choice.nodes):
        return found  # its shape no longer matches the binding: bound anew as before
    free = facts.available.free
    allowed = where.allowed_nodes(view, group, free, False)
    on_old = frozenset(g for g in free if view.gpus[g].slot in wanted
                       and (allowed is None or view.gpus[g].node_index in allowed))
    again = engine.place_new(req, view.with_free(on_old), facts.ranking, now)
    return None if again is None else (tuple(again), group)


def _book(out: CycleResult, book: Reservations, engine: Engine, req: JobRequest, got: Released | str | None,
          group: NodeGroup, job: JobRestrictions, now: float) -> bool:
    """Add the release of `req` as checked (engine.where.release_on) to `out`, its GPUs and
    CPUs/memory booked in `book`; False when it waits for the next cycle."""
    if got is None:
        return False
    if isinstance(got, str):  # Slurm may not have what the view says: release it as submitted
        out.releases.append(Release(req.job_id, req.perf_class, got))
        return True
    rel = Release(req.job_id, req.perf_class, engine.settings.placement,
                  Launch(req, got.choice, got.gres_spec, group.partition))
    book.reserve(rel.key, got.gpus, now, job, got.choice.nodes, slurm_picks=got.slurm_picks, request=req)
    out.releases.append(rel)
    return True
