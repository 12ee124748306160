"""Where the engine's `now` comes from: pald's wall clock, or a clock the caller moves (the
simulator's virtual time; tests). The engine itself never reads a clock: callers pass `now`,
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
    """A clock its owner sets (the simulator's event time, a test's script)."""

    t: float = 0.0

    def now(self) -> float:
        return self.t

    def set(self, t: float) -> None:
        self.t = float(t)
