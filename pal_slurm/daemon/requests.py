"""pald's answers to the socket's requests: `place` (the submit hook), `health`, `reload`, and
`samples` (compute nodes' MUNGE-signed samples, sample_intake.py).

It runs on the event loop's thread and reads memory only: `place` never waits on Slurm or the
database (the decision state is behind the shared lock, state.py; the store is reached through
the link's queue). `reload` and `samples` are the answers that wait (the store read; `unmunge`),
and they wait off the loop (`asyncio.to_thread`).

A placement, deferral or pass is counted and recorded only in `settle`, once the server knows
whether its reply reached the hook's socket (a hook that gave up and closed took none).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace
from collections.abc import Callable

from pal_slurm.daemon.error_log import MAX_ERROR_TEXT
from pal_slurm.daemon.leadership import LeaderWatch
from pal_slurm.daemon.server import Answer
from pal_slurm.daemon.protocol import (
    ErrorCode,
    ErrorReply,
    HealthReply,
    HealthRequest,
    PlaceReply,
    PlaceRequest,
    ReloadReply,
    ReloadRequest,
    Reply,
    Request,
    SamplesReply,
    SamplesRequest,
)
from pal_slurm.daemon.sample_intake import Refused, SampleIntake
from pal_slurm.daemon.state import DaemonState
from pal_slurm.daemon.store_link import DEADLINE_S, LinkStatus
from pal_slurm.model import DecisionKind
from pal_slurm.model.modes import OFF, SHADOW, SHADOW_PREFIX, DefaultOn
from pal_slurm.model.site_rules import SiteRules
from pal_slurm.intake.job import Pass, SubmitRules, from_hook, partitions_of
from pal_slurm.intake.refusals import refused_input
from pal_slurm.slurm.errors import SlurmUnsupported

log = logging.getLogger("pald")

RELOAD_WAIT_S = DEADLINE_S  # `reload` waits this long for the store read (off the loop)



class Requests:
    """Answers decoded requests (`answer`), and settles each reply once written (`settle`).
    `slurm_release`: what health says of the Slurm pald reads."""

    def __init__(self, state: DaemonState, leadership: LeaderWatch, slurm_release: Callable[[], str | None],
                 default_on: DefaultOn | None = None, site_rules: SiteRules | None = None,
                 samples: SampleIntake | None = None) -> None:
        self.state = state
        self.samples = samples  # None: pald has no store to put compute nodes' samples in
        self.default_on = default_on or DefaultOn()
        self.site_rules = site_rules or SiteRules()
        self.leadership = leadership
        self.slurm_release = slurm_release
        self._req_seq = 0
        # id(request) -> (the request, its reservation key, the reply) until the server settles it
        self.unsettled: dict[int, tuple[PlaceRequest, str, PlaceReply]] = {}
        # id(request) -> what pald would have answered, for a job in a shadow partition (it passes)
        self.shadowed: dict[int, PlaceReply] = {}

    def handle(self, request: Request) -> Answer:
        """Answer one request for a caller that holds the reply itself (tests, tools): what
        the answer decided is settled at once, as delivered. Never raises."""
        reply = self.answer(request)
        if not asyncio.iscoroutine(reply):
            self.settle(request, reply, written=True)
        return reply

    def answer(self, request: Request) -> Answer:
        """Answer one decoded request for the socket server (never raises: errors become
        ErrorReply). Counted and recorded in `settle` (module docstring): pald frozen between
        its last deadline check and the write answers a hook that has given up and closed."""
        try:
            if isinstance(request, PlaceRequest):
                return self._place(request)
            if isinstance(request, HealthRequest):
                return self.health()
            if isinstance(request, ReloadRequest):
                return self._reload()  # awaited by the server: the store read runs off the loop
            if isinstance(request, SamplesRequest):
                return self._samples(request)  # awaited by the server: unmunge runs off the loop
            return ErrorReply(ErrorCode.UNKNOWN_OP.value, f"unsupported request {type(request).__name__}")
        except Exception as exc:  # noqa: BLE001 - the hook must always get an answer
            # one line per failure (the traceback at debug): a request is user text, and a
            # traceback per submission is a log a user can fill
            log.debug("request failed", exc_info=True)
            self.state.note_error("request", exc)
            return ErrorReply(ErrorCode.INTERNAL.value, f"pald failed: {exc}")

    def _place(self, req: PlaceRequest) -> PlaceReply:
        """intake -> service (the engine) -> reply: the request read into the engine's job in one
        call (intake.job.from_hook: partitions, spec check, site rules, shape, restrictions),
        then decided by the service under the lock."""
        state = self.state
        if req.deadline_ms is not None and req.expired(state.clock()):
            return self._late(req)
        if state.switches.paused:  # `palctl pause`: the job runs as Slurm places it
            with state.lock:
                state.counts["pass"] += 1
                state.counts["paused"] += 1
            return PlaceReply(DecisionKind.PASS, reason="paused")
        if not self.leadership.leading():
            # a standby pald must not promise GPUs: the active one does; the job passes
            with state.lock:
                state.counts["pass"] += 1
                state.counts["standby"] += 1  # visible in health / palctl status
            return PlaceReply(DecisionKind.PASS, reason="standby")
        now = state.clock()
        service = state.service
        site = service.site
        default = site.default_partition.name if site is not None and site.default_partition is not None else None
        # the partitions it may run in (PAL's mode is the most cautious of theirs)
        partitions = partitions_of(req.job, default)
        mode = state.modes.of_job(partitions)
        if mode == OFF:  # every partition it may run in is off: untouched, as if PAL were not there
            with state.lock:
                state.counts["pass"] += 1
                state.counts["partition_off"] += 1
            return PlaceReply(DecisionKind.PASS, reason="partition_off")
        self._req_seq += 1
        key = req.request_id or f"pald-{os.getpid()}-{self._req_seq}"
        rules = SubmitRules(self.default_on, self.site_rules, service.settings.default_class)
        got = from_hook(req.job, req.pal, f"req:{key}", now, service.class_map, partitions, rules)
        if isinstance(got, Pass) and got.refused_spec:  # defence in depth: the hook's parse must be the comment's
            reply = PlaceReply(DecisionKind.PASS, reason=got.reason, warning=got.warning)
        else:
            with state.lock:
                reply = service.place(got, now, req.job.uid)
                if got.notice is not None:
                    reply = replace(reply, warning="; ".join(w for w in (got.notice, reply.warning) if w))
                expired = req.deadline_ms is not None and req.expired(state.clock())  # again, just before the reply
                if expired or mode == SHADOW:  # shadow: decided as when on, then nothing kept
                    service.retract(f"req:{key}", reply.decision)
            if expired:
                return self._late(req)
            if reply.decision is DecisionKind.PASS and refused_input(reply.reason):
                log.warning("request %s (uid %s): passed, %s (%s)", key, req.job.uid, reply.reason,
                            (reply.warning or "")[:MAX_ERROR_TEXT])
        if mode == SHADOW:
            would, reply = reply, PlaceReply(DecisionKind.PASS, reason="shadow")
            with state.lock:
                self.shadowed[id(req)] = would
        with state.lock:
            self.unsettled[id(req)] = (req, f"req:{key}", reply)
        return reply

    def settle(self, request: Request, reply: Reply, written: bool) -> None:
        """The server wrote `reply` to the hook's socket (`written`) or could not: the hook
        gave up and closed it (its deadline passed while pald was frozen), so the placement
        was never written into the job (it passed as submitted) and is taken back and counted
        late, like a request read too late. A reply that reached the socket is counted and
        recorded (once) even if it went out just past `deadline_ms`: the hook still takes a
        reply that is waiting when it looks (and `deadline_ms` is the floor of its deadline),
        so taking that placement back would let a later request double-book its GPUs."""
        state = self.state
        with state.lock:
            pending = self.unsettled.pop(id(request), None)
            if pending is None:
                return
            placed, key, answered = pending
            would = self.shadowed.pop(id(request), None)
            if not written:
                state.service.retract(key, answered.decision)
                state.counts["late"] += 1
                log.info("request %s: the hook closed before the reply (deadline %s): not recorded",
                         placed.request_id, placed.deadline_ms)
                return
            state.counts[answered.decision.value] += 1
            if would is not None:  # what pald would have done: `palctl trial report` reads it
                state.counts["shadow"] += 1
                state.record(key, would.decision, f"{SHADOW_PREFIX}{would.reason or ''}", would.nodes,
                             would.perf_class)
                return
            state.record(key, answered.decision, answered.reason or "", answered.nodes, answered.perf_class)

    def _late(self, req: PlaceRequest) -> PlaceReply:
        """The hook gave up on this request (it passed the job as submitted): answer, but
        record, reserve and count nothing, since no placement was written into the job."""
        self.state.count("late")
        log.debug("dropped request %s: past its deadline %s", req.request_id, req.deadline_ms)
        return PlaceReply(DecisionKind.PASS, reason="late")

    async def _samples(self, req: SamplesRequest) -> Reply:
        intake = self.samples
        if intake is None:
            return ErrorReply(ErrorCode.UNAVAILABLE.value, "this pald has no store for samples")
        try:
            taken = await asyncio.to_thread(intake.take, req.credential)
        except Refused as exc:
            return ErrorReply(ErrorCode.REFUSED.value, f"{exc.reason}: {exc}"[:MAX_ERROR_TEXT])
        return SamplesReply(stored=taken.stored, duplicate=taken.duplicate)

    async def _reload(self) -> ReloadReply:
        link = self.state.link
        if link is not None:
            if link.running:
                await asyncio.to_thread(link.request_refresh, RELOAD_WAIT_S)
            else:
                await asyncio.to_thread(link.read_now)
            self.state.apply_store_read()
        store = self.state.store_status()
        note = "" if store is None or store.healthy else f" (store {store.state}: kept the last ranking)"
        with self.state.lock:
            rank = self.state.service.rank_version
        paused = "; paused: every job passes" if self.state.switches.paused else ""
        return ReloadReply(rank=rank, message=f"serving ranking v{rank}{note}{paused}")

    def health(self) -> HealthReply:
        store = self.state.store_status()  # the link's own state, outside the lock
        with self.state.lock:
            return self._health(store)

    def _health(self, store: LinkStatus | None) -> HealthReply:
        state = self.state
        service = state.service
        now = state.clock()
        degraded = (store is not None and not store.healthy) or state.slurm_ok is False or service.view is None
        return HealthReply(
            status="degraded" if degraded else "ok",
            rank=service.rank_version,
            details={
                "pid": os.getpid(),
                "uptime_s": round(now - state.started, 1),
                "store": "none" if store is None else store.state,
                "slurm": self._slurm_state(),
                "slurm_release": self.slurm_release(),
                "slurm_error": None if state.slurm_problem is None else str(state.slurm_problem)[:500],
                "last_sync_age_s": None if state.last_sync is None else round(now - state.last_sync, 1),
                "last_cycle_age_s": None if state.last_cycle is None else round(now - state.last_cycle, 1),
                "gpus": service.view.size if service.view else 0,
                "free_gpus": len(service.free_now()),
                "reservations": len(service.reservations),
                "reserved_gpus": len(set().union(*[r.gpu_ids for r in service.reservations.values()])),
                # held jobs that wait with a backfill reservation: where, and in how many seconds
                "planned_starts": {str(job_id): {"nodes": state.reserved_on.get(job_id, "?"),
                                                 "in_s": round(start.at - now, 1)}
                                   for job_id, (start, _) in service.planned.items()},
                "held_jobs": service.queue.held_jobs,
                # held jobs the last cycle kept held for a job-count limit: job -> Slurm's reason
                "limited": {str(job_id): why for job_id, why in state.limited.items()},
                "leader": self.leadership.leading(),
                "paused": state.switches.paused,
                "leader_state": self.leadership.state(),
                "rack_timers_s": service.rack_timers(),
                "buffered_decisions": 0 if store is None else store.buffered,
                "store_dropped": 0 if store is None else store.dropped,
                "store_error": "" if store is None else store.error,
                "counts": dict(state.counts),
                "recent_errors": list(state.recent_errors),
            },
        )

    def _slurm_state(self) -> str:
        """ok / unknown (no read yet) / unreachable / unsupported (a release or JSON shape this
        pal-slurm does not read: upgrade pal-slurm; PAL jobs pass meanwhile)."""
        state = self.state
        if state.slurm_ok is None:
            return "unknown"
        if state.slurm_ok:
            return "ok"
        return "unsupported" if isinstance(state.slurm_problem, SlurmUnsupported) else "unreachable"
