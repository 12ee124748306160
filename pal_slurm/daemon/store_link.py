"""pald's only way to the store: one thread owns it; everyone else talks to an outbox.

Why: a store that hangs (PostgreSQL frozen, a SQLite write lock held) must cost
pald nothing but its record keeping. So:

- writes (decisions, held jobs, releases, compute nodes' samples, the heartbeat row) are queued with `put` and return
  at once; the store thread writes them in order; a failed write stays at the head of the
  queue and is tried again after `retry_s`, so nothing is lost while the store is away. The
  queue is bounded (`max_buffered`): past it the oldest write is dropped and counted
  (`dropped`), never silently;
- reads (ranking snapshot, class map, the site's switches) run on the store thread every `refresh_s` or at once on
  `request_refresh()` (`reload`); pald takes the newest result from memory (`take_read`);
- every call has a deadline: a watchdog thread breaks a call that runs past `deadline_s`
  (`repository.interrupt()`: a frozen PostgreSQL holds a call forever otherwise), and
  `status()` reports `stalled` while a call overruns, `unreachable` after a failed call: what
  pald's health says is what the store did last, not what it did at start.

- housekeeping (retention.py's `Pruner`, when given) runs on the same thread on its own slow
  period, in batches, each batch one call under the same deadline;

`work_once()` is one pass of that work on the calling thread: the store thread's body, and
what tests and tools call when no thread runs. Only one thread may do store work at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from pal_slurm.daemon.retention import Pruner
from pal_slurm.daemon.watchdog import CallWatchdog
from pal_slurm.store.errors import InvalidRecord
from pal_slurm.store.records import DecisionRecord, HeldJob, Heartbeat, RankingSnapshot
from pal_slurm.store.switches import SiteSwitches

log = logging.getLogger("pald.store")

DEADLINE_S = 5.0  # longest a store call may take (SQLite busy timeout, PostgreSQL connect)
REFRESH_S = 5.0
RETRY_S = 1.0
MAX_BUFFERED = 10_000


# What a queued write is: (kind, record); the kind names the repository method that writes it.
WRITERS = {"decision": "record_decision", "held": "add_held_job", "released": "mark_released",
           "samples": "add_samples"}  # samples: a compute node's batch (sample_intake.py)
POLL_S = 0.2  # the store thread looks at the outbox this often (producers never signal it)


@dataclass(frozen=True)
class StoreRead:
    snapshot: RankingSnapshot | None
    classes: dict[str, str]
    switches: SiteSwitches


@dataclass(frozen=True)
class LinkStatus:
    state: str  # "unknown" (no call yet), "ok", "unreachable" (last call failed), "stalled"
    error: str  # the last failure ("" once a call succeeded again)
    buffered: int  # writes waiting
    dropped: int  # writes dropped because the queue was full
    written: int
    in_flight_s: float | None  # age of the call in progress

    @property
    def healthy(self) -> bool:
        return self.state in ("ok", "unknown")


class StoreLink:
    def __init__(self, store: Any, *, deadline_s: float = DEADLINE_S, refresh_s: float = REFRESH_S,
                 retry_s: float = RETRY_S, max_buffered: int = MAX_BUFFERED,
                 clock: Callable[[], float] = time.monotonic, pruner: Pruner | None = None) -> None:
        self.store = store
        self.pruner = pruner
        self.deadline_s, self.refresh_s, self.retry_s = deadline_s, refresh_s, retry_s
        self.max_buffered = max_buffered
        self.clock = clock
        self._cond = threading.Condition()  # reads, heartbeat, stop
        self._outbox_lock = threading.Lock()  # the outbox: the hot path takes only this
        self._outbox: deque[tuple[str, Any]] = deque()
        self._heartbeat: Heartbeat | None = None  # only the newest beat matters
        self._read: StoreRead | None = None
        self._refresh_wanted = True
        self._reads_done = 0  # refresh attempts finished (ok or not), for request_refresh(wait)
        self._reading = False
        self._next_refresh = 0.0
        self._retry_at = 0.0
        self._state, self._error = "unknown", ""
        self.watchdog = CallWatchdog("store", deadline_s, store.interrupt, clock)
        self.dropped = 0
        self.written = 0
        self._stopping = False
        self._thread: threading.Thread | None = None

    # ---- producers (any thread; never block) -------------------------------------------
    def put(self, kind: str, record: Any) -> None:
        """Queue one write (a `WRITERS` kind); the store thread picks it up within POLL_S.
        Costs a lock and an append: it runs on every `place`."""
        with self._outbox_lock:
            if len(self._outbox) >= self.max_buffered:
                self._outbox.popleft()
                self.dropped += 1
            self._outbox.append((kind, record))

    def record_decision(self, rec: DecisionRecord) -> None:
        self.put("decision", rec)

    def add_held_job(self, job: HeldJob) -> None:
        self.put("held", job)

    def mark_released(self, job_id: str) -> None:
        self.put("released", job_id)

    def add_samples(self, samples: Any) -> None:
        self.put("samples", tuple(samples))

    def heartbeat(self, beat: Heartbeat) -> None:
        with self._cond:
            self._heartbeat = beat
            self._cond.notify()

    def request_refresh(self, wait_s: float | None = None) -> bool:
        """Ask for a read now; with `wait_s`, wait (off the event loop!) until one finished.
        True when a read finished in time (successful or not: see status())."""
        with self._cond:
            target = self._reads_done + (2 if self._reading else 1)  # a read under way began too early
            self._refresh_wanted = True
            self._cond.notify_all()
            if wait_s is None:
                return False
            return self._cond.wait_for(lambda: self._reads_done >= target, timeout=wait_s)

    # ---- consumers -------------------------------------------------------------------
    def take_read(self) -> StoreRead | None:
        """The newest successful read not taken yet, else None."""
        with self._cond:
            read, self._read = self._read, None
            return read

    @property
    def buffered(self) -> int:
        return len(self._outbox)

    def status(self) -> LinkStatus:
        age = self.watchdog.in_flight_s()
        state = "stalled" if age is not None and age > self.deadline_s else self._state
        return LinkStatus(state, self._error, len(self._outbox), self.dropped, self.written, age)

    # ---- the work (one thread at a time) ------------------------------------------------
    def work_once(self) -> int:
        """Read if due, then write what is queued unless backing off. Returns writes done."""
        now = self.clock()
        if self._refresh_wanted or now >= self._next_refresh:
            self._refresh(now)
        if self.clock() < self._retry_at:
            return 0
        done = self.write_now()
        if self.pruner is not None and self.pruner.due() and self.clock() >= self._retry_at:
            self.prune_now()
        return done

    def prune_now(self) -> dict[str, int]:
        """One retention pass (see retention.py); a failure is logged by `_call` and the pass
        is tried again one prune period later."""
        if self.pruner is None:
            return {}
        try:
            return self.pruner.run(self._call)
        except Exception:  # noqa: BLE001 - the store is away: next period
            return {}

    def read_now(self) -> None:
        """Read the store now (the result comes through take_read)."""
        self._refresh(self.clock())

    def write_now(self) -> int:
        """Write what is queued, in order, until a failure; then the newest heartbeat."""
        done = 0
        while True:
            with self._outbox_lock:
                if not self._outbox:
                    break
                write = self._outbox[0]
            kind, record = write
            try:
                self._call(lambda repo: getattr(repo, WRITERS[kind])(record))
            except InvalidRecord as exc:  # the store refuses this record: keeping it blocks all
                log.error("store refused a %s record, dropped: %s", kind, exc)
                self._error = str(exc)
            except Exception:  # noqa: BLE001 - store away: keep it, retry later
                self._retry_at = self.clock() + self.retry_s
                return done
            with self._outbox_lock:
                if self._outbox and self._outbox[0] is write:  # not dropped meanwhile (full)
                    self._outbox.popleft()
            self.written += 1
            done += 1
        with self._cond:
            beat, self._heartbeat = self._heartbeat, None
        if beat is not None:
            try:
                self._call(lambda repo: repo.write_heartbeat(beat))
            except Exception:  # noqa: BLE001 - the newest beat is written next time
                self._retry_at = self.clock() + self.retry_s
                with self._cond:
                    self._heartbeat = self._heartbeat or beat
        return done

    def _refresh(self, now: float) -> None:
        with self._cond:
            self._refresh_wanted = False
            self._reading = True
        try:
            snapshot = self._call(lambda repo: repo.latest_ranking())
            classes = self._call(lambda repo: repo.app_classes())
            switches = self._call(lambda repo: repo.switches())
        except Exception:  # noqa: BLE001 - keep serving the last read
            self._next_refresh = now + self.retry_s
        else:
            with self._cond:
                self._read = StoreRead(snapshot, dict(classes), SiteSwitches.from_store(switches))
            self._next_refresh = now + self.refresh_s
        with self._cond:
            self._reading = False
            self._reads_done += 1
            self._cond.notify_all()

    def _call(self, fn: Callable[[Any], Any]) -> Any:
        try:
            with self.watchdog.call():
                result = fn(self.store)
        except InvalidRecord:
            raise
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            raise
        if self._state != "ok":
            if self._state != "unknown":
                log.info("store: recovered")
            self._state, self._error = "ok", ""
        return result

    def _failed(self, exc: BaseException) -> None:
        msg = str(exc)
        if self.watchdog.overran:
            msg = f"store call took longer than {self.deadline_s:g} s and was interrupted: {msg}"
        if msg != self._error:
            log.error("store: %s", msg)
        self._state, self._error = "unreachable", msg

    # ---- threads ---------------------------------------------------------------------
    def start(self) -> None:
        """The store thread and its watchdog (daemon threads)."""
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="pald-store", daemon=True)
        self._thread.start()
        self.watchdog.start()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def stop(self, timeout_s: float = DEADLINE_S) -> None:
        """Stop the threads after one last pass of writes (bounded by `timeout_s`)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.watchdog.stop()

    def _due(self) -> bool:
        now = self.clock()
        if self._refresh_wanted or now >= self._next_refresh:
            return True
        pending = bool(self._outbox) or self._heartbeat is not None or (self.pruner is not None and self.pruner.due())
        return pending and now >= self._retry_at

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._stopping and not self._due():
                    wake = min(self._next_refresh, self._retry_at if self._outbox else self._next_refresh)
                    self._cond.wait(timeout=max(0.01, min(POLL_S, wake - self.clock())))
                stopping = self._stopping
            if stopping:
                self._retry_at = 0.0
                self._refresh_wanted = False
                self._next_refresh = float("inf")
                try:
                    self.work_once()  # one last try to write what waits
                except Exception:  # noqa: BLE001
                    log.exception("store: final flush failed")
                return
            if self._due():
                try:
                    self.work_once()
                except Exception:  # noqa: BLE001 - the store thread must not die
                    log.exception("store: unexpected failure")
                    self._retry_at = self.clock() + self.retry_s
