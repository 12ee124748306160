"""A scheduler that acts on a period (pald's cycle, Slurm's backfill pass), on the simulator's
clock: whether an instant is one of its ticks, and its next tick. One rule for every decider
that models such a scheduler (sim.pald_on_slurm, sim.stock_slurm)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Period:
    """Ticks at every multiple of `seconds` (trace seconds); 0 or less: at every event."""

    seconds: float

    def is_tick(self, now: float) -> bool:
        if self.seconds <= 0:
            return True
        k = round(now / self.seconds)
        return abs(now - k * self.seconds) <= 1e-6 * max(1.0, self.seconds)

    def next_after(self, now: float) -> float | None:
        """The first tick after `now` (None: it acts at every event, no wake-up needed)."""
        if self.seconds <= 0:
            return None
        return (math.floor(now / self.seconds + 1e-9) + 1) * self.seconds
