"""pal-fit against the model of stock Slurm on synthetic workloads it was not tuned on.

    python3 benchmarks/robustness.py --quick            # 3 loads x 2 mixes x 3 seeds, 2 timings
    python3 benchmarks/robustness.py                    # 4 loads x 3 mixes x 5 seeds, 2 timings
    python3 benchmarks/robustness.py --procs 8 --seeds 0-19
    python3 benchmarks/robustness.py --quick --bound-h inf   # pal-fit without its starvation bound

Each workload is a synthetic trace of the simulator's generator (`sim.trace.synthetic_trace`:
Poisson arrivals, the Philly GPU-count and model mix unless --mixes says otherwise, Gavel-like
lengths) at a load (the share of the cluster's GPU-hours the arrivals ask for), run as the
replay's model runs a lab replay (`replay.predict.predicted_run`: --jobs jobs, 16 nodes x 4 GPUs,
4 nodes per leaf switch, the replay's Slurm shapes and time limits, Slurm's launch cost of
--launch-wall-s wall seconds): the `stock` arm (the `slurm` placement on Slurm's pass clock)
against pald's pal-fit on Slurm, at each --scale (trace seconds per wall second: 5 is a site's
timing, a pass every 5 trace s and pald's cycle 1.5; 150 the lab's).

Prints per workload the avg JCT and makespan ratios (pal-fit / stock; < 1: better than stock),
the largest extra start delay of any job against stock (hours, with that job's GPUs) and how
many jobs start later than stock by more than the bound; then per timing the geomean and worst
ratios, the largest extra delay and the targets: no job later than stock by more than the bound,
worst makespan ratio <= 1.02, geomean avg JCT ratio <= 0.95, worst <= 1.02.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_lab.replay.plan import plan_replay  # noqa: E402
from pal_lab.replay.predict import predicted_run  # noqa: E402
from pal_slurm.config import PolicyConfig  # noqa: E402
from pal_slurm.sim.metrics import geomean  # noqa: E402
from pal_slurm.sim.trace import PHILLY_GPU_MIX, rate_for_load, synthetic_trace  # noqa: E402

NODES, GPUS_PER_NODE, NODES_PER_LEAF = 16, 4, 4  # the replay's lab cluster
# job-size mixes: Philly's GPU counts; only jobs of up to 8 GPUs; twice the share of 16- and
# 32-GPU jobs (the large jobs a starved one is)
MIXES: dict[str, Sequence[tuple[int, float]]] = {
    "philly": PHILLY_GPU_MIX,
    "small": tuple((g, w) for g, w in PHILLY_GPU_MIX if g <= 8),
    "large": tuple((g, w * 2 if g >= 16 else w) for g, w in PHILLY_GPU_MIX),
}
TARGET_SPAN_WORST, TARGET_JCT_GEOMEAN, TARGET_JCT_WORST = 1.02, 0.95, 1.02


@dataclass(frozen=True)
class Workload:
    load: float
    mix: str
    seed: int
    scale: float


@dataclass(frozen=True)
class Outcome:
    jct: float  # avg JCT ratio, pal-fit / stock
    span: float  # makespan ratio
    extra_s: float  # the largest start delay of one job against stock (trace seconds; <= 0: none later)
    extra_gpus: int  # that job's GPUs
    over_bound: int  # jobs later than stock by more than the bound


def run(w: Workload, jobs: int, launch_wall_s: float, bound_s: float | None) -> Outcome:
    gpus = NODES * GPUS_PER_NODE
    mix = MIXES[w.mix]
    trace = synthetic_trace(jobs, seed=w.seed, jobs_per_hour=rate_for_load(w.load, gpus, mix), gpu_mix=mix,
                            max_gpus=gpus, name=f"{w.mix}-{w.load:g}-s{w.seed}")
    plan = plan_replay(trace, w.scale, GPUS_PER_NODE, gpus)
    stock, arm = (predicted_run(plan, a, w.seed, NODES, GPUS_PER_NODE, NODES_PER_LEAF,
                                launch_s=launch_wall_s * w.scale, starvation_bound_s=bound_s)
                  for a in ("stock", "pal-fit"))
    s, a = stock.summary(), arm.summary()
    start = {j.job_id: j.first_start for j in stock.jobs}
    delays = sorted(((j.first_start - start[j.job_id], j.num_gpus) for j in arm.jobs), reverse=True)
    return Outcome(a["avg_jct_s"] / s["avg_jct_s"], a["makespan_s"] / s["makespan_s"], delays[0][0], delays[0][1],
                   sum(1 for d, _ in delays if d > over_s(bound_s)))


def over_s(bound_s: float | None) -> float:
    """The delay against stock a job is counted over: the bound, or a site's default bound when
    pal-fit runs with none (`--bound-h inf`: what the bound changes)."""
    return PolicyConfig().starvation_bound_s if bound_s is None or bound_s == float("inf") else bound_s


def _run(args: tuple[Workload, int, float, float | None]) -> tuple[Workload, Outcome]:
    return args[0], run(*args)


def seeds_of(text: str) -> list[int]:
    """'0-2' or '0,3,5' -> seeds."""
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",") if s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="loads 0.5,0.8,0.95, mixes philly,large, seeds 0-2")
    ap.add_argument("--loads", default="0.5,0.65,0.8,0.95")
    ap.add_argument("--mixes", default=",".join(MIXES), help=f"of {', '.join(MIXES)}")
    ap.add_argument("--seeds", default="0-4", help="e.g. 0-19 or 0,3,5 (trace, variability draw)")
    ap.add_argument("--scale", default="5,150", help="trace seconds per wall second; 5: a site's timing")
    ap.add_argument("--jobs", type=int, default=80, help="jobs per workload")
    ap.add_argument("--launch-wall-s", type=float, default=0.14, help="Slurm's launch cost, wall seconds")
    ap.add_argument("--bound-h", type=float, default=None,
                    help="pald's starvation bound, trace hours (default: [policy] starvation_bound_s; inf: none)")
    ap.add_argument("--procs", type=int, default=1, help="workloads run in parallel")
    args = ap.parse_args()
    if args.quick:
        args.loads, args.mixes, args.seeds = "0.5,0.8,0.95", "philly,large", "0-2"
    bound_s = None if args.bound_h is None else args.bound_h * 3600.0
    limit_h = over_s(bound_s) / 3600.0
    scales = [float(s) for s in args.scale.split(",")]
    work = [Workload(float(load), mix, seed, scale) for scale in scales for load in args.loads.split(",")
            for mix in args.mixes.split(",") for seed in seeds_of(args.seeds)]
    started = time.perf_counter()
    print(f"pal-fit / stock Slurm (the replay's model: {args.jobs} jobs, {NODES}x{GPUS_PER_NODE}, {NODES_PER_LEAF} "
          f"nodes per leaf, launch {args.launch_wall_s:g} wall s); pald's starvation bound "
          f"{limit_h if bound_s != float('inf') else float('inf'):g} h, jobs counted over {limit_h:g} h")
    print(f"{'scale':>5s} {'load':>5s} {'mix':7s} {'seed':>4s} {'JCT ratio':>9s} {'makespan':>8s} "
          f"{'max extra h':>11s} {'its GPUs':>8s} {'> bound':>7s}")
    results: list[tuple[Workload, Outcome]] = []
    jobs = [(w, args.jobs, args.launch_wall_s, bound_s) for w in work]
    with ProcessPoolExecutor(max_workers=max(1, args.procs)) as pool:
        for w, o in pool.map(_run, jobs):
            results.append((w, o))
            flag = "  <-" if o.jct > TARGET_JCT_WORST or o.span > TARGET_SPAN_WORST or o.over_bound else ""
            print(f"{w.scale:5g} {w.load:5g} {w.mix:7s} {w.seed:4d} {o.jct:9.3f} {o.span:8.3f} "
                  f"{o.extra_s / 3600:11.2f} {o.extra_gpus:8d} {o.over_bound:7d}{flag}", flush=True)
    for scale in scales:
        got = [o for w, o in results if w.scale == scale]
        jct, span = [o.jct for o in got], [o.span for o in got]
        worst_extra = max(got, key=lambda o: o.extra_s)
        over = sum(o.over_bound for o in got)
        print(f"\nscale {scale:g}: {len(got)} workloads; avg JCT ratio geomean {geomean(jct):.3f}, worst {max(jct):.3f}; "
              f"makespan ratio geomean {geomean(span):.3f}, worst {max(span):.3f}; largest extra delay "
              f"{worst_extra.extra_s / 3600:.2f} h ({worst_extra.extra_gpus} GPUs); jobs later than stock by more "
              f"than {limit_h:g} h: {over}")
        checks = [(f"no job later than stock by > {limit_h:g} h", over == 0),
                  (f"worst makespan ratio <= {TARGET_SPAN_WORST}", max(span) <= TARGET_SPAN_WORST),
                  (f"geomean avg JCT ratio <= {TARGET_JCT_GEOMEAN}", geomean(jct) <= TARGET_JCT_GEOMEAN),
                  (f"worst avg JCT ratio <= {TARGET_JCT_WORST}", max(jct) <= TARGET_JCT_WORST)]
        print("  " + "; ".join(f"{name}: {'met' if ok else 'NOT met'}" for name, ok in checks))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
