"""Network-aware policies against PAL and the baselines, in event mode.

    python3 benchmarks/network_compare.py                   # the full comparison
    python3 benchmarks/network_compare.py --seeds 1 --quick # a smaller one

For each scenario (the 6 bundled Sia-Philly traces at 16x4 GPUs, 4 nodes per rack, with no
congestion and with congestion; synthetic Philly-like traces with congestion), each seed
(variability draw and placement RNG) and each policy, one event-mode run. Prints per-scenario
geomean ratios to PAL of avg JCT, makespan and communication overhead (< 1 = better than PAL),
the target check (pal-net >= 10% lower geomean avg JCT than PAL, and lower makespan),
and every (trace, seed) where pal-net loses to PAL or to the best other policy.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_slurm.sim.event import EventConfig, EventSimulator  # noqa: E402
from pal_slurm.sim.network import Congestion  # noqa: E402
from pal_slurm.sim.trace import bundled_trace, bundled_trace_names, synthetic_trace  # noqa: E402

POLICIES = ("pal", "pmfirst", "packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky",
            "firstfit", "dally", "pal-backfill", "pal-net-nodelay", "pal-net", "pal-net-tuned", "pal-net-preempt")
CONGESTED = Congestion(0.3, 0.6)


def scenarios(quick: bool):
    """(label, trace maker args, congestion)."""
    out = [("sia-philly", None, Congestion()), ("sia-philly+congestion", None, CONGESTED)]
    out.append(("synthetic+congestion", ("syn", 4 if quick else 6), CONGESTED))
    return out


def traces_for(spec, seed: int):
    if spec is None:
        return [bundled_trace(n) for n in bundled_trace_names()]
    _kind, count = spec
    # Philly-like mix up to 32 GPUs, ~160 jobs arriving over ~8 hours: a loaded 64-GPU cluster
    return [synthetic_trace(160, seed=100 * seed + i, jobs_per_hour=20.0, max_gpus=32, name=f"syn{i}")
            for i in range(count)]


def one(args):
    label, trace, policy, seed, cong, restart = args
    cfg = EventConfig(num_nodes=16, gpus_per_node=4, nodes_per_rack=4, congestion=cong,
                      variability_seed=seed, seed=seed, restart_cost_s=restart)
    s = EventSimulator(cfg).run(trace, policy).summary()
    return (label, trace.name, seed, policy), s


def geomean(vals):
    vals = [v for v in vals if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--restart-cost", type=float, default=30.0, help="seconds per restart (event mode)")
    args = ap.parse_args()
    policies = [p for p in args.policies.split(",") if p]
    work = []
    for label, spec, cong in scenarios(args.quick):
        for seed in range(args.seeds):
            for tr in traces_for(spec, seed):
                for p in policies:
                    work.append((label, tr, p, seed, cong, args.restart_cost))
    t0 = time.perf_counter()
    with mp.get_context("fork").Pool(args.procs) as pool:
        results = dict(pool.map(one, work, chunksize=4))
    print(f"{len(work)} event-mode runs in {time.perf_counter() - t0:.0f} s "
          f"(16x4 GPUs, 4 nodes/rack; congestion = leaf {CONGESTED.leaf}, spine {CONGESTED.spine}; "
          f"restart cost {args.restart_cost:g} s)")

    for label, _spec, _cong in scenarios(args.quick):
        keys = sorted({(k[1], k[2]) for k in results if k[0] == label})
        print(f"\n== {label}: {len(keys)} (trace, seed) runs per policy; geomean ratio to pal (< 1 is better) ==")
        print(f"{'policy':18s} {'avg JCT':>8s} {'makespan':>9s} {'comm':>8s} {'p99 JCT':>8s}   mean avg JCT h  mean makespan h")
        rows = {}
        for p in policies:
            r = {m: geomean(results[(label, t, s, p)][m] / results[(label, t, s, "pal")][m] for t, s in keys)
                 for m in ("avg_jct_s", "makespan_s", "p99_jct_s")}
            r["comm"] = geomean((results[(label, t, s, p)]["comm_overhead_s"] + 1.0)
                                / (results[(label, t, s, "pal")]["comm_overhead_s"] + 1.0) for t, s in keys)
            mean_jct = sum(results[(label, t, s, p)]["avg_jct_s"] for t, s in keys) / len(keys) / 3600
            mean_mk = sum(results[(label, t, s, p)]["makespan_s"] for t, s in keys) / len(keys) / 3600
            rows[p] = r
            print(f"{p:18s} {r['avg_jct_s']:8.3f} {r['makespan_s']:9.3f} {r['comm']:8.3f} {r['p99_jct_s']:8.3f}"
                  f"   {mean_jct:13.2f}  {mean_mk:15.2f}")
        if "pal-net" in rows:
            r = rows["pal-net"]
            ok = r["avg_jct_s"] <= 0.9 and r["makespan_s"] < 1.0
            print(f"target (pal-net avg JCT <= 0.90 x pal and makespan < pal): "
                  f"{'MET' if ok else 'NOT MET'} ({1 - r['avg_jct_s']:.1%} lower avg JCT, "
                  f"{1 - r['makespan_s']:.1%} lower makespan)")
            others = [p for p in policies if not p.startswith("pal-net") and p != "pal-backfill"]  # its own variants aside
            losses = []
            for t, s in keys:
                mine = results[(label, t, s, "pal-net")]
                for m in ("avg_jct_s", "makespan_s"):
                    best = min(others, key=lambda p: results[(label, t, s, p)][m])
                    if results[(label, t, s, best)][m] < mine[m] * 0.999:
                        losses.append(f"{t} seed {s}: {m} {mine[m] / 3600:.2f} h vs {best} "
                                      f"{results[(label, t, s, best)][m] / 3600:.2f} h")
            print(f"pal-net loses (to the best non-pal-net policy) in {len(losses)} of {2 * len(keys)} comparisons:")
            for line in losses:
                print("  " + line)


if __name__ == "__main__":
    main()
