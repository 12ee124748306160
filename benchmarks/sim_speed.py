"""Simulator speed: seconds per (trace, policy) run in both modes (the simulator's speed targets).

    python3 benchmarks/sim_speed.py                 # everything
    python3 benchmarks/sim_speed.py --skip-compat   # event mode only
    python3 benchmarks/sim_speed.py --big-policies pal-net,dally,firstfit --big-limit 120

Prints:
1. compat mode: the 6 bundled Sia-Philly traces x the 6 artifact placements (target: all 36
   runs in under 20 s on a 2-core machine);
2. event mode: the same 36 runs (16x4 GPUs, 4 nodes per rack) plus the network-aware ones;
3. event mode at scale: 10,000 synthetic jobs on 1,024 GPUs (256 nodes x 4), one run per
   policy (target: under 60 s), built exactly as `palctl simulate --synthetic 10000 --mode event
   --cluster 256x4` builds it (same simulator, same default arrival rate: load 0.8 of the
   cluster). `--big-nodes 2048` gives 8,192 GPUs; `--big-jobs 100000` the large case. Each big
   run is in its own process with a CPU-time limit (--big-limit), so a policy too slow for that scale is reported
   as such instead of hanging.

`--baseline-code DIR` runs every big case a second time with the simulator of another checkout
(e.g. /work/main, the code before a speed change) and prints the ratio of CPU seconds, so a
figure taken on a shared machine comes with its baseline from the same command. Each line also
gives the load average while it ran: CPU seconds are the fair figure when neighbours share it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_slurm.policy import PLACEMENTS  # noqa: E402
from pal_slurm.sim.compat import CompatConfig, CompatSimulator  # noqa: E402
from pal_slurm.sim.event import EventConfig, EventSimulator  # noqa: E402
from pal_slurm.sim.event import simulator_for  # noqa: E402
from pal_slurm.sim.spec import RunSpec  # noqa: E402
from pal_slurm.sim.trace import bundled_trace, bundled_trace_names, rate_for_load, synthetic_trace  # noqa: E402

ARTIFACT = ("pal", "pmfirst", "packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky")
NET = ("firstfit", "dally", "pal-net", "pal-net-tuned", "pal-net-preempt")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def grid(mode: str, policies) -> float:
    total = 0.0
    print(f"\n== {mode} mode: seconds per run (16x4 GPUs) ==")
    print(f"{'trace':12s} " + " ".join(f"{p:>16s}" for p in policies))
    for name in bundled_trace_names():
        tr = bundled_trace(name)
        row = []
        for p in policies:
            if mode == "compat":
                sim = CompatSimulator(CompatConfig())
            else:
                sim = EventSimulator(EventConfig(num_nodes=16, gpus_per_node=4, nodes_per_rack=4))
            dt, _ = timed(lambda: sim.run(tr, p))
            total += dt
            row.append(dt)
        print(f"{name:12s} " + " ".join(f"{v:16.3f}" for v in row))
    print(f"total {mode}: {total:.2f} s for {len(bundled_trace_names()) * len(policies)} runs")
    return total


def _big_run(policy: str, jobs: int, rate: float, nodes: int, queue) -> None:
    # what `palctl simulate --synthetic JOBS --mode event --cluster NODESx4` runs (seed 0)
    tr = synthetic_trace(jobs, seed=0, jobs_per_hour=rate, max_gpus=nodes * 4, name=f"synthetic-{jobs}")
    sim = simulator_for(RunSpec(mode="event", num_nodes=nodes, gpus_per_node=4), 0)
    t0, c0 = time.perf_counter(), time.process_time()
    r = sim.run(tr, policy)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = r.summary()
    queue.put((dt, cpu, r.extra["events"], r.extra["plans"], s["utilization"], s["avg_jct_s"]))


def _cpu_seconds(pid: int) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return t.user + t.system


def _join_within_cpu(proc, limit: float, wall_factor: float = 30.0) -> float:
    """Wait until the run ends or has used `limit` CPU seconds (or wall_factor x that in wall time).

    The limit is on CPU time, not wall time: a run is single-threaded, and on a shared machine
    wall time measures the neighbours as much as the simulator.
    """
    t0 = time.perf_counter()
    cpu = 0.0
    while proc.is_alive():
        proc.join(0.5)
        cpu = max(cpu, _cpu_seconds(proc.pid))
        if cpu > limit or time.perf_counter() - t0 > wall_factor * limit:
            break
    return cpu


# The same run as _big_run, in a fresh interpreter on another checkout's code (it must have
# simulator_for, RunSpec and synthetic_trace): prints (cpu, events, plans, avg JCT) as JSON.
_BASELINE_RUN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pal_slurm.sim.event import simulator_for
try:
    from pal_slurm.sim.spec import RunSpec
except ImportError:  # a checkout whose RunSpec is in sim.runner
    from pal_slurm.sim.runner import RunSpec
from pal_slurm.sim.trace import synthetic_trace
policy, jobs, rate, nodes = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
tr = synthetic_trace(jobs, seed=0, jobs_per_hour=rate, max_gpus=nodes * 4, name=f"synthetic-{jobs}")
sim = simulator_for(RunSpec(mode="event", num_nodes=nodes, gpus_per_node=4), 0)
c0 = time.process_time()
r = sim.run(tr, policy)
print(json.dumps([time.process_time() - c0, r.extra["events"], r.extra["plans"], r.summary()["avg_jct_s"]]))
"""


