"""pald's scheduling cycle for deferred jobs: order the PAL-held jobs, place them with the
policy, and release them onto the chosen nodes and GPU slots.

`plan_releases` is pure (Slurm jobs + the service's state in, releases out); `apply_releases`
is the one function that acts, so a dry run prints exactly what would be done.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Mapping

from pal_slurm.daemon.comment_grammar import CommentError, parse_comment
from pal_slurm.daemon.restrictions import restrictions_from_squeue
from pal_slurm.daemon.service import PlacementService, Shape
from pal_slurm.model import JobRequest
from pal_slurm.policy import queue_order
from pal_slurm.policy.slurm_shape import FreeIndex, ShapeChoice
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.gres import gres_update_spec

log = logging.getLogger("pald.cycle")

DEFER_TAG = "pal:defer"
_GPU_COUNT = re.compile(r"(?:^|,)(?:gres:)?gpu(?::[^:,]+)?:(\d+)")


def is_pal_held(job) -> bool:
    """A job the hook held for pald (and not, say, held by its user for other reasons)."""
    return job.held and DEFER_TAG in (job.admin_comment or "")


def gpus_per_node(tres_per_node: str) -> int | None:
    counts = [int(m.group(1)) for m in _GPU_COUNT.finditer(tres_per_node or "")]
    return sum(counts) if counts else None


@dataclass(frozen=True)
class Release:
    job_id: int
    perf_class: str
    choice: ShapeChoice | None  # None: release untouched (fail open)
    gres_spec: str | None  # scontrol Gres= value, or None to keep the job's own
    reason: str
    net: str = "medium"  # network sensitivity from the comment
    wanted_rack: bool = False  # a multi-node job on a multi-rack cluster: it wanted one rack
    one_rack: bool = True  # whether it got one
    waited_s: float | None = None  # since submission
    time_limit_s: float | None = None  # the job's --time (for the tuner's loss estimate)
    partition: str | None = None  # the one partition to set (a job that asked for several)


@dataclass
class CycleResult:
    releases: list[Release] = field(default_factory=list)
    waiting: int = 0  # held jobs that still do not fit
    delayed: int = 0  # of those, multi-node jobs waiting for nodes under one rack


# How long a multi-node job waits for nodes under one leaf switch, as a multiple of
# `rack_wait_s`, by the network sensitivity in its comment (net=); medium when not given.
SENSITIVITY_WAIT = {"low": 0.0, "medium": 1.0, "high": 3.0}


def rack_wait_limit(net: str | None, rack_wait_s: float) -> float:
    return rack_wait_s * SENSITIVITY_WAIT.get((net or "medium").lower(), 1.0)


def plan_releases(held_jobs, service: PlacementService, queue: str = "fifo", backfill: bool = False,
                  now: float | None = None, rack_wait_s: float = 0.0,
                  rack_limits: Mapping[str, float] | None = None) -> CycleResult:
    """Which held PAL jobs to release now, and where (held_jobs: slurm JobInfo records).

    Delay scheduling for the network: on a cluster with several racks, a multi-node job first
    only accepts nodes under one leaf switch; after waiting `rack_wait_limit` seconds since
    submission it takes the best nodes anywhere. While it waits for its rack it does not block
    the jobs behind it (they may use GPUs it could not use anyway); its wait is bounded, so it
    cannot starve. `rack_limits` (sensitivity -> seconds, e.g. from the auto-tuner) overrides
    the fixed `rack_wait_s` multiples."""
    multi_rack = service.view is not None and len(set(service.view.rack_of_node)) > 1
    out = CycleResult()
    if service.view is None:
        return out
    requests = [
        JobRequest(job_id=j.job_id, num_gpus=1, submit_time=float(j.submit_time), priority=999)
        for j in held_jobs
    ]
    by_id = {j.job_id: j for j in held_jobs}
    ctx = service.context()
    free = set(ctx.cluster.free)
    indexes: dict[str, FreeIndex] = {}  # per class, private to this plan
    blocked = False
    for req in queue_order(queue)(requests):
        job = by_id[req.job_id]
        try:
            spec = parse_comment(job.comment)
        except CommentError as exc:
            out.releases.append(Release(job.job_id, "?", None, None, f"bad_comment:{exc}"))
            continue
        app = spec.perf_class if spec else "unknown"
        perf_class, _warning = service.resolve_class(app)
        per_node = gpus_per_node(job.tres_per_node)
        per_job = gpus_per_node(job.placement_request.tres_per_job) if job.placement_request else None
        if per_node:
            shape = Shape(max(1, job.node_count or 1), per_node, per_node * max(1, job.node_count or 1))
        elif per_job or (spec and spec.gpus):
            shape = Shape(None, None, per_job or spec.gpus)
        else:
            out.releases.append(Release(job.job_id, perf_class, None, None, "no_gpus"))
            continue
        if blocked:
            out.waiting += 1
            continue
        try:
            restrictions = restrictions_from_squeue(job, shape.nodes, shape.per_node or 1)
        except SlurmError:
            out.releases.append(Release(job.job_id, perf_class, None, None, "bad_nodelist"))
            continue
        eligibility = service.eligibility(restrictions, now if now is not None else float(job.submit_time))
        if eligibility.passed:  # pald cannot judge where it may run: Slurm places it
            out.releases.append(Release(job.job_id, perf_class, None, None, eligibility.passed))
            continue
        index = None
        if shape.per_node_shape:
            if perf_class not in indexes:
                indexes[perf_class] = FreeIndex(ctx.cluster, free, ctx.ranking.sf(perf_class))
            index = indexes[perf_class]
            job_ctx = ctx
        else:
            job_ctx = replace(ctx, cluster=ctx.cluster.with_free(free))

        def pick(one_rack: bool):
            return service.choose_eligible(shape, perf_class, eligibility, free, job_ctx, index,
                                           exclusive=restrictions.exclusive, one_rack=one_rack)

        spread = shape.per_node_shape and multi_rack and (shape.nodes or 1) > 1
        found = pick(spread)
        if found is None and spread:
            net = ((spec.net if spec else None) or "medium").lower()
            limit = (rack_limits or {}).get(net, rack_wait_limit(net, rack_wait_s))
            if now is not None and now - job.submit_time < limit:
                out.waiting += 1
                out.delayed += 1
                continue  # waits for a rack; jobs behind it may go meanwhile
            found = pick(False)
        choice, group = found if found else (None, None)
        if choice is None:
            out.waiting += 1
            blocked = not backfill
            continue
        free -= set(choice.gpu_ids)
        for idx in indexes.values():
            idx.take(choice.gpu_ids)
        if shape.per_node_shape and not service.binds_slots(choice):
            spec_text = None  # Slurm picks the slots on the pinned nodes, the request is kept
        elif shape.per_node_shape and choice.same_slots_everywhere():
            spec_text = gres_update_spec(next(iter(choice.nodes.values())))
        elif shape.per_node_shape:
            spec_text = f"gpu:{shape.per_node}"
        else:
            spec_text = None
        out.releases.append(Release(
            job.job_id, perf_class, choice, spec_text, service.settings.placement,
            net=((spec.net if spec else None) or "medium").lower(),
            wanted_rack=shape.per_node_shape and multi_rack and (shape.nodes or 1) > 1,
            one_rack=len({service.view.rack_of_node[service.view.node_of[g]] for g in choice.gpu_ids}) == 1,
            waited_s=None if now is None else max(0.0, now - job.submit_time),
            time_limit_s=getattr(job, "time_limit_s", None),
            partition=group.partition))
    return out


def apply_releases(result: CycleResult, actuator, service: PlacementService, now: float, record=None) -> list[tuple[int, str]]:
    """Act on the plan: pin and release each job. Returns [(job id, error)] for failures; a
    failed job stays held and is retried next cycle (pal-failsafe releases it if pald dies)."""
    errors = []
    for rel in result.releases:
        try:
            if rel.choice is None:
                actuator.release(rel.job_id)
            else:
                where = {"partition": rel.partition} if rel.partition else {}
                if rel.gres_spec:
                    actuator.place_held_job(rel.job_id, list(rel.choice.nodes), rel.gres_spec, release=True, **where)
                else:
                    actuator.place_nodes(rel.job_id, list(rel.choice.nodes), release=True, **where)
                service.reserve(f"job:{rel.job_id}", rel.choice, now)
            service.held_jobs = max(0, service.held_jobs - 1)
            if record:
                record(rel)
        except Exception as exc:  # noqa: BLE001 - one bad job must not stop the others
            errors.append((rel.job_id, str(exc)))
            log.warning("release of job %s failed: %s", rel.job_id, exc)
    return errors


def tuner_observation(rel: Release, spine_penalty: float):
    """What the delay-timer auto-tuner learns from one release of a job that wanted a rack:
    a wait sample when it got one, a loss sample (the cross-rack slowdown over its time
    limit) when it spread. None when there is nothing to learn (no time limit to weigh)."""
    from pal_slurm.policy.autotune import Observation

    if not rel.wanted_rack or rel.choice is None or rel.waited_s is None:
        return None
    if rel.one_rack:
        return Observation(rel.net, wanted=1, got=1, waited_s=rel.waited_s, comm_loss_s=0.0)
    if rel.time_limit_s is None:
        return None
    return Observation(rel.net, wanted=1, got=2, waited_s=rel.waited_s,
                       comm_loss_s=rel.time_limit_s * max(0.0, spine_penalty - 1.0))
