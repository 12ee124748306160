"""pald's Prometheus metrics: what an operator who already runs Prometheus scrapes and alerts on.

Three kinds of numbers, three owners, no shared mutable dicts:

- events counted where they happen (`observe_place` on the socket's event loop,
  `observe_cycle` after each cycle): prometheus_client's own counters and histograms, which
  are thread-safe;
- pald's state (held jobs, store and Slurm health, ranking, timers, per-GPU slowdowns): the
  event loop builds an immutable `PaldState` once per cycle (`state_of`) and `publish`es it by
  swapping one reference; the HTTP thread that serves /metrics only reads that reference;
- what the hook did when pald was not asked or did not answer (timeouts, pald down): the hook
  writes it into the job's admin_comment, so `HookOutcomes` counts the tags of jobs it sees in
  squeue, each job once.

Label sets are small and fixed (outcome, a reason token, class, sensitivity); no job ids. The
per-GPU gauges have node and gpu labels: one series per GPU and class, bounded by the cluster. They are rendered to text once per ranking (32,768 series on a 1,024 x 8-GPU
cluster with 4 classes would cost ~150 ms per scrape through the generic collector path) and
appended to the registry's output by our own small HTTP handler.
"""

from __future__ import annotations

import logging
import re
import socket
import time
from dataclasses import dataclass, field
from collections.abc import Coroutine, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from pal_slurm.daemon.protocol import PlaceReply, PlaceRequest, Reply, Request
from pal_slurm.daemon.server import Answer, Handler, Settle
from pal_slurm.ranking.drift import find_drift
from pal_slurm.ranking.snapshot import RankingSnapshot
from pal_slurm.slurm.readers import JobInfo

if TYPE_CHECKING:  # app.py wires this module in only through main.py
    from pal_slurm.daemon.app import Pald

log = logging.getLogger("pald.metrics")

PLACE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5)
CYCLE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
OUTCOMES = {"place": "placed", "defer": "deferred", "pass": "passed"}
_TOKEN = re.compile(r"[^a-z0-9_-]+")
_TAG = re.compile(r"(?:^|[;\s])pal:(placed|defer|pass)(?:=([^;\s]*))?")


def reason_label(reason: str | None) -> str:
    """A low-cardinality reason label: the token before the first ':' ('bad_comment:E_GPUS' ->
    'bad_comment'), lower case, only [a-z0-9_-], at most 32 characters; '' -> 'none'."""
    head = (reason or "").split(":", 1)[0].lower()
    return _TOKEN.sub("_", head)[:32].strip("_") or "none"


@dataclass(frozen=True)
class GpuSlowdown:
    node: str
    slot: int
    perf_class: str
    sf: float  # binned slowdown factor (1.0 = the median bin)
    score: float


@dataclass(frozen=True)
class PaldState:
    """Everything the gauges show, as of one moment (built on the event loop, read by scrapes)."""

    at: float = 0.0
    leader: bool = False
    store_up: bool | None = None
    slurm_up: bool | None = None
    last_sync_at: float | None = None
    buffered_decisions: int = 0
    reservations: int = 0
    gpus: int = 0
    free_gpus: int = 0
    held_jobs: int = 0
    held_oldest_submit: float | None = None
    ranking_version: int = 0
    ranking_created: float | None = None
    rack_timers: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    gpu_slowdowns: tuple[GpuSlowdown, ...] = ()


