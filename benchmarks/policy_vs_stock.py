"""pal-slurm's placements against stock Slurm's, in event mode.

    python3 benchmarks/policy_vs_stock.py                       # 16x4 and 32x4, 8 seeds
    python3 benchmarks/policy_vs_stock.py --nodes 16 --seeds 3  # one cluster, fewer seeds

The baseline is the replay's model of stock Slurm (the registered `slurm` placement: a
variability-blind, topology-aware first fit with EASY backfill, what cons_tres + topology/tree +
sched/backfill do). For each cluster (N nodes x 4 GPUs, 4 nodes per leaf switch), each bundled
Sia-Philly workload 1-6 and each seed (variability draw and placement RNG), one event-mode run
per policy. Prints, per workload, the mean over seeds of each policy's ratio to stock
(avg JCT / makespan; < 1 = better than stock), then per policy the geomean over workloads, the
worst workload, and the targets: geomean avg JCT <= 0.85, makespan no worse, no
workload worse than stock.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_slurm.policy import placement  # noqa: E402
from pal_slurm.policy.base import PlacementPolicy  # noqa: E402
from pal_slurm.policy.netaware.named import SLURM  # noqa: E402
from pal_slurm.sim.event import EventConfig, EventSimulator  # noqa: E402
from pal_slurm.sim.trace import bundled_trace  # noqa: E402

POLICIES = ("pal-fit", "pal-net", "pal-backfill", "pal")
TARGET_JCT = 0.85


def run(trace: str, policy: PlacementPolicy, nodes: int, seed: int,
        queue: str = "fifo") -> tuple[float, float, float, float]:
    """(avg JCT, makespan, p99 JCT, max queue wait) of one event-mode run."""
    config = EventConfig(num_nodes=nodes, gpus_per_node=4, nodes_per_rack=4, variability_seed=seed, seed=seed,
                         queue=queue)
    result = EventSimulator(config).run(bundled_trace(trace), policy)
    summary = result.summary()
    max_wait = max(j.first_start - j.submit for j in result.jobs)
    return float(summary["avg_jct_s"]), float(summary["makespan_s"]), float(summary["p99_jct_s"]), max_wait


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def compare(nodes: int, seeds: int, names: list[str], traces: list[str], queue: str = "fifo") -> bool:
    """Print one cluster's table; True when the first policy meets every target. `queue` orders
    the policies' held jobs; stock Slurm keeps FIFO (priority/basic) with backfill."""
    policies = {name: placement(name) for name in names}
    tail: dict[str, list[float]] = {name: [] for name in names}
    wait: dict[str, list[float]] = {name: [] for name in names}
    jct: dict[str, list[float]] = {name: [] for name in names}
    span: dict[str, list[float]] = {name: [] for name in names}
    print(f"\n{nodes}x4 GPUs, 4 nodes per leaf, {seeds} seeds, queue {queue}: "
          "ratio to stock Slurm (avg JCT / makespan)")
    print(f"{'trace':<12}" + "".join(f"{name:>22}" for name in names))
    for trace in traces:
        base = [run(trace, SLURM, nodes, seed) for seed in range(seeds)]
        row = f"{trace:<12}"
        for name in names:
            got = [run(trace, policies[name], nodes, seed, queue) for seed in range(seeds)]
            j = statistics.mean(g[0] / b[0] for g, b in zip(got, base))
            m = statistics.mean(g[1] / b[1] for g, b in zip(got, base))
            tail[name].append(statistics.mean(g[2] / b[2] for g, b in zip(got, base)))
            wait[name].append(max(g[3] for g in got) / max(max(b[3] for b in base), 1.0))
            jct[name].append(j)
            span[name].append(m)
            row += f"{j:>14.3f} / {m:5.3f}"
        print(row, flush=True)
    print(f"{'geomean':<12}" + "".join(f"{geomean(jct[n]):>14.3f} / {geomean(span[n]):5.3f}" for n in names))
    print(f"{'worst':<12}" + "".join(f"{max(jct[n]):>14.3f} / {max(span[n]):5.3f}" for n in names))
    print(f"{'p99 JCT':<12}" + "".join(f"{geomean(tail[n]):>22.3f}" for n in names) + "   (geomean of ratios)")
    print(f"{'max wait':<12}" + "".join(f"{max(wait[n]):>22.3f}" for n in names)
          + "   (worst workload: longest wait over seeds / stock's)")
    first = names[0]
    ok_jct = geomean(jct[first]) <= TARGET_JCT
    ok_span = geomean(span[first]) <= 1.0
    ok_each = max(jct[first]) <= 1.0
    print(f"targets for {first}: geomean avg JCT <= {TARGET_JCT}: {'met' if ok_jct else 'NOT met'}; "
          f"makespan no worse: {'met' if ok_span else 'NOT met'}; "
          f"no workload worse than stock: {'met' if ok_each else 'NOT met'}")
    return ok_jct and ok_span and ok_each


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="16,32", help="comma-separated cluster sizes (nodes of 4 GPUs)")
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated; the first is checked")
    ap.add_argument("--queue", default="fifo", help="comma-separated queue orders for the policies "
                    "(registry names: fifo, las, srtf, srtf-aged); one table each; stock stays FIFO")
    ap.add_argument("--traces", default="1,2,3,4,5,6", help="Sia-Philly workload numbers")
    args = ap.parse_args()
    names = [n for n in args.policies.split(",") if n]
    traces = [f"workload-{i}" for i in args.traces.split(",") if i]
    started = time.perf_counter()
    queues = [q for q in args.queue.split(",") if q]
    for queue in queues:
        met = [compare(int(n), args.seeds, names, traces, queue) for n in args.nodes.split(",")]
        print(f"\nqueue {queue}: {sum(met)}/{len(met)} clusters meet every target for {names[0]}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
