"""The two accounts' waits under pald's `slurm` queue order against stock Slurm, on the
accounting lab, over several runs: how far the heavy-to-light ratio of mean waits under pald is
from stock Slurm's, and how much that moves from run to run (the bound
tests/integration/test_slurm_priority_lab.py asserts is set from it).

One lab (slurmdbd, 2 nodes x 4 GPUs, fair share with equal shares, the hook and pald with
`queue = "slurm"`); each run submits the same workload (tests/support/site_order_workload.py)
as ordinary jobs (stock Slurm: the hook and pald leave them alone), then as PAL jobs, in the
same run, so both arms see the same fair-share state. Prints each run's mean waits and ratios
and the mean and spread of the difference.

    python3 benchmarks/site_order_waits.py --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pal_slurm.config import PolicyConfig  # noqa: E402
from tests.integration.test_slurm_priority_lab import FAIR_SHARE_WEIGHTS, LAB_BACKFILL, fair_share  # noqa: E402
from tests.support.accounting_pald import hooked_accounting_lab  # noqa: E402
from tests.support.site_order_workload import run_workload  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sleep-scales", default="1",
                    help="comma-separated: each job sleeps this many times as long (1: the lab test's workload)")
    ap.add_argument("--bf-interval", type=int, default=None,
                    help="Slurm's bf_interval in seconds (default: the test's, LAB_BACKFILL; 30 is Slurm's own)")
    args = ap.parse_args()
    conf = FAIR_SHARE_WEIGHTS if args.bf_interval is None else FAIR_SHARE_WEIGHTS.replace(
        LAB_BACKFILL, f"SchedulerParameters=batch_sched_delay=0,bf_interval={args.bf_interval}\n")
    with hooked_accounting_lab("pal-site-order-", nodes=2, gpus=4, extra_conf=conf) as rig:
        lab = rig.lab
        env = lab.client_env()
        for argv in (["add", "account", "heavy,light"], ["add", "user", "root", "account=heavy,light"]):
            subprocess.run(["sacctmgr", "-i", *argv], env=env, check=True, capture_output=True)
        # heavy uses the whole cluster until Slurm's decay pass has charged it
        blocker = lab.sbatch("--account=heavy", "--exclusive", "-N", "2", "--gres=gpu:4", wrap="sleep 600")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            shares = fair_share(env)
            if shares.get("heavy", 1.0) < shares.get("light", 0.0):
                break
            time.sleep(5)
        else:
            raise SystemExit(f"Slurm's fair share did not tell the accounts apart: {fair_share(env)}")
        subprocess.run(["scancel", str(blocker)], env=env, check=True)
        lab.wait_idle(60)
        print("SchedulerParameters:", [line for line in subprocess.run(
            ["scontrol", "show", "config"], env=env, capture_output=True, text=True).stdout.splitlines()
            if "SchedulerParameters" in line])
        rig.start_pald(policy='queue = "slurm"', placement=PolicyConfig().placement)  # pald's default: pal-fit
        for scale in (float(x) for x in args.sleep_scales.split(",")):
            offs = []
            print(f"sleeps x{scale:g}\nrun  stock heavy/light (s)  ratio | pald heavy/light (s)  ratio | pald/stock - 1")
            for run in range(args.runs):
                stock = run_workload(lab, pal=False, sleep_scale=scale)
                pal = run_workload(lab, pal=True, sleep_scale=scale)
                off = pal.wait_ratio() / stock.wait_ratio() - 1
                offs.append(off)
                print(f"{run:3d}  {stock.mean_wait('heavy'):6.1f} {stock.mean_wait('light'):6.1f}  "
                      f"{stock.wait_ratio():6.3f} | {pal.mean_wait('heavy'):6.1f} {pal.mean_wait('light'):6.1f}  "
                      f"{pal.wait_ratio():6.3f} | {off:+.3f}", flush=True)
                for name, arm in (("stock", stock), ("pald", pal)):
                    print(f"     {name} waits (s) by job in submit order:",
                          [(r.account[0], round(max(0.0, r.start - arm.t0), 1)) for _, r in sorted(arm.jobs.items())])
            spread = statistics.stdev(offs) if len(offs) > 1 else 0.0
            print(f"sleeps x{scale:g}: pald/stock - 1 over {len(offs)} runs: mean {statistics.mean(offs):+.3f}, "
                  f"sd {spread:.3f}, min {min(offs):+.3f}, max {max(offs):+.3f}; fair share {fair_share(env)}",
                  flush=True)


if __name__ == "__main__":
    main()
