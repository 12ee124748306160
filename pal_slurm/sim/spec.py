"""What one simulation grid asks for (mode, cluster, seeds, queue): the description that the
runner reads to pick a simulator and each simulator reads to configure itself, kept apart from
both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass

from pal_slurm.model import ClusterView
from pal_slurm.sim.gpu_models import GpuModelGroup
from pal_slurm.sim.variability import MeasuredGpus

MODES = ("compat", "event")


@dataclass(frozen=True)
class RunSpec:
    mode: str = "compat"
    num_nodes: int = 16
    gpus_per_node: int = 4
    nodes_per_rack: int | None = None
    seeds: int = 1
    queue: str = "fifo"
    locality_penalty: float = 1.7
    round_s: float = 360.0
    congestion: float = 0.0
    racks: tuple[tuple[str, str], ...] | None = None  # event mode: (node, leaf switch) from topology.conf
    cluster: ClusterView | None = None  # a named cluster (the measured one), instead of num_nodes x gpus
    variability: MeasuredGpus | None = None  # measured per-GPU data; None: the bundled Longhorn draws
    gpu_models: tuple[GpuModelGroup, ...] = ()  # event mode: several GPU models (sim.gpu_models)
    starvation_bound_s: float | None = None  # event mode: a site's starvation bound (EventConfig's)


def parse_cluster(text: str) -> tuple[int, int]:
    """'16x4' -> (16 nodes, 4 GPUs per node)."""
    try:
        nodes, gpus = text.lower().split("x")
        n, g = int(nodes), int(gpus)
    except ValueError:
        raise ValueError(f"cluster must look like NODESxGPUS (e.g. 16x4), got {text!r}") from None
    if n <= 0 or g <= 0:
        raise ValueError(f"cluster needs positive sizes, got {text!r}")
    return n, g
