"""A job's restrictions and traits in the policy's vocabulary, from either source pald has:
the hook's fields at submit (`JobFields`) or `squeue --json` for a held job (`JobInfo`).

Two sources, one vocabulary (`JobRestrictions`, `JobTraits`), so the submit-time answer and the
cycle judge a job the same way. Per-node CPU and memory needs are derived the way Slurm counts
them (tasks x CPUs per task, CPUs per GPU, memory per node / per CPU / per GPU); where the
request leaves it open the estimate errs high, which can only delay a placement, never make
Slurm refuse one.
"""

from __future__ import annotations

import functools
import math
import re

from pal_slurm.daemon.protocol import JobFields
from pal_slurm.policy.eligibility import JobRestrictions
from pal_slurm.policy.passthrough import BAD_INPUT, TOO_LARGE, JobTraits
from pal_slurm.slurm.errors import GresTooLarge, HostlistError, HostlistTooLarge, SlurmError
from pal_slurm.slurm.gres import parse_slot_type
from pal_slurm.slurm.hostlist import HostSet, compress
from pal_slurm.slurm.readers import JobInfo, parse_gres

_PER_GPU = re.compile(r"(?:^|,)(?:gres[:/])?gpu:(\d+)(?:,|$)")


def per_gpu(tres: str | None) -> int:
    """`gres:gpu:2` (--cpus-per-gpu / --mem-per-gpu) -> 2; anything else -> 0."""
    m = _PER_GPU.search(tres or "")
    return int(m.group(1)) if m else 0


def gpu_model(*tres: str | None) -> str | None:
    """The GPU model type a request names (`gres:gpu:a100:2` -> a100); slot types (s2) and
    untyped requests -> None. RefusedInput for a string over the GRES caps (its model is not
    known, so PAL must not place it on any model)."""
    for text in tres:
        model = _model_of(text)
        if model is not None:
            return model
    return None


_MEMO_CHARS = 256  # longer TRES strings (user text) are parsed every time, never kept


def _model_of(text: str | None) -> str | None:
    """One TRES string's GPU model (memoised: the same few strings come every cycle)."""
    return _memo_model(text) if text is None or len(text) <= _MEMO_CHARS else _gpu_model(text)


def _gpu_model(text: str | None) -> str | None:
    try:
        items = parse_gres(text)
    except GresTooLarge as exc:
        raise RefusedInput(f"{TOO_LARGE}:gres", str(exc)) from None
    except SlurmError:
        return None
    for item in items:
        if item.name == "gpu" and item.type is not None and parse_slot_type(item.type) is None:
            return item.type
    return None


_memo_model = functools.lru_cache(maxsize=1024)(_gpu_model)


class RefusedInput(SlurmError):
    """A field of the job pald does not read: over a cap (`input-too-large:<field>`) or
    malformed (`bad-input:<field>`). `reason` is the pass token, `detail` one short line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _hostset(text: str | None, what: str) -> HostSet:
    """A user's node list (--exclude, --nodelist) compiled, never listed."""
    try:
        return HostSet.from_expr(text)
    except HostlistTooLarge as exc:
        raise RefusedInput(f"{TOO_LARGE}:{what}", str(exc)) from None
    except HostlistError as exc:
        raise RefusedInput(f"{BAD_INPUT}:{what}", str(exc)) from None


def requested_partitions(text: str | None) -> tuple[str, ...]:
    """A job's `--partition` list (empty: Slurm's default partition)."""
    return tuple(p for p in (text or "").split(",") if p)


def restrictions_from_fields(job: JobFields, nodes: int | None, gpus_per_node: int) -> JobRestrictions:
    """From the hook's fields; `nodes`/`gpus_per_node` from the job's shape (nodes None: any).
    Raises RefusedInput for a node list over its caps or malformed."""
    k = nodes or 1
    tasks = job.ntasks_per_node or (math.ceil(job.num_tasks / k) if job.num_tasks else 1)
    cpus = max(tasks * (job.cpus_per_task or 1), job.pn_min_cpus or 0,
               per_gpu(job.cpus_per_tres) * gpus_per_node,
               math.ceil(job.min_cpus / k) if job.min_cpus else 0)
    memory = max(job.min_mem_per_node or 0, (job.min_mem_per_cpu or 0) * cpus,
                 per_gpu(job.mem_per_tres) * gpus_per_node)
    return JobRestrictions(
        partitions=requested_partitions(job.partition),
        usable_partitions=frozenset(job.usable_partitions) if job.usable_partitions is not None else None,
        uid=job.uid,
        account=job.account or None,
        qos=job.qos or None,
        constraint=job.features or None,
        exclude=_hostset(job.exc_nodes, "exclude"),
        required=_hostset(job.req_nodes, "nodelist"),
        reservation=job.reservation or None,
        exclusive=job.shared == 0,
        nodes=nodes,
        cpus_per_node=cpus,
        memory_per_node_mb=memory,
        time_limit_min=job.time_limit,
        gpu_model=gpu_model(job.tres_per_node, job.tres_per_job),
    )


def traits_from_fields(job: JobFields, now: float) -> JobTraits:
    return JobTraits(
        array=bool(job.array_inx),
        array_throttled="%" in (job.array_inx or ""),
        het_job=job.het_job_offset is not None,
        gpus_per_task=gpu_model_or_count(job.tres_per_task),
        gpus_per_socket=gpu_model_or_count(job.tres_per_socket),
        ntasks_per_gpu=job.ntasks_per_tres is not None,
        dependency=bool(job.dependency),
        begins_later=job.begin_time is not None and job.begin_time > 0 and job.begin_time > now + 1,
        user_hold=job.priority == 0,
    )


def gpu_model_or_count(tres: str | None) -> bool:
    """Whether a TRES string asks for GPUs at all."""
    try:
        return any(item.name == "gpu" for item in parse_gres(tres))
    except SlurmError:
        return bool(tres and "gpu" in tres)


def restrictions_from_squeue(job: JobInfo, nodes: int | None, gpus_per_node: int) -> JobRestrictions:
    """From `squeue --json` (a job the hook deferred; its user/array/hold traits were judged at
    submit). The usable partitions are not in squeue: access lists pald cannot evaluate make
    the partition ineligible (see eligibility.partition_refusal)."""
    req = job.placement_request
    k = nodes or 1
    cpus = max(1, req.min_cpus_per_node if req else 0,
               (per_gpu(req.cpus_per_tres) * gpus_per_node) if req else 0,
               math.ceil(req.cpus / k) if req and req.cpus else 0)
    memory = 0
    if req:
        memory = max(req.memory_per_node_mb, req.memory_per_cpu_mb * cpus,
                     per_gpu(req.memory_per_tres) * gpus_per_node)
    return JobRestrictions(
        partitions=requested_partitions(job.partition),
        uid=job.user_id,
        account=(req.account or None) if req else None,
        qos=(req.qos or None) if req else None,
        constraint=(req.features or None) if req else None,
        exclude=req.excluded_nodes if req else HostSet(),
        required=HostSet.from_expr(compress(job.required_nodes)),
        reservation=(req.reservation or None) if req else None,
        exclusive=bool(req and req.exclusive),
        nodes=nodes,
        cpus_per_node=cpus,
        memory_per_node_mb=memory,
        time_limit_min=int(job.time_limit_s // 60) if job.time_limit_s else None,
        gpu_model=gpu_model(job.tres_per_node, req.tres_per_job if req else None),
    )
