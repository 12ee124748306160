#!/usr/bin/env python3
"""CPU time of the job_submit hook's whole run (pal.lua inside slurmctld's locks), new vs old.

The real job_submit.lua + pal.lua run in lupa's Lua 5.1 with the stub `slurm` table and the
stub luasocket of tests/lua/hook_harness.py: pald's answer is already waiting, so what is timed
is the hook's own work: parsing the comment, building and encoding the request, reading,
decoding and checking the reply (shape, --exclude, partition lists) and writing the job. Each
run is one `slurm_job_submit` call timed from Python (the job table is built outside it).

Inputs, each on the current pal.lua and on the one before hostlists were compiled (commit
37356b4, read with `git show`), in the same process, interleaved:
  ordinary      one node, --gres=gpu:2, a 2-node partition list
  exclude-*     16-node reply, --exclude of ~62 KiB (the most a 64 KiB request line carries
                beside the job): distinct names / bracket ranges / n[100-99999] repeated /
                multi-group r[1-2]-n[..] items, and a 64-node partition list

The current hook passes a job whose own --exclude/--nodelist is longer than
PAL_MAX_JOB_LIST_BYTES (default 8 KiB) without reading it; `--job-list-bytes` sets that cap for
the run (default 65536, so the ~62 KiB lists are compiled and checked: the worst a site that
raises the cap gets; 8192 shows the default's unasked pass).

Usage: python3 benchmarks/hook_cpu.py [--n 200] [--old-n 5] [--old-rev 37356b4] [--job-list-bytes N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lua"))

from hook_harness import HOOK_DIR, NO_VAL, Hook  # noqa: E402
from hook_harness import fill as fill_list  # noqa: E402

LIST_BYTES = 62 * 1024
NODES = 16


def fill(item) -> str:
    return fill_list(item, LIST_BYTES)


def sixteen(names: list[str], exclude: str) -> tuple[dict, dict, dict]:
    reply = {"v": 1, "ok": True, "decision": "place", "reason": "pal", "rank": 3,
             "nodes": {n: [0] for n in names}, "gres": "gres:gpu:s0:1"}
    job = {"comment": "pal:class=resnet", "user_id": 1001, "tres_per_node": "gres:gpu:1",
           "min_nodes": NODES, "max_nodes": NODES, "exc_nodes": exclude, "partition": "gpu"}
    prefix = names[0].rstrip("0123456789")
    parts = {"gpu": {"nodes": ",".join(names) + f",{prefix}[100-147]", "flag_default": 1}}
    return job, reply, parts


def inputs() -> dict[str, tuple[dict, dict, dict]]:
    gpus = [f"gpu{i:02d}" for i in range(1, NODES + 1)]
    return {
        "ordinary": (
            {"comment": "exp1 pal:class=resnet,gpus=2", "user_id": 1001, "partition": "gpu",
             "tres_per_node": "gres:gpu:2"},
            {"v": 1, "ok": True, "decision": "place", "reason": "pal", "rank": 7,
             "nodes": {"gpu03": [2, 3]}, "gres": "gres:gpu:s2:1,gres:gpu:s3:1"},
            {"gpu": {"nodes": "gpu[01-04]", "flag_default": 1}}),
        "exclude-names": sixteen(gpus, fill(lambda i: f"x{i:05d}")),
        "exclude-ranges": sixteen(gpus, fill(lambda i: f"gpu[{3 * i + 100:04d}-{3 * i + 101:04d}]")),
        "exclude-bigrange": sixteen([f"n{i}" for i in range(1, NODES + 1)],
                                    fill(lambda i: "n[100-99999]")),
        "exclude-multigroup": sixteen([f"r9-n{i:02d}" for i in range(1, NODES + 1)],
                                      fill(lambda i: f"r[1-2]-n[{i % 90 + 1:02d}-{i % 90 + 9:02d}]")),
    }


def timed_run(hook: Hook, job: dict, reply: dict, parts: dict) -> tuple[float, float, str]:
    """One hook run: wall seconds, CPU seconds of this process, the admin_comment written."""
    hook.reply(reply)
    hook.g.WRITES = hook.lua.table()
    base = {"min_nodes": NO_VAL, "max_nodes": NO_VAL, "priority": NO_VAL, **job}
    desc, store = hook.g.make_job(hook.lua.table_from(base))
    lua_parts = hook.lua.table_from({k: hook.lua.table_from(v) for k, v in parts.items()})
    c0, t0 = time.process_time(), time.perf_counter()
    hook.g.slurm_job_submit(desc, lua_parts, 1000)
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    return took, cpu, str(store["admin_comment"] or "")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def fmt(xs: list[float]) -> str:
    ms = [x * 1000 for x in xs]
    return f"p50 {statistics.median(ms):9.3f}  p99 {pct(ms, 0.99):9.3f}  max {max(ms):9.3f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="runs per input, current pal.lua")
    ap.add_argument("--old-n", type=int, default=5, help="runs per input, old pal.lua")
    ap.add_argument("--old-rev", default="37356b4")
    ap.add_argument("--job-list-bytes", type=int, default=64 * 1024,
                    help="PAL_MAX_JOB_LIST_BYTES for the current hook")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_dir = Path(tmp)
        shutil.copy(HOOK_DIR / "job_submit.lua", old_dir / "job_submit.lua")
        old_src = subprocess.run(["git", "show", f"{args.old_rev}:job_submit_lua/pal.lua"],
                                 cwd=REPO, check=True, capture_output=True, text=True).stdout
        (old_dir / "pal.lua").write_text(old_src)
        new = Hook(env={"PAL_MAX_JOB_LIST_BYTES": str(args.job_list_bytes)})
        old = Hook(hook_dir=old_dir)
        print(f"lua: {new.lua.eval('_VERSION')} (lupa); new = working tree, old = {args.old_rev}")
        for name, (job, reply, parts) in inputs().items():
            exc = len(job.get("exc_nodes", ""))
            runs: dict[str, list[tuple[float, float, str]]] = {"new": [], "old": []}
            for i in range(max(args.n, args.old_n)):
                if i < args.n:
                    runs["new"].append(timed_run(new, job, reply, parts))
                if i < args.old_n:
                    runs["old"].append(timed_run(old, job, reply, parts))
            print(f"\n{name}: --exclude {exc} bytes, {len(reply['nodes'])} nodes in the reply")
            for which, rs in runs.items():
                print(f"  {which} ({len(rs):4d} runs) wall {fmt([r[0] for r in rs])}")
                print(f"  {' ' * 14} cpu  {fmt([r[1] for r in rs])}   -> {rs[-1][2].split(';')[0][:32]}")
            ratio = (statistics.median(r[1] for r in runs["old"])
                     / statistics.median(r[1] for r in runs["new"]))
            print(f"  old/new cpu p50: x{ratio:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