class HookOutcomes:
    """Counts the hook's admin_comment tags of jobs seen in squeue, each job once. Owned by the
    event loop (only `observe_jobs` changes it)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.seen: set[int] = set()

    def observe_jobs(self, jobs: Iterable[JobInfo]) -> None:
        current = set()
        for j in jobs:
            current.add(j.job_id)
            if j.job_id in self.seen:
                continue
            m = _TAG.search(j.admin_comment or "")
            if m is None:
                continue
            self.seen.add(j.job_id)
            kind, value = m.group(1), m.group(2)
            outcome = {"placed": "placed", "defer": "deferred", "pass": "passed"}[kind]
            self.counter.labels(outcome=outcome, reason=reason_label(value) if kind == "pass" else "none").inc()
        self.seen &= current  # jobs gone from squeue cannot come back: keep the set bounded


class PaldMetrics:
    """The registry pald serves, the event counters, and the published state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.decisions = Counter("pal_decisions", "Submit-time answers pald gave the hook, by outcome and reason.",
                                 ["outcome", "reason"], registry=self.registry)
        self.place_seconds = Histogram("pal_place_duration_seconds", "Time pald took to answer one place request.",
                                       buckets=PLACE_BUCKETS, registry=self.registry)
        self.cycle_seconds = Histogram("pal_cycle_duration_seconds",
                                       "Time of one scheduling cycle (Slurm sync, deferred-job releases).",
                                       buckets=CYCLE_BUCKETS, registry=self.registry)
        self.hook_outcomes = Counter("pal_hook_outcomes",
                                     "PAL jobs seen in squeue, by the outcome the hook tagged in admin_comment "
                                     "(passed with reason timeout or pald-down: pald did not answer in time).",
                                     ["outcome", "reason"], registry=self.registry)
        self.drift = Counter("pal_gpu_drift", "GPUs that got slower beyond [drift] threshold or changed bin "
                             "between two rankings pald served.", ["perf_class"], registry=self.registry)
        self._state = PaldState()
        self.registry.register(_StateCollector(lambda: self._state))
        # (decision, raw reason) -> labelled child: place() is the hot path, labels() is not free
        self._children: dict[tuple[str, str | None], object] = {}

    def observe_place(self, decision: str, reason: str | None, seconds: float) -> None:
        child = self._children.get((decision, reason))
        if child is None:
            child = self.decisions.labels(outcome=OUTCOMES.get(decision, decision), reason=reason_label(reason))
            if len(self._children) < 1024:  # reasons are few; never grow without bound
                self._children[(decision, reason)] = child
        child.inc()  # type: ignore[attr-defined]
        self.place_seconds.observe(seconds)

    def observe_error(self, seconds: float) -> None:
        self.decisions.labels(outcome="error", reason="internal").inc()
        self.place_seconds.observe(seconds)

    def observe_cycle(self, seconds: float) -> None:
        self.cycle_seconds.observe(seconds)

    def publish(self, state: PaldState) -> None:
        self._state = state  # one reference swap: a scrape sees the old or the new state, whole

    @property
    def state(self) -> PaldState:
        return self._state


class _StateCollector:
    """Turns the published PaldState into metric families at scrape time (HTTP thread: reads only)."""

    def __init__(self, current: Callable[[], PaldState]) -> None:
        self.current = current

    def describe(self) -> list[Metric]:
        return []  # the families depend on the state; nothing to pre-register

    def collect(self) -> Iterator[Metric]:
        s = self.current()
        now = time.time()

        def gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc)
            if value is not None:
                g.add_metric([], float(value))
            return g

        yield gauge("pal_leader", "1 when this pald is the active one (a standby passes every job).", int(s.leader))
        yield gauge("pal_store_up", "1 when the last store call worked, 0 when it failed (pald serves from memory).",
                    None if s.store_up is None else int(s.store_up))
        yield gauge("pal_slurm_up", "1 when the last Slurm sync worked.", None if s.slurm_up is None else int(s.slurm_up))
        yield gauge("pal_last_sync_timestamp_seconds", "Unix time of pald's last successful Slurm sync.", s.last_sync_at)
        yield gauge("pal_buffered_decisions", "Decisions waiting to be written to the store.", s.buffered_decisions)
        yield gauge("pal_reservations", "GPU sets promised at submit time, not yet busy in Slurm.", s.reservations)
        yield gauge("pal_gpus", "GPUs in pald's view of the cluster.", s.gpus)
        yield gauge("pal_free_gpus", "Free GPUs in pald's view (minus reservations).", s.free_gpus)
        yield gauge("pal_held_jobs", "PAL jobs held for pald (deferred).", s.held_jobs)
        yield gauge("pal_held_job_oldest_age_seconds", "Age of the oldest deferred PAL job (0 when none).",
                    0.0 if s.held_oldest_submit is None else max(0.0, now - s.held_oldest_submit))
        yield gauge("pal_ranking_version", "Version of the ranking snapshot pald serves (0: none).", s.ranking_version)
        yield gauge("pal_ranking_age_seconds", "Age of the ranking snapshot pald serves.",
                    None if s.ranking_created is None else max(0.0, now - s.ranking_created))
        timers = GaugeMetricFamily("pal_rack_wait_timer_seconds",
                                   "Seconds a deferred multi-node job of each network sensitivity waits for one "
                                   "rack (auto-tuned).", labels=["sensitivity"])
        for sens, secs in sorted(s.rack_timers.items()):
            timers.add_metric([sens], float(secs))
        yield timers
        releases = CounterMetricFamily("pal_releases", "Deferred jobs pald released (placed or passed).")
        releases.add_metric([], float(s.counts.get("released", 0)))
        yield releases
        errors = CounterMetricFamily("pal_errors", "Errors pald noted (Slurm, store, requests, releases).")
        errors.add_metric([], float(s.counts.get("errors", 0)))
        yield errors
        samples = CounterMetricFamily("pal_node_samples", "Compute nodes' samples pald took (stored), recognised "
                                      "as sent before (duplicate), and batches it refused (refused).",
                                      labels=["outcome"])
        for outcome in ("stored", "duplicate", "refused"):
            samples.add_metric([outcome], float(s.counts.get(f"samples_{outcome}", 0)))
        yield samples


