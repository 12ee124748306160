"""pald's composition root: wires config, store, Slurm adapter and the placement service, and
runs the loops (Slurm sync + deferred-job cycle, store refresh, heartbeat, decision writer).

Failure behaviour, on purpose:
- the `place` answer never waits on Slurm or the database: it reads memory only;
- nothing but the store link's own thread waits on the database (store_link.py): decisions,
  held jobs and releases are queued, reads arrive in memory, `reload` waits in a worker thread;
- the store going away makes pald *degraded*, not dead: it keeps the last ranking and class
  map, buffers writes (bounded, drops counted) and writes them when the store is back;
- a Slurm command failing is logged once per kind of error and retried next cycle;
- the heartbeat carries the time of the last *complete* cycle, so a pald whose Slurm sync keeps
  failing looks dead to pal-failsafe (which then releases the held jobs) however alive its
  loop is;
- every loop catches its own errors: a loop that dies would silently stop releasing jobs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Collection, Mapping

from pal_slurm.model.comment_grammar import CommentError, verify_spec
from pal_slurm.daemon import pins, requeue
from pal_slurm.daemon.cycle import apply_releases, is_pal_held, mark_released, until_next_tick
from pal_slurm.daemon.tags import DEFER_TAG, pal_tags, request_id, with_tag
from pal_slurm.daemon.protocol import (
    ErrorCode,
    ErrorReply,
    HealthReply,
    HealthRequest,
    PlaceReply,
    PlaceRequest,
    ReloadReply,
    ReloadRequest,
)
from pal_slurm.daemon.leadership import LeaderWatch
from pal_slurm.daemon.retention import Pruner, RetentionPolicy
from pal_slurm.daemon.service import PlacementService, Release, ServiceSettings, held_shape
from pal_slurm.daemon.store_link import DEADLINE_S, StoreLink
from pal_slurm.engine import Clock, WallClock
from pal_slurm.model import DecisionKind
from pal_slurm.policy.passthrough import refused_input
from pal_slurm.model.shape import ShapeError
from pal_slurm.policy import autotune
from pal_slurm.policy.shapes import choice_of
from pal_slurm.slurm.errors import SlurmError, SlurmUnsupported
from pal_slurm.slurm.hostlist import compress
from pal_slurm.slurm.readers import cluster_view, unheld_slots
from pal_slurm.slurm.topology import read_racks
from pal_slurm.store.leader import AlwaysLeader
from pal_slurm.store.records import DecisionRecord, HeldJob, Heartbeat

log = logging.getLogger("pald")

MAX_RELEASE_FAILURES = 3  # then the job is released as submitted (see Pald._give_up_on)
MAX_REPLACES = 1  # a released job stuck this many times more keeps no node pin (see Pald._unstick)
RELOAD_WAIT_S = DEADLINE_S  # `reload` waits this long for the store read (off the loop)


def times_unstuck(admin_comment: str | None) -> int:
    """How often pald held a stuck release again (its ``pal:defer;unstuck=<n>`` tags, highest n)."""
    counts = [0]
    for word in (admin_comment or "").split():
        name, *fields = word.split(";")
        if name == DEFER_TAG:
            counts += [int(f[8:]) for f in fields if f.startswith("unstuck=") and f[8:].isdigit()]
    return max(counts)


def held_comments(held) -> dict[int | str, str]:
    """Each held job's admin_comment by every scontrol name a release may use (its id, its
    ``A_I`` name, an array record's elements): what mark_released extends."""
    out: dict[int | str, str] = {}
    for j in held:
        try:
            refs = j.element_refs()
        except SlurmError:
            refs = []
        for ref in (j.job_id, j.ref, *refs):
            out[ref] = j.admin_comment
    return out


def queue_keys(jobs) -> set[str]:
    """Reservation keys of every job a read shows, in any state: `job:<id>` and `job:<A_I>`
    (each element of an array's record), `req:<id>` from the hook's tag."""
    out = set()
    for j in jobs:
        out.add(f"job:{j.job_id}")
        out.add(f"job:{j.ref}")
        try:
            out.update(f"job:{ref}" for ref in j.element_refs())
        except SlurmError:
            pass
        rid = request_id(j.admin_comment)
        if rid:
            out.add(f"req:{rid}")
    return out


def started_keys(jobs) -> set[str]:
    """Reservation keys of jobs Slurm no longer holds back: `job:<id>` for jobs pald released,
    `req:<id>` for jobs placed at submit (the hook writes req=<id> into admin_comment)."""
    out = set()
    for j in jobs:
        if j.state == "PENDING":
            continue
        out.add(f"job:{j.job_id}")
        out.add(f"job:{j.ref}")  # an array element pald released as A_I
        rid = request_id(j.admin_comment)
        if rid:
            out.add(f"req:{rid}")
    return out


