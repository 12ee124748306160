"""pald's submit-time decision on a Slurm site, one call from the service (`place_and_book`):
place, defer or pass a job read by intake.job.from_hook (`decide`), a placement's GPUs booked
in the service's reservations (engine/reservations.py) before the call returns. No I/O: pald's
service hands it its last Slurm read (`Seen`) and its reservations. The cycle's counterpart,
for the held jobs, is engine/held.py.

Why here: the service keeps the state (view, reservations, held queue) and the engine
decides, so a reader follows one call from the service into the decision and back, in the
order the answer is built: where the job may run (engine/where.py), its size against the
cluster, its mode (`defer`, `now`, `auto` behind held jobs), the placement (one answer per
node group, the one whose slowest GPU is fastest), the check that Slurm has what it names,
the GPUs Slurm will take, and their booking.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

from pal_slurm.engine.choice_check import Binding
from pal_slurm.engine.cycle import Engine
from pal_slurm.engine.reservations import Reservations
from pal_slurm.engine.where import Promised, Where, as_slurm_takes, vetted
from pal_slurm.intake.job import Intake
from pal_slurm.intake.refusals import refused_input
from pal_slurm.model import ClusterView, DecisionKind, JobRequest
from pal_slurm.model.site import SiteView
from pal_slurm.policy.eligibility import BLOCK_DEFER, Eligibility, NodeGroup, multi_node_in_blocks
from pal_slurm.policy.shapes import ShapeChoice, ShapeIndex, choice_of
from pal_slurm.ranking import Ranking
from pal_slurm.slurm.gres import tres_per_node


class Facts(NamedTuple):
    """What the service knows when a job is asked about: its last Slurm read less its
    reservations, and the jobs it plans around. Read before the decision is booked (every
    caller books after deciding): `available` and `shape_index` are the book's own."""

    view: ClusterView
    site: SiteView | None
    book: Reservations  # the reservations (the free GPUs they leave: `available`)
    shape_index: ShapeIndex  # the free GPUs the reservations leave, indexed
    ranking: Ranking
    promised: Promised
    running: Sequence[JobRequest]  # the running jobs a placement that plans around them sees

    @property
    def available(self) -> ClusterView:
        """The view with reserved GPUs taken out, made when first asked after a booking: a
        burst of `now` requests answered from the index never needs it, and each copy is a
        pass over every free GPU (tens of thousands at a large site)."""
        return self.book.available(self.view)


class Seen(NamedTuple):
    """The service's last Slurm read as the engine decides on it: the view, the site's facts
    (None: every GPU node is eligible), the ranking, and Slurm's running jobs as a placement
    that plans around them sees them (PlacementService.observe_running)."""

    view: ClusterView
    site: SiteView | None
    ranking: Ranking
    running: list[JobRequest]


def facts_of(engine: Engine, book: Reservations, seen: Seen, running: bool = True) -> Facts:
    """`seen` less the reservations in `book` (`running`: with the running jobs, and the
    promised ones, when the placement plans around them; False: none, for an answer that
    cannot use them)."""
    view = seen.view
    return Facts(view, seen.site, book, book.index(view), seen.ranking, book.promised(),
                 planning_running(engine, book, seen) if running else ())


def planning_running(engine: Engine, book: Reservations, seen: Seen) -> list[JobRequest]:
    """The running jobs a placement that plans around them sees: Slurm's and the jobs `book`
    promised GPUs to that Slurm has not started yet, each ending at its limit (none for a
    placement that does not plan around them)."""
    return book.with_running(seen.running) if engine.policy.traits.plans_around_running else []


Found = tuple[tuple[int, ...], NodeGroup]


def place_eligible(engine: Engine, where: Where, facts: Facts, job: JobRequest, eligibility: Eligibility,
                   exclusive: bool, now: float, running: Sequence[JobRequest] = ()) -> Found | None:
    """The engine's answer for a new job on the nodes it may use: one answer per node group
    (partition), the one whose slowest GPU is fastest. The unrestricted case (every node)
    goes through the shared index, or, given the `running` jobs (a placement that plans
    around them: it may rather wait for one to end), through a cycle over them and the job
    (Engine.place_behind); a restricted one gets the view narrowed to its nodes."""
    index = facts.shape_index
    sf = facts.ranking.sf(job.perf_class)
    best: tuple[float, tuple[int, ...], NodeGroup] | None = None
    for group in eligibility.groups:
        allowed = where.allowed_nodes(facts.view, group, index.free, exclusive)
        if allowed is not None and not allowed:
            continue
        if allowed is None and running and not exclusive:
            gpus = engine.place_behind(job, (), facts.available, facts.ranking, now, running)
        else:  # the index is the free set; narrowed, it skips the nodes the job may not use
            gpus = engine.place_new(job, facts.view, facts.ranking, now, shape_index=index.narrowed(allowed))
        if gpus is None:
            continue
        worst = max(sf[g] for g in gpus)
        if best is None or worst < best[0]:
            best = (worst, tuple(gpus), group)
    return None if best is None else (best[1], best[2])


def place_behind_held(engine: Engine, where: Where, facts: Facts, job: JobRequest, eligibility: Eligibility,
                      exclusive: bool, now: float, waiting: Sequence[JobRequest] | None) -> Found | None:
    """A new job while older PAL jobs are held: placed now only where the cycle would start
    it now (Engine.place_behind over the held jobs and it), else None (it is held too).
    Only when pald knows every held job as the engine sees it (`waiting`: the last cycle's
    waiting jobs and the deferrals that cycle did not plan; None: not all known) and the new
    job, like them, may use every node: anything else is held (the cycle decides it)."""
    if waiting is None or exclusive or len(eligibility.groups) != 1:
        return None
    group = eligibility.groups[0]
    if where.allowed_nodes(facts.view, group, frozenset(), False) is not None:
        return None
    if len(waiting) > engine.settings.submit_backfill_max:  # a plan too long for the hook
        return None
    gpus = engine.place_behind(job, waiting, facts.available, facts.ranking, now, facts.running)
    return None if gpus is None else (tuple(gpus), group)


