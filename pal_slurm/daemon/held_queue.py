"""The queue of held PAL jobs as the submit path sees it: how many wait ahead of a new job, and
which of them the engine can plan a newcomer behind (Engine.place_behind).

Why the submit path needs it: a new job is placed at once only where the cycle would start it
now, behind the held ones (the queue order is kept). Three sources make up that queue, and
each ends at a known step:
- the jobs the last cycle left waiting, as the engine saw them (`waiting`; None: not known, or
  some may use only some nodes);
- the hook's deferrals since the last Slurm read (`deferred_since_sync`);
- the deferrals a read already counts as held that no cycle has planned yet
  (`deferred_unplanned`): the cycle runs after the read, the lock released in between; without
  them every submission in that window was held (a lab replay: 6 of 40 jobs, each of which
  then waited for pald's next cycle and often Slurm's next pass).

Part of the placement service's state (one owner: pald's lock); no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pal_slurm.intake.tags import request_id
from pal_slurm.model import JobRequest
from pal_slurm.slurm.readers import JobInfo


@dataclass
class HeldQueue:
    held_jobs: int = 0  # PAL-held jobs in Slurm (last sync) plus deferrals since
    waiting: list[JobRequest] | None = None  # module docstring
    deferred_since_sync: dict[str, JobRequest] = field(default_factory=dict)  # key -> request
    deferred_unplanned: dict[str, JobRequest] = field(default_factory=dict)  # key -> request

    def defer(self, key: str, job: JobRequest | None = None) -> None:
        """The hook holds a new job (`job`: as the engine would plan it; None: one the submit
        path cannot plan behind, e.g. a deferral the job itself asked for)."""
        self.held_jobs += 1
        if job is not None:
            self.deferred_since_sync[key] = job

    def retract(self, key: str) -> None:
        """A deferral whose reply the hook never took: the job passed as submitted."""
        self.held_jobs = max(0, self.held_jobs - 1)
        self.deferred_since_sync.pop(key, None)
        self.deferred_unplanned.pop(key, None)

    def released(self, count: int = 1) -> None:
        self.held_jobs = max(0, self.held_jobs - count)

    def observe_read(self, held_jobs: int, now: float) -> None:
        """A Slurm read (taken at `now`) shows `held_jobs` held jobs the cycle may start."""
        self.held_jobs = held_jobs
        # deferred before this read: Slurm's held list has them now, the next cycle plans
        # them; until it does, the submit path plans behind them as it did (none held: gone)
        before = {k: j for k, j in self.deferred_since_sync.items() if j.submit_time < now}
        self.deferred_unplanned = {**self.deferred_unplanned, **before} if held_jobs else {}
        if not held_jobs:
            # nothing waits (pald runs no cycle then): not "unknown" (None, the start), and
            # not the last cycle's list (jobs since started or gone), or the first job held
            # after a quiet spell held every newcomer until a cycle ran (a lab replay: 2 jobs)
            self.waiting = []
        self.deferred_since_sync = {k: j for k, j in self.deferred_since_sync.items() if j.submit_time >= now}

    def planned(self, waiting: list[JobRequest] | None, held: Iterable[JobInfo]) -> None:
        """A cycle planned the held jobs of a read (`held`) and left `waiting` (None: unknown)."""
        self.waiting = waiting
        self.deferred_unplanned = {}  # this cycle planned them (in `held`, as Slurm's jobs)
        # ... and so it did any deferral the read behind `held` already showed (one deferred as
        # the read was taken): else the submit path planned behind it twice until the next read
        # (none since the read, the usual case: no need to read every held job's tags)
        if self.deferred_since_sync:
            for j in held:
                rid = request_id(j.admin_comment)
                if rid:
                    self.deferred_since_sync.pop(f"req:{rid}", None)

    def known(self) -> list[JobRequest] | None:
        """Every held job as the engine would plan it, in queue order; None when the submit path
        does not know them all (requeued jobs, restricted ones, the start)."""
        if self.waiting is None:
            return None
        out = [*self.waiting, *self.deferred_unplanned.values(), *self.deferred_since_sync.values()]
        return out if len(out) >= self.held_jobs else None
