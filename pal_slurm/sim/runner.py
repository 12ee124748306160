"""Runs a grid of (trace, policy, seed) simulations in one mode: the one place that wires
traces, policies and simulators together for `palctl simulate` and the benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from pal_slurm.sim.compat import CompatConfig, CompatSimulator
from pal_slurm.model import ClusterView
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.trace import Trace
from pal_slurm.sim.gpu_models import GpuModelGroup
from pal_slurm.sim.variability import MeasuredGpus

if TYPE_CHECKING:
    from pal_slurm.sim.event import EventSimulator

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


def _simulator(spec: RunSpec, seed_index: int) -> CompatSimulator | EventSimulator:
    if spec.mode == "compat":
        if spec.gpu_models:
            raise ValueError("several GPU models need --mode event (compat mode is the artifact's one-model cluster)")
        cfg = CompatConfig(
            num_nodes=spec.num_nodes,
            gpus_per_node=spec.gpus_per_node,
            round_s=spec.round_s,
            locality_penalty=spec.locality_penalty,
            queue=spec.queue,
            variability_seed=42 + seed_index,  # seed index 0 is the artifact's draw
            arrival_seed=1 + seed_index,
            cluster=spec.cluster,
            variability=spec.variability,
        )
        return CompatSimulator(cfg)
    if spec.mode == "event":
        from pal_slurm.sim import event  # imported lazily: compat needs none of it

        return event.simulator_for(spec, seed_index)
    raise ValueError(f"unknown mode {spec.mode!r}; choose one of {', '.join(MODES)}")


def run_grid(
    traces: Sequence[Trace],
    policies: Sequence[str],
    spec: RunSpec,
    on_progress: Callable[[float], None] | None = None,
) -> list[RunResult]:
    """Every trace x policy x seed; results in that order."""
    total = max(1, len(traces) * len(policies) * spec.seeds)
    done = 0
    out: list[RunResult] = []
    for trace in traces:
        for seed_index in range(spec.seeds):
            for policy in policies:
                sim = _simulator(spec, seed_index)

                def step(frac: float, _done: int = done) -> None:
                    if on_progress:
                        on_progress((_done + frac) / total)

                out.append(sim.run(trace, policy, progress=step))
                done += 1
                if on_progress:
                    on_progress(done / total)
    return out