def _baseline(code_dir: str, policy: str, jobs: int, rate: float, nodes: int, limit: float) -> str:
    """CPU seconds of the same run on `code_dir`'s simulator, and whether it gave the same result."""
    proc = subprocess.Popen([sys.executable, "-c", _BASELINE_RUN, code_dir, policy, str(jobs), repr(rate), str(nodes)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    while proc.poll() is None and _cpu_seconds(proc.pid) <= limit and time.perf_counter() - t0 <= 30 * limit:
        time.sleep(0.5)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        return f"baseline > {limit:.0f} s CPU"
    out, err = proc.communicate()
    if proc.returncode != 0:
        return f"baseline failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}"
    cpu, events, plans, avg = json.loads(out.strip().splitlines()[-1])
    return f"baseline {cpu:.1f} s CPU, avg JCT {avg / 3600:.1f} h"


def big(policies, jobs: int, rate: float | None, limit: float, nodes: int = 256, baseline_code: str | None = None) -> None:
    rate = rate or rate_for_load(0.8, nodes * 4)
    print(f"\n== event mode at scale: {jobs} jobs on {nodes * 4} GPUs ({nodes}x4, 4 nodes/rack), {rate:.2f} jobs/h ==")
    ctx = mp.get_context("fork")
    for p in policies:
        q = ctx.Queue()
        proc = ctx.Process(target=_big_run, args=(p, jobs, rate, nodes, q))
        t0 = time.perf_counter()
        proc.start()
        _join_within_cpu(proc, limit)
        if proc.is_alive():
            proc.terminate()
            proc.join()
            print(f"{p:18s} > {limit:.0f} s CPU (stopped after {time.perf_counter() - t0:.0f} s wall)", flush=True)
            continue
        if q.empty():
            print(f"{p:18s} failed (exit {proc.exitcode})")
            continue
        dt, cpu, events, plans, util, avg = q.get()
        # CPU seconds as well: on a shared machine wall time measures the neighbours too
        line = (f"{p:18s} {dt:7.1f} s wall {cpu:7.1f} s CPU  ({events} events, {plans} plans, util {util:.2f}, "
                f"avg JCT {avg / 3600:.1f} h, load {os.getloadavg()[0]:.1f})")
        if baseline_code:
            base = _baseline(baseline_code, p, jobs, rate, nodes, limit)
            ratio = ""
            if base.startswith("baseline ") and " s CPU" in base and ">" not in base:
                ratio = f"  = {float(base.split()[1]) / max(cpu, 1e-9):.2f}x faster"
            elif ">" in base:
                ratio = f"  = > {limit / max(cpu, 1e-9):.2f}x faster"
            line += f"  | {base}{ratio}"
        print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-compat", action="store_true")
    ap.add_argument("--skip-event-grid", action="store_true")
    ap.add_argument("--big-jobs", type=int, default=10_000)
    ap.add_argument("--big-rate", type=float, default=None,
                    help="synthetic arrivals per hour (default: palctl's, load 0.8 of the cluster)")
    ap.add_argument("--big-nodes", type=int, default=256, help="nodes of 4 GPUs")
    ap.add_argument("--big-policies", default=",".join(PLACEMENTS))
    ap.add_argument("--big-limit", type=float, default=180.0, help="CPU seconds before a big run is stopped")
    ap.add_argument("--baseline-code", default=None, metavar="DIR",
                    help="also run each big case on this checkout's simulator (e.g. /work/main) and print the ratio")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPU(s)")
    if not args.skip_compat:
        grid("compat", ARTIFACT)
    if not args.skip_event_grid:
        grid("event", ARTIFACT + NET)
    if args.big_jobs > 0:
        big([p for p in args.big_policies.split(",") if p], args.big_jobs, args.big_rate, args.big_limit, args.big_nodes,
            args.baseline_code)


if __name__ == "__main__":
    main()
