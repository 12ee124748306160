"""The lab replay without a Slurm: what the replay's simulator predicts for an arm against stock.

    python3 benchmarks/replay_prediction.py                          # 6 traces x seeds 0-2
    python3 benchmarks/replay_prediction.py --traces workload-5 --seeds 0 --explain 3
    python3 benchmarks/replay_prediction.py --jobs 80 --phases 10 --scale 600,150,60 --launch-wall-s 0.14

The setting is `palctl replay`'s (first --jobs jobs of each bundled Sia-Philly trace, --scale
trace seconds per wall second, 16 nodes x 4 GPUs, 4 nodes per leaf switch, the replay's Slurm
shapes and time limits) and the prediction is `replay.predict.predict`'s: the model of stock
Slurm (passes, EASY backfill on limits, whole-node reservations, best-fit leaf) against the
model of pald on Slurm for the arm, with the simulator's exact per-GPU draw for the seed as
pald's ranking (a replay measures it) and a fixed Slurm launch cost. It runs in seconds, so it
covers traces and seeds a replay (minutes of wall time each) does not.

Prints per (seed, trace) the arm's avg JCT and makespan over stock's, the geomean and the
worst; `--phases K` predicts each (seed, trace) at K phases of Slurm's backfill passes against
the first submission (spread over one bf_interval; a replay aligns its first job 0.5 s after a
pass, and the lab's passes drift by milliseconds each) and prints the ratio's min / mean / max:
how much the outcome of a compressed replay hangs on sub-second timing; `--explain K` lists, for each loss, the K jobs whose JCT grew most, with where each
arm ran them (start-finish, trace hours) and their run time's stretch over the job's ideal.
`--scale` takes several scales (a table each): how much the time compression decides, with
`--launch-wall-s`, Slurm's launch cost in wall seconds (as on a lab: the same at every scale).
`--headroom` adds how far any policy could go (the jobs' best possible JCT over stock's), the run
times' share of stock's JCT (the rest is waiting) and the share of the headroom the arm took.
`--limits-as-scale L` rounds the time limits as a replay at L would (one wall minute at least:
2.5 trace hours at 150) whatever `--scale` is: with `--scale 5` (a pass 5 trace s, pald's cycle
1.5, a launch 0.7: a site's timing) it tells what the limits decide from what the timing does.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_lab.replay.ctldlog import PassClock  # noqa: E402
from pal_lab.replay.harness import BF_INTERVAL_S  # noqa: E402
from pal_lab.replay.plan import plan_replay  # noqa: E402
from pal_lab.replay.predict import predicted_run  # noqa: E402
from pal_slurm.sim.metrics import geomean  # noqa: E402
from pal_slurm.sim.trace import bundled_trace  # noqa: E402
from pal_slurm.intake.hostlist import compress  # noqa: E402

TRACES = ("workload-1", "workload-2", "workload-3", "workload-4", "workload-5", "workload-6")
NODES, GPUS_PER_NODE, NODES_PER_LEAF = 16, 4, 4  # the replay's lab cluster


def predicted_runs(trace: str, arm: str, seed: int, jobs: int, scale: float, launch_s: float,
                   slurm_pass: PassClock | None = None, limit_scale: float | None = None):
    """(stock's run, the arm's run) as the replay predicts them (`slurm_pass`: the passes'
    clock, default the one a replay aligns its first job to; `limit_scale`: time limits rounded
    to whole wall minutes at that scale, default `scale`'s own)."""
    plan = plan_replay(bundled_trace(trace), scale, GPUS_PER_NODE, NODES * GPUS_PER_NODE, jobs=jobs,
                       limit_scale=limit_scale)
    return tuple(predicted_run(plan, a, seed, NODES, GPUS_PER_NODE, NODES_PER_LEAF, launch_s=launch_s,
                               slurm_pass=slurm_pass)
                 for a in ("stock", arm))


def phase_spread(trace: str, arm: str, seed: int, jobs: int, scale: float, launch_s: float,
                 phases: int, limit_scale: float | None = None) -> list[float]:
    """The arm's avg JCT over stock's at `phases` pass phases spread over one bf_interval."""
    out = []
    for k in range(phases):
        clock = PassClock(phase_s=(k + 0.5) / phases * BF_INTERVAL_S, period_s=BF_INTERVAL_S)
        stock, arm_run = predicted_runs(trace, arm, seed, jobs, scale, launch_s, clock, limit_scale)
        out.append(arm_run.summary()["avg_jct_s"] / stock.summary()["avg_jct_s"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", default=",".join(TRACES))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--arm", default="pal-fit")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--scale", default="600", help="trace seconds per wall second; several: 600,150,60")
    ap.add_argument("--launch-s", type=float, default=60.0, help="Slurm's launch cost, trace seconds")
    ap.add_argument("--launch-wall-s", type=float, default=None,
                    help="Slurm's launch cost in wall seconds (x each scale; overrides --launch-s)")
    ap.add_argument("--limits-as-scale", type=float, default=None, metavar="L",
                    help="round time limits to whole wall minutes as a replay at scale L would (default: each "
                         "--scale's own): a site's time scale with a compressed replay's limits")
    ap.add_argument("--explain", type=int, default=0, metavar="K")
    ap.add_argument("--headroom", action="store_true",
                    help="also print how far any policy could go: the jobs' best possible JCT (best GPUs, best "
                         "locality, no wait) over stock's avg JCT, stock's and the arm's run time (start to end) "
                         "over stock's avg JCT, and the share of that headroom the arm takes")
    ap.add_argument("--phases", type=int, default=0, metavar="K",
                    help="predict at K phases of Slurm's passes and print the ratio's min/mean/max")
    args = ap.parse_args()
    scales = [float(s) for s in args.scale.split(",")]
    for scale in scales:
        launch_s = args.launch_s if args.launch_wall_s is None else args.launch_wall_s * scale
        if args.phases:
            print_phases(args, scale, launch_s)
        else:
            print_predictions(args, scale, launch_s)


def print_phases(args, scale: float, launch_s: float) -> None:
    print(f"{args.arm} / stock avg JCT, predicted at {args.phases} pass phases ({args.jobs} jobs, "
          f"scale {scale:g}, launch {launch_s:g} trace s)")
    print(f"{'seed':>4s} {'trace':12s} {'min':>6s} {'mean':>6s} {'max':>6s}  per phase")
    for seed in (int(s) for s in args.seeds.split(",")):
        for trace in args.traces.split(","):
            rs = phase_spread(trace, args.arm, seed, args.jobs, scale, launch_s, args.phases, args.limits_as_scale)
            print(f"{seed:4d} {trace:12s} {min(rs):6.3f} {sum(rs) / len(rs):6.3f} {max(rs):6.3f}  "
                  + " ".join(f"{r:.3f}" for r in rs), flush=True)


def print_predictions(args, scale: float, launch_s: float) -> None:
    ratios, bounds = [], []
    limits = "" if args.limits_as_scale is None else f", limits as at scale {args.limits_as_scale:g}"
    print(f"{args.arm} / stock, predicted ({args.jobs} jobs, scale {scale:g}{limits}, 16x4, 4 nodes per leaf)")
    print(f"{'seed':>4s} {'trace':12s} {'stock avg JCT h':>15s} {'arm avg JCT h':>13s} {'JCT ratio':>9s} {'makespan ratio':>14s}"
          + (f" {'bound':>6s} {'stock run':>9s} {'arm run':>8s} {'taken':>6s}" if args.headroom else ""))
    for seed in (int(s) for s in args.seeds.split(",")):
        for trace in args.traces.split(","):
            stock, arm = predicted_runs(trace, args.arm, seed, args.jobs, scale, launch_s,
                                        limit_scale=args.limits_as_scale)
            s, a = stock.summary(), arm.summary()
            r, m = a["avg_jct_s"] / s["avg_jct_s"], a["makespan_s"] / s["makespan_s"]
            ratios.append(r)
            extra = ""
            if args.headroom:
                room = headroom(stock, arm)
                bounds.append(room["bound"])
                extra = (f" {room['bound']:6.3f} {room['stock_run']:9.3f} {room['arm_run']:8.3f} "
                         f"{room['taken']:6.2f}")
            print(f"{seed:4d} {trace:12s} {s['avg_jct_s'] / 3600:15.3f} {a['avg_jct_s'] / 3600:13.3f} "
                  f"{r:9.3f} {m:14.3f}{extra}{'  <- loss' if r > 1.0 or m > 1.0 else ''}", flush=True)
            if args.explain and (r > 1.0 or m > 1.0):
                explain(stock, arm, args.explain)
    print(f"geomean avg JCT ratio {geomean(ratios):.3f} over {len(ratios)} runs, worst {max(ratios):.3f}"
          + (f"; geomean bound {geomean(bounds):.3f}" if bounds else ""))


def headroom(stock, arm) -> dict:
    """How far any policy could bring avg JCT below stock's, and how much of it the arm took,
    all over stock's avg JCT: `bound` (every job's best possible JCT: its best GPUs, best
    locality, no wait: `JobOutcome.lower_bound_s`), `stock_run` / `arm_run` (the jobs' run
    times, start to end: what placement decides; the rest is waiting), `taken` ((stock - arm) /
    (stock - bound))."""
    n = len(stock.jobs)
    stock_jct = sum(o.jct for o in stock.jobs) / n
    arm_jct = sum(o.jct for o in arm.jobs) / len(arm.jobs)
    bound = sum(o.lower_bound_s for o in stock.jobs) / n
    return {"bound": bound / stock_jct,
            "stock_run": sum(o.finish - o.first_start for o in stock.jobs) / n / stock_jct,
            "arm_run": sum(o.finish - o.first_start for o in arm.jobs) / len(arm.jobs) / stock_jct,
            "taken": (stock_jct - arm_jct) / (stock_jct - bound) if stock_jct > bound else float("nan")}


def explain(stock, arm, k: int) -> None:
    before = {o.job_id: o for o in stock.jobs}
    grown = sorted(arm.jobs, key=lambda o: before[o.job_id].jct - o.jct)[:k]
    for o in grown:
        b = before[o.job_id]
        print(f"      job {o.job_id} ({o.num_gpus} GPUs, {o.model}): JCT {b.jct / 3600:.2f} -> {o.jct / 3600:.2f} h; "
              f"stock ran it {b.first_start / 3600:.2f}-{b.finish / 3600:.2f} (x{(b.finish - b.first_start) / o.ideal_runtime:.2f}"
              f" ideal) on {_nodes(b.gpus)}, the arm {o.first_start / 3600:.2f}-{o.finish / 3600:.2f} "
              f"(x{(o.finish - o.first_start) / o.ideal_runtime:.2f}) on {_nodes(o.gpus)}")


def _nodes(gpus) -> str:
    """The lab's names of the nodes a job's GPUs are on (GPU index = node position x 4 + slot)."""
    return compress(f"gpu{g // GPUS_PER_NODE + 1:02d}" for g in gpus) or "-"


if __name__ == "__main__":
    main()
