"""How long the Slurm lab cluster takes to start, run a first job, and stop.

    python3 benchmarks/slurm_lab_startup.py [--runs 5] [--nodes 4] [--gpus 4]
    (after `make install`; from a plain checkout: PYTHONPATH=. python3 benchmarks/...)

Prints per-run and median seconds for: start (all nodes idle and the scheduler's parameters
loaded), first job (sbatch of `true` to COMPLETED), and stop (every lab process gone).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pal_lab.lab import missing_binaries, start_lab


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=4)
    args = parser.parse_args()
    if missing_binaries():
        print("Slurm lab binaries missing:", ", ".join(missing_binaries()))
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="pal-lab-bench-") as tmp:
        for run in range(args.runs):
            lab = start_lab(Path(tmp) / f"lab{run}", nodes=args.nodes, gpus=args.gpus)
            t0 = time.monotonic()
            job = lab.sbatch("--gres=gpu:1", wrap="true")
            lab.wait_job(job)
            first_job = time.monotonic() - t0
            stop = lab.stop()
            rows.append((lab.start_seconds, first_job, stop))
            print(f"run {run + 1}: start {lab.start_seconds:.2f} s, first job {first_job:.2f} s, "
                  f"stop {stop:.2f} s")
    for name, col in (("start", 0), ("first job", 1), ("stop", 2)):
        values = [r[col] for r in rows]
        print(f"{name:>9}: median {statistics.median(values):.2f} s, "
              f"min {min(values):.2f} s, max {max(values):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
