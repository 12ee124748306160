"""pald prunes its own history: decisions, samples and finished held-job rows age out.

Without it the store grows with every job (a decision row per submission, a sample per GPU
per job) until someone remembers `palctl db prune`. The active pald prunes every
`[store] prune_every_s` on the store thread, in batches of `BATCH_ROWS` per kind (each batch
one short transaction under the store call's deadline, so a year of backlog never holds a
lock for long, and writes queued meanwhile wait one batch at most). What rankings need is
never pruned: samples younger than `[profiling] window_s` (what `palctl rank` reads) and the
newest `keep_samples` of every GPU and class. Ranking snapshots are never pruned.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from pal_slurm.config import Config

log = logging.getLogger("pald.retention")

BATCH_ROWS = 5000  # rows of each kind per transaction
MAX_BATCHES = 200  # per pass: a larger backlog is finished by the next passes


@dataclass(frozen=True)
class RetentionPolicy:
    retention_s: float  # 0: keep everything
    keep_samples: int
    window_s: float  # the ranking window: never cut into
    every_s: float

    @classmethod
    def from_config(cls, config: Config) -> RetentionPolicy:
        s = config.store
        return cls(s.retention_s, s.keep_samples, config.profiling.window_s, s.prune_every_s)

    @property
    def enabled(self) -> bool:
        return self.retention_s > 0

    def cutoff(self, now: datetime) -> datetime:
        """Rows older than this go."""
        return now - timedelta(seconds=max(self.retention_s, self.window_s))


class Pruner:
    """When to prune (`due`) and one pass of it (`run`, on the store thread). `may_prune` says
    whether this pald leads: a standby leaves the store to the leader."""

    def __init__(self, policy: RetentionPolicy, may_prune: Callable[[], bool], *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 batch_rows: int = BATCH_ROWS) -> None:
        self.policy = policy
        self.may_prune = may_prune
        self.clock, self.wall = clock, wall
        self.batch_rows = batch_rows
        self.next_at = clock() + min(policy.every_s, 60.0)  # the first pass soon after start
        self.passes = 0
        self.deleted: dict[str, int] = {}

    def due(self) -> bool:
        return self.policy.enabled and self.clock() >= self.next_at

    def run(self, call: Callable[[Callable[[Any], Any]], Any]) -> dict[str, int]:
        """One pass: batches through `call(fn)` (the store link's deadline-guarded call) until
        each kind deletes less than a batch. The next pass is scheduled first, so a failing
        store is tried again one period later, not every cycle. Raises what `call` raises."""
        self.next_at = self.clock() + self.policy.every_s
        if not self.may_prune():
            return {}
        before = self.policy.cutoff(self.wall())
        total: dict[str, int] = {}
        for _ in range(MAX_BATCHES):
            counts = call(lambda repo: repo.prune(before, keep_samples=self.policy.keep_samples,
                                                  max_rows=self.batch_rows))
            for kind, n in counts.items():
                total[kind] = total.get(kind, 0) + n
            if max(counts.values(), default=0) < self.batch_rows:
                break
        self.passes += 1
        for kind, n in total.items():
            self.deleted[kind] = self.deleted.get(kind, 0) + n
        if any(total.values()):
            log.info("pruned rows older than %s: %s", f"{before:%Y-%m-%d %H:%M} UTC",
                     ", ".join(f"{n} {kind}" for kind, n in total.items()))
        return total
