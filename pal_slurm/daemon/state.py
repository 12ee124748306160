"""pald's shared mutable state and its one owner: the lock.

Two threads change pald's decision state: the event loop's (the socket server answers
`place`, `health`, `reload` and settles each reply) and the cycle's worker thread (the Slurm
sync refreshes the view, the cycle plans and reserves releases). They share:

- the placement service (view, reservations, engine) and what health reports of the cycle
  (`reserved_on`, `last_jobs`, `held_ids`, `node_names`): read or changed only with `lock` held;
- `counts` and `recent_errors`: changed only through `count` and `note_error` (they take it);
- the answers not yet settled (requests.Requests.unsettled): under the lock too, as the
  placement each stands for is taken back under it.

Neither holds the lock while it waits on Slurm or the store: Slurm commands run outside it,
and store work is only queued (store_link.py: its own thread writes). The Slurm status fields
(`slurm_ok`, `last_sync`, `last_cycle`) are written by the worker thread alone and read as
plain values. What the cycle alone keeps (held_jobs.py) is the worker thread's, unlocked.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import datetime, timezone
from typing import Callable, Mapping

from pal_slurm.daemon.error_log import OnceLogger
from pal_slurm.daemon.service import PlacementService
from pal_slurm.daemon.store_link import LinkStatus, StoreLink
from pal_slurm.model import DecisionKind
from pal_slurm.slurm.readers import JobInfo
from pal_slurm.store.records import DecisionRecord
from pal_slurm.model.modes import PartitionModes
from pal_slurm.store.switches import SiteSwitches

log = logging.getLogger("pald")

COUNTS = ("place", "defer", "pass", "standby", "paused", "shadow", "partition_off", "released", "errors", "late", "released_outside", "reheld",
          "unstuck", "requeued", "samples_stored", "samples_duplicate", "samples_refused")  # what health's `counts` shows, each from 0


class DaemonState:
    """The state both threads share, behind `lock` (an RLock: a holder may call what takes it)."""

    def __init__(self, service: PlacementService, link: StoreLink | None, clock: Callable[[], float],
                 modes: PartitionModes | None = None) -> None:
        self.lock = threading.RLock()
        self.service = service
        self.link = link
        self.clock = clock
        self.started = clock()
        self.counts: dict[str, int] = dict.fromkeys(COUNTS, 0)
        self.errors = OnceLogger()
        self.recent_errors: deque[dict[str, object]] = deque(maxlen=20)
        # Slurm, as the worker thread last read it
        self.slurm_ok: bool | None = None
        self.slurm_problem: Exception | None = None  # why the last Slurm read failed
        self.last_sync: float | None = None
        self.last_cycle: float | None = None  # end of the last complete sync + release cycle
        self.last_jobs: tuple[JobInfo, ...] = ()  # jobs of the last Slurm sync (the metrics publisher)
        self.held_ids: frozenset[int] = frozenset()  # PAL-held jobs among them
        # node -> (NodeAddr, NodeHostname) of the last Slurm sync: who may send whose samples
        self.node_names: dict[str, tuple[str, str]] = {}
        self.reserved_on: dict[int | str, str] = {}  # held job -> the nodes its reservation held at the last cycle
        self.limited: dict[int | str, str] = {}  # held job -> the job-count limit that kept it held at the last cycle
        # the site's switches as the store last said (`palctl pause`): replaced whole under the
        # lock, read as one value (a request reads it once, the cycle once per cycle)
        self.switches = SiteSwitches()
        # PAL's mode per partition: pal.toml's (`file_modes`) under the store's `palctl mode` switches
        self.file_modes = modes or PartitionModes()
        self.modes = self.file_modes

    def count(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] += n

    def note_error(self, what: str, exc: BaseException) -> None:
        with self.lock:
            self.counts["errors"] += 1
            self.errors.error(what, exc)
            self.recent_errors.append({"at": round(self.clock(), 1), "what": what, "error": str(exc)[:300]})

    # ---- the store, through the link (queued: nothing here waits on the database) ----------
    def record(self, job_id: str, kind: DecisionKind, reason: str, nodes: Mapping[str, tuple[int, ...]] | None,
               perf_class: str | None) -> None:
        if self.link is None:
            return
        self.link.record_decision(
            DecisionRecord(job_id=job_id, kind=kind, reason=reason or "", nodes=dict(nodes or {}),
                           ranking_version=self.service.rank_version, perf_class=perf_class,
                           created_at=datetime.now(timezone.utc))
        )

    def mark_released(self, job_id: int | str) -> None:
        if self.link is not None:
            self.link.mark_released(str(job_id))  # queued: a release never waits on the store

    def store_status(self) -> LinkStatus | None:
        """The store link's LinkStatus, None without a store."""
        return None if self.link is None else self.link.status()

    def apply_store_read(self) -> None:
        """Serve the newest ranking snapshot, class map and switches the link read (memory
        only); with no new read (store away) the old ones stay."""
        read = None if self.link is None else self.link.take_read()
        if read is None:
            return
        with self.lock:
            if read.switches.paused != self.switches.paused:
                log.warning("%s by %s: %s", "paused" if read.switches.paused else "resumed", read.switches.changed_by,
                            "every job passes and held jobs are released" if read.switches.paused
                            else "placing jobs again")
            self.switches = read.switches
            modes = self.file_modes.overridden(read.switches.modes)
            if modes != self.modes:
                log.warning("modes: %s, every other partition %s",
                            ", ".join(f"{p}={m}" for p, m in sorted(modes.by_partition.items())) or "none named",
                            modes.default)
            self.modes = modes
            self.service.set_class_map(read.classes)
            snapshot = read.snapshot
            if snapshot is not None and (self.service.snapshot is None
                                         or snapshot.version != self.service.snapshot.version):
                log.info("serving ranking snapshot v%s (%d entries)", snapshot.version, len(snapshot.entries))
                self.service.set_snapshot(snapshot)
