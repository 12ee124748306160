"""Runs a grid of (trace, policy, seed) simulations in one mode: the one place that wires
traces, policies and simulators together for `palctl simulate` and the benchmarks."""

from __future__ import annotations

from typing import Callable, Sequence

from pal_slurm.sim.compat import CompatConfig, CompatSimulator
from pal_slurm.sim.event import EventSimulator, simulator_for
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.spec import MODES, RunSpec
from pal_slurm.sim.trace import Trace


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
        return simulator_for(spec, seed_index)
    raise ValueError(f"unknown mode {spec.mode!r}; choose one of {', '.join(MODES)}")


def run_one(trace: Trace, policy: str, spec: RunSpec, seed_index: int,
            progress: Callable[[float], None] | None = None) -> RunResult:
    """One (trace, policy, seed) run on a fresh simulator: what each cell of `run_grid` does,
    so a sweep split into single runs (sim.sweep) gives the grid's results one by one."""
    return _simulator(spec, seed_index).run(trace, policy, progress=progress)


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
                def step(frac: float, _done: int = done) -> None:
                    if on_progress:
                        on_progress((_done + frac) / total)

                out.append(run_one(trace, policy, spec, seed_index, progress=step))
                done += 1
                if on_progress:
                    on_progress(done / total)
    return out
