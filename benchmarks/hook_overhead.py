#!/usr/bin/env python3
"""sbatch latency with the pal-slurm hook vs a hook that returns at once, on the real lab.

Two lab clusters up at the same time, submissions alternating between them (same machine,
same moment, same load):
  baseline  job_submit.lua that returns slurm.SUCCESS at once (the lab's pass-through hook)
  pal       the real job_submit.lua + pal.lua asking the real pald (SQLite store) per job
Each gets N jobs (`sbatch --hold --gres=gpu:1 --comment=pal:class=resnet,mode=now --wrap true`:
held by the user so the cluster stays idle; mode=now so pald answers every one, placing the
first 16 and passing the rest, without deferring) and each sbatch is timed.
The in-hook round trip (pald ask, measured inside Lua) is read from slurmctld's log
(`pal: ... rtt_ms=`).

Usage: python3 benchmarks/hook_overhead.py [--n 200]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pal_slurm.slurm.lab import start_lab  # noqa: E402
from pal_slurm.daemon.process import PaldProcess, write_config  # noqa: E402


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * len(v)))]


def sbatch_ms(lab) -> float:
    t = time.perf_counter()
    subprocess.run(["sbatch", "--parsable", "--hold", "--gres=gpu:1", "--comment=pal:class=resnet,mode=now",
                    f"--output={lab.lab_dir}/out/%j.out", "--wrap", "true"],
                   env=lab.client_env(), check=True, capture_output=True)
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hook-overhead-"))

    sock = tmp / "pald.sock"
    base_lab = start_lab(tmp / "base")
    pal_lab = pald = None
    try:
        pal_lab = start_lab(tmp / "pal", hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                            env={"PAL_SOCKET": str(sock)})
        cfg = write_config(tmp / "pal.toml", socket=sock, db_url=f"sqlite:///{tmp}/pal.db",
                           slurm_conf=pal_lab.slurm_conf, heartbeat=tmp / "hb", cycle_s=1.0)
        pald = PaldProcess(cfg, sock, tmp / "pald.log").start()
        for _ in range(10):  # warm up both
            sbatch_ms(base_lab), sbatch_ms(pal_lab)
        base, pal = [], []
        for i in range(args.n):
            first, second = (base_lab, pal_lab) if i % 2 == 0 else (pal_lab, base_lab)
            a, b = sbatch_ms(first), sbatch_ms(second)
            (base if first is base_lab else pal).append(a)
            (pal if second is pal_lab else base).append(b)
        log = pal_lab.log()
    finally:
        if pald:
            pald.stop()
        if pal_lab:
            pal_lab.stop()
        base_lab.stop()
    rtts = [float(x) for x in re.findall(r"pal: .*rtt_ms=([0-9.]+)", log)][10:]
    decisions = re.findall(r"pal: (\w+)", log)
    print(f"sbatch latency over {args.n} submissions each (ms):")
    print(f"  baseline hook (returns at once): median {statistics.median(base):.2f}  p90 {pct(base, 90):.2f}  p99 {pct(base, 99):.2f}")
    print(f"  pal hook + pald:                 median {statistics.median(pal):.2f}  p90 {pct(pal, 90):.2f}  p99 {pct(pal, 99):.2f}")
    overhead = statistics.median(pal) - statistics.median(base)
    print(f"  median overhead: {overhead:+.2f} ms ({statistics.median(pal) / statistics.median(base):.3f}x); target < 2 ms: "
          f"{'met' if overhead < 2.0 else 'MISSED'}")
    if rtts:
        print(f"in-hook round trip to pald ({len(rtts)} asks): p50 {pct(rtts, 50):.2f} ms  p99 {pct(rtts, 99):.2f} ms  "
              f"max {max(rtts):.2f} ms")
    kinds = {k: decisions.count(k) for k in set(decisions)}
    print(f"hook log lines by kind: {kinds}")


if __name__ == "__main__":
    main()
