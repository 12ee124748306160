"""pal-fit against the model of stock Slurm on synthetic workloads it was not tuned on.

    python3 benchmarks/robustness.py --quick            # 3 loads x 2 mixes x 3 seeds, 2 timings
    python3 benchmarks/robustness.py                    # 4 loads x 3 mixes x 5 seeds, 2 timings
    python3 benchmarks/robustness.py --procs 8 --seeds 0-19
    python3 benchmarks/robustness.py --quick --bound-h inf   # pal-fit without its starvation bound
    python3 benchmarks/robustness.py --quick --queues fifo,slurm   # pald's queue and Slurm's order
    python3 benchmarks/robustness.py --traces workload-3 --jobs 40 --seeds 0 --queues fifo,slurm
    python3 benchmarks/robustness.py --quick --control-jitter 0.01   # stock against itself, lengths +-1%
    python3 benchmarks/robustness.py --quick --control-jitter 0.01 --stock-draws 5   # against 5 stock draws

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

--queues runs pald's model with each of pald's queue orders (`[policy] queue`) against the same
stock run: `fifo` (pald's own queue, the default) and `slurm` (Slurm's priority order: every held
job that cannot start reserves at once and the engine's free backfill is off, `Engine.keeps_order`;
the model has no Slurm priority, every job scores the same, so that is submit order under
Slurm's backfill rule). Per timing it prints each queue's figures side by side, and the mean
wait per account: the synthetic traces have none, so each job gets one by `accounts` (a heavy
account with 2/3 of the jobs, a light one with every third), for stock and each queue, with
the heavy/light ratio (what a fair-share committee compares with stock's).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_lab.replay.plan import ReplayPlan, plan_replay  # noqa: E402
from pal_lab.replay.predict import predicted_run  # noqa: E402
from pal_slurm.config import PolicyConfig  # noqa: E402
from pal_slurm.sim.metrics import JobOutcome, RunResult, geomean  # noqa: E402
from pal_slurm.sim.trace import PHILLY_GPU_MIX, bundled_trace, rate_for_load, synthetic_trace  # noqa: E402

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
    waits: dict[str, float]  # account -> its jobs' mean wait (trace seconds)


HEAVY, LIGHT = "heavy", "light"
HEAVY_SHARE = 2 / 3  # the heavy account's share of the jobs (and, in expectation, of the GPU-hours)


def accounts(jobs: Sequence[JobOutcome]) -> dict[int, str]:
    """job id -> account: the light account gets every third job in submission order (the 3rd,
    6th, ...), the heavy one the others, so the heavy account submits 2/3 of the jobs and, as the
    sizes and lengths are drawn independently of the order, about HEAVY_SHARE of the GPU-hours.
    Deterministic and the same for every arm (it reads only the trace's jobs)."""
    ordered = sorted(jobs, key=lambda j: (j.submit, j.job_id))
    return {j.job_id: LIGHT if i % 3 == 2 else HEAVY for i, j in enumerate(ordered)}


def mean_waits(result: RunResult, account: dict[int, str]) -> dict[str, float]:
    """account -> the mean wait (first start less submit, trace s) of its jobs in `result`."""
    waits: dict[str, list[float]] = {HEAVY: [], LIGHT: []}
    for j in result.jobs:
        waits[account[j.job_id]].append(j.first_start - j.submit)
    return {a: sum(w) / len(w) if w else 0.0 for a, w in waits.items()}


CONTROL = "ctrl"  # the control row's name (--control-jitter)
DRAW_JITTER = 0.01  # the share by which --stock-draws jitter lengths when --control-jitter does not say


def baseline_draws(seed: int, draws: int) -> list[int]:
    """The jitter seeds of stock's runs beyond the plan's own (`draws` - 1 of them), none the
    control's (which draws with the workload's seed)."""
    return [seed + 1_000_003 * i for i in range(1, draws)]


def jittered(plan: ReplayPlan, jitter: float, seed: int) -> ReplayPlan:
    """`plan` with each job's length (its iterations) multiplied by a uniform draw from
    [1 - jitter, 1 + jitter], its time limit and everything else kept (the control's plan)."""
    rng = random.Random(seed)
    jobs = tuple(replace(j, trace_job=replace(j.trace_job, iterations=j.trace_job.iterations
                                              * (1.0 + rng.uniform(-jitter, jitter))))
                 for j in plan.jobs)
    return replace(plan, jobs=jobs)


def against(arm: RunResult, baseline: Sequence[RunResult], bound_s: float | None,
            account: dict[int, str]) -> Outcome:
    """`arm`'s figures against stock's runs of the same workload: the ratios to their mean avg
    JCT and makespan, each job's delay against its median start over them."""
    a = arm.summary()
    jct = statistics.fmean(r.summary()["avg_jct_s"] for r in baseline)
    span = statistics.fmean(r.summary()["makespan_s"] for r in baseline)
    starts: dict[int, list[float]] = {}
    for r in baseline:
        for j in r.jobs:
            starts.setdefault(j.job_id, []).append(j.first_start)
    start = {jid: statistics.median(s) for jid, s in starts.items()}
    delays = sorted(((j.first_start - start[j.job_id], j.num_gpus) for j in arm.jobs), reverse=True)
    return Outcome(a["avg_jct_s"] / jct, a["makespan_s"] / span, delays[0][0],
                   delays[0][1], sum(1 for d, _ in delays if d > over_s(bound_s)), mean_waits(arm, account))


def run(w: Workload, jobs: int, launch_wall_s: float, bound_s: float | None,
        queues: Sequence[str] = ("fifo",), control_jitter: float = 0.0, stock_draws: int = 1
        ) -> tuple[dict[str, float], dict[str, Outcome]]:
    """Stock's mean wait per account, and pal-fit's outcome against stock with each of `queues`
    (and, with `control_jitter`, stock's own on lengths that jitter: `CONTROL`). With
    `stock_draws` > 1, "stock" is that many runs: the plan's and the rest on lengths jittered by
    `control_jitter` (or DRAW_JITTER), each a draw of its own (`baseline_draws`)."""
    gpus = NODES * GPUS_PER_NODE
    if w.mix in MIXES:
        trace = synthetic_trace(jobs, seed=w.seed, jobs_per_hour=rate_for_load(w.load, gpus, MIXES[w.mix]),
                                gpu_mix=MIXES[w.mix], max_gpus=gpus, name=f"{w.mix}-{w.load:g}-s{w.seed}")
    else:  # a bundled trace (--traces), its first `jobs` jobs as the replay takes them
        trace = bundled_trace(w.mix)
    plan = plan_replay(trace, w.scale, GPUS_PER_NODE, gpus, jobs=jobs if w.mix not in MIXES else None)

    def stock_on(p: ReplayPlan) -> RunResult:
        return predicted_run(p, "stock", w.seed, NODES, GPUS_PER_NODE, NODES_PER_LEAF, launch_s=launch_wall_s * w.scale)

    stock = stock_on(plan)
    account = accounts(stock.jobs)
    baseline = [stock] + [stock_on(jittered(plan, control_jitter or DRAW_JITTER, draw))
                          for draw in baseline_draws(w.seed, stock_draws)]
    out = {}
    for queue in queues:
        arm = predicted_run(plan, "pal-fit", w.seed, NODES, GPUS_PER_NODE, NODES_PER_LEAF,
                            launch_s=launch_wall_s * w.scale, starvation_bound_s=bound_s, queue=queue)
        out[queue] = against(arm, baseline, bound_s, account)
    if control_jitter > 0:
        out[CONTROL] = against(stock_on(jittered(plan, control_jitter, w.seed)), baseline, bound_s, account)
    return mean_waits(stock, account), out


def over_s(bound_s: float | None) -> float:
    """The delay against stock a job is counted over: the bound, or a site's default bound when
    pal-fit runs with none (`--bound-h inf`: what the bound changes)."""
    return PolicyConfig().starvation_bound_s if bound_s is None or bound_s == float("inf") else bound_s


def _run(args: tuple[Workload, int, float, float | None, tuple[str, ...], float, int]
         ) -> tuple[Workload, tuple[dict[str, float], dict[str, Outcome]]]:
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
    ap.add_argument("--traces", default="",
                    help="bundled traces (e.g. workload-3) run instead of the synthetic workloads, their first --jobs")
    ap.add_argument("--queues", default="fifo", help="pald's queue orders to run, e.g. fifo,slurm")
    ap.add_argument("--control-jitter", type=float, default=0.0,
                    help="also run stock with each job's length jittered by up to this share (e.g. 0.01), against stock")
    ap.add_argument("--stock-draws", type=int, default=1,
                    help="stock as this many runs (the rest on jittered lengths): ratios to their mean, "
                         "delays against each job's median start")
    args = ap.parse_args()
    if args.quick:
        args.loads, args.mixes, args.seeds = "0.5,0.8,0.95", "philly,large", "0-2"
    bound_s = None if args.bound_h is None else args.bound_h * 3600.0
    limit_h = over_s(bound_s) / 3600.0
    scales = [float(s) for s in args.scale.split(",")]
    queues = tuple(q for q in args.queues.split(",") if q)
    rows_of = queues + ((CONTROL,) if args.control_jitter > 0 else ())
    work = [Workload(float(load), mix, seed, scale) for scale in scales for load in args.loads.split(",")
            for mix in args.mixes.split(",") for seed in seeds_of(args.seeds)]
    if args.traces:
        work = [Workload(0.0, name, seed, scale) for scale in scales for name in args.traces.split(",")
                for seed in seeds_of(args.seeds)]
    started = time.perf_counter()
    print(f"pal-fit / stock Slurm (the replay's model: {args.jobs} jobs, {NODES}x{GPUS_PER_NODE}, {NODES_PER_LEAF} "
          f"nodes per leaf, launch {args.launch_wall_s:g} wall s); pald's starvation bound "
          f"{limit_h if bound_s != float('inf') else float('inf'):g} h, jobs counted over {limit_h:g} h; "
          f"pald's queue: {', '.join(queues)}; stock: {args.stock_draws} run(s)"
          + (f", control: stock on lengths +-{args.control_jitter:g}" if args.control_jitter > 0 else ""))
    print(f"{'scale':>5s} {'load':>5s} {'mix':10s} {'seed':>4s} {'queue':6s} {'JCT ratio':>9s} {'makespan':>8s} "
          f"{'max extra h':>11s} {'its GPUs':>8s} {'> bound':>7s}")
    results: list[tuple[Workload, dict[str, float], dict[str, Outcome]]] = []
    jobs = [(w, args.jobs, args.launch_wall_s, bound_s, queues, args.control_jitter, args.stock_draws) for w in work]
    with ProcessPoolExecutor(max_workers=max(1, args.procs)) as pool:
        for w, (stock_waits, by_queue) in pool.map(_run, jobs):
            results.append((w, stock_waits, by_queue))
            for queue, o in by_queue.items():
                flag = "  <-" if o.jct > TARGET_JCT_WORST or o.span > TARGET_SPAN_WORST or o.over_bound else ""
                print(f"{w.scale:5g} {w.load:5g} {w.mix:10s} {w.seed:4d} {queue:6s} {o.jct:9.3f} {o.span:8.3f} "
                      f"{o.extra_s / 3600:11.2f} {o.extra_gpus:8d} {o.over_bound:7d}{flag}", flush=True)
    for scale in scales:
        rows = [(stock_waits, by_queue) for w, stock_waits, by_queue in results if w.scale == scale]
        print(f"\nscale {scale:g}: {len(rows)} workloads")
        for queue in rows_of:
            got = [by_queue[queue] for _, by_queue in rows]
            jct, span = [o.jct for o in got], [o.span for o in got]
            worst_extra = max(got, key=lambda o: o.extra_s)
            over = sum(o.over_bound for o in got)
            print(f"  {queue:6s} avg JCT ratio geomean {geomean(jct):.3f}, worst {max(jct):.3f}; makespan ratio "
                  f"geomean {geomean(span):.3f}, worst {max(span):.3f}; largest extra delay "
                  f"{worst_extra.extra_s / 3600:.2f} h ({worst_extra.extra_gpus} GPUs); jobs later than stock by "
                  f"more than {limit_h:g} h: {over}")
            checks = [(f"no job later than stock by > {limit_h:g} h", over == 0),
                      (f"worst makespan ratio <= {TARGET_SPAN_WORST}", max(span) <= TARGET_SPAN_WORST),
                      (f"geomean avg JCT ratio <= {TARGET_JCT_GEOMEAN}", geomean(jct) <= TARGET_JCT_GEOMEAN),
                      (f"worst avg JCT ratio <= {TARGET_JCT_WORST}", max(jct) <= TARGET_JCT_WORST)]
            print("         " + "; ".join(f"{name}: {'met' if ok else 'NOT met'}" for name, ok in checks))
        print(f"  mean wait per account, trace h (mean over the workloads; {HEAVY}: {HEAVY_SHARE:.2f} of the "
              f"jobs, `accounts`):")
        arms = [("stock", [sw for sw, _ in rows])] + [(q, [bq[q].waits for _, bq in rows]) for q in rows_of]
        for name, waits in arms:
            heavy = sum(x[HEAVY] for x in waits) / len(waits)
            light = sum(x[LIGHT] for x in waits) / len(waits)
            print(f"  {name:6s} {HEAVY} {heavy / 3600:6.2f}  {LIGHT} {light / 3600:6.2f}  "
                  f"{HEAVY}/{LIGHT} {heavy / light if light else float('inf'):.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
