"""Starvation bound stage: no wait the placement adds may make a job start much later than
stock Slurm would start it.

The waits of the other stages (for a tighter tier, for faster bins, around a reservation for a
consolidated placement, a reservation only after `reserve_after_s`) each finish that job sooner
by the running jobs' estimates, but nothing bounds them together: on a Sia-Philly trace at a
site's timing, pal-fit started a 16-GPU job 69 hours after stock Slurm did. With the bound, a
wait for faster GPUs whose planned start is past the job's submission + `bound_s` is not
taken, and a job that has waited longer than `bound_s` is placed as stock Slurm would place
it: it takes what fits now (no wait for faster GPUs, no detour wait for a consolidated
placement), and when nothing fits it holds an EASY reservation at once, ahead of every later
job (the first `reservations` of the backfill stage's such jobs, whatever the others hold).

The wait for a tighter tier (a job on one leaf switch instead of several) is not cut: it is
bounded by the running jobs' ends and holds a reservation (past the bound, as a blocked job
does), while the spread placement it avoids runs the job for longer (2.2x for a
16-GPU DCGAN job across two leaves) on GPUs that every later job then waits for. Cutting it
raised the makespan of a synthetic trace in the replay's model by 20% against pal-fit without
the bound (load 0.5, Philly mix, seed 2, 150 trace s per wall s; benchmarks/robustness.py).

The bound is a site's: pald takes `[policy] starvation_bound_s` (config, 4 h) and a replay's
model compresses it as the trace (PlacementContext.starvation_bound_s); a run that gives none
(`palctl simulate` without `--starvation-bound`, the golden event runs) has no bound. Why no
default of its own: the golden event traces ask for 1.1x the cluster's GPU-hours, so 167 to 176
of their 240 jobs wait longer than 4 h, and a 4 h bound changes the recorded result of one of
them (`stay-put`, pal-fit's avg JCT by 0.9 s of 118 h; `loaded` and `shaped` stay as recorded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pal_slurm.model import JobRequest
from pal_slurm.policy.base import PlacementContext


@dataclass(frozen=True)
class StarvationBound:
    """A job's waits end `bound_s` after it began waiting (a site's `[policy]
    starvation_bound_s` sets it through PlacementContext.starvation_bound_s)."""

    bound_s: float = math.inf  # none unless the caller's context gives one (see the module)

    def _bound(self, ctx: PlacementContext) -> float:
        return self.bound_s if ctx.starvation_bound_s is None else ctx.starvation_bound_s

    def latest_start(self, job: JobRequest, ctx: PlacementContext) -> float:
        """The latest instant a wait the placement adds may plan `job` to start at."""
        bound = self._bound(ctx)
        return job.waiting_since + bound if bound < math.inf else math.inf

    def starved(self, job: JobRequest, ctx: PlacementContext) -> bool:
        """Whether `job` has waited longer than the bound: it is placed as stock Slurm would."""
        return ctx.now > self.latest_start(job, ctx)
