#!/usr/bin/env python3
"""sbatch latency through two versions of the hook at the same moment: a git ref's
job_submit_lua/ (default `main`) against the working tree's, on three lab clusters up at once.

  base    the lab's pass-through job_submit.lua (returns at once)
  ref     job_submit.lua + pal.lua from `git archive <ref>`, asking its own real pald
  tree    this checkout's job_submit.lua + pal.lua, asking its own real pald
Both palds run this checkout's code (the hook is what is compared). Submissions rotate over
the three labs round by round, the same workload as benchmarks/hook_overhead.py (blocks of 20
one-GPU sleep jobs: 16 placed, 2 deferred, 2 passed by pald; every lab emptied between
blocks), so load hits them alike; the figure that matters is the per-round paired difference
tree - ref. Run it with ref = the tree's own HEAD
(an A/A run) to see the noise floor on the machine at hand.

Usage: python3 benchmarks/hook_ab.py [--ref main] [--n 600]
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.hook_overhead import (  # noqa: E402  (the same workload)
    BLOCK, hook_decisions, pct, reset, rtts_ms, sbatch_ms, submission)
from pal_slurm.daemon.process import PaldProcess, write_config  # noqa: E402
from pal_lab.lab import start_lab  # noqa: E402


def export_hook(ref: str, into: Path) -> Path:
    """job_submit_lua/ as it is at `ref`, unpacked under `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "job_submit_lua"],
                             check=True, capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(into)
    return into / "job_submit_lua" / "job_submit.lua"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="main")
    ap.add_argument("--n", type=int, default=600)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hook-ab-"))
    hooks = {"ref": export_hook(args.ref, tmp / "ref"),
             "tree": REPO / "job_submit_lua" / "job_submit.lua"}
    labs, palds = {}, []
    try:
        labs["base"] = start_lab(tmp / "base")
        for name, hook in hooks.items():
            sock = tmp / f"{name}.sock"
            lab = start_lab(tmp / name, hook=str(hook), env={"PAL_SOCKET": str(sock)})
            cfg = write_config(tmp / f"{name}.toml", socket=sock, db_url=f"sqlite:///{tmp}/{name}.db",
                               slurm_conf=lab.slurm_conf, heartbeat=tmp / f"{name}.hb", cycle_s=1.0)
            palds.append(PaldProcess(cfg, sock, tmp / f"{name}-pald.log").start())
            labs[name] = lab
        order = ["base", "ref", "tree"]
        for i in range(10):  # warm up
            for name in order:
                sbatch_ms(labs[name], submission(i))
        warm = {name: len(labs[name].log()) for name in hooks}
        times = {name: [] for name in order}
        for i in range(args.n):
            if i % BLOCK == 0:
                reset(labs.values(), palds)
            for name in order[i % 3:] + order[:i % 3]:
                times[name].append(sbatch_ms(labs[name], submission(i)))
        logs = {name: labs[name].log()[warm[name]:] for name in hooks}
        reset(labs.values(), palds)
    finally:
        for pald in palds:
            pald.stop()
        for lab in labs.values():
            lab.stop()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"sbatch latency, {args.n} submissions per lab, rotating order (ms); "
          f"ref = {args.ref}; load avg at the end {load}")
    for name in order:
        print(f"  {name:5s} median {statistics.median(times[name]):6.2f}  p90 {pct(times[name], 90):6.2f}"
              f"  p99 {pct(times[name], 99):6.2f}")
    base = statistics.median(times["base"])
    for name in hooks:
        rtts = rtts_ms(logs[name])
        print(f"  {name}: median overhead vs base {statistics.median(times[name]) - base:+.2f} ms; "
              f"in-hook round trip p50 {pct(rtts, 50):.2f} ms, p99 {pct(rtts, 99):.2f} ms; "
              f"decisions {dict(sorted(hook_decisions(logs[name]).items()))}")
    paired = [t - r for t, r in zip(times["tree"], times["ref"])]
    print(f"  tree - ref, paired per round: median {statistics.median(paired):+.3f} ms")


if __name__ == "__main__":
    main()