@dataclass(frozen=True)
class Submitted:
    """The submit path's decision. DEFER: `queue` says whether the job waits in pald's held
    queue (`queued`: as the engine sees it, or None). PLACE: the GPUs to reserve, the choice
    to write, the exact slots (`gres`, None: Slurm picks the slots on the nodes)."""

    decision: DecisionKind
    reason: str
    warning: str | None = None  # replaces the intake's warning for the user (None: keep it)
    queue: bool = False
    queued: JobRequest | None = None
    gpus: tuple[int, ...] = ()
    choice: ShapeChoice | None = None
    partition: str | None = None
    gres: str | None = None


def decide(engine: Engine, where: Where, facts: Facts, got: Intake, mode: str, now: float, held: bool,
           waiting: Sequence[JobRequest] | None, crowded: bool) -> Submitted:
    """Place, defer or pass the job `got` at submit. `mode`: auto / now / defer; `held`:
    older PAL jobs are held (`waiting`: them as the engine sees them, None: not all known);
    `crowded`: its user has as many placements in flight as pald promises one user."""
    shape, restrictions, view = got.shape, got.restrictions, facts.view
    eligibility = where.eligibility(restrictions, view, facts.site, now, facts.promised)
    if eligibility.passed and refused_input(eligibility.passed):
        return Submitted(DecisionKind.PASS, eligibility.passed,
                         warning="PAL leaves this job to Slurm: --constraint over its caps")
    if eligibility.passed:
        return Submitted(DecisionKind.PASS, eligibility.passed)
    if shape.per_node and shape.per_node > view.max_gpus_per_node:
        return Submitted(DecisionKind.PASS, "too_many_gpus_per_node")
    if shape.total > view.size:
        return Submitted(DecisionKind.PASS, "bigger_than_cluster")
    if got.deferred:
        return Submitted(DecisionKind.DEFER, got.deferred, queue=True)
    if facts.site is not None and multi_node_in_blocks(facts.site, restrictions):
        return Submitted(DecisionKind.DEFER, BLOCK_DEFER, queue=True)
    if mode == "defer":
        return Submitted(DecisionKind.DEFER, "asked", queue=True)
    job = got.request
    if mode == "auto" and held:  # older PAL jobs wait: backfill, or wait with them
        found = place_behind_held(engine, where, facts, job, eligibility, restrictions.exclusive, now, waiting)
        if found is None:
            return Submitted(DecisionKind.DEFER, "queued", queue=True, queued=job)
    else:  # `now` asks for GPUs now: no waiting for a running job's end
        found = place_eligible(engine, where, facts, job, eligibility, restrictions.exclusive, now,
                               facts.running if mode == "auto" else ())
    if found is None:
        if mode == "now":
            return Submitted(DecisionKind.PASS, "no_room")
        return Submitted(DecisionKind.DEFER, "no_room", queue=True, queued=job)
    if crowded:
        # a fair share of promises: a user with this many placements Slurm has not shown
        # yet (a burst, or a loop of submissions Slurm rejects after the hook) is promised
        # no more GPUs until a read shows them. The job waits in pald's queue, placed by
        # the next cycle once Slurm shows it (a rejected one never is). It is counted as
        # held only from that read on, and is not in the submit path's plan: until then
        # nobody else's job waits behind it (a job submitted meanwhile may start first,
        # for at most one read). `now` jobs pass.
        return Submitted(DecisionKind.PASS if mode == "now" else DecisionKind.DEFER, "user_in_flight")
    gpus, group = found
    choice = choice_of(gpus, view)
    bound, why = vetted(facts.site, choice)
    if bound is None:  # Slurm may not have what the view says: the job runs as submitted
        return Submitted(DecisionKind.PASS, f"doubt:{why}")
    gpus, choice = as_slurm_takes(view, facts.shape_index.free, job, gpus, choice, bound)
    gres = None
    if bound is Binding.SLOTS and shape.is_per_node and choice.same_slots_everywhere():
        gres = tres_per_node(next(iter(choice.nodes.values())))
    return Submitted(DecisionKind.PLACE, engine.settings.placement, gpus=gpus, choice=choice,
                     partition=group.partition, gres=gres)


def place_and_book(engine: Engine, where: Where, book: Reservations, seen: Seen, got: Intake, mode: str, now: float,
                   held: bool, waiting: Sequence[JobRequest] | None, user: int) -> Submitted:
    """`decide` for the job `got` submitted by `user` on `seen` less `book`'s reservations, a
    placement booked in `book` under the job's key before this returns. The running jobs
    matter only to an `auto` job placed now, or behind the held jobs pald knows."""
    facts = facts_of(engine, book, seen, running=mode == "auto" and (not held or waiting is not None))
    d = decide(engine, where, facts, got, mode, now, held, waiting, book.crowded(user))
    if d.decision is DecisionKind.PLACE and d.choice is not None:
        # a per-node job answered without its slots: Slurm takes the lowest free ones on its nodes
        book.reserve(str(got.key), d.gpus, now, got.restrictions, d.choice.nodes,
                     slurm_picks=got.shape.is_per_node and d.gres is None, request=got.request, user=user)
    return d
