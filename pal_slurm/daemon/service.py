"""pald's decision state and its two answers, both through the engine. No I/O, no clock of its own.

It holds the last cluster view read from Slurm, the ranking snapshot, the application -> class
map, and *reservations*: GPUs promised to a job that Slurm does not show as busy yet (the hook
answers before the job exists; a released job starts a moment later). Two decisions therefore
never get the same GPUs. Reservations end when a later Slurm view shows the job started (or its
GPUs busy), or after a TTL (a job that never started must not block GPUs for ever).

- `place` (the submit hook): a new job is placed now when it fits and no older PAL job is held
  (so the queue order is kept); otherwise it is deferred (the hook holds it and the cycle
  releases it later), or, with `mode=now`, passed to Slurm untouched.
- `plan_cycle` (every cycle): the held jobs through the engine's cycle; the GPUs of every
  release are reserved here, before pald acts on Slurm.

Where a job may run (partitions, features, exclusions, reservations, CPUs/memory: the site
view and policy/eligibility) restricts the view the engine places on: one node group per
partition the job may use, the best answer over them. A job pald cannot judge passes.

The object is not thread-safe on purpose: it has one owner (pald holds its lock around every
call), so the state is never seen half-changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Iterable, Mapping, Sequence

from pal_slurm.daemon.choice_check import Binding, vet
from pal_slurm.daemon import requeue
from pal_slurm.daemon.held_queue import HeldQueue
from pal_slurm.daemon.protocol import PlaceReply, PlaceRequest
from pal_slurm.intake.job import DEFAULT_NET, Pass, class_of, from_hook, from_queue, running_class
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.model import ClusterView, DecisionKind, JobRequest, PlannedStart
from pal_slurm.model.decision import JobId
from pal_slurm.model.site_rules import SiteRules
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.shape import JobShape
from pal_slurm.model.priority import priority as multifactor_priority
from pal_slurm.model.site import SiteView
from pal_slurm.policy.eligibility import (
    Eligibility,
    NodeGroup,
    eligible_nodes,
    short_after_promises,
    without,
)
from pal_slurm.intake.refusals import refused_input
from pal_slurm.policy.registry import SLURM_PRIORITY_QUEUE
from pal_slurm.policy.shapes import ShapeChoice, ShapeIndex, choice_of, shape_of, slurm_picks, slurm_picks_slots
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.priority import SitePriorityRead, priority_job
from pal_slurm.slurm.readers import JobInfo
from pal_slurm.slurm.gres import gres_update_spec, tres_per_node

MODES = ("auto", "now", "defer")


# the job states whose GPUs a placement planning around running jobs sees free at the job's
# limit (PlacementService.observe_running); the view counts SUSPENDED GPUs busy too, with no end
HOLDS_GPUS_TO_AN_END = frozenset({"RUNNING", "COMPLETING", "CONFIGURING"})
# GPUs Slurm counts allocated with no job in squeue holding them (a job that has just ended,
# slurm.readers.unheld_slots) are seen freeing this many seconds after each read, for as long
# as they have been so for at most UNHELD_WINDOW_S; after that, busy with no end (what a
# job pald cannot see holds, e.g. another user's under PrivateData=jobs, never frees soon)
UNHELD_FREE_IN_S = 1.0
UNHELD_WINDOW_S = 5.0


@dataclass(frozen=True)
class ServiceSettings:
    placement: str = "pal"  # registered placement, for every job shape
    queue: str = "fifo"  # registered queue order of the held jobs
    locality_penalty: float = 1.7
    backfill: bool = False  # held jobs: later jobs may pass one that does not fit
    delay_timers: Mapping[tuple[str, str], float] | None = None  # network-aware placements' delay timers (None: theirs)
    reserve_after_s: float | None = None  # backfilling placements: a held job's wait before it reserves (None: theirs)
    starvation_bound_s: float | None = None  # placements with a starvation bound: the bound (None: theirs)
    default_class: str = "A"  # unknown applications: the most variability-sensitive class
    default_mode: str = "auto"  # auto: place if it fits now, else defer
    reservation_ttl_s: float = 30.0
    submit_grace_s: float = 2.0  # see observe_cluster
    user_reservations_max: int = 8  # placements per user no read has shown yet (place: over it, pass)
    max_view_age_s: float = float("inf")  # pass instead of placing from an older Slurm view
    site_rules: SiteRules = SiteRules()  # the class and net of a held job, as at its submission

    def engine(self) -> EngineSettings:
        return EngineSettings(placement=self.placement, queue=self.queue, locality_penalty=self.locality_penalty,
                              running_jobs_move=False, backfill=self.backfill, delay_timers=self.delay_timers,
                              reserve_after_s=self.reserve_after_s, starvation_bound_s=self.starvation_bound_s)


# ---- Slurm's view of a job -> the engine's --------------------------------------------------
MAX_ELIGIBILITY_MEMO = 1024  # distinct restrictions memoised per Slurm read (they hold user text)


def gres_for_release(shape: JobShape, choice: ShapeChoice, binds_slots: bool = True) -> str | None:
    """scontrol Gres= for a released job: the exact slots when they are the same on every node
    (and the site types every GPU by slot), else the per-node count; None for a total request
    or nodes without slot types (the job keeps its own request, pinned to nodes)."""
    if not shape.is_per_node or not binds_slots:
        return None
    if choice.same_slots_everywhere():
        return gres_update_spec(next(iter(choice.nodes.values())))
    return f"gpu:{shape.per_node}"


def ranking_of(view: ClusterView, snapshot: RankingSnapshot | None) -> Ranking:
    """The policies' ranking on `view`: the store's snapshot, or uniform before the first."""
    return Ranking.uniform(view.size, version=0) if snapshot is None else snapshot.to_ranking(view)


@dataclass(frozen=True)
class Release:
    job_id: int | str  # a job id, or ``A_I``: one element of an array's pending record
    perf_class: str
    choice: ShapeChoice | None  # None: release untouched (fail open)
    gres_spec: str | None  # scontrol Gres= value, or None to keep the job's own
    reason: str
    request: JobRequest | None = None  # the engine's view of the job (None when released untouched)
    partition: str | None = None  # the one partition to set (a job that asked for several)

    @property
    def key(self) -> str:
        return f"job:{self.job_id}"


@dataclass
class CycleResult:
    releases: list[Release] = field(default_factory=list)
    waiting: int = 0  # held jobs the plan leaves waiting


@dataclass
class Reservation:
    key: str
    gpu_ids: frozenset[int]
    made_at: float
    promised: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # node -> (CPUs, memory MB)
    # pald pinned only the nodes: Slurm takes the lowest slots free there when it starts the job,
    # so the reservation follows what each read shows free (PlacementService._follow_slurm_picks)
    slurm_picks: bool = False
    # the job as the engine planned it (its time limit as what is left): until Slurm starts it, a
    # placement that plans around running jobs sees these GPUs free at its end, not never
    request: JobRequest | None = None
    user: int | None = None  # the submitting user's uid (placements at submit)
    seen: bool = False  # a Slurm read has shown its job (in any state)

    def as_running(self, busy: Collection[int] = ()) -> JobRequest | None:
        """The promised job as if it ran on its GPUs (less `busy`: GPUs a running job holds)
        from when they were promised; None: no request known, or nothing left. Why: GPUs
        missing from the free set with no end in sight made a finish-aware placement see no leaf
        switch ever free for a large job while each leaf held one promised node, and take a
        spread placement 7.8x slower (the replay model, workload-1)."""
        if self.request is None:
            return None
        on = sorted(self.gpu_ids.difference(busy))
        return self.request.started_on(on, self.made_at) if on else None


@dataclass
class PlacementService:
    settings: ServiceSettings = field(default_factory=ServiceSettings)
    class_map: AppClassMap = field(default_factory=AppClassMap)
    view: ClusterView | None = None
    site: SiteView | None = None  # partitions, features, CPUs/memory; None: every GPU node is eligible
    # what Slurm's multifactor priority is computed from (queue order `slurm`); None: not read
    site_priority: SitePriorityRead | None = None
    view_time: float = float("-inf")
    snapshot: RankingSnapshot | None = None  # the store's latest, or None
    ranking: Ranking | None = None
    queue: HeldQueue = field(default_factory=HeldQueue)  # the held jobs, as the submit path sees them
    # the running jobs as the last Slurm read showed them, for a placement that plans around
    # them (Traits.plans_around_running; else empty): their time limit less their run time left
    running: list[JobRequest] = field(default_factory=list)
    # (node, slot) -> when a read first showed it allocated with no job holding it (observe_running)
    unheld_since: dict[tuple[str, int], float] = field(default_factory=dict)
    reservations: dict[str, Reservation] = field(default_factory=dict)
    # the last cycle's held jobs that wait with a backfill reservation: job -> when and where
    # the engine plans to start them, and the job's class (what an admin asks about a job
    # that stays held)
    planned: dict[JobId, tuple[PlannedStart, str]] = field(default_factory=dict)
    engine: Engine = field(init=False)
    _available: ClusterView | None = None  # view minus reservations (cached until either changes)
    _shape_index: ShapeIndex | None = None  # the free GPUs (view minus reservations), indexed
    _eligibility: dict[JobRestrictions, Eligibility] = field(default_factory=dict)  # per Slurm read
    _eligibility_any: dict[None, Eligibility] = field(default_factory=dict)  # no site: per Slurm read
    _allowed: dict[NodeGroup, frozenset[int] | None] = field(default_factory=dict)  # per Slurm read

    def __post_init__(self) -> None:
        self.engine = Engine(self.settings.engine(), rng=random.Random(0))

    # ---- inputs ------------------------------------------------------------------------
    def observe_cluster(self, view: ClusterView, now: float, held_jobs: int | None = None,
                        started: Collection[str] = frozenset(), in_queue: Collection[str] | None = None,
                        queue_read_at: float | None = None) -> None:
        """A fresh Slurm view (taken at `now`): drop reservations it confirms or that expired.

        `started`: reservation keys whose job Slurm shows started or finished (a short job can
        start and end between two views, so "its GPUs look busy" alone is not enough).

        `in_queue`: the reservation keys of every job the read's squeue shows (any state), and
        `queue_read_at` when that squeue was started. A promise made `submit_grace_s` or more
        before the read started whose job the read does not show never arrived (Slurm rejected
        the submission after the hook answered: someone else's reservation, a wrong account,
        a user at MaxSubmitJobs) and is dropped now, not after the TTL. Why the grace: the hook
        runs under slurmctld's job read lock and the job is created under its write lock
        after it, so a squeue started just after the answer may come before the job; the grace
        covers that step on a busy controller. A job slower still is not lost: the read that
        shows it rebuilds its reservation from its pin (pins.unreserved_pins)."""
        layout_changed = self.view is None or [(g.node, g.slot) for g in self.view.gpus] != [
            (g.node, g.slot) for g in view.gpus
        ]
        if layout_changed and self.view is not None:
            self.reservations.clear()  # gpu ids changed meaning
        self.view = view
        self.view_time = now
        self._allowed.clear()  # node indices may change meaning
        self._eligibility_any.clear()
        if layout_changed or self.ranking is None:
            self.ranking = ranking_of(view, self.snapshot)
        for key, r in list(self.reservations.items()):
            confirmed = key in started or (r.made_at < now and not (r.gpu_ids & view.free))
            never_came = (in_queue is not None and queue_read_at is not None and key not in in_queue
                          and r.made_at + self.settings.submit_grace_s <= queue_read_at)
            if confirmed or never_came or now - r.made_at > self.settings.reservation_ttl_s:
                del self.reservations[key]
            elif in_queue is not None and key in in_queue and not r.seen:
                self.reservations[key] = replace(r, seen=True)
        self._follow_slurm_picks(view)
        if held_jobs is not None:
            self.queue.observe_read(held_jobs, now)
        self._changed()

    def _follow_slurm_picks(self, view: ClusterView) -> None:
        """Move each not yet started job whose slots Slurm picks onto the lowest slots free on
        its nodes now (in the order they were promised, around the exact reservations).

        Why: pald reserved the lowest slots its view showed free, but a view is up to a cycle
        old; a slot below them that frees before Slurm's pass is the one Slurm gives the job,
        and pald had promised it to the next job, which then waited behind it (a lab replay of
        workload-4: a 1-GPU job waited two scheduling passes, 1600 trace s, on a slot Slurm had
        given a 6-GPU job; at a site it waits for that job's whole run)."""
        if not any(r.slurm_picks for r in self.reservations.values()):
            return
        taken = set().union(*[r.gpu_ids for r in self.reservations.values() if not r.slurm_picks])
        for key, r in sorted(self.reservations.items(), key=lambda kv: kv[1].made_at):
            if not r.slurm_picks:
                continue
            free = view.free - taken
            picked: set[int] = set()
            for node, mine in _by_node(r.gpu_ids, view).items():
                lowest = [g for g in view.nodes[node].gpu_ids if g in free][:len(mine)]
                picked.update(lowest if len(lowest) == len(mine) else mine)  # not startable yet: as promised
            taken |= picked
            if picked != r.gpu_ids:
                self.reservations[key] = replace(r, gpu_ids=frozenset(picked))

    def observe_running(self, jobs: Iterable[JobInfo], now: float, unheld: Mapping[str, Iterable[int]] | None = None) -> None:
        """The running jobs (slurm JobInfo records, from the same read as the view) as the
        engine sees them, for a placement that plans around them: on the GPUs Slurm shows them
        on, each with its time limit less the time it has run as what is left (pald knows
        nothing closer; a job without a limit counts as ending now), and the network
        sensitivity its comment names (`medium` for any other comment).

        A job Slurm shows COMPLETING (its epilog runs) or CONFIGURING (its nodes boot) holds
        its GPUs in the view, so it counts here the same way. Why: a COMPLETING job's GPUs were
        busy with no end in sight, so a 32-GPU job that could wait a minute for eight fast
        nodes saw one of them never free and was released at once onto three slower ones
        (a lab replay of workload-4 at 150, seed 2: its slowest GPU 1.113x instead of 0.998x's
        bin, the replay's makespan 1.011 of stock's where the model, whose pald sees an ended
        job running until its next read, said 0.941).

        `unheld`: per node, the GPU slots Slurm counts allocated that no job in the read holds
        (`slurm.readers.unheld_slots`: a job that ended between the two reads, or whose
        cleanup Slurm has not finished). Each node's count as one job ending
        `UNHELD_FREE_IN_S` after the read, while they have been unheld for at most
        `UNHELD_WINDOW_S` (longer: something pald cannot see holds them). Why: with no job
        they were busy with no end in sight, so a 12-GPU GPT-2 job waiting for a leaf's last
        two nodes, freed by a job that had ended in the same second, saw them never free and
        was spread over two leaf switches at once, 7.8x slower for 40 trace hours (a lab
        replay of workload-1 at 150, seed 0: makespan 1.261 of stock's)."""
        self.running = []
        if self.view is None or not self.engine.policy.traits.plans_around_running:
            return
        where = self.view.gpu_by_location()
        seen: dict[str, tuple[str, str, str]] = {}  # comment -> (app, class, sensitivity)
        for j in jobs:
            if j.state not in HOLDS_GPUS_TO_AN_END or not j.gpu_slots:
                continue
            gpus = tuple(where[(node, slot)] for node, slots in j.gpu_slots.items() for slot in slots
                         if (node, slot) in where)
            if not gpus:
                continue
            if j.comment not in seen:
                seen[j.comment] = running_class(j.comment, self.class_map)
            app, perf_class, net = seen[j.comment]
            started = float(j.start_time or now)
            left = max(0.0, float(j.time_limit_s) - (now - started)) if j.time_limit_s else 0.0
            self.running.append(JobRequest(job_id=j.job_id, num_gpus=len(gpus), perf_class=perf_class, app=app,
                                           submit_time=float(j.submit_time or started), waiting_since=started,
                                           running_on=gpus,
                                           remaining_time=left, net_sensitivity=net))
        since = {(node, slot): self.unheld_since.get((node, slot), now)
                 for node, slots in (unheld or {}).items() for slot in slots}
        self.unheld_since = since
        for node, slots in sorted((unheld or {}).items()):
            gpus = tuple(sorted(where[(node, slot)] for slot in slots
                                if (node, slot) in where and now - since[(node, slot)] <= UNHELD_WINDOW_S))
            if gpus:
                self.running.append(JobRequest(job_id=f"ended-on-{node}", num_gpus=len(gpus),
                                               perf_class=self.settings.default_class, submit_time=now,
                                               waiting_since=now, running_on=gpus, remaining_time=UNHELD_FREE_IN_S,
                                               net_sensitivity=DEFAULT_NET))

    def observe_site(self, site: SiteView) -> None:
        """Partitions, features, reservations and free CPUs/memory from the same Slurm read."""
        self.site = site
        self._eligibility.clear()
        self._allowed.clear()

    def observe_priority(self, read: SitePriorityRead | None) -> None:
        """The inputs of Slurm's multifactor priority (slurm.priority); None: the site does
        not run priority/multifactor, and every held job scores 0 (submit order)."""
        self.site_priority = read

    def slurm_priority(self, job: JobInfo, now: float) -> float:
        """The priority Slurm's multifactor plugin would give `job` at `now` were it not held
        (a held job shows 0: docs/decisions/site-priority.md); 0 without the site's inputs."""
        read = self.site_priority
        if read is None:
            return 0.0
        return float(multifactor_priority(priority_job(job, read.partitions), read.site, now))

    def set_snapshot(self, snapshot: RankingSnapshot | None) -> None:
        self.snapshot = snapshot
        if self.view is not None:
            self.ranking = ranking_of(self.view, snapshot)
        self._changed()

    def set_class_map(self, mapping: dict[str, str]) -> None:
        self.class_map = AppClassMap(dict(mapping), default=self.settings.default_class)

    def _changed(self) -> None:
        self._available = None
        self._shape_index = None

    @property
    def rank_version(self) -> int:
        return self.ranking.version if self.ranking else 0

    # ---- queries -----------------------------------------------------------------------
    def free_now(self) -> frozenset[int]:
        return self.available().free if self.view is not None else frozenset()

    def planning_running(self) -> list[JobRequest]:
        """The running jobs a placement that plans around them sees: Slurm's (observe_running)
        and the jobs pald promised GPUs to that Slurm has not started yet, each ending at its limit."""
        if not self.engine.policy.traits.plans_around_running:
            return []
        if not self.reservations:  # the hook's common case: nothing more to build
            return self.running
        busy = {g for j in self.running for g in j.running_on}
        started = {j.job_id for j in self.running}
        promised = (r.as_running(busy) for r in self.reservations.values())
        return [*self.running, *(p for p in promised if p is not None and p.job_id not in started)]

    def available(self) -> ClusterView:
        """The view with reserved GPUs taken out: what the engine may place on (built when
        asked, after a change)."""
        assert self.view is not None, "no cluster view yet"
        if self._available is None:
            taken = set().union(*[r.gpu_ids for r in self.reservations.values()])
            self._available = self.view.with_free(self.view.free - taken)
        return self._available

    def resolve_class(self, app: str) -> tuple[str, str | None]:
        """(class, warning for the user or None)."""
        return class_of(self.class_map, app)

    def rack_timers(self) -> dict[str, float]:
        """Seconds a job of each network sensitivity waits for one rack (the placement's delay
        timers, tuned when it is a tuned placement)."""
        timers = self.engine.delay_timers() or self.engine.policy.delay_timers
        return {sens: round(secs, 1) for (sens, level), secs in timers.items() if level == "rack"}

    # ---- where a job may run (policy/eligibility) ---------------------------------------
    def eligibility(self, job: JobRestrictions, now: float) -> Eligibility:
        """The nodes `job` may use. Memoised per Slurm read: most jobs share their restrictions."""
        if self.site is None:  # every GPU node (one group, made once per Slurm read)
            if None not in self._eligibility_any:
                names = frozenset(n.name for n in self.view.nodes) if self.view else frozenset()
                self._eligibility_any[None] = Eligibility((NodeGroup(None, names, names),))
            return self._eligibility_any[None]
        found = self._eligibility.get(job)
        if found is None:
            found = eligible_nodes(job, self.site, now)
            if len(self._eligibility) < MAX_ELIGIBILITY_MEMO:  # a burst of distinct jobs is not kept
                self._eligibility[job] = found
        return without(found, short_after_promises(job, self.site, self.promised()))

    def promised(self) -> dict[str, tuple[int, int]]:
        """CPUs and memory per node promised to jobs Slurm does not show running yet."""
        out: dict[str, tuple[int, int]] = {}
        for r in self.reservations.values():
            for node, (cpus, memory) in r.promised.items():
                had = out.get(node, (0, 0))
                out[node] = (had[0] + cpus, had[1] + memory)
        return out

    def fits_after_promises(self, nodes: Iterable[str], job: JobRestrictions) -> bool:
        """Whether every node of a choice still has the job's CPUs and memory, counting what
        earlier decisions promised (the cycle places several jobs before any starts)."""
        if self.site is None:
            return True
        return not (set(nodes) & short_after_promises(job, self.site, self.promised()))

    def allowed_nodes(self, group: NodeGroup, free: Collection[int], exclusive: bool = False) -> frozenset[int] | None:
        """Node indices of `group` that fit now (None: every node); exclusive jobs only get
        nodes whose GPUs are all in `free`."""
        assert self.view is not None
        nodes = self.view.nodes
        if exclusive:
            return frozenset(n.index for n in nodes if n.name in group.fits_now and n.gpu_ids
                             and all(g in free for g in n.gpu_ids))
        if group not in self._allowed:
            everywhere = len(group.fits_now) >= len(nodes) and all(n.name in group.fits_now for n in nodes)
            self._allowed[group] = None if everywhere else frozenset(
                n.index for n in nodes if n.name in group.fits_now)
        return self._allowed[group]

    def vet(self, choice: ShapeChoice) -> tuple[Binding | None, str]:
        """How `choice` can be written into a job (choice_check.Binding), or (None, why) when
        Slurm might not have what it names (checked against the last Slurm read's node facts):
        the caller passes then. Without a site view (tests, the simulator) the view is trusted."""
        return (Binding.SLOTS, "") if self.site is None else vet(choice.nodes, self.site.nodes)

    def _index(self) -> ShapeIndex:
        if self._shape_index is None:
            self._shape_index = ShapeIndex(self.available())
        return self._shape_index

    def place_eligible(self, job: JobRequest, eligibility: Eligibility, exclusive: bool,
                       now: float, running: Sequence[JobRequest] = ()) -> tuple[tuple[int, ...], NodeGroup] | None:
        """The engine's answer for a new job on the nodes it may use: one answer per node group
        (partition), the one whose slowest GPU is fastest. The unrestricted case (every node)
        goes through the shared index, or, given the `running` jobs (a placement that plans
        around them: it may rather wait for one to end), through a cycle over them and the job
        (Engine.place_behind); a restricted one gets the view narrowed to its nodes."""
        assert self.view is not None and self.ranking is not None
        index = self._index()
        sf = self.ranking.sf(job.perf_class)
        best: tuple[float, tuple[int, ...], NodeGroup] | None = None
        for group in eligibility.groups:
            allowed = self.allowed_nodes(group, index.free, exclusive)
            if allowed is not None and not allowed:
                continue
            if allowed is None and running and not exclusive:
                gpus = self.engine.place_behind(job, (), self.available(), self.ranking, now, running)
            else:  # the index is the free set; narrowed, it skips the nodes the job may not use
                gpus = self.engine.place_new(job, self.view, self.ranking, now, shape_index=index.narrowed(allowed))
            if gpus is None:
                continue
            worst = max(sf[g] for g in gpus)
            if best is None or worst < best[0]:
                best = (worst, tuple(gpus), group)
        return None if best is None else (best[1], best[2])

    def place_behind_held(self, job: JobRequest, eligibility: Eligibility, exclusive: bool,
                          now: float) -> tuple[tuple[int, ...], NodeGroup] | None:
        """A new job while older PAL jobs are held: placed now only where the cycle would start
        it now (Engine.place_behind over the held jobs and it), else None (it is held too).
        Only when pald knows every held job as the engine sees it (the last cycle's waiting
        jobs and the deferrals that cycle did not plan) and the new job, like them, may use every node: anything
        else is held, as before (the cycle decides it)."""
        assert self.view is not None and self.ranking is not None
        waiting = self.queue.known()  # None: held jobs the submit path does not know (requeued, ...)
        if waiting is None or exclusive or len(eligibility.groups) != 1:
            return None
        group = eligibility.groups[0]
        if self.allowed_nodes(group, frozenset(), False) is not None:
            return None
        if len(waiting) > self.engine.settings.submit_backfill_max:  # a plan too long for the hook
            return None
        gpus = self.engine.place_behind(job, waiting, self.available(), self.ranking, now, self.planning_running())
        return None if gpus is None else (tuple(gpus), group)

    # ---- reservations --------------------------------------------------------------------
    def reserve(self, key: str, gpu_ids: Iterable[int], now: float, job: JobRestrictions | None = None,
                nodes: Iterable[str] = (),
                slurm_picks: bool = False, request: JobRequest | None = None, user: int | None = None) -> None:
        """Promise `gpu_ids` (and, with `job`, its CPUs and memory on each of `nodes`) to `key`;
        `slurm_picks`: pald pinned only the nodes, Slurm picks the slots (they follow each read);
        `request`: the job as the engine planned it (Reservation.as_running); `user`: the
        submitting uid of a placement at submit (in_flight)."""
        promised = {n: (job.cpus_per_node, job.memory_per_node_mb) for n in nodes} if job else {}
        self.reservations[key] = Reservation(key, frozenset(gpu_ids), now, promised, slurm_picks, request, user)
        self._available = None  # rebuilt when asked; the shape index stays in step
        if self._shape_index is not None:
            self._shape_index.take(gpu_ids)

    def in_flight(self, uid: int) -> int:
        """Placements at submit for user `uid` whose job no Slurm read has shown yet."""
        return sum(1 for r in self.reservations.values() if r.user == uid and not r.seen)

    def clear_reservations(self) -> None:
        self.reservations.clear()
        self._changed()

    def unreserve(self, key: str) -> None:
        """A decision that could not be carried out: its GPUs are free again."""
        if self.reservations.pop(key, None) is not None:
            self._changed()

    def retract(self, key: str, decision: DecisionKind) -> None:
        """Undo what `place` did for an answer that will not be used (the hook gave up)."""
        self.unreserve(key)
        if decision is DecisionKind.DEFER:
            self.queue.retract(key)

    # ---- the submit-time answer ----------------------------------------------------------
    def place(self, req: PlaceRequest, now: float, key: str) -> PlaceReply:
        if self.view is None or self.ranking is None:
            return PlaceReply(DecisionKind.PASS, reason="no_cluster_view")
        if now - self.view_time > self.settings.max_view_age_s:
            return PlaceReply(DecisionKind.PASS, reason="stale_view")
        got = from_hook(req.job, req.pal, key, now, self.class_map)
        base: dict[str, Any] = dict(rank=self.rank_version, perf_class=got.perf_class, warning=got.warning)
        if isinstance(got, Pass):
            return PlaceReply(DecisionKind.PASS, reason=got.reason, **base)
        shape, restrictions = got.shape, got.restrictions
        eligibility = self.eligibility(restrictions, now)
        if eligibility.passed and refused_input(eligibility.passed):
            return PlaceReply(DecisionKind.PASS, reason=eligibility.passed,
                              **{**base, "warning": "PAL leaves this job to Slurm: --constraint over its caps"})
        if eligibility.passed:
            return PlaceReply(DecisionKind.PASS, reason=eligibility.passed, **base)
        if shape.per_node and shape.per_node > self.view.max_gpus_per_node:
            return PlaceReply(DecisionKind.PASS, reason="too_many_gpus_per_node", **base)
        if shape.total > self.view.size:
            return PlaceReply(DecisionKind.PASS, reason="bigger_than_cluster", **base)
        mode = req.pal.mode or self.settings.default_mode
        if got.deferred:
            self.queue.defer(key)
            return PlaceReply(DecisionKind.DEFER, reason=got.deferred, **base)
        if mode == "defer":
            self.queue.defer(key)
            return PlaceReply(DecisionKind.DEFER, reason="asked", **base)
        job = got.request
        if mode == "auto" and self.queue.held_jobs > 0:  # older PAL jobs wait: backfill, or wait with them
            found = self.place_behind_held(job, eligibility, restrictions.exclusive, now)
            if found is None:
                self.queue.defer(key, job)
                return PlaceReply(DecisionKind.DEFER, reason="queued", **base)
        else:  # `now` asks for GPUs now: no waiting for a running job's end
            found = self.place_eligible(job, eligibility, restrictions.exclusive, now,
                                        self.planning_running() if mode == "auto" else ())
        if found is None:
            if mode == "now":
                return PlaceReply(DecisionKind.PASS, reason="no_room", **base)
            self.queue.defer(key, job)
            return PlaceReply(DecisionKind.DEFER, reason="no_room", **base)
        if self.in_flight(req.job.uid) >= self.settings.user_reservations_max:
            # a fair share of promises: a user with this many placements Slurm has not shown
            # yet (a burst, or a loop of submissions Slurm rejects after the hook) is promised
            # no more GPUs until a read shows them. The job waits in pald's queue, placed by
            # the next cycle once Slurm shows it (a rejected one never is). It is counted as
            # held only from that read on, and is not in the submit path's plan: until then
            # nobody else's job waits behind it (a job submitted meanwhile may start first,
            # for at most one read). `now` jobs pass.
            if mode == "now":
                return PlaceReply(DecisionKind.PASS, reason="user_in_flight", **base)
            return PlaceReply(DecisionKind.DEFER, reason="user_in_flight", **base)
        gpus, group = found
        choice = choice_of(gpus, self.view)
        bound, why = self.vet(choice)
        if bound is None:  # Slurm may not have what the view says: the job runs as submitted
            return PlaceReply(DecisionKind.PASS, reason=f"doubt:{why}", **base)
        gpus, choice = self._as_slurm_takes(job, gpus, choice, bound)
        gres = None
        if bound is Binding.SLOTS and shape.is_per_node and choice.same_slots_everywhere():
            gres = tres_per_node(next(iter(choice.nodes.values())))
        # a per-node job answered without its slots: Slurm takes the lowest free ones on its nodes
        self.reserve(key, gpus, now, restrictions, choice.nodes, slurm_picks=shape.is_per_node and gres is None,
                     request=job, user=req.job.uid)
        return PlaceReply(DecisionKind.PLACE, reason=self.settings.placement, nodes=choice.nodes, gres=gres,
                          partition=group.partition, site_checked=True, **base)

    # ---- the cycle -------------------------------------------------------------------------
    def plan_cycle(self, held: Sequence[JobInfo], now: float) -> CycleResult:
        """Which held PAL jobs (slurm JobInfo records) to release now, and where: the engine's
        cycle over them. Every release's GPUs are reserved before this returns; the caller
        acts on Slurm and calls `unreserve(release.key)` for a release that failed."""
        out = CycleResult()
        self.planned = {}
        if self.view is None or self.ranking is None:
            return out
        requests: list[JobRequest] = []  # may use every node: one engine cycle over them all
        restricted: list[JobRequest] = []  # placed after, each on its nodes
        groups: dict[int | str, NodeGroup] = {}
        limits: dict[int | str, JobRestrictions] = {}  # where each may run, what it needs per node
        by_id = {}
        not_yet = 0  # requeued jobs in Slurm's requeue delay: planned once they may start
        unexpanded = 0  # array elements beyond what could start now (not planned this cycle)
        # held jobs share few restrictions (the intake hands out one value for equal fields):
        # where each may run is judged once per cycle, found by identity (hashing a job's
        # restrictions costs more than judging them again)
        wheres: dict[int, tuple[JobRestrictions, NodeGroup | None | str]] = {}
        bound: dict[int | str, tuple[int, ...]] = {}  # jobs already bound to slot types
        for j in held:
            if not getattr(j, "unreadable", "") and requeue.not_yet_eligible(j, now):
                not_yet += 1
                continue
            got = from_queue(requeue.placement_record(j), self.class_map, self.settings.site_rules)
            if isinstance(got, Pass):
                out.releases.append(Release(j.job_id, got.perf_class, None, None, got.reason))
                continue
            shape, perf_class, restrictions = got.shape, got.perf_class, got.restrictions
            request = got.request
            if self.settings.queue == SLURM_PRIORITY_QUEUE:
                request = replace(request, site_priority=self.slurm_priority(j, now))
            if id(restrictions) not in wheres:  # the entry holds the value: its id is not reused
                wheres[id(restrictions)] = (restrictions, self._where(restrictions, now))
            group = wheres[id(restrictions)][1]
            if isinstance(group, str):  # eligibility passed it to Slurm
                out.releases.append(Release(j.job_id, perf_class, None, None, group))
                continue
            slots = requeue.bound_slots(j) if shape.is_per_node else None
            if slots is not None:
                group = None  # placed after the shared cycle, on its own slots (_on_bound_slots)
            try:
                every = j.element_refs()
            except SlurmError:
                out.releases.append(Release(j.job_id, perf_class, None, None, "bad_array_tasks"))
                continue
            refs = every[:max(1, len(self.available().free) // max(1, shape.total))]
            unexpanded += len(every) - len(refs)  # an array's later elements wait too
            for ref in refs:  # an array's pending elements: as many as could start now, in order
                req = request if ref == request.job_id else replace(request, job_id=ref)
                by_id[ref], limits[ref] = req, restrictions
                if slots is not None:
                    bound[ref] = slots
                if group is not None:
                    requests.append(req)
                    groups[ref] = group
                else:
                    restricted.append(req)
        launched = 0
        if requests:
            plan = self.engine.decide([*self.planning_running(), *requests], self.available(), self.ranking, now)
            self.planned = {job_id: (p, by_id[job_id].perf_class) for job_id, p in plan.planned.items()
                            if job_id in by_id}
            for job_id, gpus in plan.launch.items():
                launched += self._release(out, by_id[job_id], gpus, groups[job_id], limits[job_id], now)
        for req in self.engine.order_jobs(restricted):
            # in queue order, on what the cycle left (GPUs, and CPUs/memory promised meanwhile);
            # without backfill the first that waits holds the ones behind it
            job = limits[req.job_id]
            found = self.place_eligible(req, self.eligibility(job, now), job.exclusive, now)
            if found is not None and req.job_id in bound:
                found = self._on_bound_slots(req, found, bound[req.job_id], now)
            if found is None or not self._release(out, req, found[0], found[1], job, now):
                if not self.settings.backfill:
                    break
                continue
            launched += 1
        out.waiting = len(requests) + len(restricted) - launched + not_yet + unexpanded
        released = {r.job_id for r in out.releases}
        # the submit path plans behind these; unknown (None) when some held jobs are not in it
        self.queue.planned(None if restricted or not_yet or unexpanded
                           else [r for r in requests if r.job_id not in released], held)
        return out

    def _on_bound_slots(self, req: JobRequest, found: tuple[tuple[int, ...], NodeGroup], slots: tuple[int, ...],
                        now: float) -> tuple[tuple[int, ...], NodeGroup] | None:
        """A job whose request already names slot types (requeue.bound_slots: a requeued PAL
        job, or one released before that did not start) is placed again on those same slots,
        on whichever nodes have them free (PAL's choice among them), or waits (None).

        Why not new slots: Slurm 22.05 keeps a retyped job's old slot types with count 0
        (`GRES=gpu:s0:0(IDX:),gpu:s1:1(IDX:1)`) and does not start it on a node where those
        old slots are busy (Reason=Resources, found on the lab), and refuses an untyped count
        over typed ones. The same types on other nodes start (tests/integration/test_site_compat.py)."""
        assert self.view is not None and self.ranking is not None
        gpus, group = found
        choice = choice_of(gpus, self.view)
        wanted = set(slots)
        if all(set(s) == wanted for s in choice.nodes.values()):
            return found
        if len(gpus) != len(slots) * len(choice.nodes):
            return found  # its shape no longer matches the binding: bound anew as before
        free = self.available().free
        allowed = self.allowed_nodes(group, free, False)
        on_old = frozenset(g for g in free if self.view.gpus[g].slot in wanted
                           and (allowed is None or self.view.gpus[g].node_index in allowed))
        again = self.engine.place_new(req, self.view.with_free(on_old), self.ranking, now)
        return None if again is None else (tuple(again), group)

    def _where(self, restrictions: JobRestrictions, now: float) -> NodeGroup | None | str:
        """Where a held job may run: its one node group when that is every node and the job
        shares nodes, so it joins the shared engine cycle; None when it is placed after it, on
        its own nodes; or the reason it goes to Slurm untouched."""
        eligibility = self.eligibility(restrictions, now)
        if eligibility.passed:  # pald cannot judge where it may run: Slurm places it
            return eligibility.passed
        group = eligibility.groups[0] if len(eligibility.groups) == 1 else None
        if group is None or restrictions.exclusive or self.allowed_nodes(group, frozenset(), False) is not None:
            group = None
        return group

    def _release(self, out: CycleResult, req: JobRequest, gpus: Sequence[int], group: NodeGroup, job: JobRestrictions,
                 now: float) -> bool:
        """Add the release of `req` on `gpus` (reserving them, and its CPUs/memory) to `out`;
        False when the nodes no longer have its CPUs/memory after this cycle's earlier releases
        (the engine places on GPUs alone): it waits for the next cycle."""
        assert self.view is not None
        choice = choice_of(gpus, self.view)
        if not self.fits_after_promises(choice.nodes, job):
            return False
        bound, why = self.vet(choice)
        if bound is None:  # Slurm may not have what the view says: release it as submitted
            out.releases.append(Release(req.job_id, req.perf_class, None, None, f"doubt:{why}"))
            return True
        gpus, choice = self._as_slurm_takes(req, gpus, choice, bound)
        rel = Release(req.job_id, req.perf_class, choice,
                      gres_for_release(shape_of(req), choice, bound is Binding.SLOTS),
                      self.settings.placement, request=req, partition=group.partition)
        exact = bound is Binding.SLOTS and choice.same_slots_everywhere()  # else Slurm takes the lowest free
        self.reserve(rel.key, gpus, now, job, choice.nodes, slurm_picks=shape_of(req).is_per_node and not exact,
                     request=req)
        out.releases.append(rel)
        return True

    def _as_slurm_takes(self, job: JobRequest, gpus: Sequence[int], choice: ShapeChoice,
                        bound: Binding) -> tuple[tuple[int, ...], ShapeChoice]:
        """On nodes that do not type their slots pald pins only the nodes, and Slurm takes the
        lowest free slots there: reserve those (the engine already did so where the slots differ
        between nodes; policy.shapes.slurm_picks_slots)."""
        assert self.view is not None
        if bound is Binding.SLOTS or not slurm_picks_slots(job, gpus, self.view, binds_slots=False):
            return tuple(gpus), choice
        picked = slurm_picks(gpus, self.view, self.available().free)
        return picked, choice_of(picked, self.view)


def _by_node(gpu_ids: Iterable[int], view: ClusterView) -> dict[int, list[int]]:
    """GPU ids grouped by their node's index."""
    out: dict[int, list[int]] = {}
    for g in sorted(gpu_ids):
        out.setdefault(view.gpus[g].node_index, []).append(g)
    return out
