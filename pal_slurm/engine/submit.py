"""The submit path's decision: one call from the hook's job (an `Intake`) to place, defer or
pass, on the nodes it may use. Pure: pald's service hands it the view, the reservations' free
GPUs and the held jobs, and keeps the reservation it answers with.

Why here: the service keeps the state (view, reservations, held queue) and the engine
decides, so a reader follows one call from the service into the decision and back, in the
order the answer is built: where the job may run (policy/eligibility, memoised per Slurm
read in `Where`), its size against the cluster, its mode (`defer`, `now`, `auto` behind held
jobs), the placement (one answer per node group, the one whose slowest GPU is fastest),
the check that Slurm has what it names (engine/choice_check), and the GPUs Slurm will take.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping, NamedTuple, Sequence

from pal_slurm.engine.choice_check import Binding, vet
from pal_slurm.engine.cycle import Engine
from pal_slurm.intake.job import Intake
from pal_slurm.intake.refusals import refused_input
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model import ClusterView, DecisionKind, JobRequest
from pal_slurm.model.site import SiteView
from pal_slurm.policy.eligibility import Eligibility, NodeGroup, eligible_nodes, short_after_promises, without
from pal_slurm.model.shape import JobShape
from pal_slurm.policy.shapes import ShapeChoice, ShapeIndex, choice_of, shape_of, slurm_picks, slurm_picks_slots
from pal_slurm.ranking import Ranking
from pal_slurm.slurm.gres import gres_update_spec, tres_per_node

MAX_ELIGIBILITY_MEMO = 1024  # distinct restrictions memoised per Slurm read (they hold user text)

Promised = Mapping[str, tuple[int, int]]  # node -> (CPUs, memory MB) promised, not started yet


@dataclass
class Where:
    """Where jobs may run on one Slurm read (policy/eligibility), memoised: most jobs share
    their restrictions. The owner clears it when a read changes the view (`view_changed`) or
    the site (`site_changed`)."""

    _eligibility: dict[JobRestrictions, Eligibility] = field(default_factory=dict)  # per site read
    _any: dict[None, Eligibility] = field(default_factory=dict)  # no site: every node, per view
    _allowed: dict[NodeGroup, frozenset[int] | None] = field(default_factory=dict)  # per read

    def view_changed(self) -> None:
        self._allowed.clear()  # node indices may change meaning
        self._any.clear()

    def site_changed(self) -> None:
        self._eligibility.clear()
        self._allowed.clear()

    def eligibility(self, job: JobRestrictions, view: ClusterView | None, site: SiteView | None, now: float,
                    promised: Promised) -> Eligibility:
        """The nodes `job` may use, less those short of its CPUs/memory after `promised`."""
        if site is None:  # every GPU node (one group, made once per Slurm read)
            if None not in self._any:
                names = frozenset(n.name for n in view.nodes) if view else frozenset()
                self._any[None] = Eligibility((NodeGroup(None, names, names),))
            return self._any[None]
        found = self._eligibility.get(job)
        if found is None:
            found = eligible_nodes(job, site, now)
            if len(self._eligibility) < MAX_ELIGIBILITY_MEMO:  # a burst of distinct jobs is not kept
                self._eligibility[job] = found
        return without(found, short_after_promises(job, site, promised))

    def allowed_nodes(self, view: ClusterView, group: NodeGroup, free: Collection[int],
                      exclusive: bool = False) -> frozenset[int] | None:
        """Node indices of `group` that fit now (None: every node); exclusive jobs only get
        nodes whose GPUs are all in `free`."""
        nodes = view.nodes
        if exclusive:
            return frozenset(n.index for n in nodes if n.name in group.fits_now and n.gpu_ids
                             and all(g in free for g in n.gpu_ids))
        if group not in self._allowed:
            everywhere = len(group.fits_now) >= len(nodes) and all(n.name in group.fits_now for n in nodes)
            self._allowed[group] = None if everywhere else frozenset(
                n.index for n in nodes if n.name in group.fits_now)
        return self._allowed[group]


def held_group(where: Where, view: ClusterView, site: SiteView | None, restrictions: JobRestrictions, now: float,
               promised: Promised) -> NodeGroup | None | str:
    """Where a held job may run, for the cycle: its one node group when that is every node
    and the job shares nodes, so it joins the shared engine cycle; None when it is placed
    after it, on its own nodes; or the reason it goes to Slurm untouched."""
    eligibility = where.eligibility(restrictions, view, site, now, promised)
    if eligibility.passed:  # pald cannot judge where it may run: Slurm places it
        return eligibility.passed
    group = eligibility.groups[0] if len(eligibility.groups) == 1 else None
    if group is None or restrictions.exclusive or where.allowed_nodes(view, group, frozenset(), False) is not None:
        group = None
    return group


def fits_after_promises(site: SiteView | None, nodes: Iterable[str], job: JobRestrictions, promised: Promised) -> bool:
    """Whether every node of a choice still has the job's CPUs and memory, counting what
    earlier decisions promised (the cycle places several jobs before any starts)."""
    if site is None:
        return True
    return not (set(nodes) & short_after_promises(job, site, promised))


def vetted(site: SiteView | None, choice: ShapeChoice) -> tuple[Binding | None, str]:
    """How `choice` can be written into a job (choice_check.Binding), or (None, why) when
    Slurm might not have what it names (checked against the last Slurm read's node facts):
    the caller passes then. Without a site view (tests, the simulator) the view is trusted."""
    return (Binding.SLOTS, "") if site is None else vet(choice.nodes, site.nodes)


class Facts(NamedTuple):
    """What the service knows when a job is asked about: its last Slurm read less its
    reservations, and the jobs it plans around."""

    view: ClusterView
    site: SiteView | None
    available: ClusterView  # the view with reserved GPUs taken out
    shape_index: ShapeIndex  # the same free GPUs, indexed
    ranking: Ranking
    promised: Promised
    running: Sequence[JobRequest]  # the running jobs a placement that plans around them sees


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


def as_slurm_takes(view: ClusterView, free: Collection[int], job: JobRequest, gpus: Sequence[int],
                   choice: ShapeChoice, bound: Binding) -> tuple[tuple[int, ...], ShapeChoice]:
    """On nodes that do not type their slots pald pins only the nodes, and Slurm takes the
    lowest free slots there (of `free`): those are the job's (the engine already did so where
    the slots differ between nodes; policy.shapes.slurm_picks_slots)."""
    if bound is Binding.SLOTS or not slurm_picks_slots(job, gpus, view, binds_slots=False):
        return tuple(gpus), choice
    picked = slurm_picks(gpus, view, free)
    return picked, choice_of(picked, view)


def gres_for_release(shape: JobShape, choice: ShapeChoice, binds_slots: bool = True) -> str | None:
    """scontrol Gres= for a released job: the exact slots when they are the same on every node
    (and the site types every GPU by slot), else the per-node count; None for a total request
    or nodes without slot types (the job keeps its own request, pinned to nodes)."""
    if not shape.is_per_node or not binds_slots:
        return None
    if choice.same_slots_everywhere():
        return gres_update_spec(next(iter(choice.nodes.values())))
    return f"gpu:{shape.per_node}"


class Released(NamedTuple):
    """A held job's release as the cycle writes it: the GPUs Slurm will take, the choice, the
    scontrol Gres= value (None: the job keeps its own) and whether Slurm picks the slots on
    the nodes (the reservation then follows what each read shows free)."""

    gpus: tuple[int, ...]
    choice: ShapeChoice
    gres_spec: str | None
    slurm_picks: bool


def release_on(view: ClusterView, site: SiteView | None, free: Collection[int], job: JobRequest,
               gpus: Sequence[int], restrictions: JobRestrictions, promised: Promised) -> Released | str | None:
    """The release of a held job the engine placed on `gpus`: None when its nodes no longer
    have its CPUs/memory after this cycle's earlier releases (the engine places on GPUs
    alone: it waits for the next cycle); a `doubt:` reason when Slurm may not have what the
    view says (it is released as submitted)."""
    choice = choice_of(gpus, view)
    if not fits_after_promises(site, choice.nodes, restrictions, promised):
        return None
    bound, why = vetted(site, choice)
    if bound is None:
        return f"doubt:{why}"
    picked, choice = as_slurm_takes(view, free, job, gpus, choice, bound)
    shape = shape_of(job)
    exact = bound is Binding.SLOTS and choice.same_slots_everywhere()  # else Slurm takes the lowest free
    return Released(picked, choice, gres_for_release(shape, choice, bound is Binding.SLOTS),
                    shape.is_per_node and not exact)


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
    gpus, choice = as_slurm_takes(view, facts.available.free, job, gpus, choice, bound)
    gres = None
    if bound is Binding.SLOTS and shape.is_per_node and choice.same_slots_everywhere():
        gres = tres_per_node(next(iter(choice.nodes.values())))
    return Submitted(DecisionKind.PLACE, engine.settings.placement, gpus=gpus, choice=choice,
                     partition=group.partition, gres=gres)
