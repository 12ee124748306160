"""A deadline for blocking calls pald makes on its own threads (store, leadership lock).

Drivers do not time out on every hang (a SIGSTOPped PostgreSQL answers TCP forever), so the
thread making a call marks it (`with watchdog.call():`) and a small watchdog thread calls
`interrupt()` (the repository's or the lock's) once the call overruns `deadline_s`. Whoever
reports health reads `in_flight_s()`; `overran` says whether the last call was broken.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger("pald")


class CallWatchdog:
    def __init__(self, what: str, deadline_s: float, interrupt: Callable[[], int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.deadline_s = deadline_s
        self._interrupt = interrupt
        self.clock = clock
        self._started: float | None = None
        self.overran = False  # the call in progress (or the last one) was interrupted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def call(self) -> Iterator[None]:
        self.overran = False
        self._started = self.clock()
        try:
            yield
        finally:
            self._started = None

    def in_flight_s(self) -> float | None:
        started = self._started
        return None if started is None else max(0.0, self.clock() - started)

    def check(self) -> None:
        """Interrupt the call in progress if it overran (the watchdog thread's step)."""
        started = self._started
        if started is None or self.overran or self.clock() - started <= self.deadline_s:
            return
        self.overran = True
        try:
            broken = self._interrupt()
        except Exception as exc:  # noqa: BLE001
            log.error("%s: cannot interrupt a stuck call: %s", self.what, exc)
            return
        log.error("%s: a call took longer than %.1f s: interrupted %d connection(s)",
                  self.what, self.deadline_s, broken)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"{self.what}-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None

    def _run(self) -> None:
        step = max(0.05, self.deadline_s / 4)
        while not self._stop.wait(step):
            self.check()
