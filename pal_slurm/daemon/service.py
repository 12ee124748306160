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

Both decide in the engine, one call each (engine/site.py: `decide` at submit, `plan_held` for
the cycle, each launch checked there); the service keeps the state they decide on and what they answer. Where a
job may run (partitions, features, exclusions, reservations, CPUs/memory: the site view and
policy/eligibility) restricts the view the engine places on: one node group per partition the
job may use, the best answer over them. A job pald cannot judge passes.

The object is not thread-safe on purpose: it has one owner (pald holds its lock around every
call), so the state is never seen half-changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Iterable, Mapping, Sequence

from pal_slurm.daemon.held_queue import HeldQueue
from pal_slurm.daemon.protocol import PlaceReply
from pal_slurm.intake.held import HeldRead, read_held
from pal_slurm.intake.job import DEFAULT_NET, Pass, Read, class_of, running_class
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.engine.site import Facts, decide, place_eligible, plan_held
from pal_slurm.engine.where import Released, Where, held_group, release_on
from pal_slurm.model import ClusterView, DecisionKind, JobRequest, PlannedStart
from pal_slurm.model.decision import JobId
from pal_slurm.model.site_rules import SiteRules
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.priority import priority as multifactor_priority
from pal_slurm.model.site import SiteView
from pal_slurm.policy.site_index import SiteIndex
from pal_slurm.policy.eligibility import NodeGroup
from pal_slurm.policy.registry import SLURM_PRIORITY_QUEUE
from pal_slurm.policy.shapes import ShapeChoice, ShapeIndex, choice_of
from pal_slurm.policy.slurm_starts import SLURM_STARTS
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.slurm.priority import SitePriorityRead, priority_job
from pal_slurm.slurm.readers import JobInfo

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
    where: Where = field(default_factory=Where)  # where jobs may run on the last read (memoised)

    def __post_init__(self) -> None:
        self.engine = Engine(self.settings.engine(), rng=random.Random(0), start_rule=SLURM_STARTS)

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
        self.where.view_changed()
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

    def observe_site(self, site: SiteView, index: SiteIndex | None = None) -> None:
        """Partitions, features, reservations and free CPUs/memory from the same Slurm read;
        `index`: the read's SiteIndex when the reader built it (off the lock; else built when
        first asked)."""
        self.site = site
        self.where.site_changed(index if index is not None and index.site is site else None)

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

    # ---- what the engine decides on ------------------------------------------------------
    def facts(self, running: bool = True) -> Facts:
        """The last Slurm read less the reservations, as the engine's submit path takes it
        (`running`: with the running jobs a placement plans around; False: none, for an
        answer that cannot use them)."""
        assert self.view is not None and self.ranking is not None
        return Facts(self.view, self.site, self.available(), self._index(), self.ranking, self.promised(),
                     self.planning_running() if running else ())

    def promised(self) -> dict[str, tuple[int, int]]:
        """CPUs and memory per node promised to jobs Slurm does not show running yet."""
        out: dict[str, tuple[int, int]] = {}
        for r in self.reservations.values():
            for node, (cpus, memory) in r.promised.items():
                had = out.get(node, (0, 0))
                out[node] = (had[0] + cpus, had[1] + memory)
        return out

    def _index(self) -> ShapeIndex:
        if self._shape_index is None:
            self._shape_index = ShapeIndex(self.available())
        return self._shape_index

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
    def place(self, got: Read, now: float, user: int) -> PlaceReply:
        """The answer for a job at submit (`got`: the hook's request as intake.job.from_hook
        read it; `user`: the submitting uid): the engine decides (engine.site.decide); the
        service keeps what it answers: the GPUs of a placement reserved, a deferral queued."""
        if self.view is None or self.ranking is None:
            return PlaceReply(DecisionKind.PASS, reason="no_cluster_view")
        if now - self.view_time > self.settings.max_view_age_s:
            return PlaceReply(DecisionKind.PASS, reason="stale_view")
        base: dict[str, Any] = dict(rank=self.rank_version, perf_class=got.perf_class, warning=got.warning)
        if isinstance(got, Pass):
            return PlaceReply(DecisionKind.PASS, reason=got.reason, **base)
        key = str(got.key)
        mode = (got.spec.mode if got.spec else None) or self.settings.default_mode
        held = self.queue.held_jobs > 0
        waiting = self.queue.known() if held and mode == "auto" else None  # None: held jobs it does not know
        crowded = self.in_flight(user) >= self.settings.user_reservations_max
        # the running jobs matter only to an `auto` job placed now, or behind the held jobs pald knows
        facts = self.facts(running=mode == "auto" and (not held or waiting is not None))
        d = decide(self.engine, self.where, facts, got, mode, now, held, waiting, crowded)
        if d.warning is not None:
            base["warning"] = d.warning
        if d.decision is DecisionKind.DEFER and d.queue:
            self.queue.defer(key, d.queued)
        if d.decision is not DecisionKind.PLACE or d.choice is None:
            return PlaceReply(d.decision, reason=d.reason, **base)
        # a per-node job answered without its slots: Slurm takes the lowest free ones on its nodes
        self.reserve(key, d.gpus, now, got.restrictions, d.choice.nodes,
                     slurm_picks=got.shape.is_per_node and d.gres is None, request=got.request, user=user)
        return PlaceReply(DecisionKind.PLACE, reason=d.reason, nodes=d.choice.nodes, gres=d.gres,
                          partition=d.partition, site_checked=True, **base)

    # ---- the cycle -------------------------------------------------------------------------
    def plan_cycle(self, held: Sequence[JobInfo], now: float) -> CycleResult:
        """`plan_read` of squeue's records of held PAL jobs, read here (intake.held.read_held)."""
        return self.plan_read(read_held(held, now, self.class_map, self.settings.site_rules).jobs, now)

    def plan_read(self, held: Sequence[HeldRead], now: float) -> CycleResult:
        """Which held PAL jobs (read by intake.held) to release now, and where: the engine's
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
        promised = self.promised()  # (the loop reserves nothing)
        free = len(self.available().free)
        for h in held:
            j, got, slots = h.job, h.read, h.slots
            if got is None:  # Slurm would not start it yet
                not_yet += 1
                continue
            if isinstance(got, Pass):
                out.releases.append(Release(j.job_id, got.perf_class, None, None, got.reason))
                continue
            shape, perf_class, restrictions = got.shape, got.perf_class, got.restrictions
            request = got.request
            if self.settings.queue == SLURM_PRIORITY_QUEUE:
                request = replace(request, site_priority=self.slurm_priority(j, now))
            if id(restrictions) not in wheres:  # the entry holds the value: its id is not reused
                wheres[id(restrictions)] = (restrictions, held_group(self.where, self.view, self.site, restrictions,
                                                                     now, promised))
            group = wheres[id(restrictions)][1]
            if isinstance(group, str):  # eligibility passed it to Slurm
                out.releases.append(Release(j.job_id, perf_class, None, None, group))
                continue
            if not shape.is_per_node:
                slots = None
            if slots is not None:
                group = None  # placed after the shared cycle, on its own slots (_on_bound_slots)
            every = h.elements
            if every is None:
                out.releases.append(Release(j.job_id, perf_class, None, None, "bad_array_tasks"))
                continue
            refs = every[:max(1, free // max(1, shape.total))]
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
            plan, checked = plan_held(self.engine, self.view, self.site, self.available(), self.ranking,
                                      self.promised(), self.planning_running(), requests, limits, now)
            self.planned = {job_id: (p, by_id[job_id].perf_class) for job_id, p in plan.planned.items()
                            if job_id in by_id}
            for job_id, release in checked:
                launched += self._released(out, by_id[job_id], release, groups[job_id], limits[job_id], now)
        for req in self.engine.order_jobs(restricted) if restricted else ():
            # in queue order, on what the cycle left (GPUs, and CPUs/memory promised meanwhile);
            # without backfill the first that waits holds the ones behind it
            job = limits[req.job_id]
            facts = self.facts(running=False)
            eligibility = self.where.eligibility(job, self.view, self.site, now, facts.promised)
            found = place_eligible(self.engine, self.where, facts, req, eligibility, job.exclusive, now, ())
            if found is not None and req.job_id in bound:
                found = self._on_bound_slots(req, found, bound[req.job_id], now)
            if found is None or not self._released(out, req, release_on(
                    self.view, self.site, self.available().free, req, found[0], job, self.promised()), found[1], job, now):
                if not self.settings.backfill:
                    break
                continue
            launched += 1
        out.waiting = len(requests) + len(restricted) - launched + not_yet + unexpanded
        released = {r.job_id for r in out.releases}
        # the submit path plans behind these; unknown (None) when some held jobs are not in it
        self.queue.planned(None if restricted or not_yet or unexpanded
                           else [r for r in requests if r.job_id not in released], [h.job for h in held])
        return out

    def _on_bound_slots(self, req: JobRequest, found: tuple[tuple[int, ...], NodeGroup], slots: tuple[int, ...],
                        now: float) -> tuple[tuple[int, ...], NodeGroup] | None:
        """A job whose request already names slot types (intake.held.bound_slots: a requeued PAL
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
        allowed = self.where.allowed_nodes(self.view, group, free, False)
        on_old = frozenset(g for g in free if self.view.gpus[g].slot in wanted
                           and (allowed is None or self.view.gpus[g].node_index in allowed))
        again = self.engine.place_new(req, self.view.with_free(on_old), self.ranking, now)
        return None if again is None else (tuple(again), group)

    def _released(self, out: CycleResult, req: JobRequest, got: Released | str | None, group: NodeGroup,
                  job: JobRestrictions, now: float) -> bool:
        """Add the release of `req` as checked (engine.where.release_on: reserving its GPUs,
        and its CPUs/memory) to `out`; False when it waits for the next cycle."""
        if got is None:
            return False
        if isinstance(got, str):  # Slurm may not have what the view says: release it as submitted
            out.releases.append(Release(req.job_id, req.perf_class, None, None, got))
            return True
        rel = Release(req.job_id, req.perf_class, got.choice, got.gres_spec, self.settings.placement, request=req,
                      partition=group.partition)
        self.reserve(rel.key, got.gpus, now, job, got.choice.nodes, slurm_picks=got.slurm_picks, request=req)
        out.releases.append(rel)
        return True


def _by_node(gpu_ids: Iterable[int], view: ClusterView) -> dict[int, list[int]]:
    """GPU ids grouped by their node's index."""
    out: dict[int, list[int]] = {}
    for g in sorted(gpu_ids):
        out.setdefault(view.gpus[g].node_index, []).append(g)
    return out
