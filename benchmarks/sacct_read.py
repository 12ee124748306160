#!/usr/bin/env python3
"""How long a large site's accounting dump takes to read, and the memory it takes.

Writes a dump of `--bytes` bytes, then times `pal_slurm.sim.sacct.read_accounting` on it in a
fresh process and prints the jobs read, the seconds and the peak resident memory. `--format -P`
is the shape `sacct -a -P` gives without `-X` (each job a row, plus its `.batch` and `.extern`
steps, which the reader drops); `--format json` is `sacct --json`'s (Slurm 22.05, indented, each
job with its two steps). The reader keeps the jobs, not the file: memory follows the job count.

Usage: python3 benchmarks/sacct_read.py [--bytes 1073741824] [--format -P|json] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HEADER = "JobID|JobName|Account|Partition|Submit|Start|End|Timelimit|AllocTRES|NNodes|State|Comment|ReqTRES\n"

MEASURE = """
import resource, sys, time
from pal_slurm.sim.sacct import read_accounting
t = time.perf_counter()
jobs = read_accounting(sys.argv[1])
dt = time.perf_counter() - t
print(f"{len(jobs)} jobs read in {dt:.1f} s; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
"""


def write_dump(path: Path, target: int) -> int:
    """A `sacct -P` dump of at least `target` bytes; the number of jobs in it."""
    i = 0
    with path.open("w") as f:
        f.write(HEADER)
        size = len(HEADER)
        while size < target:
            i += 1
            day, hour, minute, gpus = 1 + i % 28, i % 24, i % 60, 1 << (i % 4)
            at = f"2024-03-{day:02d}T{hour:02d}:{minute:02d}"
            times = f"{at}:00|{at}:30|{at}:59"
            tres = f"cpu={8 * gpus},gres/gpu={gpus},mem=64G,node=1"
            rows = (f"{i}|train-{i % 97}|acct{i % 13}|gpu|{times}|1-00:00:00|billing={gpus},{tres}|1|COMPLETED|"
                    f"pal:class=A|gres/gpu={gpus}\n"
                    f"{i}.batch|batch|acct{i % 13}||{times}||{tres}|1|COMPLETED||\n"
                    f"{i}.extern|extern|acct{i % 13}||{times}||billing={gpus},{tres}|1|COMPLETED||\n")
            f.write(rows)
            size += len(rows)
    return i


def write_json_dump(path: Path, target: int) -> int:
    """A `sacct --json` dump of at least `target` bytes; the number of jobs in it."""
    i = 0
    with path.open("w") as f:
        f.write('{\n  "meta": {"plugin": {"type": "openapi/dbv0.0.38"}},\n  "errors": [],\n  "jobs": [\n')
        size = 0
        while size < target:
            i += 1
            gpus, submit = 1 << (i % 4), 1_700_000_000 + 60 * i
            tres = [{"type": "cpu", "name": None, "id": 1, "count": 8 * gpus},
                    {"type": "gres", "name": "gpu", "id": 1001, "count": gpus}]
            times = {"elapsed": 3570, "eligible": submit, "end": submit + 3600, "start": submit + 30,
                     "submission": submit, "suspended": 0}
            job = {"account": f"acct{i % 13}", "allocation_nodes": 1,
                   "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task": None, "task_id": None},
                   "comment": {"administrator": None, "job": "pal:class=A", "system": None}, "job_id": i,
                   "name": f"train-{i % 97}", "nodes": f"gpu{i % 64:02d}", "partition": "gpu",
                   "state": {"current": "COMPLETED", "reason": "None"}, "time": {**times, "limit": 1440},
                   "tres": {"allocated": tres, "requested": tres},
                   "steps": [{"step": {"id": f"{i}.{name}", "name": name}, "time": times, "tres": {"allocated": tres},
                              "state": "COMPLETED", "exit_code": {"status": "SUCCESS", "return_code": 0}}
                             for name in ("batch", "extern")]}
            text = ("" if i == 1 else ",\n") + json.dumps(job, indent=2)
            f.write(text)
            size += len(text)
        f.write("\n  ]\n}\n")
    return i


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=int, default=1 << 30, help="size of the dump to write")
    ap.add_argument("--format", choices=("-P", "json"), default="-P", help="sacct -P or sacct --json")
    ap.add_argument("--dir", default=None, help="where to write it (deleted afterwards)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "sacct.txt"
        jobs = (write_json_dump if args.format == "json" else write_dump)(path, args.bytes)
        print(f"{args.format} dump: {path.stat().st_size} bytes, {jobs} jobs")
        r = subprocess.run([sys.executable, "-c", MEASURE, str(path)], cwd=REPO, text=True, capture_output=True)
        print(r.stdout.strip() or r.stderr.strip())
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
