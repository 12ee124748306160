"""What the event simulator predicts for a replayed arm (same jobs, cluster, draw, seed).

The simulator runs the plan's jobs (the same subset, submission times relative to the first)
on the same cluster (nodes, GPUs per node, nodes per leaf switch) with the same per-GPU draw
(`variability_seed` = the replay's seed). Each arm maps to the simulator policy closest to it:
`stock` -> `firstfit` (lowest node/GPU first, FIFO, no backfill: Slurm's backfill on the time
limits is NOT modelled yet), `pal` -> `pal`, `pal-net` -> `pal-net`. The prediction is therefore
a first estimate; `palctl replay` reports it next to the measurement so the gap is visible.
"""

from __future__ import annotations

from dataclasses import replace

from pal_slurm.replay.plan import ReplayPlan
from pal_slurm.sim.runner import RunSpec
from pal_slurm.sim.trace import Trace

SIM_POLICY = {"stock": "firstfit", "pal": "pal", "pal-net": "pal-net"}


def predict(plan: ReplayPlan, arm: str, seed: int, num_nodes: int, gpus_per_node: int,
            nodes_per_rack: int) -> dict:
    """{"policy", "avg_jct_s", "makespan_s"} of the event simulator for this arm."""
    jobs = tuple(replace(j.trace_job, submit_time=j.submit_s) for j in plan.jobs)
    spec = RunSpec(mode="event", num_nodes=num_nodes, gpus_per_node=gpus_per_node,
                   nodes_per_rack=nodes_per_rack, seeds=seed + 1)
    policy = SIM_POLICY[arm]
    from pal_slurm.sim.event import simulator_for

    result = simulator_for(spec, seed).run(Trace(plan.trace, jobs), policy)
    s = result.summary()
    return {"policy": policy, "avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"]}