_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def error_kind(what: str, exc: BaseException) -> str:
    """What makes two errors "the same" for logging: where, the exception type, and the
    message with its numbers masked (a byte offset, a job id or a pid that changes every
    cycle must not make a repeating error look new)."""
    return f"{what}:{type(exc).__name__}:{_NUMBERS.sub('#', str(exc)[:MAX_ERROR_TEXT])}"


MAX_ERROR_TEXT = 200  # of an error's message in its kind (a message may quote user text)
MAX_ERROR_KINDS = 256  # kinds remembered; past that, new kinds of one `what` share one


@dataclass
class OnceLogger:
    """Logs each kind of error once (until it clears), so a dead Slurm or database does not
    flood the log every second; `repeats` counts what was not logged again."""

    seen: dict[str, int] = field(default_factory=dict)

    def error(self, what: str, exc: BaseException) -> None:
        kind = error_kind(what, exc)
        if kind not in self.seen and len(self.seen) >= MAX_ERROR_KINDS:
            kind = f"{what}:many"  # never a set that grows with what users write
        if kind in self.seen:
            self.seen[kind] += 1
            return
        self.seen[kind] = 0
        log.error("%s: %s", what, str(exc)[:MAX_ERROR_TEXT])

    def clear(self, what: str) -> None:
        cleared = [k for k in self.seen if k.startswith(what + ":")]
        if cleared:
            log.info("%s: recovered (%d repeat(s) not logged)", what, sum(self.seen[k] for k in cleared))
        for k in cleared:
            del self.seen[k]


