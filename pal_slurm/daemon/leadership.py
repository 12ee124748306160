"""Whether this pald leads, decided off the cycle: the lock is checked on its own thread.

Checking a PostgreSQL advisory lock is a database round trip; with the database frozen it
never returns. So a thread checks the lock every `every_s` (under a watchdog that breaks a
stuck check), folds each check into the lease (pal_slurm/store/lease.py: a store outage does
not cost the leadership), and `leading()` is a memory read the cycle and `place` can afford.
`check_now()` is one check on the calling thread (tests, and pald before its threads run).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from pal_slurm.daemon.watchdog import CallWatchdog
from pal_slurm.store.leader import Leadership
from pal_slurm.store.lease import Lease, LockCheck, LockState

log = logging.getLogger("pald")


class LeaderWatch:
    def __init__(self, leader: Leadership, *, grace_s: float, every_s: float = 1.0, deadline_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.leader = leader
        self.lease = Lease(grace_s, exact=leader.exact)
        self.every_s = every_s
        self.clock = clock
        self.watchdog = CallWatchdog("leadership", deadline_s, leader.interrupt, clock)
        self.last_check: LockCheck | None = None
        self._lock = threading.Lock()  # one owner of the lease: whoever holds this
        self._published: tuple[bool, float] = (False, 0.0)  # (leading, until), replaced whole
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def leading(self) -> bool:
        """A memory read for the hot path: the checker publishes (leading, until) as one tuple."""
        leading, until = self._published
        return leading and self.clock() < until

    def state(self) -> str:
        with self._lock:
            return self.lease.reason

    def check_now(self) -> bool:
        try:
            with self.watchdog.call():
                check = self.leader.check()
        except Exception as exc:  # noqa: BLE001 - a lock we cannot check is an unreachable one
            check = LockCheck(LockState.UNREACHABLE, error=str(exc))
        with self._lock:
            was = self.lease.leading
            leading = self.lease.observe(check, self.clock())
            self._published = (leading, self.lease.lead_until())
            self.last_check = check
            reason = self.lease.reason
        if leading != was:
            log.warning("%s (%s)", "now the active pald" if leading else "lost leadership: standby", reason)
        return leading

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """A first check on the caller's thread (bounded by the watchdog), then the thread."""
        if self._thread is not None:
            return
        self._stop.clear()
        self.watchdog.start()
        self.check_now()
        self._thread = threading.Thread(target=self._run, name="pald-leader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)  # a check stuck on a frozen database dies with the process
            self._thread = None
        self.watchdog.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.check_now()
