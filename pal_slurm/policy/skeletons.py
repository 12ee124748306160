"""The two round skeletons every placement shares; a placement is an allocator plus one of them.

- non-sticky: free every running job, then place jobs in order (optionally the PAL/PM-First
  head window sorted by class first); stop at the first job that does not fit (no backfill, as
  the artifact). Jobs that land on exactly the GPUs they held are simply kept.
- sticky: running jobs keep their GPUs; each waiting job in order gets an allocation from the
  free GPUs, and when `preempt` is set and none fits, running jobs are stopped from the *tail*
  of the order one at a time until it does (the artifact's Packed-S / Random-S). A job stopped
  that way can be placed again later in the same round, as in the artifact.

An allocator is `alloc(job, free, ctx) -> tuple[int, ...] | None` where `free` is a sorted list
of free GPU ids; it must return exactly `job.num_gpus` distinct ids from `free` or None.
"""

from __future__ import annotations

import bisect
from typing import Callable, Iterable, Sequence

from pal_slurm.model import JobRequest, RoundPlan
from pal_slurm.model.classes import class_rank
from pal_slurm.model.decision import JobId
from pal_slurm.policy.base import PlacementContext

Allocator = Callable[[JobRequest, list[int], PlacementContext], "tuple[int, ...] | None"]


def head_window(order: Sequence[JobRequest], capacity: int) -> list[JobRequest]:
    """Longest prefix of the order whose summed GPU demand fits the cluster."""
    out, total = [], 0
    for job in order:
        total += job.num_gpus
        if total > capacity:
            break
        out.append(job)
    return out


def class_first(order: Sequence[JobRequest], capacity: int) -> list[JobRequest]:
    """PAL / PM-First reorder: the head window stably sorted by class (A first), then the rest."""
    window = head_window(order, capacity)
    return sorted(window, key=lambda j: class_rank(j.perf_class)) + list(order[len(window):])


def _remove(free: list[int], gpus: Iterable[int]) -> None:
    """Delete `gpus` from the sorted list `free` in place (bisect + C-level deletes)."""
    for g in sorted(gpus, reverse=True):
        i = bisect.bisect_left(free, g)
        if i < len(free) and free[i] == g:
            del free[i]


def nonsticky_round(order: Sequence[JobRequest], ctx: PlacementContext, alloc: Allocator,
                    reorder: Callable[[Sequence[JobRequest], int], list[JobRequest]] | None = None,
                    deterministic: bool = True) -> RoundPlan:
    held = {j.job_id: tuple(sorted(j.running_on)) for j in order if j.running_on}
    free_set = set(ctx.cluster.free)
    for on in held.values():
        free_set.update(on)
    free = sorted(free_set)
    seq = reorder(order, ctx.cluster.size) if reorder is not None else list(order)
    # Every round starts from the same free set, so a deterministic allocator gives the same
    # GPUs to the same leading jobs as last round: reuse them up to the first change.
    memo = ctx.memo if deterministic else None
    keys = [(j.job_id, j.num_gpus, j.perf_class, j.shape) for j in seq] if memo is not None else []
    sig = (alloc, ctx.locality_penalty, tuple(free)) if memo is not None else None
    allocs: list[tuple[int, ...] | None] = []
    # the ranking by identity (the memo keeps it alive, so its id cannot be reused meanwhile)
    if memo is not None and memo.get("ranking") is ctx.ranking and memo.get("sig") == sig:
        prev_keys, prev_allocs = memo["keys"], memo["allocs"]
        for i, (a, b) in enumerate(zip(prev_keys, keys)):
            if a != b or i >= len(prev_allocs):
                break
            allocs.append(prev_allocs[i])
            if prev_allocs[i] is None:
                break
    launch: dict[JobId, tuple[int, ...]] = {job.job_id: gpus for job, gpus in zip(seq, allocs) if gpus is not None}
    if launch:
        _remove(free, [g for gpus in launch.values() for g in gpus])
    if not allocs or allocs[-1] is not None:
        for job in seq[len(allocs):]:
            gpus = alloc(job, free, ctx)
            allocs.append(None if gpus is None else tuple(gpus))
            if gpus is None:
                break
            launch[job.job_id] = tuple(gpus)
            _remove(free, gpus)
    if memo is not None:
        memo.update(sig=sig, ranking=ctx.ranking, keys=keys[: len(allocs)], allocs=allocs)
    suspend = set()
    for jid, gpus in held.items():
        if jid in launch and tuple(sorted(launch[jid])) == gpus:
            del launch[jid]  # unchanged: keep running
        else:
            suspend.add(jid)
    return RoundPlan(frozenset(suspend), launch)


def sticky_round(order: Sequence[JobRequest], ctx: PlacementContext, alloc: Allocator, preempt: bool = True) -> RoundPlan:
    order = list(order)
    running = {j.job_id: tuple(j.running_on) for j in order if j.running_on}
    free = sorted(ctx.cluster.free)
    launch: dict[JobId, tuple[int, ...]] = {}
    suspend: list[JobId] = []
    for idx, job in enumerate(order):
        if job.job_id in running:
            continue
        gpus = alloc(job, free, ctx)
        if gpus is None and preempt:
            for victim in reversed(order[idx + 1:]):
                if victim.job_id not in running:
                    continue
                suspend.append(victim.job_id)
                free = sorted(free + list(running.pop(victim.job_id)))
                gpus = alloc(job, free, ctx)
                if gpus is not None:
                    break
        if gpus is None:
            break
        launch[job.job_id] = tuple(gpus)
        _remove(free, gpus)
    return RoundPlan(frozenset(suspend), launch)
