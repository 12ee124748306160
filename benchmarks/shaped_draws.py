"""A placement change over many draws of the simulator's loaded trace with per-node jobs.

One golden case (tests/unit/sim/test_event_golden.py, "shaped") is one draw of a chaotic
system: a change that moves one early job moves every job after it, a few percent either way
(pal-net +20% on the golden draw for a change within 0.97-1.04 on thirty others). This runs
the same construction over N draws (trace seed, variability draw and simulator seed per draw)
and prints each placement's avg JCT and makespan; with `--against` the ratios to an earlier
run's JSON (e.g. one made in a clone of the code before the change; run this file from that
clone: it puts its own checkout first on the path):

    (cd <clone before> && python3 benchmarks/shaped_draws.py --draws 50 --json /tmp/old.json)
    python3 benchmarks/shaped_draws.py --draws 50 --json /tmp/new.json --against /tmp/old.json
    python3 benchmarks/shaped_draws.py --compare /tmp/old.json /tmp/new.json  # no new runs
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pal_slurm.policy import PLACEMENTS  # noqa: E402
from pal_slurm.sim.event import EventConfig, EventSimulator  # noqa: E402
from tests.unit.sim.test_event_golden import shaped_trace  # noqa: E402  (the golden case's construction)


def run_draw(placement: str, draw: int) -> tuple[float, float]:
    cfg = EventConfig(num_nodes=16, gpus_per_node=4, nodes_per_rack=4, seed=100 + draw, variability_seed=draw)
    summary = EventSimulator(cfg).run(shaped_trace(11 + draw), placement).summary()
    return summary["avg_jct_s"], summary["makespan_s"]


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def print_ratios(before: dict, after: dict, placements: list[str]) -> None:
    for placement in placements:
        keys = [k for k in after if k.startswith(placement + "/") and k in before]
        if not keys:
            continue
        jct = [after[k][0] / before[k][0] for k in keys]
        span = [after[k][1] / before[k][1] for k in keys]
        changed = sum(1 for x in jct if abs(x - 1.0) > 1e-9)
        print(f"{placement:18s} n={len(keys):2d} avg JCT geomean {geomean(jct):.4f} (min {min(jct):.3f} "
              f"max {max(jct):.3f})  makespan {geomean(span):.4f} (max {max(span):.3f})  changed {changed}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--placements", default=",".join(sorted(PLACEMENTS)))
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--first", type=int, default=0, help="first draw number")
    ap.add_argument("--json", help="write {placement/draw: [avg JCT s, makespan s]} here")
    ap.add_argument("--against", help="an earlier run's JSON: print the ratios to it")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="print the ratios of two runs' JSON")
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        print_ratios(before, after, sorted({k.split("/")[0] for k in after}))
        return 0
    results: dict[str, list[float]] = {}
    for placement in args.placements.split(","):
        for draw in range(args.first, args.first + args.draws):
            results[f"{placement}/{draw}"] = list(run_draw(placement, draw))
        jcts = [results[f"{placement}/{d}"][0] for d in range(args.first, args.first + args.draws)]
        print(f"{placement:18s} {args.draws} draws: mean avg JCT {sum(jcts) / len(jcts) / 3600:8.1f} h", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    if args.against:
        print("ratios to", args.against)
        print_ratios(json.loads(Path(args.against).read_text()), results, args.placements.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