class Pald:
    """One daemon instance. `store` may be None (memory only); `reader`/`actuator` are the
    Slurm adapter's SlurmReader / SlurmActuator (or fakes with the same methods in tests)."""

    def __init__(self, config, store, reader, actuator, clock: Clock | None = None, leader=None):
        self.config = config
        self.leadership = LeaderWatch(leader or AlwaysLeader(), grace_s=config.daemon.leader_grace_s,
                                      every_s=config.daemon.cycle_s)
        pruner = Pruner(RetentionPolicy.from_config(config), self.leadership.leading)
        self.link = StoreLink(store, pruner=pruner) if store is not None else None
        self.reader = reader
        self.actuator = actuator
        self.clock = (clock or WallClock()).now
        d, p = config.daemon, config.policy
        # The decision state (placement service, engine, reservations) has one owner: whoever
        # holds this lock. The socket loop (place, health) and the cycle's worker thread take it
        # around every read or change of it; Slurm and store I/O happen outside it.
        self.lock = threading.RLock()
        self.service = PlacementService(
            ServiceSettings(
                placement=p.placement,
                queue=p.queue,
                locality_penalty=p.locality_penalty,
                backfill=d.backfill,
                delay_timers=autotune.rack_timers(p.rack_wait_s),
                reserve_after_s=p.reserve_after_s,
                default_class=p.default_class,
                default_mode=d.default_mode,
                reservation_ttl_s=d.reservation_ttl_s,
                submit_grace_s=d.submit_grace_s,
                user_reservations_max=d.user_reservations_max,
                max_view_age_s=max(5.0 * d.cycle_s, 5.0),
            )
        )
        self.service.set_class_map({})
        self.started = self.clock()
        self.slurm_ok: bool | None = None
        self.slurm_problem: SlurmError | Exception | None = None  # why the last Slurm read failed
        self.last_sync: float | None = None
        self.last_cycle: float | None = None  # end of the last complete sync + release cycle
        self.errors = OnceLogger()
        self.recent_errors: deque = deque(maxlen=20)
        self.counts = {"place": 0, "defer": 0, "pass": 0, "standby": 0, "released": 0, "errors": 0, "late": 0,
                       "released_outside": 0, "reheld": 0, "unstuck": 0, "requeued": 0}
        self.held_seen: set[int] = set()
        self.deferred: set[int] = set()  # PAL-held jobs at the last sync, minus those pald released
        self.released_by_pald: set[int | str] = set()  # deferred jobs this pald released (still in squeue)
        self.noticed: set[int] = set()  # deferred jobs seen released by someone else (recorded once)
        self.admin_held: set[int | str] = set()  # deferred jobs seen under pald's admin hold (or given one)
        self.reheld: set[int] = set()  # deferred jobs a user released in the window, held again (once)
        self.released_at: dict[int | str, float] = {}  # jobs pald pinned and released, not seen started yet
        self.replaced: dict[int | str, int] = {}  # job id -> times a stuck release went back to the queue
        self.release_failures: dict[int | str, int] = {}  # job id -> cycles in a row Slurm refused its placement
        self.reserved_on: dict[int | str, str] = {}  # held job -> the nodes its reservation held at the last cycle
        self.last_jobs: tuple = ()  # jobs of the last Slurm sync (read by the metrics publisher)
        self.held_ids: frozenset[int] = frozenset()  # PAL-held jobs among them
        self.cycle_observers: list = []  # called on the event loop with each cycle's duration (s)
        self._racks: tuple[float, dict[str, str]] | None = None
        self._req_seq = 0
        self._unsettled: dict[int, tuple[str, PlaceReply]] = {}  # id(request) -> (key, reply) until the server settles it

    # ---- requests ------------------------------------------------------------------------
    def handle(self, request) -> object:
        """Answer one request for a caller that holds the reply itself (tests, tools): what
        the answer decided is settled at once, as delivered. Never raises."""
        reply = self.answer(request)
        self.settle(request, reply, written=True)
        return reply

    def answer(self, request) -> object:
        """Answer one decoded request for the socket server (never raises: errors become
        ErrorReply). A placement, deferral or pass is counted and recorded only in `settle`,
        once the server knows whether its reply reached the hook's socket: pald frozen between
        its last deadline check and the write answers a hook that has given up and closed."""
        try:
            if isinstance(request, PlaceRequest):
                return self._place(request)
            if isinstance(request, HealthRequest):
                return self.health()
            if isinstance(request, ReloadRequest):
                return self._reload()  # awaited by the server: the store read runs off the loop
            return ErrorReply(ErrorCode.UNKNOWN_OP.value, f"unsupported request {type(request).__name__}")
        except Exception as exc:  # noqa: BLE001 - the hook must always get an answer
            # one line per failure (the traceback at debug): a request is user text, and a
            # traceback per submission is a log a user can fill
            log.debug("request failed", exc_info=True)
            self._note_error("request", exc)
            return ErrorReply(ErrorCode.INTERNAL.value, f"pald failed: {exc}")

    def _place(self, req: PlaceRequest) -> PlaceReply:
        if req.deadline_ms is not None and req.expired(self.clock()):
            return self._late(req)
        if not self.leading:
            # a standby pald must not promise GPUs: the active one does; the job passes
            self.counts["pass"] += 1
            self.counts["standby"] += 1  # visible in health / palctl status
            return PlaceReply(DecisionKind.PASS, reason="standby")
        self._req_seq += 1
        key = req.request_id or f"pald-{os.getpid()}-{self._req_seq}"
        now = self.clock()
        try:  # defence in depth: the hook's parse must be what the raw comment says
            verify_spec(req.job.comment, req.pal)
        except CommentError as exc:
            reply = PlaceReply(DecisionKind.PASS, reason=f"bad_comment:{exc.code}",
                               warning=f"pald ignored the pal: spec: {exc.message}")
        else:
            with self.lock:
                reply = self.service.place(req, now, key=f"req:{key}")
                expired = req.deadline_ms is not None and req.expired(self.clock())  # again, just before the reply
                if expired:
                    self.service.retract(f"req:{key}", reply.decision)
            if expired:
                return self._late(req)
            if refused_input(reply.reason):
                log.warning("request %s (uid %s): passed, %s (%s)", key, req.job.uid, reply.reason,
                            (reply.warning or "")[:MAX_ERROR_TEXT])
        with self.lock:
            self._unsettled[id(req)] = (f"req:{key}", reply)
        return reply

    def settle(self, request, reply, written: bool) -> None:
        """The server wrote `reply` to the hook's socket (`written`) or could not: the hook
        gave up and closed it (its deadline passed while pald was frozen), so the placement
        was never written into the job (it passed as submitted) and is taken back and counted
        late, like a request read too late. A reply that reached the socket is counted and
        recorded (once) even if it went out just past `deadline_ms`: the hook still takes a
        reply that is waiting when it looks (and `deadline_ms` is the floor of its deadline),
        so taking that placement back would let a later request double-book its GPUs."""
        with self.lock:
            pending = self._unsettled.pop(id(request), None)
            if pending is None:
                return
            key, answered = pending
            if not written:
                self.service.retract(key, answered.decision)
                self.counts["late"] += 1
                log.info("request %s: the hook closed before the reply (deadline %s): not recorded",
                         request.request_id, request.deadline_ms)
                return
            self.counts[answered.decision.value] += 1
            self._record(key, answered.decision, answered.reason, answered.nodes, answered.perf_class)

    def _late(self, req: PlaceRequest) -> PlaceReply:
        """The hook gave up on this request (it passed the job as submitted): answer, but
        record, reserve and count nothing, since no placement was written into the job."""
        with self.lock:
            self.counts["late"] += 1
        log.debug("dropped request %s: past its deadline %s", req.request_id, req.deadline_ms)
        return PlaceReply(DecisionKind.PASS, reason="late")

    async def _reload(self) -> ReloadReply:
        if self.link is not None:
            if self.link.running:
                await asyncio.to_thread(self.link.request_refresh, RELOAD_WAIT_S)
            else:
                await asyncio.to_thread(self.link.read_now)
            self.apply_store_read()
        store = self.store_status()
        note = "" if store is None or store.healthy else f" (store {store.state}: kept the last ranking)"
        with self.lock:
            rank = self.service.rank_version
        return ReloadReply(rank=rank, message=f"serving ranking v{rank}{note}")

    def store_status(self):
        """The store link's LinkStatus, None without a store."""
        return None if self.link is None else self.link.status()

    @property
    def store_ok(self) -> bool | None:
        """Whether the store's last call worked (False also while one is stalled); None before
        the first call or without a store."""
        status = self.store_status()
        return None if status is None or status.state == "unknown" else status.state == "ok"

    def health(self) -> HealthReply:
        store = self.store_status()  # the link's own state, outside pald's lock
        with self.lock:
            return self._health(store)

    def _health(self, store) -> HealthReply:
        now = self.clock()
        degraded = (store is not None and not store.healthy) or self.slurm_ok is False or self.service.view is None
        return HealthReply(
            status="degraded" if degraded else "ok",
            rank=self.service.rank_version,
            details={
                "pid": os.getpid(),
                "uptime_s": round(now - self.started, 1),
                "store": "none" if store is None else store.state,
                "slurm": self._slurm_state(),
                "slurm_release": self.reader.release,
                "slurm_error": None if self.slurm_problem is None else str(self.slurm_problem)[:500],
                "last_sync_age_s": None if self.last_sync is None else round(now - self.last_sync, 1),
                "last_cycle_age_s": None if self.last_cycle is None else round(now - self.last_cycle, 1),
                "gpus": self.service.view.size if self.service.view else 0,
                "free_gpus": len(self.service.free_now()),
                "reservations": len(self.service.reservations),
                "reserved_gpus": len(set().union(*[r.gpu_ids for r in self.service.reservations.values()])),
                # held jobs that wait with a backfill reservation: where, and in how many seconds
                "planned_starts": {str(job_id): {"nodes": self.reserved_on.get(job_id, "?"),
                                                 "in_s": round(start.at - now, 1)}
                                   for job_id, (start, _) in self.service.planned.items()},
                "held_jobs": self.service.held_jobs,
                "leader": self.leading,
                "leader_state": self.leadership.state(),
                "rack_timers_s": self.rack_timers(),
                "buffered_decisions": 0 if store is None else store.buffered,
                "store_dropped": 0 if store is None else store.dropped,
                "store_error": "" if store is None else store.error,
                "counts": dict(self.counts),
                "recent_errors": list(self.recent_errors),
            },
        )

    def _slurm_state(self) -> str:
        """ok / unknown (no read yet) / unreachable / unsupported (a release or JSON shape this
        pal-slurm does not read: upgrade pal-slurm; PAL jobs pass meanwhile)."""
        if self.slurm_ok is None:
            return "unknown"
        if self.slurm_ok:
            return "ok"
        return "unsupported" if isinstance(self.slurm_problem, SlurmUnsupported) else "unreachable"

    # ---- store (through the link: nothing here waits on the database) --------------------
    def _record(self, job_id: str, kind: DecisionKind, reason: str, nodes, perf_class) -> None:
        if self.link is None:
            return
        self.link.record_decision(
            DecisionRecord(job_id=job_id, kind=kind, reason=reason or "", nodes=dict(nodes or {}),
                           ranking_version=self.service.rank_version, perf_class=perf_class,
                           created_at=datetime.now(timezone.utc))
        )

    def start_store(self) -> None:
        """Start the store link's and the leadership's threads (pald's run); without them,
        store work and lock checks happen on demand on the caller's thread. Blocks up to a
        lock check's deadline: call it off the event loop."""
        self.leadership.start()
        if self.link is not None:
            self.link.start()

    def stop_store(self, timeout_s: float = RELOAD_WAIT_S) -> None:
        """Stop the link after one last try to write what waits (bounded), then leadership."""
        if self.link is not None:
            self.link.stop(timeout_s)
        self.leadership.stop()

    def flush_decisions(self) -> int:
        """One synchronous pass of store work (tests, tools; never while the link runs):
        writes what is queued until a failure; returns how many writes were done."""
        return 0 if self.link is None else self.link.write_now()

    def refresh_store(self) -> None:
        """Read the store now and apply it (synchronous: tests, tools, benchmarks; pald's
        running loops use apply_store_read with the link's thread doing the reading)."""
        if self.link is None:
            return
        self.link.read_now()
        self.apply_store_read()

    def apply_store_read(self) -> None:
        """Serve the newest ranking snapshot and class map the link read (memory only); with
        no new read (store away) the old ones stay."""
        read = None if self.link is None else self.link.take_read()
        if read is None:
            return
        with self.lock:
            self.service.set_class_map(read.classes)
            snapshot = read.snapshot
            if snapshot is not None and (self.service.snapshot is None
                                         or snapshot.version != self.service.snapshot.version):
                log.info("serving ranking snapshot v%s (%d entries)", snapshot.version, len(snapshot.entries))
                self.service.set_snapshot(snapshot)

    def _note_error(self, what: str, exc: BaseException) -> None:
        self.counts["errors"] += 1
        self.errors.error(what, exc)
        self.recent_errors.append({"at": round(self.clock(), 1), "what": what, "error": str(exc)[:300]})

    # ---- Slurm -----------------------------------------------------------------------------
    def rack_timers(self) -> dict[str, float]:
        """Seconds a multi-node job of each network sensitivity waits for one rack (tuned)."""
        with self.lock:
            return self.service.rack_timers()

    def racks(self) -> dict[str, str] | None:
        """node -> leaf switch from [slurm] topology_conf (re-read when the file changes)."""
        path = self.config.slurm.topology_conf
        if not path:
            return None
        try:
            mtime = os.stat(path).st_mtime
            if self._racks is None or self._racks[0] != mtime:
                self._racks = (mtime, read_racks(path))
                self.errors.clear("topology")
        except Exception as exc:  # noqa: BLE001 - a bad topology file: keep the last good one
            self._note_error("topology", exc)
        return self._racks[1] if self._racks else None

    @property
    def leader(self):
        return self.leadership.leader

    @property
    def leading(self) -> bool:
        """Whether we act on Slurm now (a memory read: the lock is checked on its own thread,
        and a store outage does not end the leadership: store/lease.py)."""
        return self.leadership.leading()

    def check_leadership(self) -> bool:
        """Without the leadership thread (tests, tools): check the lock here, once."""
        if not self.leadership.running:
            self.leadership.check_now()
        return self.leading

    def sync_and_cycle(self) -> None:
        """Read Slurm, refresh the view, release deferred jobs that fit (blocking: run it in a
        thread; the socket loop keeps answering meanwhile)."""
        held = self.sync()
        if held:
            self.cycle(held)

    def sync(self) -> list | None:
        """Read Slurm and refresh the view; the PAL-held jobs to plan (None: nothing to act on)."""
        self.check_leadership()
        try:
            # squeue before sinfo: a job that ends between the two reads is then still a
            # running job with an end (its limit), never GPUs allocated to no job; taken
            # before squeue starts: a promise older than this whose job it misses never came
            read_at = self.clock()
            jobs = self.reader.jobs()
            nodes = self.reader.nodes()
            site = self.reader.site(nodes)
        except Exception as exc:  # noqa: BLE001
            self.slurm_ok = False
            self.slurm_problem = exc
            self._note_error("slurm", exc)
            return None
        now = self.clock()
        held = [j for j in jobs if is_pal_held(j)]
        view = cluster_view(nodes, jobs, self.racks())
        waiting = sum(1 for j in held if not requeue.not_yet_eligible(j, now))  # ahead of new jobs
        with self.lock:
            self.last_jobs, self.held_ids = tuple(jobs), frozenset(j.job_id for j in held)
            if site is not None:
                self.service.observe_site(site)
            self.service.observe_cluster(view, now, held_jobs=waiting, started=started_keys(jobs),
                                         in_queue=queue_keys(jobs), queue_read_at=read_at)
            self.service.observe_pins(jobs, now)
            self.service.observe_running(jobs, now, unheld=unheld_slots(nodes, jobs))
            self.last_sync = now
        if self.slurm_ok is not True:
            self.errors.clear("slurm")
        self.slurm_ok = True
        self.slurm_problem = None
        if not self.leading:
            self.last_cycle = now
            return None  # standby: keep the view warm, act on nothing
        self._track_held(held, jobs)
        self.admin_held.update(j.job_id for j in held if j.reason == "JobHeldAdmin")
        self._notice_outside_releases(jobs, held)
        self._take_back_requeued(jobs)
        self._unstick(jobs, now)
        if not held:
            self.last_cycle = now
        return held

    def cycle(self, held) -> list[Release]:
        """Plan the held jobs through the engine and release those that fit; the releases done."""
        now = self.clock()
        with self.lock:  # plan, and reserve every release's GPUs, before acting on Slurm
            plan = self.service.plan_cycle(held, now)
            self._note_planned_starts(now, {str(j.job_id) for j in held})
        done_releases: list[Release] = []

        def done(rel):
            with self.lock:
                self.service.released()
                self.counts["released"] += 1
                if rel.request is not None and rel.choice is not None:
                    self.service.engine.observe_start(rel.request, rel.choice.gpu_ids, self.service.view, now)
                nodes = rel.choice.nodes if rel.choice else {}
                kind = DecisionKind.PLACE if rel.choice else DecisionKind.PASS
                self._record(str(rel.job_id), kind, f"released:{rel.reason}", nodes, rel.perf_class)
            self._mark_released(rel.job_id)
            self.deferred.discard(rel.job_id)
            self.released_by_pald.add(rel.job_id)
            if rel.choice is not None:
                self.released_at[rel.job_id] = now
            done_releases.append(rel)

        def failed(rel, exc):
            with self.lock:
                self.service.unreserve(rel.key)

        comments = held_comments(held)
        errors = apply_releases(plan, self.actuator, done=done, failed=failed, comments=comments)
        for job_id, err in errors:
            self._note_error("release", RuntimeError(f"job {job_id}: {err}"))
        self._give_up_on(dict(errors), comments)
        self._admin_hold([j for j in held if j.job_id in self.deferred], {r.job_id for r in done_releases})
        self.last_cycle = now
        return done_releases

    def _note_planned_starts(self, now: float, held: Collection[str]) -> None:
        """Log and record a held job's backfill reservation when it first holds one or holds
        other nodes than the last one logged for it (its planned start moves with every
        estimate, and a cycle may leave it without one for a moment: not each time):
        `palctl explain JOB` and pald's log then say what a held job waits for, and a job
        behind it that stays held can be told why (the reservation refuses it the nodes it
        holds when it would end after the planned start). `held`: the held jobs' ids (a job
        no longer held is forgotten). Caller holds the lock."""
        view = self.service.view
        now_on: dict[int | str, str] = {k: v for k, v in self.reserved_on.items()
                                        if str(k).split("_", 1)[0] in held}
        for job_id, (start, perf_class) in self.service.planned.items():
            nodes = choice_of(sorted(start.gpus), view).nodes if start.gpus is not None and view else {}
            where = compress(nodes) if nodes else "anywhere"
            now_on[job_id] = where
            if self.reserved_on.get(job_id) != where:
                log.info("job %s waits with a reservation on %s, planned start in %.0f s", job_id, where,
                         start.at - now)
                self._record(str(job_id), DecisionKind.DEFER, f"reserved:start_in_s={start.at - now:.0f}",
                             nodes, perf_class)
        self.reserved_on = now_on

    def _give_up_on(self, failed: dict[int | str, str], comments: Mapping[int | str, str]) -> None:
        """A job whose placement Slurm refused MAX_RELEASE_FAILURES cycles in a row is released
        as submitted: a PAL problem costs a job its placement, never its run."""
        self.release_failures = {j: self.release_failures.get(j, 0) + 1 for j in failed}
        for job_id, times in list(self.release_failures.items()):
            if times < MAX_RELEASE_FAILURES:
                continue
            try:
                self.actuator.release(job_id)
            except Exception as exc:  # noqa: BLE001 - try again next cycle
                self._note_error("release", RuntimeError(f"job {job_id}: {exc}"))
                continue
            mark_released(self.actuator, job_id, comments.get(job_id))
            log.warning("job %s: placement refused %d times (%s); released without PAL placement",
                        job_id, times, failed[job_id])
            with self.lock:
                self.counts["released"] += 1
                self._record(str(job_id), DecisionKind.PASS, "released:placement_refused", {}, None)
                self.service.released()
            self._mark_released(job_id)
            self.deferred.discard(job_id)
            self.released_by_pald.add(job_id)
            del self.release_failures[job_id]

    def _notice_outside_releases(self, jobs, held) -> None:
        """A deferred job (`pal:defer` tag) that is no longer held and that pald did not
        release was released behind its back. Jobs from before this pald started count only
        if it saw them held.

        - Still pending, and pald never saw it under its admin hold: its user lifted the hook's
          hold (a user hold: Lua cannot set an admin one) in the window before pald's first
          cycle. pald holds it again, once, and it waits its turn in pald's queue like any
          deferred job (`reheld`).
        - Otherwise (it started, an operator or pal-failsafe released it, or it was held again
          once already): the release stands. pald records it once and forgets it, so it is
          never placed a second time (`released_outside`)."""
        held_now = {j.job_id for j in held}
        for j in jobs:
            if (j.job_id in held_now or j.job_id in self.released_by_pald or j.ref in self.released_by_pald
                    or j.job_id in self.noticed
                    or j.state == "CANCELLED" or DEFER_TAG not in pal_tags(j.admin_comment)
                    or (j.job_id not in self.deferred and j.submit_time < self.started)):
                continue
            if j.state == "PENDING" and j.job_id not in self.admin_held and j.job_id not in self.reheld:
                self._hold_again(j.job_id, j.ref)
                continue
            self.noticed.add(j.job_id)
            with self.lock:
                self.counts["released_outside"] += 1
            log.warning("job %s was released outside pald (now %s): it runs without PAL placement",
                        j.job_id, j.state)
            self._record(str(j.job_id), DecisionKind.PASS, "released_outside_pal", {}, None)
            self._mark_released(j.job_id)
        present = {j.job_id for j in jobs} | {j.ref for j in jobs}
        self.deferred = held_now
        self.released_by_pald &= present
        self.noticed &= present
        self.admin_held &= present
        self.reheld &= present

    def _hold_again(self, job_id: int, ref: int | str) -> None:
        """Put a deferred job its user released back under pald's (admin) hold (by `ref`, its
        scontrol name: an array element's job id may be the array's, which names them all)."""
        try:
            self.actuator.hold(ref)
        except Exception as exc:  # noqa: BLE001 - it started meanwhile, or Slurm refused: next sync sees which
            self._note_error("hold", exc)
            return
        self.reheld.add(job_id)
        self.admin_held.add(job_id)
        with self.lock:
            self.counts["reheld"] += 1
        log.warning("job %s: its user released it before pald's admin hold; held again, it waits its turn",
                    job_id)
        self._record(str(job_id), DecisionKind.DEFER, "reheld:released_by_user", {}, None)

    def _unstick(self, jobs, now: float) -> None:
        """A job pald pinned and released that has not started `release_start_s` later waits on
        PAL's pins, maybe for ever (its node drained after the release, its GPUs went to a job
        Slurm preferred). pald drops the node pin and holds it again (tagged
        ``pal:defer;unstuck=<n>`` first: the hold is pald's, tags.py): the next cycle places it
        anew on what is free then. Stuck a second time (MAX_REPLACES), it keeps no node pin
        and is left to Slurm. Each step is counted (`unstuck`) and recorded. A job its user
        (or an operator) held meanwhile is theirs: pald waits, and its clock starts again when
        it is released.

        What it tracks is rebuilt from Slurm, so a restart loses none of it: a pending job on a
        pin pald made (pins.pin_key: ``job:<ref>``) that it does not track is tracked from this
        read on, and how often a job was held again is its ``pal:defer;unstuck=<n>`` tags."""
        bound = self.config.daemon.release_start_s
        states = {**{j.job_id: j for j in jobs}, **{j.ref: j for j in jobs}}  # array elements by A_I
        for j in jobs:
            key = pins.pin_key(j)
            if key is not None and key.startswith("job:"):
                self.released_at.setdefault(j.ref, now)
                self.replaced[j.ref] = max(self.replaced.get(j.ref, 0), times_unstuck(j.admin_comment))
        for job_id, since in list(self.released_at.items()):
            j = states.get(job_id)
            if j is None or j.state != "PENDING":  # started or gone
                del self.released_at[job_id]
                continue
            if j.held:  # held by its user or an operator: theirs until they release it
                self.released_at[job_id] = now
                continue
            if now - since < bound:
                continue
            again = self.replaced.get(job_id, 0) < MAX_REPLACES
            try:
                self.actuator.unpin(job_id)
                if again:
                    times = self.replaced.get(job_id, 0) + 1
                    self.actuator.set_admin_comment(job_id, with_tag(j.admin_comment, f"{DEFER_TAG};unstuck={times}"))
                    self.actuator.hold(job_id)
            except Exception as exc:  # noqa: BLE001 - it started meanwhile, or Slurm refused: next sync
                self._note_error("unstick", RuntimeError(f"job {job_id}: {exc}"))
                continue
            del self.released_at[job_id]
            if again:
                self.replaced[job_id] = self.replaced.get(job_id, 0) + 1
                self.admin_held.add(job_id)
                self.released_by_pald.discard(job_id)
            with self.lock:
                self.counts["unstuck"] += 1
            what = "held again to be placed anew" if again else "left to Slurm without a node pin"
            log.warning("job %s: released %.0f s ago on %s and not started; %s", job_id, now - since,
                        ",".join(j.required_nodes) or "?", what)
            self._record(str(job_id), DecisionKind.DEFER if again else DecisionKind.PASS,
                         "unstuck:replace" if again else "unstuck:unpinned", {}, None)
        present = set(states)
        self.replaced = {k: v for k, v in self.replaced.items() if k in present}

    def _take_back_requeued(self, jobs) -> None:
        """PAL jobs Slurm requeued go back into pald's queue, to be placed again (requeue.py):
        tagged first, then held; the next sync plans them. A failure leaves the job to Slurm
        as it was (pinned to its old placement) and is retried next sync, unless the tag got
        written (then Slurm runs it where it was: a PAL problem never costs a job its run)."""
        for j in jobs:
            if not requeue.to_take_back(j):
                continue
            try:
                self.actuator.set_admin_comment(j.ref, requeue.tagged_comment(j))  # A_I: not its array
                self.actuator.hold(j.ref)
            except Exception as exc:  # noqa: BLE001 - one job's failure must not stop the others
                self._note_error("requeue", RuntimeError(f"job {j.job_id}: {exc}"))
                continue
            with self.lock:
                self.counts["requeued"] += 1
            log.info("job %s was requeued (restart %d): back in pald's queue to be placed again",
                     j.job_id, j.restart_count)
            self._record(str(j.job_id), DecisionKind.DEFER, f"requeued:{j.restart_count}", {}, None)

    def _admin_hold(self, held, released: Collection[int | str] = ()) -> None:
        """Turn the hook's hold (priority 0, JobHeldUser: its user may `scontrol release` it and
        jump pald's queue) into an admin hold (JobHeldAdmin), which only an Operator or above
        lifts. pald runs as one (its own user with AdminLevel=Operator, SlurmUser or root), so
        `scontrol hold` here is an admin hold.

        `held` was read before this cycle's releases (`released`): an array's record is held
        by the names of the elements it still has (`JobInfo.own_ref`), never by the array's
        job id, which would hold again the elements just released (a flaky 30 s wait, found
        by tests/integration/test_site_compat.py's array test)."""
        refs, user_held = [], []
        for j in held:
            if j.reason == "JobHeldAdmin":
                continue
            try:
                ref = j.own_ref(without=released)
            except SlurmError as exc:  # an array task string not read: the plan passed it to Slurm
                self._note_error("hold", exc)
                continue
            if ref is not None:
                refs.append(ref)
                user_held.append(j.job_id)
        if not refs:
            return
        try:
            self.actuator.hold_many(refs)
        except Exception as exc:  # noqa: BLE001 - the jobs stay held as they were; next cycle retries
            self._note_error("hold", exc)
            return
        self.admin_held.update(user_held)

    def _track_held(self, held, jobs) -> None:
        """Record each PAL-held job in the store once. `held_seen` keeps only jobs Slurm still
        shows (a job gone from squeue never comes back), so it stays the size of the queue."""
        if self.link is None:
            return
        self.held_seen &= {j.job_id for j in jobs}
        for j in held:
            if j.job_id in self.held_seen:
                continue
            try:
                gpus = held_shape(j, None).total
            except ShapeError:
                gpus = 0  # no GPU request: the cycle releases it untouched
            self.link.add_held_job(HeldJob(
                job_id=str(j.job_id), perf_class=self.service.settings.default_class,
                gpus=gpus,
                submitted_at=datetime.fromtimestamp(j.submit_time or self.clock(), timezone.utc)))
            self.held_seen.add(j.job_id)

    def _mark_released(self, job_id: int | str) -> None:
        if self.link is not None:
            self.link.mark_released(str(job_id))  # queued: a release never waits on the store

    # ---- heartbeat -------------------------------------------------------------------------
    def heartbeat(self) -> None:
        path = Path(self.config.daemon.heartbeat_file)
        with self.lock:
            rank, held_jobs = self.service.rank_version, self.service.held_jobs
        # synced_at: the last complete cycle (pald's start until there is one); pal-failsafe
        # counts the heartbeat as old as the older of the two times.
        doc = {"pid": os.getpid(), "host": socket.gethostname(), "at": self.clock(),
               "synced_at": self.last_cycle if self.last_cycle is not None else self.started,
               "rank": rank, "held_jobs": held_jobs}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, path)
        except OSError as exc:
            self._note_error("heartbeat", exc)
        if self.link is not None:
            self.link.heartbeat(Heartbeat("pald", f"{doc['host']}:{doc['pid']}", datetime.now(timezone.utc),
                                          {"rank": doc["rank"]}))

    # ---- loops -----------------------------------------------------------------------------
    async def run_loops(self, stop: asyncio.Event) -> None:
        cycle = self.config.daemon.cycle_s
        while not stop.is_set():
            try:
                self.apply_store_read()
                cycle_started = time.monotonic()
                await asyncio.to_thread(self.sync_and_cycle)
                cycle_s = time.monotonic() - cycle_started
                await asyncio.to_thread(self.heartbeat)
                for observe in self.cycle_observers:
                    observe(cycle_s)
            except Exception as exc:  # noqa: BLE001 - never let the loop die
                self._note_error("loop", exc)
            delay = until_next_tick(time.time(), cycle)
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
