"""A scheduler that acts on a period (pald's cycle, Slurm's backfill pass), on the simulator's
clock: whether an instant is one of its ticks, and its next tick. One rule for every decider
that models such a scheduler (sim.stock_slurm, pal_lab.replay.pald_model)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Period:
    """Ticks at `offset` plus every multiple of `seconds` (trace seconds); `seconds` 0 or less:
    at every event. `offset` is the phase of a scheduler whose clock does not start with the
    trace (Slurm's passes run from slurmctld's start: replay.ctldlog.pass_clock)."""

    seconds: float
    offset: float = 0.0

    def is_tick(self, now: float) -> bool:
        if self.seconds <= 0:
            return True
        since = now - self.offset
        k = round(since / self.seconds)
        return abs(since - k * self.seconds) <= 1e-6 * max(1.0, self.seconds)

    def next_after(self, now: float) -> float | None:
        """The first tick after `now` (None: it acts at every event, no wake-up needed)."""
        if self.seconds <= 0:
            return None
        return (math.floor((now - self.offset) / self.seconds + 1e-9) + 1) * self.seconds + self.offset

    def last_at_or_before(self, now: float) -> float:
        """The latest tick at or before `now` (`now` itself when it acts at every event); a tick
        within 1e-9 of a period after `now` is float noise and counts as at `now`."""
        if self.seconds <= 0:
            return now
        return math.floor((now - self.offset) / self.seconds + 1e-9) * self.seconds + self.offset
