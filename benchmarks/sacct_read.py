#!/usr/bin/env python3
"""How long a large site's accounting dump takes to read into a trace, and the memory it takes.

Writes a dump of `--size-gib` GiB in the shape the docs ask sites for,

    sacct -a -X -P --format=JobID,JobName,Account,Partition,Submit,Start,End,Timelimit,AllocTRES,NNodes,State,Comment,ReqTRES

(or `sacct --json`'s, `--format json`: Slurm 22.05's, indented, each job with two steps), then
times `pal_slurm.sim.sacct.load_accounting_trace` on it in a fresh process and prints the rows,
the jobs kept, the wall seconds, rows per second, the CPU seconds (the wall's share of a
shared host's cores aside), the peak resident memory and what it grew by per kept job. The jobs are a site's mix: GPU and CPU-only jobs, pending and cancelled rows
that never started, running ones, array tasks (`123_4`, pending `123_[5-9]`), comments with a
`pal:class=`, free text or a malformed spec, typed and untyped GPU requests. Only the GPU jobs
that finished are kept, so memory should follow them, not the file.

Usage: python3 benchmarks/sacct_read.py [--size-gib 1] [--format -P|json] [--window-days N] [--dir /tmp] [--profile]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]

FIELDS = "JobID|JobName|Account|Partition|Submit|Start|End|Timelimit|AllocTRES|NNodes|State|Comment|ReqTRES"
START = 1_709_251_200  # the first submission: 2024-03-01T00:00:00 UTC
SPAN_S = 30 * 86400  # a month of submissions, whatever the job count

MEASURE = """
import resource, sys, time
from pal_slurm.sim.sacct import load_accounting_trace
def rss():  # peak resident MiB: VmHWM is this program's own (ru_maxrss keeps the parent's across exec)
    try:
        return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rows, base, days = int(sys.argv[2]), rss(), float(sys.argv[4]) if sys.argv[4] else None
t, cpu = time.perf_counter(), time.process_time()
if sys.argv[3] == "profile":
    import cProfile, pstats
    with cProfile.Profile() as p:
        trace = load_accounting_trace(sys.argv[1], days=days)
    pstats.Stats(p).sort_stats("tottime").print_stats(14)
else:
    trace = load_accounting_trace(sys.argv[1], days=days)
dt, cpu, peak, kept = time.perf_counter() - t, time.process_time() - cpu, rss(), len(trace.jobs)
print(f"{rows} rows read in {dt:.1f} s ({rows / dt:,.0f} rows/s; CPU {cpu:.1f} s); {kept} jobs kept; peak RSS {peak:.0f} MiB "
      f"({base:.0f} MiB before the read: {(peak - base) * 1048576 / kept:.0f} bytes per kept job)")
