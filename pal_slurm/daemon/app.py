"""pald's composition root: wires config, store, Slurm adapter and the placement service, and
runs the loops (Slurm sync + deferred-job cycle, store refresh, heartbeat, decision writer).

Failure behaviour, on purpose:
- the `place` answer never waits on Slurm or the database: it reads memory only;
- nothing but the store link's own thread waits on the database (store_link.py): decisions,
  held jobs and releases are queued, reads arrive in memory, `reload` waits in a worker thread;
- the store going away makes pald *degraded*, not dead: it keeps the last ranking and class
  map, buffers writes (bounded, drops counted) and writes them when the store is back;
- a Slurm command failing is logged once per distinct message and retried next cycle;
- every loop catches its own errors: a loop that dies would silently stop releasing jobs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pal_slurm.daemon.comment_grammar import CommentError, verify_spec
from pal_slurm.daemon.cycle import (
    SENSITIVITY_WAIT,
    apply_releases,
    gpus_per_node,
    is_pal_held,
    plan_releases,
    tuner_observation,
)
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
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.daemon.store_link import DEADLINE_S, StoreLink
from pal_slurm.model import DecisionKind
from pal_slurm.policy import autotune
from pal_slurm.slurm.errors import SlurmError, SlurmUnsupported
from pal_slurm.slurm.readers import cluster_view
from pal_slurm.slurm.topology import read_racks
from pal_slurm.store.leader import AlwaysLeader
from pal_slurm.store.records import DecisionRecord, HeldJob, Heartbeat

log = logging.getLogger("pald")

RELOAD_WAIT_S = DEADLINE_S  # `reload` waits this long for the store read (off the loop)
_REQ_ID = re.compile(r"(?:^|[;\s])req=([^;\s]+)")


def started_keys(jobs) -> set[str]:
    """Reservation keys of jobs Slurm no longer holds back: `job:<id>` for jobs pald released,
    `req:<id>` for jobs placed at submit (the hook writes req=<id> into admin_comment)."""
    out = set()
    for j in jobs:
        if j.state == "PENDING":
            continue
        out.add(f"job:{j.job_id}")
        m = _REQ_ID.search(j.admin_comment or "")
        if m:
            out.add(f"req:{m.group(1)}")
    return out


@dataclass
class OnceLogger:
    """Logs each distinct error message once (until it clears), so a dead Slurm or database
    does not flood the log every second."""

    seen: set[str] = field(default_factory=set)

    def error(self, what: str, exc: BaseException) -> None:
        msg = f"{what}: {exc}"
        if msg not in self.seen:
            self.seen.add(msg)
            log.error(msg)

    def clear(self, what: str) -> None:
        cleared = {m for m in self.seen if m.startswith(what + ":")}
        if cleared:
            log.info("%s: recovered", what)
        self.seen -= cleared


class Pald:
    """One daemon instance. `store` may be None (memory only); `reader`/`actuator` are the
    Slurm adapter's SlurmReader / SlurmActuator (or fakes with the same methods in tests)."""

    def __init__(self, config, store, reader, actuator, clock=time.time, leader=None):
        self.config = config
        self.leadership = LeaderWatch(leader or AlwaysLeader(), grace_s=config.daemon.leader_grace_s,
                                      every_s=config.daemon.cycle_s)
        self.link = StoreLink(store) if store is not None else None
        self.reader = reader
        self.actuator = actuator
        self.clock = clock
        d, p = config.daemon, config.policy
        self.service = PlacementService(
            ServiceSettings(
                placement=p.placement,
                locality_penalty=p.locality_penalty,
                default_class=p.default_class,
                default_mode=d.default_mode,
                reservation_ttl_s=d.reservation_ttl_s,
            )
        )
        self.service.set_class_map({})
        self.started = clock()
        self.slurm_ok: bool | None = None
        self.slurm_problem: SlurmError | Exception | None = None  # why the last Slurm read failed
        self.last_sync: float | None = None
        self.errors = OnceLogger()
        self.recent_errors: deque = deque(maxlen=20)
        self.counts = {"place": 0, "defer": 0, "pass": 0, "standby": 0, "released": 0, "errors": 0}
        self.held_seen: set[int] = set()
        self.last_jobs: tuple = ()  # jobs of the last Slurm sync (read by the metrics publisher)
        self.held_ids: frozenset[int] = frozenset()  # PAL-held jobs among them
        self.cycle_observers: list = []  # called on the event loop with each cycle's duration (s)
        self._racks: tuple[float, dict[str, str]] | None = None
        # delay-timer auto-tuner, online: starts from rack_wait_s x sensitivity, learns from releases
        self.tuner = autotune.initial_state(timers={(s, "rack"): config.policy.rack_wait_s * f
                                                    for s, f in SENSITIVITY_WAIT.items()})
        self._req_seq = 0

    # ---- requests ------------------------------------------------------------------------
    def handle(self, request) -> object:
        """Answer one decoded request (never raises: errors become ErrorReply)."""
        try:
            if isinstance(request, PlaceRequest):
                return self._place(request)
            if isinstance(request, HealthRequest):
                return self.health()
            if isinstance(request, ReloadRequest):
                return self._reload()  # awaited by the server: the store read runs off the loop
            return ErrorReply(ErrorCode.UNKNOWN_OP.value, f"unsupported request {type(request).__name__}")
        except Exception as exc:  # noqa: BLE001 - the hook must always get an answer
            log.exception("request failed")
            self._note_error("request", exc)
            return ErrorReply(ErrorCode.INTERNAL.value, f"pald failed: {exc}")

    def _place(self, req: PlaceRequest) -> PlaceReply:
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
            reply = self.service.place(req, now, key=f"req:{key}")
        self.counts[reply.decision.value] += 1
        self._record(f"req:{key}", reply.decision, reply.reason, reply.nodes, reply.perf_class)
        return reply

    async def _reload(self) -> ReloadReply:
        if self.link is not None:
            if self.link.running:
                await asyncio.to_thread(self.link.request_refresh, RELOAD_WAIT_S)
            else:
                await asyncio.to_thread(self.link.read_now)
            self.apply_store_read()
        store = self.store_status()
        note = "" if store is None or store.healthy else f" (store {store.state}: kept the last ranking)"
        return ReloadReply(rank=self.service.rank_version, message=f"serving ranking v{self.service.rank_version}{note}")

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
        now = self.clock()
        store = self.store_status()
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
                "gpus": self.service.view.size if self.service.view else 0,
                "free_gpus": len(self.service.free_now()),
                "reservations": len(self.service.reservations),
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
        self.service.set_class_map(read.classes)
        snapshot = read.snapshot
        if snapshot is not None and (self.service.snapshot is None or snapshot.version != self.service.snapshot.version):
            log.info("serving ranking snapshot v%s (%d entries)", snapshot.version, len(snapshot.entries))
            self.service.set_snapshot(snapshot)

    def _note_error(self, what: str, exc: BaseException) -> None:
        self.counts["errors"] += 1
        self.errors.error(what, exc)
        self.recent_errors.append({"at": round(self.clock(), 1), "what": what, "error": str(exc)[:300]})

    # ---- Slurm -----------------------------------------------------------------------------
    def rack_timers(self) -> dict[str, float]:
        """Seconds a multi-node job of each network sensitivity waits for one rack (tuned)."""
        return {sens: round(secs, 1) for (sens, level), secs in autotune.timers(self.tuner).items() if level == "rack"}

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
        self.check_leadership()
        try:
            nodes = self.reader.nodes()
            jobs = self.reader.jobs()
            site = self.reader.site(nodes)
        except Exception as exc:  # noqa: BLE001
            self.slurm_ok = False
            self.slurm_problem = exc
            self._note_error("slurm", exc)
            return
        now = self.clock()
        held = [j for j in jobs if is_pal_held(j)]
        self.last_jobs, self.held_ids = tuple(jobs), frozenset(j.job_id for j in held)
        if site is not None:
            self.service.observe_site(site)
        self.service.observe_cluster(cluster_view(nodes, jobs, self.racks()), now, held_jobs=len(held),
                                     started=started_keys(jobs))
        self.last_sync = now
        if self.slurm_ok is not True:
            self.errors.clear("slurm")
        self.slurm_ok = True
        self.slurm_problem = None
        if not self.leading:
            return  # standby: keep the view warm, act on nothing
        self._track_held(held)
        if not held:
            return
        plan = plan_releases(held, self.service, self.config.policy.queue, self.config.daemon.backfill,
                             now=now, rack_wait_s=self.config.policy.rack_wait_s, rack_limits=self.rack_timers())

        def record(rel):
            self.counts["released"] += 1
            obs = tuner_observation(rel, self.config.policy.locality_penalty)
            if obs is not None:
                self.tuner = autotune.observe(self.tuner, obs)
            nodes = rel.choice.nodes if rel.choice else {}
            kind = DecisionKind.PLACE if rel.choice else DecisionKind.PASS
            self._record(str(rel.job_id), kind, f"released:{rel.reason}", nodes, rel.perf_class)
            self._mark_released(rel.job_id)

        for job_id, err in apply_releases(plan, self.actuator, self.service, now, record=record):
            self._note_error("release", RuntimeError(f"job {job_id}: {err}"))

    def _track_held(self, held) -> None:
        if self.link is None:
            return
        for j in held:
            if j.job_id in self.held_seen:
                continue
            self.link.add_held_job(HeldJob(
                job_id=str(j.job_id), perf_class=self.service.settings.default_class,
                gpus=(gpus_per_node(j.tres_per_node) or 1) * max(1, j.node_count or 1),
                submitted_at=datetime.fromtimestamp(j.submit_time or self.clock(), timezone.utc)))
            self.held_seen.add(j.job_id)

    def _mark_released(self, job_id: int) -> None:
        if self.link is not None:
            self.link.mark_released(str(job_id))  # queued: a release never waits on the store

    # ---- heartbeat -------------------------------------------------------------------------
    def heartbeat(self) -> None:
        path = Path(self.config.daemon.heartbeat_file)
        doc = {"pid": os.getpid(), "host": socket.gethostname(), "at": self.clock(), "rank": self.service.rank_version,
               "held_jobs": self.service.held_jobs}
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
            started = time.monotonic()
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
            delay = max(0.05, cycle - (time.monotonic() - started))
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
