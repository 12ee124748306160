#!/usr/bin/env python3
"""A storm of PAL submissions with hostile ones interleaved, on the real lab: figures.

The same storm as tests/integration/test_hostile_storm.py (tests/support/storm.py: the lab's
slurmctld + 4 slurmd x 4 emulated GPUs, the real job_submit.lua, the real pald on SQLite; one
submitter, hostile texts spread evenly among the ordinary ones). Prints, per kind of
submission: how the hook ended (placed / deferred / passed and why), the hook's whole run in
slurmctld (`run_ms` from its log line: socket round trip to pald + its own checks) p50 / p99 /
max, and sbatch's wall time; then pald's heartbeat's oldest age during the storm, its RSS before
and at most, and what it logged. `--hostile 0` is the baseline storm of ordinary jobs alone, run
the same way.

Usage: python3 benchmarks/hostile_storm.py [--ordinary 1000] [--hostile 100] [--settle 300]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.storm import pct, run_storm, settle, start_storm_rig  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ordinary", type=int, default=1000)
    ap.add_argument("--hostile", type=int, default=100)
    ap.add_argument("--settle", type=float, default=300.0, help="seconds to wait for the jobs to end")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pal-storm-"))
    root.chmod(0o755)
    rig = start_storm_rig(root)
    try:
        r = run_storm(rig, args.ordinary, args.hostile)
        print(f"{len(r.submissions)} submissions in {r.wall_s:.1f} s")
        print(f"{'kind':28s} {'n':>5s}  {'hook run_ms p50 / p99 / max':>30s}  {'sbatch s p99':>12s}  outcomes")
        for kind, rows in r.per_kind.items():
            ms = r.run_ms(kind)
            walls = [s.wall_s for s in r.submissions if s.kind == kind]
            outcomes: dict[str, int] = {}
            for decision, reason, _ in rows:
                key = decision + (f":{reason}" if reason else "")
                outcomes[key] = outcomes.get(key, 0) + 1
            figs = f"{pct(ms, 50):8.2f} {pct(ms, 99):8.2f} {max(ms) if ms else float('nan'):8.2f}"
            print(f"{kind:28s} {len(rows):5d}  {figs:>30s}  {pct(walls, 99):12.3f}  {outcomes}")
        print(f"ordinary not answered by pald (timeout / pald-down): {r.ordinary_not_answered()}"
              f"; placed or deferred: {r.ordinary_placed_or_deferred()}; rejected by sbatch: {r.ordinary_rejected()}")
        print(f"hostile not answered: {r.hostile_not_answered()}")
        print(f"pald heartbeat oldest age during the storm: {r.heartbeat_max_age_s:.2f} s")
        print(f"pald RSS: {r.rss_start_mb:.1f} MB before, {r.rss_max_mb:.1f} MB at most "
              f"(+{r.rss_max_mb - r.rss_start_mb:.1f}); pald logged {r.pald_log_bytes} bytes")
        ids = [s.job_id for s in r.submissions if s.kind == "ordinary" and s.job_id]
        print(f"ordinary jobs' end (within {args.settle:.0f} s): {settle(rig, ids, args.settle)}")
    finally:
        rig.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
