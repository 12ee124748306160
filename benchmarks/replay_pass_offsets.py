"""Where Slurm's backfill passes fell through a replayed arm: each pass's offset from the clock
fitted to them (`replay.ctldlog.pass_offsets`), per window of wall time.

    python3 benchmarks/replay_pass_offsets.py /tmp/s33/w1s0/workload-1-s150-n160-seed0/pal-fit [--window 100] [--from 60 --to 95]

ARM_DIR is one arm's work dir under a replay's --work-dir (it holds `submitted.json` and
`lab/log/slurmctld.log`). The timing grid (`replay.predict.pass_phases`) takes the offsets'
quantiles over the whole replay; this shows whether they hold still or drift, and with
--from/--to each pass in a stretch of wall seconds (e.g. around the race that decides a trace).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_lab.replay.ctldlog import pass_clock, pass_offsets, slurm_starts  # noqa: E402
from pal_lab.replay.harness import BF_INTERVAL_S, arm_ctld_log, arm_submissions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("arm_dir", type=Path, metavar="ARM_DIR")
    ap.add_argument("--window", type=float, default=100.0, help="wall s per line of the summary")
    ap.add_argument("--from", dest="lo", type=float, default=None, help="list each pass from this wall s")
    ap.add_argument("--to", dest="hi", type=float, default=None, help="... to this one")
    ap.add_argument("--scale", type=float, default=150.0, help="trace s per wall s (to print trace hours)")
    a = ap.parse_args()
    try:
        submitted = arm_submissions(a.arm_dir)
    except (OSError, ValueError) as e:
        print(f"{a.arm_dir}: not a replayed arm's work dir ({e})", file=sys.stderr)
        return 2
    starts = slurm_starts(arm_ctld_log(a.arm_dir))
    t0 = min(submitted.values())
    clock = pass_clock(starts, t0, BF_INTERVAL_S)
    if clock is None:
        print(f"{a.arm_dir}: fewer than two backfill passes started jobs", file=sys.stderr)
        return 2
    offsets = pass_offsets(starts, t0, clock)
    print(f"fitted clock: phase {clock.phase_s:.4f} s, period {clock.period_s:.6f} s; {len(offsets)} passes started jobs")
    if a.lo is not None or a.hi is not None:
        lo, hi = a.lo or 0.0, a.hi if a.hi is not None else float("inf")
        for t, off in offsets:
            if lo <= t <= hi:
                print(f"{t:9.2f} wall s  {t * a.scale / 3600:6.2f} trace h  offset {off * 1000:+7.1f} ms  "
                      f"phase {(clock.phase_s + off) % clock.period_s:.3f} s")
    print(f"\n{'wall s':>15} {'passes':>6} {'median ms':>9} {'min ms':>7} {'max ms':>7}")
    start = 0.0
    while start <= offsets[-1][0]:
        mine = [off for t, off in offsets if start <= t < start + a.window]
        if mine:
            print(f"{start:7.0f}-{start + a.window:<7.0f} {len(mine):6d} {statistics.median(mine) * 1000:+9.1f} "
                  f"{min(mine) * 1000:+7.1f} {max(mine) * 1000:+7.1f}")
        start += a.window
    return 0


if __name__ == "__main__":
    sys.exit(main())