print(*trace.warnings[:6], sep="\\n")
"""


def _clock(epoch: int) -> str:
    """sacct's local-time format, without datetime's cost per row (epoch seconds since START)."""
    s = epoch - START
    day, s = divmod(s, 86400)
    hour, s = divmod(s, 3600)
    minute, second = divmod(s, 60)
    return f"2024-03-{1 + day:02d}T{hour:02d}:{minute:02d}:{second:02d}"  # SPAN_S stays in March


def jobs(count_hint: int) -> Iterator[dict[str, Any]]:
    """An endless mix of jobs; each a dict of what both formats print (times as epoch seconds,
    None for "never"). Submissions spread over SPAN_S whatever the count."""
    i = 0
    step = max(1, SPAN_S // max(1, count_hint))
    while True:
        i += 1
        kind = i % 20  # 0-8 GPU done, 9-13 CPU only, 14-15 pending, 16 cancelled pending, 17 running, 18-19 failed/timeout GPU
        gpus = 0 if 9 <= kind <= 13 else 1 << (i % 4)
        submit = START + (i * step) % SPAN_S
        start = None if kind in (14, 15, 16) else submit + i % 600
        end = None if start is None or kind == 17 else start + 60 + (i * 7919) % 86400
        array = i % 11 == 0
        yield {
            "id": f"{i}_{i % 7}" if array else str(i),
            "array": (i, i % 7) if array else None,
            "name": f"train-{i % 97}" if gpus else f"prep-{i % 31}",
            "account": f"acct{i % 13}", "partition": "gpu" if gpus else "cpu",
            "submit": submit, "start": start, "end": end,
            "limit_min": (60, 240, 1440, 2880)[i % 4],
            "gpus": gpus, "model": "a100" if gpus and i % 5 == 0 else None,
            "nodes": 1 + (gpus >= 8 and i % 2), "cpus": 8 * max(gpus, 1),
            "state": ("PENDING" if kind in (14, 15) else "CANCELLED" if kind == 16 else "RUNNING" if kind == 17
                      else "FAILED" if kind == 18 else "TIMEOUT" if kind == 19 else "COMPLETED"),
            "comment": ("pal:class=A", "pal:class=B", "", "reran after OOM", "pal:class=")[i % 5],
        }


def _limit(minutes: int) -> str:
    days, rest = divmod(minutes, 1440)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00" if days else f"{rest // 60:02d}:{rest % 60:02d}:00"


def pipe_row(j: dict[str, Any]) -> str:
    """One `sacct -X -P` line."""
    gpus, model = j["gpus"], j["model"]
    typed = f"gres/gpu:{model}={gpus}," if model else ""
    tres = f"billing={j['cpus']},cpu={j['cpus']}," + (f"gres/gpu={gpus},{typed}" if gpus else "") + \
        f"mem={8 * j['cpus']}G,node={j['nodes']}"
    job_id = j["id"]
    if j["start"] is None and j["array"]:
        job_id = f"{j['array'][0]}_[{j['array'][1]}-{j['array'][1] + 4}]"  # a pending array's remaining tasks
    state = "CANCELLED by 1000" if j["state"] == "CANCELLED" else j["state"]
    return "|".join((
        job_id, j["name"], j["account"], j["partition"], _clock(j["submit"]),
        "Unknown" if j["start"] is None else _clock(j["start"]),
        "Unknown" if j["end"] is None else _clock(j["end"]),
        _limit(j["limit_min"]), "" if j["start"] is None else tres, str(j["nodes"]), state, j["comment"],
        tres,
    )) + "\n"


def json_job(j: dict[str, Any]) -> dict[str, Any]:
    """One element of `sacct --json`'s jobs array (Slurm 22.05)."""
    gpus = j["gpus"]
    tres = [{"type": "cpu", "name": None, "id": 1, "count": j["cpus"]}] + \
        ([{"type": "gres", "name": "gpu", "id": 1001, "count": gpus}] if gpus else [])
    requested = tres + ([{"type": "gres", "name": f"gpu:{j['model']}", "id": 1002, "count": gpus}]
                        if j["model"] else [])
    times = {"elapsed": (j["end"] or 0) - (j["start"] or 0) if j["end"] else 0, "eligible": j["submit"],
             "end": j["end"] or 0, "start": j["start"] or 0, "submission": j["submit"], "suspended": 0}
    array_id, task = j["array"] or (0, None)
    return {"account": j["account"], "allocation_nodes": j["nodes"],
            "array": {"job_id": array_id, "limits": {"max": {"running": {"tasks": 0}}}, "task": None,
                      "task_id": task},
            "comment": {"administrator": None, "job": j["comment"], "system": None},
            "job_id": int(j["id"].split("_")[0]) + (10**9 if j["array"] else 0),
            "name": j["name"], "nodes": "None assigned" if j["start"] is None else f"gpu{int(j['id'].split('_')[0]) % 64:02d}",
            "partition": j["partition"], "state": {"current": j["state"], "reason": "None"},
            "time": {**times, "limit": j["limit_min"]},
            "tres": {"allocated": tres if j["start"] is not None else [], "requested": requested},
            "steps": [] if j["start"] is None else [
                {"step": {"id": f"{j['id']}.{name}", "name": name}, "time": times, "tres": {"allocated": tres},
                 "state": "COMPLETED", "exit_code": {"status": "SUCCESS", "return_code": 0}}
                for name in ("batch", "extern")]}


def write_dump(path: Path, target: int, fmt: str) -> int:
    """A dump of at least `target` bytes; the number of jobs (rows) in it."""
    rows = 0
    with path.open("w") as f:
        if fmt == "json":
            f.write('{\n  "meta": {"plugin": {"type": "openapi/dbv0.0.38"}},\n  "errors": [],\n  "jobs": [\n')
        else:
            f.write(FIELDS + "\n")
        size, chunk = 0, []
        for j in jobs(target // (800 if fmt == "json" else 190)):
            text = (",\n" if rows else "") + json.dumps(json_job(j), indent=2) if fmt == "json" else pipe_row(j)
            chunk.append(text)
            size += len(text)
            rows += 1
            if len(chunk) >= 4096:
                f.write("".join(chunk))
                chunk.clear()
                if size >= target:
                    break
        f.write("".join(chunk))
        if fmt == "json":
            f.write("\n  ]\n}\n")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-gib", type=float, default=1.0, help="size of the dump to write, GiB")
    ap.add_argument("--format", choices=("-P", "json"), default="-P", help="sacct -P or sacct --json")
    ap.add_argument("--dir", default=None, help="where to write it (deleted afterwards)")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions too (slower)")
    ap.add_argument("--window-days", type=float, default=None,
                    help="keep the jobs of this many days before the last submission (--window)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / ("sacct.json" if args.format == "json" else "sacct.txt")
        t = time.perf_counter()
        rows = write_dump(path, int(args.size_gib * (1 << 30)), args.format)
        print(f"{args.format} dump: {path.stat().st_size} bytes, {rows} rows (written in {time.perf_counter() - t:.0f} s)")
        r = subprocess.run([sys.executable, "-c", MEASURE, str(path), str(rows), "profile" if args.profile else "",
                            "" if args.window_days is None else str(args.window_days)],
                           cwd=REPO, text=True, capture_output=True)
        print(r.stdout.strip(), r.stderr.strip(), sep="\n" if r.stderr else "")
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
