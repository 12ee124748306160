#!/usr/bin/env python3
"""sbatch latency with the pal-slurm hook vs a hook that returns at once, on the real lab.

Two lab clusters up at the same time, submissions alternating between them (same machine,
same moment, same load):
  baseline  job_submit.lua that returns slurm.SUCCESS at once (the lab's pass-through hook)
  pal       the real job_submit.lua + pal.lua asking the real pald (SQLite store) per job

The jobs are what a busy cluster sees, so every reply path of pald is exercised: blocks of
BLOCK submissions (`sbatch --gres=gpu:1 --comment=pal:class=resnet[,mode=now] --wrap 'sleep
600'`, not held by the user: user-held jobs are passed by pald on purpose, docs/site-compat):
- the first 16 of a block fill the 16 GPUs: pald *places* them (nodes + GPU slots), they run;
- then 2 more in pald's default mode: no room, so pald *defers* them (the hook holds them,
  pald's cycle turns the hold into an admin hold);
- then 2 with mode=now: no room, so pald *passes* them (they wait in Slurm's own queue).
Between blocks (outside the timings) every job of both labs is cancelled and the benchmark
waits until pald sees the 16 GPUs free again. Both labs get the same submissions, so the
baseline's Slurm starts and queues the same jobs. Each sbatch is timed; the in-hook round trip
(pald ask, measured inside Lua) is read from slurmctld's log (`pal: ... rtt_ms=`), and the
decisions the hook wrote (its log lines) are counted.

`--workload held` runs the workload this benchmark had before: every job `sbatch --hold`
(`mode=now`, `--wrap true`), which pald passes at once since user-held jobs are the user's:
the hook's round trip and pald's pass path only, no placement, no job ever runs.
Kept to compare with figures taken with it; `busy` (the default) is the one to quote.

Usage: python3 benchmarks/hook_overhead.py [--n 200] [--workload busy|held]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pal_lab.lab import start_lab  # noqa: E402
from pal_slurm.daemon.process import PaldProcess, write_config  # noqa: E402

TARGET_MS = 1.16  # the hook's median overhead without pald's fault hardening; aim under 1 ms
BLOCK = 20  # 16 placed (one GPU each on 4 x 4 GPUs), 2 deferred, 2 passed
EXPECTED = ["place"] * 16 + ["defer"] * 2 + ["pass"] * 2
_HOOK_LINE = re.compile(r"pal: (place|defer|pass)\b")


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * len(v)))]


HELD = ["--hold", "--gres=gpu:1", "--comment=pal:class=resnet,mode=now"]  # --workload held


def submission(i: int) -> list[str]:
    """The sbatch arguments of the block's i-th submission (see the module docstring)."""
    mode = ",mode=now" if EXPECTED[i % BLOCK] == "pass" else ""
    return ["--gres=gpu:1", f"--comment=pal:class=resnet{mode}"]


def sbatch_ms(lab, args: list[str]) -> float:
    t = time.perf_counter()
    wrap = "true" if "--hold" in args else "sleep 600"
    subprocess.run(["sbatch", "--parsable", *args, f"--output={lab.lab_dir}/out/%j.out", "--wrap", wrap],
                   env=lab.client_env(), check=True, capture_output=True)
    return (time.perf_counter() - t) * 1000


def reset(labs, palds, timeout: float = 60.0) -> None:
    """Between blocks: no job left in any lab, and every pald sees its 16 GPUs free, nothing
    reserved and nothing held (so the next block is placed, deferred and passed as planned)."""
    for lab in labs:
        subprocess.run(["scancel", "--partition=gpu"], env=lab.client_env(), capture_output=True)
    for lab in labs:
        lab.wait_idle(timeout)
    deadline = time.monotonic() + timeout
    for pald in palds:
        while True:
            d = pald.health().details
            if d["free_gpus"] == d["gpus"] and d["reservations"] == 0 and d["held_jobs"] == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"pald never saw its cluster empty: {d}")
            time.sleep(0.1)


def hook_decisions(log: str) -> Counter:
    """place / defer / pass lines the hook wrote into slurmctld's log."""
    return Counter(_HOOK_LINE.findall(log))


def rtts_ms(log: str) -> list[float]:
    return [float(x) for x in re.findall(r"pal: .*rtt_ms=([0-9.]+)", log)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--workload", choices=("busy", "held"), default="busy")
    args = ap.parse_args()
    held = args.workload == "held"
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
        labs = (base_lab, pal_lab)
        for i in range(10):  # warm up both
            sbatch_ms(base_lab, HELD if held else submission(i)), sbatch_ms(pal_lab, HELD if held else submission(i))
        warm_log = len(pal_lab.log())
        base, pal = [], []
        by_kind: dict[str, list[float]] = {k: [] for k in set(EXPECTED)}
        for i in range(args.n):
            if i % BLOCK == 0 and not held:
                reset(labs, [pald])
            first, second = (base_lab, pal_lab) if i % 2 == 0 else (pal_lab, base_lab)
            job = HELD if held else submission(i)
            a, b = sbatch_ms(first, job), sbatch_ms(second, job)
            t_base, t_pal = (a, b) if first is base_lab else (b, a)
            base.append(t_base)
            pal.append(t_pal)
            by_kind["pass" if held else EXPECTED[i % BLOCK]].append(t_pal - t_base)
        log = pal_lab.log()[warm_log:]
        reset(labs, [pald])
    finally:
        if pald:
            pald.stop()
        if pal_lab:
            pal_lab.stop()
        base_lab.stop()
    rtts = rtts_ms(log)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    shape = "every job user-held (all passed)" if held else f"blocks of {BLOCK}"
    print(f"sbatch latency over {args.n} submissions each (ms), {shape}; load avg at the end {load}:")
    print(f"  baseline hook (returns at once): median {statistics.median(base):.2f}  p90 {pct(base, 90):.2f}  p99 {pct(base, 99):.2f}")
    print(f"  pal hook + pald:                 median {statistics.median(pal):.2f}  p90 {pct(pal, 90):.2f}  p99 {pct(pal, 99):.2f}")
    overhead = statistics.median(pal) - statistics.median(base)
    paired = [p - b for p, b in zip(pal, base)]
    verdict = "met" if overhead <= TARGET_MS else "MISSED"
    print(f"  median overhead: {overhead:+.2f} ms ({statistics.median(pal) / statistics.median(base):.3f}x); "
          f"paired per round: median {statistics.median(paired):+.2f} ms; target <= +{TARGET_MS:.2f} ms "
          f"(aim < 1 ms): {verdict}")
    for kind, diffs in sorted(by_kind.items()):
        if diffs:
            print(f"    {kind:5s} rounds ({len(diffs):3d}): paired median {statistics.median(diffs):+.2f} ms")
    if rtts:
        print(f"in-hook round trip to pald ({len(rtts)} asks): p50 {pct(rtts, 50):.2f} ms  p99 {pct(rtts, 99):.2f} ms  "
              f"max {max(rtts):.2f} ms")
    decisions = hook_decisions(log)
    planned = Counter("pass" if held else EXPECTED[i % BLOCK] for i in range(args.n))
    print(f"hook decisions (slurmctld log): {dict(sorted(decisions.items()))}; planned {dict(sorted(planned.items()))}")


if __name__ == "__main__":
    main()
