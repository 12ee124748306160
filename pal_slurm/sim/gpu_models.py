"""A cluster of several GPU models for the event simulator (`palctl simulate --gpu-models`).

A site with A100 and V100 nodes asks two things a one-model simulation cannot answer: jobs
that request a model (`--gres=gpu:a100:2`, a trace's `gpu_model` column) may run only on its
nodes, and a model's GPUs run a job faster or slower as a whole, on top of the per-GPU
variability within the model. Here: `a100=4:0.5,v100=12` gives the first 4 nodes (in the
cluster's node order) model a100, whose GPUs take 0.5x the time, and the next 12 v100 (1.0x).
The time factor multiplies every class's per-GPU score on those GPUs, so rankings, PAL's bins
and each job's speed all see it; per-GPU variability keeps its draw (the bundled data or
`--variability`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from pal_slurm.model import ClusterView

_GROUP = re.compile(r"^([A-Za-z0-9_.-]+)=(\d+)(?::([0-9.eE+-]+))?$")


class GpuModelsError(ValueError):
    """A --gpu-models value that cannot describe the cluster."""


@dataclass(frozen=True)
class GpuModelGroup:
    model: str  # the model's name, as jobs request it (a100)
    nodes: int  # how many nodes, taken in the cluster's node order
    time_factor: float = 1.0  # a job's time on these GPUs relative to the others' (0.5: twice as fast)


def parse_gpu_models(text: str) -> tuple[GpuModelGroup, ...]:
    """'a100=4:0.5,v100=12' -> the groups in order; a clear error for anything else."""
    groups = []
    for part in (p.strip() for p in text.split(",")):
        m = _GROUP.match(part)
        if not m:
            raise GpuModelsError(f"--gpu-models: {part!r} is not MODEL=NODES[:TIME_FACTOR] (e.g. a100=4:0.5,v100=12)")
        factor = float(m.group(3)) if m.group(3) else 1.0
        if not (math.isfinite(factor) and 0.0 < factor <= 100.0):
            raise GpuModelsError(f"--gpu-models: {part!r}: the time factor must be in (0, 100], got {m.group(3)}")
        if int(m.group(2)) <= 0:
            raise GpuModelsError(f"--gpu-models: {part!r}: a model needs at least one node")
        groups.append(GpuModelGroup(m.group(1), int(m.group(2)), factor))
    names = [g.model for g in groups]
    if len(set(names)) != len(names):
        raise GpuModelsError(f"--gpu-models: a model is named twice in {text!r}")
    return tuple(groups)


def with_gpu_models(cluster: ClusterView, groups: Sequence[GpuModelGroup]) -> ClusterView:
    """The cluster with its nodes' models set, group after group in node order; the groups
    must cover every node."""
    wanted = sum(g.nodes for g in groups)
    if wanted != len(cluster.nodes):
        raise GpuModelsError(f"--gpu-models names {wanted} nodes; the cluster has {len(cluster.nodes)}")
    models: dict[str, str] = {}
    nodes = iter(cluster.nodes)
    for group in groups:
        for _ in range(group.nodes):
            models[next(nodes).name] = group.model
    return cluster.with_gpu_models(models)


def scaled_scores(scores: Mapping[str, Sequence[float]], cluster: ClusterView,
                  groups: Sequence[GpuModelGroup]) -> dict[str, tuple[float, ...]]:
    """Every class's per-GPU scores times its GPU's model time factor."""
    factor = [1.0] * cluster.size
    for group in groups:
        for g in cluster.gpus_by_model.get(group.model, ()):
            factor[g] = group.time_factor
    return {c: tuple(v * f for v, f in zip(values, factor)) for c, values in scores.items()}
