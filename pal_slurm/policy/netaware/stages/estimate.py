"""Estimate stage: how long a job runs on given GPUs from now, the clock reservations,
finish-aware waits and backfill admission read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from pal_slurm.model import JobRequest
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.estimates import _slowdowns, _Table


class Estimate(Protocol):
    def runtime(self, job: JobRequest, gpus: Sequence[int], ctx: PlacementContext, table: _Table) -> float:
        """Estimated seconds `job` runs on `gpus` from now (`table`: the plan's slowdown table)."""
        ...


@dataclass(frozen=True)
class Stretched:
    """`JobRequest.remaining_time` is work on median GPUs (ideal seconds), stretched by the
    estimated slowdown there: ranking score x network factor. In the simulator that is the
    trace's true length; under Slurm the job's time limit."""

    def runtime(self, job: JobRequest, gpus: Sequence[int], ctx: PlacementContext, table: _Table) -> float:
        pm, net = _slowdowns(job, gpus, ctx, table)
        return job.remaining_time * pm * net


@dataclass(frozen=True)
class WallLimit:
    """The remaining time is a wall-clock bound (Slurm's time limit, as Slurm's backfill reads
    it): the job ends by now + remaining, whatever its GPUs and network."""

    def runtime(self, job: JobRequest, gpus: Sequence[int], ctx: PlacementContext, table: _Table) -> float:
        return job.remaining_time
