#!/usr/bin/env python3
"""What one hostile submission costs pald's submit path, beside an ordinary one.

Each case sends one request whose user-written field (--exclude, --nodelist, --constraint, a
GRES index list) is hostile through the real in-process place path (`Pald.handle`, what the
socket handler runs, under pald's lock) on a 256-node x 8-GPU cluster with a site view, and
prints per case: p50 and max of the hostile request's time over `--n` repetitions, the p50 of
an ordinary request measured in the same process, their ratio, the growth of peak RSS, the
bytes pald logged per hostile request, and pald's answer. Each case runs in its own process
with a wall-clock limit (`--timeout`): a case past it is printed as such (code that expands
what users write can take hours on one).

Usage: python3 benchmarks/hostile_place.py [--nodes 256] [--n 20] [--timeout 60] [--budget 10]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

KIB64 = 65_536


def _fill(items) -> str:
    """Items joined by commas, as many as fit in 64 KiB."""
    out, size = [], -1
    for item in items:
        if size + 1 + len(item) > KIB64:
            break
        out.append(item)
        size += 1 + len(item)
    return ",".join(out)


def _numbers():
    i = 0
    while True:
        yield i
        i += 1


CASES: dict[str, dict[str, str]] = {
    "ordinary (no hostile field)": {},
    "--exclude ten copies of n[0-99999] (109 B)": {"exc_nodes": ",".join(["n[0-99999]"] * 10)},
    "--exclude a[0-999]b[0-1999]": {"exc_nodes": "a[0-999]b[0-1999]"},
    "--exclude 64 KiB of distinct ranges": {"exc_nodes": _fill(f"n[{i * 10}-{i * 10 + 4}]" for i in _numbers())},
    "--exclude 64 KiB of n[1-99999]": {"exc_nodes": _fill("n[1-99999]" for _ in _numbers())},
    "--exclude 64 KiB of single names": {"exc_nodes": _fill(f"n{i}" for i in _numbers())},
    "--nodelist ten copies of n[0-99999]": {"req_nodes": ",".join(["n[0-99999]"] * 10)},
    "--constraint 600 deep": {"features": "(" * 600 + "fast" + ")" * 600},
    "--constraint 64 KiB": {"features": "fast&" * (KIB64 // 5 - 1) + "fast"},
    "--gres gpu:a100:1(IDX:0-2999999) (30 B)": {"tres_per_node": "gres:gpu:a100:1(IDX:0-2999999)"},
}


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] * 1000


def child(case: str, nodes: int, n: int, budget_s: float) -> dict:
    """Run one case in this process; the figures as a dict."""
    from place_latency import build_pald

    from pal_slurm.daemon.protocol import JobFields, PlaceRequest
    from pal_slurm.model.comment_grammar import CommentSpec

    logged = io.StringIO()
    handler = logging.StreamHandler(logged)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)

    pald, _, _ = build_pald(nodes, 8, 0, random.Random(1))
    pald.sync_and_cycle()

    def request(i: int, fields: dict) -> PlaceRequest:
        return PlaceRequest(JobFields(uid=1000, comment="pal:class=resnet,mode=now", gpus_per_node=1, **fields),
                            CommentSpec("resnet", mode="now"), request_id=f"r{i}")

    def one(i: int, fields: dict):
        pald.service.clear_reservations()
        pald.sync_and_cycle()  # a fresh view for each (untimed): a slow case must not age it to stale_view
        t = time.perf_counter()
        reply = pald.handle(request(i, fields))
        return time.perf_counter() - t, reply

    for i in range(5):  # warm up: leadership, first-call costs
        one(i, {})
    ordinary = [one(100 + i, {})[0] for i in range(max(n, 50))]
    logged.seek(0)
    logged.truncate()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times, reply = [], None
    started = time.perf_counter()
    for i in range(n):
        dt, reply = one(1000 + i, CASES[case])
        times.append(dt)
        if time.perf_counter() - started > budget_s:
            break
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    log_bytes = len(logged.getvalue())
    after = one(9999, {})[1]
    return {"p50_ms": pct(times, 50), "max_ms": max(times) * 1000, "reps": len(times),
            "ordinary_p50_ms": pct(ordinary, 50), "rss_growth_mb": (rss1 - rss0) / 1024,
            "log_bytes_per_request": log_bytes / len(times), "answer": _answer(reply),
            "next_ordinary": _answer(after)}


def _answer(reply) -> str:
    """place / defer / pass:<reason>, or the type of an error reply."""
    decision = getattr(reply, "decision", None)
    if decision is None:
        return f"{type(reply).__name__}:{getattr(reply, 'code', '?')}"
    return decision.value + (f":{reply.reason}" if decision.value == "pass" else "")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--n", type=int, default=20, help="repetitions of each hostile request")
    ap.add_argument("--timeout", type=float, default=60.0, help="wall-clock limit of one case (s)")
    ap.add_argument("--budget", type=float, default=10.0, help="stop repeating a case after this many s")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(child(args.case, args.nodes, args.n, args.budget)))
        return
    print(f"cluster: {args.nodes} nodes x 8 GPUs, site view judged; {args.n} repetitions per case "
          f"(fewer past {args.budget:.0f} s), {args.timeout:.0f} s limit per case; code: {ROOT}")
    print(f"{'case':45s} {'p50 ms':>9s} {'max ms':>9s} {'ordinary':>9s} {'ratio':>8s} {'RSS +MB':>8s} "
          f"{'log B/req':>9s}  answer (next ordinary)")
    for case in CASES:
        argv = [sys.executable, __file__, "--case", case, "--nodes", str(args.nodes), "--n", str(args.n),
                "--budget", str(args.budget)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"{case:45s} {'> ' + str(int(args.timeout * 1000)):>9s}  (killed at the limit: one request "
                  f"did not finish)")
            continue
        if done.returncode != 0:
            print(f"{case:45s} failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{case:45s} {r['p50_ms']:9.3f} {r['max_ms']:9.3f} {r['ordinary_p50_ms']:9.3f} "
              f"{r['p50_ms'] / r['ordinary_p50_ms']:7.1f}x {r['rss_growth_mb']:8.1f} "
              f"{r['log_bytes_per_request']:9.0f}  {r['answer']} ({r['next_ordinary']}, {r['reps']} reps)")


if __name__ == "__main__":
    main()
