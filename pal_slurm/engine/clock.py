"""Where the engine's `now` comes from: pald's wall clock, the simulator's event loop
(sim.loop.EventLoop: the instant it handles), or a clock the caller moves (tests). The engine itself never reads a clock: callers pass `now`,
taken from one of these."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class WallClock:
    """Seconds since the epoch (pald)."""

    def now(self) -> float:
        return time.time()


@dataclass
class ManualClock:
    """A clock its owner sets (a test's script, pald driven by a model of time)."""

    t: float = 0.0

    def now(self) -> float:
        return self.t

    def set(self, t: float) -> None:
        self.t = float(t)
