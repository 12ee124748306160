"""pald's assembly: builds its parts on one shared state and runs its loops.

The parts, each a module with one job:
- state.py: the shared mutable state and its one owner, the lock (which thread holds what);
- requests.py: the socket's answers (`place`, `health`, `reload`), on the event loop;
- sync.py: read Slurm -> refresh the placement service's view, on the cycle's worker thread;
- shadow.py: where Slurm ran the jobs of `shadow` partitions, for `palctl trial report`;
- cycle.py: held jobs -> engine -> the engine's Actuator (launcher.py: pald's, over Slurm),
  on the same worker thread, with held_jobs.py's accounting of what pald did to held jobs.

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
import os
import pwd
import socket
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from pal_slurm.config import Config
from pal_slurm.daemon.cycle import HeldJobCycle, until_next_tick
from pal_slurm.daemon.held_jobs import HeldJobs
from pal_slurm.daemon.launcher import JobControl, SlurmLauncher
from pal_slurm.daemon.memory import FrozenAfterRead
from pal_slurm.daemon.leadership import LeaderWatch
from pal_slurm.daemon.protocol import HealthReply, Reply, Request
from pal_slurm.daemon.requests import RELOAD_WAIT_S, Requests
from pal_slurm.daemon.server import Answer
from pal_slurm.daemon.retention import Pruner, RetentionPolicy
from pal_slurm.daemon.sample_intake import SampleIntake
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.engine.held import Release
from pal_slurm.daemon.shadow import ShadowWatch
from pal_slurm.daemon.state import DaemonState
from pal_slurm.daemon.store_link import StoreLink
from pal_slurm.daemon.read_plan import ReadPeriods
from pal_slurm.daemon.sync import LimitsRead, NoJobRead, PriorityRead, SlurmRead, SlurmSync
from pal_slurm.engine import Clock, WallClock
from pal_slurm.policy import autotune
from pal_slurm.slurm.munge import Unmunge
from pal_slurm.slurm.readers import JobInfo
from pal_slurm.store.leader import AlwaysLeader, Leadership
from pal_slurm.store.records import Heartbeat
from pal_slurm.store.repository import Repository

__all__ = ["Pald"]


def service_settings(config: Config) -> ServiceSettings:
    """The placement service's settings from pal.toml's [daemon] and [policy]."""
    d, p = config.daemon, config.policy
    return ServiceSettings(
        placement=p.placement,
        queue=p.queue,
        locality_penalty=p.locality_penalty,
        backfill=d.backfill,
        delay_timers=autotune.rack_timers(p.rack_wait_s),
        reserve_after_s=p.reserve_after_s,
        starvation_bound_s=p.starvation_bound_s,
        default_class=p.default_class,
        default_mode=d.default_mode,
        reservation_ttl_s=d.reservation_ttl_s,
        submit_grace_s=d.submit_grace_s,
        user_reservations_max=d.user_reservations_max,
        max_view_age_s=max(5.0 * d.cycle_s, 5.0, 2.0 * config.slurm.read_floor_s, 2.0 * config.slurm.nodes_every_s),
        site_rules=d.site_rules(),
    )


def sample_intake(config: Config, state: DaemonState) -> SampleIntake | None:
    """The intake of compute nodes' samples (sample_intake.py) over pald's store link; None
    without a store. Credentials of root and of `[samples] slurmd_user` are accepted."""
    link = state.link
    if link is None:
        return None
    try:
        slurmd_uid: int | None = pwd.getpwnam(config.samples.slurmd_user).pw_uid
    except KeyError:
        slurmd_uid = None

    def node_names(node: str) -> tuple[str, str] | None:
        with state.lock:
            return state.node_names.get(node)

    return SampleIntake(Unmunge(config.samples.munge_socket), node_names,
                        {0} | ({slurmd_uid} if slurmd_uid is not None else set()), link.add_samples, state.count,
                        room=lambda: link.buffered < link.max_buffered // 2)


class Pald:
    """One daemon instance: its parts (module docstring) wired on one DaemonState. `store` may
    be None (memory only); `reader`/`actuator` are the Slurm adapter's SlurmReader /
    SlurmActuator (or fakes with the same methods in tests); `priority` reads the inputs of
    Slurm's multifactor priority for the `slurm` queue order (slurm.priority.read_site_priority);
    `limits` the site's job-count limits (slurm.job_limits.read_job_limits)."""

    def __init__(self, config: Config, store: Repository | None, reader: SlurmRead, actuator: JobControl,
                 clock: Clock | None = None, leader: Leadership | None = None,
                 priority: PriorityRead | None = None, limits: LimitsRead | None = None,
                 memory: FrozenAfterRead | None = None) -> None:
        self.config = config
        self.memory = memory  # freezes each read's state out of the collector (daemon.memory); None: Python's own
        self.leadership = LeaderWatch(leader or AlwaysLeader(), grace_s=config.daemon.leader_grace_s,
                                      every_s=config.daemon.cycle_s)
        pruner = Pruner(RetentionPolicy.from_config(config), self.leadership.leading)
        link = StoreLink(store, pruner=pruner) if store is not None else None
        service = PlacementService(service_settings(config))
        service.set_class_map({})
        self.state = DaemonState(service, link, (clock or WallClock()).now, config.daemon.modes())
        self.reader = reader
        self.actuator = actuator
        self.requests = Requests(self.state, self.leadership, lambda: self.reader.release,
                                 config.daemon.default_on_jobs(), service.settings.site_rules,
                                 sample_intake(config, self.state))
        slurm = config.slurm
        self.slurm_sync = SlurmSync(self.state, reader, slurm.topology_conf, priority, limits,
                                    ReadPeriods(slurm.read_floor_s, slurm.jobs_every_s, slurm.site_every_s,
                                                slurm.nodes_every_s, config.daemon.cycle_s / 2))
        self.held = HeldJobs(self.state, actuator, config.daemon.release_start_s)
        self.shadow = ShadowWatch(self.state)
        self.held_cycle = HeldJobCycle(self.state, SlurmLauncher(actuator), actuator, self.held)
        self.cycle_observers: list[Callable[[float], None]] = []  # called on the event loop with each cycle's duration (s)

    # ---- the socket's answers (requests.py) -------------------------------------------------
    def handle(self, request: Request) -> Answer:
        return self.requests.handle(request)

    def answer(self, request: Request) -> Answer:
        return self.requests.answer(request)

    def settle(self, request: Request, reply: Reply, written: bool) -> None:
        self.requests.settle(request, reply, written)

    def health(self) -> HealthReply:
        return self.requests.health()

    # ---- the worker thread: sync (sync.py), then the cycle (cycle.py) -----------------------
    def sync_and_cycle(self) -> None:
        """Read Slurm, refresh the view, release deferred jobs that fit (blocking: run it in a
        thread; the socket loop keeps answering meanwhile)."""
        held = self.sync()
        if held:
            self.cycle(held)

    def turn(self) -> None:
        """One turn of pald's loop: `sync_and_cycle` with the jobs read only when the read plan
        calls for it (daemon.read_plan: the nodes every nodes_every_s, the jobs on events, the
        site on a slower period). Blocking, as sync_and_cycle."""
        held = self.sync(planned=True)
        if held:
            self.cycle(held)

    def sync(self, planned: bool = False) -> list[JobInfo] | None:
        """Read Slurm and refresh the view, then the held jobs' upkeep; the PAL-held jobs to
        plan (None: nothing to act on: the read failed, read no jobs, or this pald is a
        standby). `planned`: read as the read plan says (`turn`), else read everything now."""
        try:
            return self._sync(planned)
        finally:
            if self.memory is not None:
                self.memory.after_read()

    def _sync(self, planned: bool) -> list[JobInfo] | None:
        self.check_leadership()
        read = self.slurm_sync.read_when_due() if planned else self.slurm_sync.read()
        if isinstance(read, NoJobRead):
            self.state.last_cycle = read.at  # Slurm's reads work and call for nothing to act on
            return None
        if read is None:
            return None
        if not self.leading:
            self.state.last_cycle = read.at
            return None  # standby: keep the view warm, act on nothing
        if not self.state.switches.paused:  # paused: pald holds nothing again (requeued, stuck, released by a user)
            self.held.upkeep(read.jobs, read.held, read.at)
        self.shadow.observe(read.jobs, read.at)
        if not read.held:
            self.state.last_cycle = read.at
        return list(read.held)

    def cycle(self, held: list[JobInfo]) -> list[Release]:
        """Plan the held jobs through the engine and release those that fit; the releases done."""
        return self.held_cycle.run(held)

    # ---- leadership ----------------------------------------------------------------------
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

    # ---- store (through the link: nothing here waits on the database) --------------------
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
        self.state.apply_store_read()

    @property
    def store_ok(self) -> bool | None:
        """Whether the store's last call worked (False also while one is stalled); None before
        the first call or without a store."""
        status = self.state.store_status()
        return None if status is None or status.state == "unknown" else status.state == "ok"

    # ---- heartbeat -------------------------------------------------------------------------
    def heartbeat(self) -> None:
        state = self.state
        path = Path(self.config.daemon.heartbeat_file)
        with state.lock:
            rank, held_jobs = state.service.rank_version, state.service.queue.held_jobs
        # synced_at: the last complete cycle (pald's start until there is one); pal-failsafe
        # counts the heartbeat as old as the older of the two times.
        host, pid = socket.gethostname(), os.getpid()
        doc = {"pid": pid, "host": host, "at": state.clock(),
               "synced_at": state.last_cycle if state.last_cycle is not None else state.started,
               "rank": rank, "held_jobs": held_jobs}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, path)
        except OSError as exc:
            state.note_error("heartbeat", exc)
        if self.link is not None:
            self.link.heartbeat(Heartbeat("pald", f"{host}:{pid}", datetime.now(timezone.utc), {"rank": rank}))

    # ---- loops -----------------------------------------------------------------------------
    async def run_loops(self, stop: asyncio.Event) -> None:
        cycle = self.config.daemon.cycle_s
        while not stop.is_set():
            try:
                self.apply_store_read()
                cycle_started = time.monotonic()
                await asyncio.to_thread(self.turn)
                cycle_s = time.monotonic() - cycle_started
                await asyncio.to_thread(self.heartbeat)
                for observe in self.cycle_observers:
                    observe(cycle_s)
            except Exception as exc:  # noqa: BLE001 - never let the loop die
                self.state.note_error("loop", exc)
            delay = until_next_tick(time.time(), cycle)
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass

    # ---- what tools and tests read of the parts most ----------------------------------------
    @property
    def service(self) -> PlacementService:
        return self.state.service

    @property
    def counts(self) -> dict[str, int]:
        return self.state.counts

    @property
    def link(self) -> StoreLink | None:
        return self.state.link

    @link.setter
    def link(self, link: StoreLink | None) -> None:
        self.state.link = link

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.state.clock = clock
