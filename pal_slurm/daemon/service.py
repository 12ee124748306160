"""pald's decision state and its two answers, both through the engine. No I/O, no clock of its own.

It holds the last cluster view read from Slurm, the ranking snapshot, the application -> class
map, and *reservations* (its `book`, engine/reservations.py): GPUs promised to a job that
Slurm does not show as busy yet (the hook answers before the job exists; a released job starts
a moment later). Two decisions therefore
never get the same GPUs. Reservations end when a later Slurm view shows the job started (or its
GPUs busy), or after a TTL (a job that never started must not block GPUs for ever).

- `place` (the submit hook): a new job is placed now when it fits and no older PAL job is held
  (so the queue order is kept); otherwise it is deferred (the hook holds it and the cycle
  releases it later), or, with `mode=now`, passed to Slurm untouched.
- `plan_cycle` (every cycle): the held jobs through the engine's cycle; the GPUs of every
  release are reserved before pald acts on Slurm.

Both decide in the engine, one call each that also books the answer in the service's
reservations (engine/reservations.py): engine/site.py's `place_and_book` at submit,
engine/held.py's `plan_and_book` for the cycle, each launch checked and built there. The
service keeps the state they decide on (its last Slurm read, the reservations, the held queue)
and tells the held queue what they answered. Where a job may run (partitions, features,
exclusions, reservations, CPUs/memory: the site view and policy/eligibility) restricts the
view the engine places on: one node group per partition the job may use, the best answer over
them. A job pald cannot judge passes.

The object is not thread-safe on purpose: it has one owner (pald holds its lock around every
call), so the state is never seen half-changed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping, Sequence

from pal_slurm.daemon.held_queue import HeldQueue
from pal_slurm.daemon.protocol import PlaceReply
from pal_slurm.intake.held import HeldRead, read_held
from pal_slurm.intake.job import DEFAULT_NET, Pass, Read, class_of, running_class
from pal_slurm.intake.job_limits import LimitCount
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.engine.held import CycleResult, plan_and_book
from pal_slurm.engine.reservations import Reservation, Reservations
from pal_slurm.engine.site import Seen, place_and_book, planning_running
from pal_slurm.engine.where import Where
from pal_slurm.model import ClusterView, DecisionKind, JobRequest, PlannedStart
from pal_slurm.model.decision import JobId
from pal_slurm.model.site_rules import SiteRules
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.site import SiteView
from pal_slurm.policy.site_index import SiteIndex
from pal_slurm.policy.slurm_starts import SLURM_STARTS
from pal_slurm.ranking import Ranking
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.slurm.priority import SitePriorityRead, held_priority
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


@dataclass
class PlacementService:
    settings: ServiceSettings = field(default_factory=ServiceSettings)
    class_map: AppClassMap = field(default_factory=AppClassMap)
    view: ClusterView | None = None
    site: SiteView | None = None  # partitions, features, CPUs/memory; None: every GPU node is eligible
    # what Slurm's multifactor priority is computed from (queue order `slurm`); None: not read
    site_priority: SitePriorityRead | None = None
    # the last read's jobs counted against the site's job-count limits (intake.job_limits);
    # None: no limit known (not enforced, not read yet, or its read failed)
    limit_count: LimitCount | None = None
    view_time: float = float("-inf")
    snapshot: RankingSnapshot | None = None  # the store's latest, or None
    ranking: Ranking | None = None
    queue: HeldQueue = field(default_factory=HeldQueue)  # the held jobs, as the submit path sees them
    # the running jobs as the last Slurm read showed them, for a placement that plans around
    # them (Traits.plans_around_running; else empty): their time limit less their run time left
    running: list[JobRequest] = field(default_factory=list)
    # (node, slot) -> when a read first showed it allocated with no job holding it (observe_running)
    unheld_since: dict[tuple[str, int], float] = field(default_factory=dict)
    # the last cycle's held jobs that wait with a backfill reservation: job -> when and where
    # the engine plans to start them, and the job's class (what an admin asks about a job
    # that stays held)
    planned: dict[JobId, tuple[PlannedStart, str]] = field(default_factory=dict)
    engine: Engine = field(init=False)
    book: Reservations = field(init=False)  # the reservations, and the free GPUs they leave on the view
    where: Where = field(default_factory=Where)  # where jobs may run on the last read (memoised)

    def __post_init__(self) -> None:
        self.engine = Engine(self.settings.engine(), rng=random.Random(0), start_rule=SLURM_STARTS)
        self.book = Reservations(per_user_max=self.settings.user_reservations_max)

    @property
    def reservations(self) -> dict[str, Reservation]:
        """The reservations by key (the book's)."""
        return self.book.by_key

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
            self.book.clear()
            self.book.changed()  # gpu ids changed meaning
        self.view = view
        self.view_time = now
        self.where.view_changed(layout_changed)
        if layout_changed or self.ranking is None:
            self.ranking = ranking_of(view, self.snapshot)
        self.book.observe(view, now, started, in_queue, queue_read_at, self.settings.submit_grace_s,
                          self.settings.reservation_ttl_s)
        self.book.settle(view)
        if held_jobs is not None:
            self.queue.observe_read(held_jobs, now)

    def confirm_view(self, now: float) -> None:
        """The view stands as Slurm shows it at `now`: a node read found every node's
        allocation and state as the view's own read left them (daemon.read_plan), so a `place`
        judges it current without a job read."""
        if self.view is not None:
            self.view_time = max(self.view_time, now)

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

    def observe_limits(self, count: LimitCount | None) -> None:
        """The jobs of the same Slurm read counted against the site's job-count limits; a
        held job one more running job would put over one is not released (engine.held)."""
        self.limit_count = count

    def slurm_priority(self, job: JobInfo, now: float) -> float:
        """The priority Slurm's multifactor plugin would give `job` at `now` were it not held
        (a held job shows 0: docs/decisions/site-priority.md); 0 without the site's inputs."""
        return held_priority(job, self.site_priority, now)

    def set_snapshot(self, snapshot: RankingSnapshot | None) -> None:
        self.snapshot = snapshot
        if self.view is not None:
            self.ranking = ranking_of(self.view, snapshot)
        self.book.changed()

    def set_class_map(self, mapping: dict[str, str]) -> None:
        self.class_map = AppClassMap(dict(mapping), default=self.settings.default_class)

    @property
    def rank_version(self) -> int:
        return self.ranking.version if self.ranking else 0

    # ---- queries -----------------------------------------------------------------------
    def free_now(self) -> frozenset[int]:
        return self.available().free if self.view is not None else frozenset()

    def planning_running(self) -> list[JobRequest]:
        """The running jobs a placement that plans around them sees: Slurm's (observe_running)
        and the jobs pald promised GPUs to that Slurm has not started yet, each ending at its limit."""
        assert self.view is not None and self.ranking is not None
        return planning_running(self.engine, self.book, self.seen())

    def available(self) -> ClusterView:
        """The view with reserved GPUs taken out: what the engine may place on."""
        assert self.view is not None, "no cluster view yet"
        return self.book.available(self.view)

    def resolve_class(self, app: str) -> tuple[str, str | None]:
        """(class, warning for the user or None)."""
        return class_of(self.class_map, app)

    def rack_timers(self) -> dict[str, float]:
        """Seconds a job of each network sensitivity waits for one rack (the placement's delay
        timers, tuned when it is a tuned placement)."""
        timers = self.engine.delay_timers() or self.engine.policy.delay_timers
        return {sens: round(secs, 1) for (sens, level), secs in timers.items() if level == "rack"}

    # ---- what the engine decides on ------------------------------------------------------
    def seen(self) -> Seen:
        """The last Slurm read as the engine decides on it (with the reservations: `book`)."""
        assert self.view is not None and self.ranking is not None
        return Seen(self.view, self.site, self.ranking, self.running)

    def promised(self) -> Mapping[str, tuple[int, int]]:
        """CPUs and memory per node promised to jobs Slurm does not show running yet (the book's: read only)."""
        return self.book.promised()

    # ---- reservations --------------------------------------------------------------------
    def reserve(self, key: str, gpu_ids: Iterable[int], now: float, job: JobRestrictions | None = None,
                nodes: Iterable[str] = (), slurm_picks: bool = False, request: JobRequest | None = None,
                user: int | None = None) -> None:
        """Promise `gpu_ids` to `key` outside the engine's answers (Reservations.reserve): a pin a
        Slurm read shows that no reservation holds (pins.unreserved_pins)."""
        self.book.reserve(key, gpu_ids, now, job, nodes, slurm_picks, request, user)

    def in_flight(self, uid: int) -> int:
        """Placements at submit for user `uid` whose job no Slurm read has shown yet."""
        return self.book.in_flight(uid)

    def clear_reservations(self) -> None:
        self.book.clear()
        if self.view is not None:
            self.book.settle(self.view)

    def unreserve(self, key: str) -> None:
        """A decision that could not be carried out: its GPUs are free again."""
        self.book.drop(key)

    def retract(self, key: str, decision: DecisionKind) -> None:
        """Undo what `place` did for an answer that will not be used (the hook gave up)."""
        self.unreserve(key)
        if decision is DecisionKind.DEFER:
            self.queue.retract(key)

    # ---- the submit-time answer ----------------------------------------------------------
    def place(self, got: Read, now: float, user: int) -> PlaceReply:
        """The answer for a job at submit (`got`: the hook's request as intake.job.from_hook
        read it; `user`: the submitting uid): the engine decides and books a placement's GPUs
        (engine.site.place_and_book); the service queues a deferral and answers."""
        if self.view is None or self.ranking is None:
            return PlaceReply(DecisionKind.PASS, reason="no_cluster_view")
        if now - self.view_time > self.settings.max_view_age_s:
            return PlaceReply(DecisionKind.PASS, reason="stale_view")
        base: dict[str, Any] = dict(rank=self.rank_version, perf_class=got.perf_class, warning=got.warning)
        if isinstance(got, Pass):
            return PlaceReply(DecisionKind.PASS, reason=got.reason, **base)
        mode = (got.spec.mode if got.spec else None) or self.settings.default_mode
        seen = self.seen()
        held = self.queue.held_jobs > 0
        waiting = self.queue.known() if held and mode == "auto" else None  # None: held jobs it does not know
        d = place_and_book(self.engine, self.where, self.book, seen, got, mode, now, held, waiting, user)
        if d.warning is not None:
            base["warning"] = d.warning
        if d.decision is DecisionKind.DEFER and d.queue:
            self.queue.defer(str(got.key), d.queued)
        if d.decision is not DecisionKind.PLACE or d.choice is None:
            return PlaceReply(d.decision, reason=d.reason, **base)
        return PlaceReply(DecisionKind.PLACE, reason=d.reason, nodes=d.choice.nodes, gres=d.gres,
                          partition=d.partition, site_checked=True, **base)

    # ---- the cycle -------------------------------------------------------------------------
    def plan_cycle(self, held: Sequence[JobInfo], now: float) -> CycleResult:
        """`plan_read` of squeue's records of held PAL jobs, read here (intake.held.read_held)."""
        return self.plan_read(read_held(held, now, self.class_map, self.settings.site_rules).jobs, now)

    def plan_read(self, held: Sequence[HeldRead], now: float) -> CycleResult:
        """Which held PAL jobs (read by intake.held) to release now, and where: the engine's
        cycle over them (engine.held.plan_and_book), every release's GPUs reserved before this
        returns; the caller acts on Slurm and calls `unreserve(release.key)` for a release that
        failed. The held queue learns what the submit path plans behind."""
        self.planned = {}
        if self.view is None or self.ranking is None:
            return CycleResult()
        jobs = [h.job for h in held]
        out = plan_and_book(self.engine, self.where, self.book, self.seen(), held, now, self.site_priority,
                            self.limit_count)
        self.planned = out.planned
        self.queue.planned(out.behind, jobs)  # the submit path plans behind these
        return out
