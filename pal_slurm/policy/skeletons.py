"""The two round skeletons every placement shares; a placement is an allocator plus one of them.

- non-sticky: free every running job, then place jobs in order (optionally the PAL/PM-First
  head window sorted by class first); stop at the first job that does not fit (no backfill, as
  the artifact). Jobs that land on exactly the GPUs they held are simply kept.
- sticky: running jobs keep their GPUs; each waiting job in order gets an allocation from the
  free GPUs, and when `preempt` is set and none fits, running jobs are stopped from the *tail*
  of the order one at a time until it does (the artifact's Packed-S / Random-S). A job stopped
  that way can be placed again later in the same round, as in the artifact.

An allocator is `alloc(job, free, ctx) -> tuple[int, ...] | None` where `free` is the round's
free GPUs (policy.free.FreeGpus: the sorted id list, the id array or the mask, kept in step as
the round takes GPUs); it must return exactly `job.num_gpus` distinct ids from `free` or None.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Sequence

from pal_slurm.model import JobRequest, RoundPlan
from pal_slurm.model.classes import class_rank
from pal_slurm.model.decision import JobId
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.free import FreeGpus

Allocator = Callable[[JobRequest, FreeGpus, PlacementContext], "tuple[int, ...] | None"]


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


def nonsticky_round(order: Sequence[JobRequest], ctx: PlacementContext, alloc: Allocator,
                    reorder: Callable[[Sequence[JobRequest], int], list[JobRequest]] | None = None,
                    deterministic: bool = True) -> RoundPlan:
    held = {j.job_id: tuple(sorted(j.running_on)) for j in order if j.running_on}
    free_set = set(ctx.cluster.free)
    for on in held.values():
        free_set.update(on)
    free = FreeGpus(ctx.cluster.size, free_set)
    seq = reorder(order, ctx.cluster.size) if reorder is not None else list(order)
    # Every round starts from the same free set, so a deterministic allocator gives the same
    # GPUs to the same leading jobs as last round: reuse them up to the first change. (A job's
    # key is made only for the jobs this round reaches: a long queue's tail never is.)
    memo = ctx.memo if deterministic else None
    sig = (alloc, ctx.locality_penalty, free.signature()) if memo is not None else None
    keys: list[tuple[object, ...]] = []
    allocs: list[tuple[int, ...] | None] = []
    # the ranking by identity (the memo keeps it alive, so its id cannot be reused meanwhile)
    if memo is not None and memo.get("ranking") is ctx.ranking and memo.get("sig") == sig:
        prev_keys, prev_allocs = memo["keys"], memo["allocs"]
        for i, (a, j) in enumerate(zip(prev_keys, seq)):
            if i >= len(prev_allocs) or a != (j.job_id, j.num_gpus, j.perf_class, j.shape):
                break
            keys.append(a)
            allocs.append(prev_allocs[i])
            if prev_allocs[i] is None:
                break
    launch: dict[JobId, tuple[int, ...]] = {job.job_id: gpus for job, gpus in zip(seq, allocs) if gpus is not None}
    if launch:
        free.take([g for gpus in launch.values() for g in gpus])
    if not allocs or allocs[-1] is not None:
        for job in seq[len(allocs):]:
            gpus = alloc(job, free, ctx)
            allocs.append(None if gpus is None else tuple(gpus))
            if memo is not None:
                keys.append((job.job_id, job.num_gpus, job.perf_class, job.shape))
            if gpus is None:
                break
            launch[job.job_id] = tuple(gpus)
            free.take(gpus)
    if memo is not None:
        memo.update(sig=sig, ranking=ctx.ranking, keys=keys, allocs=allocs)
    suspend = set()
    for jid, gpus in held.items():
        if jid in launch and tuple(sorted(launch[jid])) == gpus:
            del launch[jid]  # unchanged: keep running
        else:
            suspend.add(jid)
    return RoundPlan(frozenset(suspend), launch)


_holds_gpus = attrgetter("running_on")  # a request's GPUs held now (empty: it waits)


def sticky_round(order: Sequence[JobRequest], ctx: PlacementContext, alloc: Allocator, preempt: bool = True) -> RoundPlan:
    """Running jobs keep their GPUs; the others, in `order`, take what fits until one does not
    (with `preempt`, that one first stops running jobs from the tail of `order`, which then wait
    behind it). A job counts as running by its request, not through a table of every running
    job: a large site's queue holds thousands of jobs, and a round usually stops long before
    its end."""
    order = list(order)
    free = FreeGpus(ctx.cluster.size, ctx.cluster.free)
    launch: dict[JobId, tuple[int, ...]] = {}
    suspend: list[JobId] = []
    stopped: set[JobId] = set()  # running jobs this round stopped (they wait again)
    for idx, job in enumerate(order):
        if job.running_on and job.job_id not in stopped:
            continue
        gpus = alloc(job, free, ctx)
        if gpus is None and preempt:
            # (the running ones of a long tail picked out in C: most of it waits)
            for victim in filter(_holds_gpus, reversed(order[idx + 1:])):
                if victim.job_id in stopped:
                    continue
                suspend.append(victim.job_id)
                stopped.add(victim.job_id)
                free.give(tuple(victim.running_on))
                gpus = alloc(job, free, ctx)
                if gpus is not None:
                    break
        if gpus is None:
            break
        launch[job.job_id] = tuple(gpus)
        free.take(gpus)
    return RoundPlan(frozenset(suspend), launch)
