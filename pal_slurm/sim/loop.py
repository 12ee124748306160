"""The simulator's one event loop, and its clock: both modes run on it.

Time advances from event to event on a heap of (time, seq, kind, payload); `seq` increases
monotonically, so events at the same time are handled in the order they were scheduled and a
run repeats exactly (SimPy's rule). A mode registers one handler per event kind; after every
event at one instant is handled, the mode's `decide(t)` runs once if any handler said that
something changed. The event mode's kinds are arrivals, finishes and wake-ups (sim/event.py);
compat's is one periodic kind, the artifact's round (sim/compat.py: each round pushes the next).

The loop is the engine's Clock for the run (`now()`: the instant being handled), the one the
simulator's Actuator (sim.core.SimActuator) starts jobs at.
"""

from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence

from pal_slurm.sim.errors import SimulationError

Event = tuple[float, int, int, object]  # (time, seq, kind, payload)
Handler = Callable[[float, object], bool]  # (t, payload) -> whether a decision is called for


class EventLoop:
    def __init__(self, label: str, max_events: int):
        self.label = label  # the run's name in errors (trace/policy)
        self.max_events = max_events  # a guard: a run that never ends is an error, not a hang
        self.heap: list[Event] = []
        self.seq = 0
        self.t = 0.0
        self.events = 0  # events handled (or dropped as stale: `dropped`)

    def now(self) -> float:
        return self.t

    def push(self, t: float, kind: int, payload: object) -> None:
        if not math.isfinite(t):  # NaN never equals itself: the loop would spin forever
            raise SimulationError(f"{self.label}: event at non-finite time {t!r} ({kind}, {payload})")
        heapq.heappush(self.heap, (t, self.seq, kind, payload))
        self.seq += 1

    def dropped(self, keep: Callable[[Event], bool]) -> None:
        """Drop the queued events `keep` refuses (they count as handled); the others keep their
        order (time, sequence)."""
        heap = self.heap
        live = [e for e in heap if keep(e)]
        self.events += len(heap) - len(live)
        heap[:] = live
        heapq.heapify(heap)

    def run(self, handlers: Sequence[Handler], decide: Callable[[float], None] | None = None,
            before: Callable[[float], None] | None = None, tidy: Callable[[], None] | None = None) -> None:
        """Handle events until none is left. `tidy()` runs before each instant is read (it may
        drop events), `before(t)` when the clock moves to t, before its events."""
        heap = self.heap
        while heap:
            if tidy is not None:
                tidy()
            t = heap[0][0]
            if before is not None:
                before(t)
            self.t = t
            changed = False
            while heap and heap[0][0] == t:
                _t, _s, kind, payload = heapq.heappop(heap)
                self.events += 1
                if self.events > self.max_events:
                    raise SimulationError(f"{self.label}: more than {self.max_events} events")
                changed |= handlers[kind](t, payload)
            if changed and decide is not None:
                decide(t)
