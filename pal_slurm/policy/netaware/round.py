"""One plan's working state, which its stages share (the Kubernetes scheduler framework's
cycle state): made by the placement at the start of every plan and dropped at its end, so no
stage keeps anything between plans (what lasts a run lives in the context's RunCache)."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from pal_slurm.model import ClusterView, JobRequest, PlannedStart
from pal_slurm.model.decision import JobId
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.estimates import Allocation
from pal_slurm.policy.netaware.reservations import _Allocations, _Releases, _Reservation

Runtime = Callable[[JobRequest, Sequence[int]], float]  # estimated seconds of a job on GPUs, from now
Allocate = Callable[[JobRequest, Sequence[int], int], "Allocation | None"]  # (job, free ids, max tier)


class Round:
    """What a plan's stages read and change: the free GPUs, the running jobs' releases, the
    reservations held so far and the jobs started or stopped."""

    def __init__(self, ctx: PlacementContext, rack_idx: Sequence[int], free: set[int] | frozenset[int], releases: _Releases,
                 allocations: _Allocations, allocate: Allocate, runtime: Runtime,
                 allowed: Callable[[JobRequest], int], variability: bool) -> None:
        self.ctx = ctx  # as the placement sees it (its locality stage's view)
        self.cluster: ClusterView = ctx.cluster
        self.now = ctx.now
        self.rack_idx = rack_idx  # node -> rack index as the placement sees racks
        # free GPUs, changed only through `take` and `give` as the plan starts and stops jobs;
        # the caller's set (read only) until the plan first changes it
        self.free: set[int] | frozenset[int] = free
        self._owns_free = False
        self.releases = releases  # when the running jobs free their GPUs
        self.allocations = allocations  # allocations and reservations memoised until `free` changes
        self.allocate = allocate  # the score stage's choice over any free list
        self.runtime = runtime  # the estimate stage's length of a job on GPUs
        self.allowed = allowed  # the filter stage's widest tier a job accepts now
        self.variability = variability  # whether the score stage reads the ranking's bins
        self.launch: dict[JobId, tuple[int, ...]] = {}
        self.suspend: set[JobId] = set()
        self.res: list[_Reservation] = []  # reservations of the first jobs that cannot start
        self.planned: dict[JobId, PlannedStart] = {}  # their planned starts, as the plan reports them
        self.reserved_nodes: dict[int, float] = {}  # node -> until when the per-node reservations hold it
        self.starved_held = 0  # reservations held by jobs past their starvation bound (stages.bound)

    def take(self, gpus: Iterable[int]) -> None:
        """`gpus` are no longer free (a job the plan starts)."""
        self._own_free().difference_update(gpus)

    def give(self, gpus: Iterable[int]) -> None:
        """`gpus` are free (a job the plan stops)."""
        self._own_free().update(gpus)

    def _own_free(self) -> set[int]:
        """The plan's own free set, copied from the caller's when first changed. Why: the
        caller's is a shape index's at submit (pald's burst of one-job plans), tens of
        thousands of GPUs at a large site; copying it for every request was most of a
        request's cost, and a one-job plan that starts its job changes nothing after that."""
        if not self._owns_free:
            self.free = self.allocations.free = set(self.free)
            self._owns_free = True
        return self.free  # type: ignore[return-value]

    def hold(self, job: JobRequest, r: _Reservation) -> None:
        """Keep `r` for `job`, and report its planned start when it has one."""
        self.res.append(r)
        if r.shadow < float("inf"):
            self.planned[job.job_id] = PlannedStart(r.shadow, r.group)
