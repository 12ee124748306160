"""A trace as Slurm submissions: shapes, compressed times, time limits, the payload's inputs.

Pure: no I/O. Times in a plan are *trace* seconds unless named `_wall`; `scale` is trace
seconds per wall second.

Time limits. Slurm's backfill needs one per job and stores it in whole minutes of wall time,
so a job's limit is `LIMIT_FACTOR x ideal runtime` (a user's estimate with headroom for slow
GPUs and the network) rounded UP to whole wall minutes (at least one); the limit in trace
seconds is that many minutes x 60 x scale, and the simulator must use exactly that value.
A plan for the model alone may round limits at another scale (`limit_scale`): a site's time
scale with a compressed replay's coarse limits, to tell the two effects apart.
Slurm never kills a job at its limit (the lab runs with OverTimeLimit=UNLIMITED): a replay
measures where jobs ran, not how a site's limits bite.

Shapes. A job of N GPUs on nodes of G GPUs asks for k = ceil(N / G) nodes of N / k GPUs each
(`-N k --gres=gpu:N/k`), the Slurm shape that holds it on the fewest nodes; every Sia-Philly
count (1, 4, 6, 8, 12, 16, 24, 32, 48 on 4-GPU nodes) divides evenly.

Comments. A job's `--comment` names its class and its network sensitivity as a number
(`pal:class=dcgan,net=2.22`): the factor the simulator's network model gives the job's model
over two racks (`NetworkModel.spread_factor`, model.network), as an ML user who ran their model
across two leaf switches once would write it. (With the three class names, pald took DCGAN's
2.2x for `medium`'s 1.35x and spread its jobs where waiting for a leaf was sooner.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence, TypedDict

from pal_slurm.model import JobShape
from pal_slurm.model import ClusterView
from pal_slurm.model.classes import AppClassMap
from pal_slurm.sim.network import NetworkModel
from pal_slurm.sim.trace import Trace, TraceJob

LIMIT_FACTOR = 2.0


class PlanError(ValueError):
    """A trace that cannot be replayed on this cluster (the message says which job and why)."""


def slurm_shape(num_gpus: int, gpus_per_node: int) -> JobShape:
    """The per-node Slurm shape of a job of `num_gpus` GPUs (see module docstring)."""
    if num_gpus <= 0:
        raise PlanError(f"a job needs at least one GPU, not {num_gpus}")
    k = math.ceil(num_gpus / gpus_per_node)
    if num_gpus % k:
        raise PlanError(f"{num_gpus} GPUs do not split evenly over {k} nodes of {gpus_per_node} GPUs")
    return JobShape.on_nodes(k, num_gpus // k)


def time_limit_minutes(ideal_s: float, scale: float) -> int:
    """The job's Slurm time limit (whole wall minutes) for an ideal runtime in trace seconds."""
    return max(1, math.ceil(LIMIT_FACTOR * ideal_s / scale / 60.0 - 1e-9))


@dataclass(frozen=True)
class ReplayJob:
    """One trace job as a Slurm submission."""

    trace_job: TraceJob
    perf_class: str
    shape: JobShape
    submit_s: float  # trace seconds after the first submission
    limit_minutes: int  # Slurm --time (wall minutes)
    scale: float
    net_sensitivity: str = "medium"  # the comment's net= (its model's spread factor: declared_net)
    limit_scale: float | None = None  # the scale whose wall minutes count limit_minutes (None: scale)

    @property
    def name(self) -> str:
        return f"replay-{self.trace_job.job_id}"

    @property
    def base_s(self) -> float:
        return self.trace_job.ideal_runtime

    @property
    def limit_s(self) -> float:
        """The time limit in trace seconds (what the simulator uses)."""
        return self.limit_minutes * 60.0 * (self.scale if self.limit_scale is None else self.limit_scale)

    @property
    def submit_wall(self) -> float:
        return self.submit_s / self.scale

    def sbatch_args(self) -> list[str]:
        if self.limit_scale not in (None, self.scale):
            raise PlanError(f"job {self.trace_job.job_id}: its limit is rounded at scale {self.limit_scale:g}, not the "
                            f"replay's {self.scale:g}; such a plan is for the model only")
        return [f"--job-name={self.name}", f"--nodes={self.shape.nodes}",
                f"--gres=gpu:{self.shape.per_node}", f"--time={self.limit_minutes}",
                f"--comment=pal:class={self.perf_class},net={self.net_sensitivity}"]


