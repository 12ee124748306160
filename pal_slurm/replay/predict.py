"""What the event simulator predicts for a replayed arm (same jobs, cluster, draw, seed).

The simulator runs the plan's jobs (the same subset, submission times relative to the first)
on the same cluster (nodes, GPUs per node, nodes per leaf switch) with the same per-GPU draw
(`variability_seed` = the replay's seed). Each arm maps to the simulator policy closest to it:
`stock` -> `STOCK_SLURM`, a variability-blind, topology-aware first fit with EASY backfill
(cons_tres takes the lowest free nodes and GPU indices, topology/tree prefers one leaf switch,
sched/backfill starts jobs out of order when they do not delay the first blocked one; the
simulator's backfill plans with the jobs' real remaining time, not Slurm's time limits - a
known difference), `pal` -> `pal`, `pal-net` -> `pal-net` (the simulator's own loops, not yet
the Slurm submit/held-job path pald takes). `palctl replay` reports the prediction next to the
measurement so the gap is visible.

Slurm's own cost per job (`launch_s`, trace seconds: the replay measures it as wall seconds
from sbatch to the payload running plus teardown, times the scale) is charged to every job as
extra run time on its GPUs; at 600 trace s per wall s it is ~1000 trace s a job, more than the
median job's ideal runtime, so a prediction without it misses the replay by that much.
"""

from __future__ import annotations

from dataclasses import replace

from pal_slurm.policy.netaware import NetAwarePlacement
from pal_slurm.replay.plan import ReplayPlan
from pal_slurm.sim.runner import RunSpec
from pal_slurm.sim.trace import Trace

STOCK_SLURM = NetAwarePlacement("slurm-stock", variability=False, delay=False, finish_aware=False,
                                topology_aware=True)
SIM_POLICY: dict[str, NetAwarePlacement | str] = {"stock": STOCK_SLURM, "pal": "pal", "pal-net": "pal-net",
                                                  "pal-fit": "pal-fit"}


def predict(plan: ReplayPlan, arm: str, seed: int, num_nodes: int, gpus_per_node: int,
            nodes_per_rack: int, launch_s: float = 0.0) -> dict:
    """{"policy", "avg_jct_s", "makespan_s"} of the event simulator for this arm."""
    jobs = tuple(replace(j.trace_job, submit_time=j.submit_s,
                         iterations=j.trace_job.iterations + launch_s / j.trace_job.iter_time) for j in plan.jobs)
    spec = RunSpec(mode="event", num_nodes=num_nodes, gpus_per_node=gpus_per_node,
                   nodes_per_rack=nodes_per_rack, seeds=seed + 1)
    policy = SIM_POLICY[arm]
    from pal_slurm.sim.event import simulator_for

    result = simulator_for(spec, seed).run(Trace(plan.trace, jobs), policy)
    s = result.summary()
    name = policy if isinstance(policy, str) else policy.name
    return {"policy": name, "avg_jct_s": s["avg_jct_s"], "makespan_s": s["makespan_s"]}