def gpu_slowdowns(snapshot: RankingSnapshot | None) -> tuple[GpuSlowdown, ...]:
    if snapshot is None:
        return ()
    return tuple(GpuSlowdown(e.node, e.slot, e.perf_class, float(e.sf), float(e.score)) for e in snapshot.entries)


class Publisher:
    """Runs on pald's event loop once per cycle: builds the state, counts hook tags, and notices
    GPU drift when the served ranking changes. The only writer of what scrapes read."""

    def __init__(self, metrics: PaldMetrics, drift_threshold: float) -> None:
        self.metrics = metrics
        self.hook = HookOutcomes(metrics.hook_outcomes)
        self.drift_threshold = drift_threshold
        self._snapshot: RankingSnapshot | None = None  # the last ranking snapshot seen (to compare the next one with)
        self._slowdowns: tuple[GpuSlowdown, ...] = ()

    def publish(self, pald: Pald) -> PaldState:
        shared = pald.state
        with shared.lock:  # pald's decision state has one owner: read it under its lock
            snapshot, jobs, held_ids = shared.service.snapshot, shared.last_jobs, shared.held_ids
        if snapshot is not self._snapshot:
            self._ranking_changed(snapshot)
        self.hook.observe_jobs(jobs)
        held = [j.submit_time for j in jobs if j.job_id in held_ids and j.submit_time]
        health = pald.health().details
        state = PaldState(
            at=time.time(),
            leader=bool(pald.leading),
            store_up=pald.store_ok,
            slurm_up=shared.slurm_ok,
            last_sync_at=shared.last_sync,
            buffered_decisions=int(health.get("buffered_decisions", 0)),
            reservations=int(health.get("reservations", 0)),
            gpus=int(health.get("gpus", 0)),
            free_gpus=int(health.get("free_gpus", 0)),
            held_jobs=int(health.get("held_jobs") or 0),
            held_oldest_submit=float(min(held)) if held else None,
            ranking_version=snapshot.version if snapshot is not None else 0,
            ranking_created=_epoch(snapshot.created_at if snapshot is not None else None),
            rack_timers=dict(health.get("rack_timers_s") or {}),
            counts=dict(health.get("counts") or {}),
            gpu_slowdowns=self._slowdowns,
        )
        self.metrics.publish(state)
        return state

    def _ranking_changed(self, snapshot: RankingSnapshot | None) -> None:
        previous, self._snapshot = self._snapshot, snapshot
        self._slowdowns = gpu_slowdowns(snapshot)
        if previous is None or snapshot is None:
            return
        drifts = find_drift(previous.entries, snapshot.entries, self.drift_threshold)
        for d in drifts:
            self.metrics.drift.labels(perf_class=d.perf_class).inc()
            log.warning("GPU drift (ranking v%s -> v%s): %s", previous.version, snapshot.version, d.describe())


