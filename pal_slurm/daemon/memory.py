"""pald's garbage collection: the state each Slurm read builds is frozen out of the collector.

Why: at a large site the collector tracks some 1.2 million objects, most of them a read's (jobs,
nodes, the shape index), and each of Python's generational collections that reaches them walks them
all while the socket thread waits: place's p99 was set by those pauses, not by placing
(benchmarks/place_latency.py at 8,192 nodes x 8 GPUs, 50,000 held, 100,000 running, the same
host and minute: socket round trip p99 3.97 ms as Python collects, 1.16 ms with the state
frozen after each read; in process, with the site view, 3.45 and 1.10 ms).

Frozen objects are still freed by reference counting when pald drops them; only garbage in
reference cycles waits for the next full collection, which runs every `full_every_s` on pald's
worker thread (unfreeze, collect, freeze). That collection still holds the interpreter, so an
answer due meanwhile waits for it: once every `full_every_s` instead of at whichever request
met a collection of the old generations.
"""

from __future__ import annotations

import gc
import time
from typing import Callable


class FrozenAfterRead:
    """Call `after_read` when a Slurm read has been applied (daemon.app.Pald.sync)."""

    def __init__(self, full_every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every_s = full_every_s
        self.clock = clock
        self.last_full = clock()
        self.full_collections = 0

    def after_read(self) -> None:
        now = self.clock()
        if now - self.last_full >= self.full_every_s:
            gc.unfreeze()
            gc.collect()
            self.last_full = now
            self.full_collections += 1
        gc.freeze()