@dataclass(frozen=True)
class ReplayPlan:
    trace: str
    scale: float
    jobs: tuple[ReplayJob, ...]

    @property
    def span_wall(self) -> float:
        return self.jobs[-1].submit_wall if self.jobs else 0.0


def plan_replay(trace: Trace, scale: float, gpus_per_node: int, total_gpus: int,
                jobs: int | None = None, classes: AppClassMap | None = None,
                network: NetworkModel | None = None, limit_scale: float | None = None) -> ReplayPlan:
    """The first `jobs` jobs of `trace` (all when None), submission times relative to the first.
    `network`: the model whose spread factors the comments declare (default: the simulator's).
    `limit_scale`: round time limits to whole wall minutes at this scale instead (model only)."""
    if scale <= 0 or (limit_scale is not None and limit_scale <= 0):
        raise PlanError(f"time scale must be > 0, not {scale if scale <= 0 else limit_scale}")
    chosen = list(trace.jobs[:jobs] if jobs else trace.jobs)
    if not chosen:
        raise PlanError(f"{trace.name}: no jobs to replay")
    classes = classes or AppClassMap()
    network = network or NetworkModel()
    sensitivity: dict[str, str] = {}
    t0 = min(j.submit_time for j in chosen)
    out = []
    for j in sorted(chosen, key=lambda j: (j.submit_time, j.job_id)):
        if j.num_gpus > total_gpus:
            raise PlanError(f"{trace.name}: job {j.job_id} needs {j.num_gpus} GPUs; the cluster has {total_gpus}")
        if j.model not in sensitivity:
            sensitivity[j.model] = declared_net(network, j.model)
        out.append(ReplayJob(j, classes.class_of(j.model), slurm_shape(j.num_gpus, gpus_per_node),
                             j.submit_time - t0, time_limit_minutes(j.ideal_runtime, limit_scale or scale), scale,
                             sensitivity[j.model], limit_scale))
    return ReplayPlan(trace.name, scale, tuple(out))


def declared_net(network: NetworkModel, model: str) -> str:
    """A model's `net=` as the replay's comments declare it: its spread factor, 2 decimals."""
    return f"{network.spread_factor(model):.2f}"


class PayloadSpec(TypedDict):
    """The JSON a replayed job's payload reads (payload_spec writes it)."""

    job: int
    name: str
    base_s: float
    scale: float
    perf_class: str
    model: str
    gpus: int
    slowdown: dict[str, list[float]]  # node -> per slot
    rack: dict[str, str]  # node -> rack
    net: dict[str, float]  # "nodes,racks" -> network factor


def payload_spec(job: ReplayJob, cluster: ClusterView, slowdowns: Mapping[str, Sequence[float]],
                 network: NetworkModel) -> PayloadSpec:
    """What the payload needs to know to run as long as its placement makes it (JSON-able).

    slowdown: per node, per slot, the class's per-GPU slowdown (the simulator's draw);
    net: "nodes,racks" -> network factor for this job's model and GPU count.
    """
    per_class = slowdowns[job.perf_class]
    per_node: dict[str, list[float]] = {}
    for g in cluster.gpus:
        per_node.setdefault(g.node, []).append(float(per_class[g.gpu_id]))
    racks = {n.name: n.rack for n in cluster.nodes}
    n_racks = len(set(racks.values()))
    n_gpus = job.trace_job.num_gpus
    net = {f"{k},{r}": network.factor(job.trace_job.model, n_gpus, k, r)
           for k in range(1, len(cluster.nodes) + 1) for r in range(1, min(k, n_racks) + 1)}
    return {"job": job.trace_job.job_id, "name": job.name, "base_s": job.base_s, "scale": job.scale,
            "perf_class": job.perf_class, "model": job.trace_job.model, "gpus": n_gpus,
            "slowdown": per_node, "rack": racks, "net": net}
