"""A job's restrictions and traits in the policy's vocabulary, from either source pald has:
the hook's fields at submit (`HookFields`) or `squeue --json` for a held job (`JobInfo`).

Two sources, one vocabulary (`JobRestrictions`, `JobTraits`), so the submit-time answer and the
cycle judge a job the same way. Per-node CPU and memory needs are derived the way Slurm counts
them (tasks x CPUs per task, CPUs per GPU, memory per node / per CPU / per GPU); where the
request leaves it open the estimate errs high, which can only delay a placement, never make
Slurm refuse one.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Protocol

from pal_slurm.intake.hostlist import HostSet, compress
from pal_slurm.intake.refusals import BAD_INPUT, TOO_LARGE, JobTraits, RefusedInput
from pal_slurm.intake.tres import asks_for_gpus, gpu_model, per_gpu
from pal_slurm.slurm.errors import HostlistError, HostlistTooLarge
from pal_slurm.slurm.readers import JobInfo, JobPlacementRequest


@dataclass(frozen=True)
class JobRestrictions:
    """Everything in a job's request that limits where it may run (one job-side vocabulary,
    built from the hook's fields at submit and from squeue for held jobs)."""

    partitions: tuple[str, ...] = ()  # -p a,b; () = the default partition
    usable_partitions: frozenset[str] | None = None  # Slurm's own list for this user (hook's part_list)
    uid: int | None = None
    account: str | None = None  # None: the user's default account (unknown here)
    qos: str | None = None
    constraint: str | None = None  # --constraint text
    exclude: HostSet = HostSet()  # --exclude, matched as written (never listed: it is user text)
    required: HostSet = HostSet()  # --nodelist (the job gets all of them)
    reservation: str | None = None
    exclusive: bool = False
    nodes: int | None = 1  # node count; None: any number (a --gpus=N job)
    cpus_per_node: int = 1
    memory_per_node_mb: int = 0
    time_limit_min: int | None = None  # None: the partition's default
    gpu_model: str | None = None  # --gres=gpu:<model>:n / --gpus=<model>:n: only nodes of that model


class HookFields(Protocol):
    """The hook's fields of a job at submit time, as pald's protocol carries them
    (daemon/protocol.JobFields): what the intake reads of them."""

    @property
    def uid(self) -> int: ...
    @property
    def name(self) -> str | None: ...
    @property
    def comment(self) -> str: ...
    @property
    def partition(self) -> str | None: ...
    @property
    def gpus_per_node(self) -> int | None: ...
    @property
    def gpus_per_job(self) -> int | None: ...
    @property
    def tres_per_node(self) -> str | None: ...
    @property
    def tres_per_job(self) -> str | None: ...
    @property
    def tres_per_task(self) -> str | None: ...
    @property
    def tres_per_socket(self) -> str | None: ...
    @property
    def min_nodes(self) -> int | None: ...
    @property
    def usable_partitions(self) -> tuple[str, ...] | None: ...
    @property
    def features(self) -> str | None: ...
    @property
    def exc_nodes(self) -> str | None: ...
    @property
    def req_nodes(self) -> str | None: ...
    @property
    def reservation(self) -> str | None: ...
    @property
    def account(self) -> str | None: ...
    @property
    def qos(self) -> str | None: ...
    @property
    def shared(self) -> int | None: ...
    @property
    def time_limit(self) -> int | None: ...
    @property
    def cpus_per_task(self) -> int | None: ...
    @property
    def ntasks_per_node(self) -> int | None: ...
    @property
    def num_tasks(self) -> int | None: ...
    @property
    def pn_min_cpus(self) -> int | None: ...
    @property
    def min_cpus(self) -> int | None: ...
    @property
    def cpus_per_tres(self) -> str | None: ...
    @property
    def min_mem_per_node(self) -> int | None: ...
    @property
    def min_mem_per_cpu(self) -> int | None: ...
    @property
    def mem_per_tres(self) -> str | None: ...
    @property
    def array_inx(self) -> str | None: ...
    @property
    def het_job_offset(self) -> int | None: ...
    @property
    def dependency(self) -> str | None: ...
    @property
    def begin_time(self) -> int | None: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def ntasks_per_tres(self) -> int | None: ...




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


def restrictions_from_fields(job: HookFields, nodes: int | None, gpus_per_node: int) -> JobRestrictions:
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


def traits_from_fields(job: HookFields, now: float) -> JobTraits:
    return JobTraits(
        array=bool(job.array_inx),
        array_throttled="%" in (job.array_inx or ""),
        het_job=job.het_job_offset is not None,
        gpus_per_task=asks_for_gpus(job.tres_per_task),
        gpus_per_socket=asks_for_gpus(job.tres_per_socket),
        ntasks_per_gpu=job.ntasks_per_tres is not None,
        dependency=bool(job.dependency),
        begins_later=job.begin_time is not None and job.begin_time > 0 and job.begin_time > now + 1,
        user_hold=job.priority == 0,
    )


def restrictions_from_squeue(job: JobInfo, nodes: int | None, gpus_per_node: int) -> JobRestrictions:
    """From `squeue --json` (a job the hook deferred; its user/array/hold traits were judged at
    submit). The usable partitions are not in squeue: access lists pald cannot evaluate make
    the partition ineligible (see eligibility.partition_refusal). Memoised on the fields it
    reads: thousands of held jobs share a few restrictions, and each cycle reads them all."""
    return _from_squeue(job.partition, job.user_id, job.required_nodes, job.time_limit_s, job.tres_per_node,
                        job.placement_request, nodes, gpus_per_node)


@functools.lru_cache(maxsize=1024)
def _from_squeue(partition: str, uid: int, required_nodes: tuple[str, ...], time_limit_s: float | None,
                 tres_per_node: str, req: JobPlacementRequest | None, nodes: int | None,
                 gpus_per_node: int) -> JobRestrictions:
    k = nodes or 1
    cpus = max(1, req.min_cpus_per_node if req else 0,
               (per_gpu(req.cpus_per_tres) * gpus_per_node) if req else 0,
               math.ceil(req.cpus / k) if req and req.cpus else 0)
    memory = 0
    if req:
        memory = max(req.memory_per_node_mb, req.memory_per_cpu_mb * cpus,
                     per_gpu(req.memory_per_tres) * gpus_per_node)
    return JobRestrictions(
        partitions=requested_partitions(partition),
        uid=uid,
        account=(req.account or None) if req else None,
        qos=(req.qos or None) if req else None,
        constraint=(req.features or None) if req else None,
        exclude=req.excluded_nodes if req else HostSet(),
        required=HostSet.from_expr(compress(required_nodes)),
        reservation=(req.reservation or None) if req else None,
        exclusive=bool(req and req.exclusive),
        nodes=nodes,
        cpus_per_node=cpus,
        memory_per_node_mb=memory,
        time_limit_min=int(time_limit_s // 60) if time_limit_s else None,
        gpu_model=gpu_model(tres_per_node, req.tres_per_job if req else None),
    )