def _epoch(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


class Instrumented:
    """pald's request path with its place requests timed and counted: `answer` times pald's
    answer, `settle` (which the socket server calls after each write) counts it, as pald
    itself does (`Pald.settle`): an answer the server could not write (the hook gave up and
    closed its socket) was taken back by pald and is counted passed/late, not by what it said.
    Both run on the server's event loop, the one owner of the timings held in between."""

    def __init__(self, answer: Handler, settle: Settle, metrics: PaldMetrics) -> None:
        self._answer, self._settle, self.metrics = answer, settle, metrics
        self._seconds: dict[int, float] = {}  # id(request) -> time pald took to answer it, until settled

    def answer(self, request: Request) -> Answer:
        if not isinstance(request, PlaceRequest):
            return self._answer(request)
        started = time.perf_counter()
        reply = self._answer(request)
        self._seconds[id(request)] = time.perf_counter() - started
        return reply

    def settle(self, request: Request, reply: Reply, written: bool) -> None:
        self._settle(request, reply, written)
        seconds = self._seconds.pop(id(request), None)
        if seconds is None:  # not a place request (or answered by something else)
            return
        if not isinstance(reply, PlaceReply):
            self.metrics.observe_error(seconds)
        elif written:
            self.metrics.observe_place(reply.decision.value, reply.reason, seconds)
        else:
            self.metrics.observe_place("pass", "late", seconds)

    def handle(self, request: Request) -> Answer:
        """Answer and settle at once, as delivered (`Pald.handle`'s in-process form)."""
        reply = self.answer(request)
        if not isinstance(reply, Coroutine):
            self.settle(request, reply, written=True)
        return reply


def instrument(answer: Handler, settle: Settle, metrics: PaldMetrics) -> Instrumented:
    """Wrap pald's `answer` and `settle` (see `Instrumented`)."""
    return Instrumented(answer, settle, metrics)


class GpuSeriesText:
    """The per-GPU gauges as exposition text, rendered once per published tuple of slowdowns.
    Called from the HTTP threads; the lock makes one of them render while others wait."""

    HEADER = ("# HELP pal_gpu_slowdown Binned slowdown factor of each GPU per class in the served ranking "
              "(1.0 = the median bin; larger = slower).\n# TYPE pal_gpu_slowdown gauge\n")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[GpuSlowdown, ...] | None = None
        self._text = b""

    def render(self, slowdowns: tuple[GpuSlowdown, ...]) -> bytes:
        with self._lock:
            if slowdowns is not self._key:
                lines = [f'pal_gpu_slowdown{{node="{_esc(g.node)}",gpu="{g.slot}",perf_class="{_esc(g.perf_class)}"}} '
                         f"{g.sf!r}\n" for g in slowdowns]
                self._text = (self.HEADER + "".join(lines)).encode()
                self._key = slowdowns
            return self._text


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(metrics: PaldMetrics, gpu_text: GpuSeriesText) -> bytes:
    """The whole /metrics body: the registry's families, then the per-GPU gauges."""
    return generate_latest(metrics.registry) + gpu_text.render(metrics.state.gpu_slowdowns)


# A scrape is one short request: a peer that sends nothing (or stalls mid-request) is dropped
# after CONNECTION_TIMEOUT_S of silence, one that trickles bytes after CONNECTION_DEADLINE_S in
# all, and at most MAX_CONNECTIONS are served at once (one thread each); a connection over the
# bound is closed at once, so silent or slow peers cost a bounded number of threads.
CONNECTION_TIMEOUT_S = 5.0
CONNECTION_DEADLINE_S = 15.0
MAX_CONNECTIONS = 16


def serve_metrics(metrics: PaldMetrics, address: str, port: int, *,
                  timeout_s: float = CONNECTION_TIMEOUT_S, deadline_s: float = CONNECTION_DEADLINE_S,
                  max_connections: int = MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """Start the /metrics HTTP endpoint in a daemon thread; returns the server (shutdown()able).
    OSError when the address cannot be bound."""
    gpu_text = GpuSeriesText()

    class Handler(BaseHTTPRequestHandler):
        timeout = timeout_s  # socket timeout for every read and write of this connection

        def setup(self) -> None:
            super().setup()
            self._cutoff = threading.Timer(deadline_s, self._cut)  # a trickling peer: cut off
            self._cutoff.daemon = True
            self._cutoff.start()

        def _cut(self) -> None:
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def finish(self) -> None:
            self._cutoff.cancel()
            try:
                super().finish()
            except OSError:
                pass  # the peer went away, or the deadline cut it off

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                self.send_error(404, "only /metrics here")
                return
            body = exposition(metrics, gpu_text)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - scrapes are not worth a log line
            pass

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    slots = threading.BoundedSemaphore(max_connections)

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True
        block_on_close = False

        def process_request(self, request: Any, client_address: Any) -> None:
            if not slots.acquire(blocking=False):
                self.shutdown_request(request)  # over the bound: Prometheus retries next interval
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                slots.release()

    server = Server((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="pal-metrics", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", address, server.server_port)
    return server
