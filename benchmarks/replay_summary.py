"""The lab replay's targets over several replays: per trace, the mean of the replays' ratios
beside the mean of their predictions (`pal_lab.replay.summary`: why one replay is one draw).

    python3 benchmarks/replay_summary.py docs/results/slurm/replay-*.json --stock docs/results/slurm/stock-workload-1-seed0.json

Each FILE is one replay's `palctl replay --json` / `--output FILE` document (or `benchmarks/slurm_replay.py`'s all.json):
a pald arm with the stock arm of the same trace and seed beside it. Prints every replay (avg
JCT and makespan over stock's, the predicted ratio and its miss), then per trace and arm the
means, the worst makespan and how many replays' own predictions missed by more than 0.05,
then the targets: every trace a win, the geomean of the traces' means, no makespan over
stock's, every trace's mean predicted within 0.05 (and, over the replays predicted over a
timing grid, `slurm_replay.py --predict-only --grid K`, the grid's mean beside their own).
Where a trace and seed has several stock runs (`--stock FILE`: a replay whose stock arm only
is to count, e.g. one whose pald arm ran older code), a last table gives their spread and every
replay over their mean (the stock arm is a draw as well).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pal_lab.replay.summary import PREDICTION_TOLERANCE, by_trace, ratios_of, stock_runs_of  # noqa: E402
from pal_slurm.sim.metrics import geomean  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--stock", action="append", default=[], metavar="FILE",
                    help="a replay whose stock arm only counts (pooled with the stock runs beside FILEs)")
    a = ap.parse_args()
    ratios = []
    other_stock = []
    for path in a.stock:
        rows = _rows(path)
        if rows is None:
            return 2
        other_stock += stock_runs_of(rows)
    for path in a.files:
        rows = _rows(path)
        if rows is None:
            return 2
        got = ratios_of(os.path.basename(path), rows)
        if not got:
            print(f"{path}: no pald arm with a stock arm and predictions beside it", file=sys.stderr)
        ratios += got
    if not ratios:
        return 2
    print(f"{'replay':58} {'arm':8} {'seed':>4} {'ratio':>6} {'pred':>6} {'miss':>7} {'grid':>6} {'miss':>7} "
          f"{'makespan':>8} {'pred':>6}")
    for r in ratios:
        print(f"{r.source[:58]:58} {r.arm:8} {r.seed:4d} {r.jct:6.3f} {r.predicted_jct:6.3f} {r.miss:+7.3f} "
              f"{_opt(r.grid_jct, '6.3f')} {_opt(r.grid_miss, '+7.3f')} {r.makespan:8.3f} {r.predicted_makespan:6.3f}")
    traces = by_trace(ratios, other_stock)
    print(f"\n{'trace':12} {'arm':8} {'replays':>7} {'ratio':>6} {'pred':>6} {'miss':>7} {'gridded':>7} {'grid':>6} "
          f"{'miss':>7} {'worst makespan':>14} {'runs missed':>11}")
    for t in traces:
        print(f"{t.trace:12} {t.arm:8} {len(t.replays):7d} {t.jct:6.3f} {t.predicted_jct:6.3f} {t.miss:+7.3f} "
              f"{len(t.gridded):7d} {_opt(t.grid_jct, '6.3f')} {_opt(t.grid_miss, '+7.3f')} "
              f"{t.worst_makespan:14.3f} {t.runs_missed:>5d} of {len(t.replays)}")
    if any(len(t.stock_runs(seed)) > 1 for t in traces for seed in t.seeds):
        print(f"\n{'trace':12} {'arm':8} {'seed':>4} {'stock runs':>10} {'stock avg JCT h':>17} {'stock makespan h':>17}"
              f" {'replays':>7} {'ratio over their mean':>21} {'worst makespan':>14}")
        for t in traces:
            for seed in t.seeds:
                runs = t.stock_runs(seed)
                jcts = [r.avg_jct_s / 3600 for r in runs]
                spans = [r.makespan_s / 3600 for r in runs]
                mine = t.pooled(seed)
                print(f"{t.trace:12} {t.arm:8} {seed:4d} {len(runs):10d} {min(jcts):8.3f}-{max(jcts):<8.3f} "
                      f"{min(spans):8.3f}-{max(spans):<8.3f} {len(mine):7d} {sum(j for j, _ in mine) / len(mine):21.3f} "
                      f"{max(m for _, m in mine):14.4f}")
            print(f"{t.trace:12} {t.arm:8} {'all':>4} {'':10} {'':17} {'':17} {len(t.replays):7d} {t.pooled_jct:21.3f} "
                  f"{t.pooled_worst_makespan:14.4f}  grid mean {_opt(t.grid_jct, '5.3f')} (miss {_opt(t.pooled_grid_miss, '+6.3f')})")
        print("(every replay over the mean of its seed's stock runs)")
    for arm in sorted({t.arm for t in traces}):
        mine = [t for t in traces if t.arm == arm]
        grid_misses = [t.grid_miss for t in mine if t.grid_miss is not None]
        grid = ("" if not grid_misses else
                f" (the timing grid's, on the {len(grid_misses)} of {len(mine)} traces with gridded replays, "
                f"set beside those replays: {all(abs(g) <= PREDICTION_TOLERANCE for g in grid_misses)})")
        print(f"\n{arm}: {len(mine)} trace(s); a win on every trace: {all(t.jct < 1.0 for t in mine)}; "
              f"geomean of the traces' mean ratios {geomean(t.jct for t in mine):.3f} (target <= 0.85); "
              f"makespan no worse than stock's in every replay: {all(t.worst_makespan <= 1.0 for t in mine)}; "
              f"every trace's mean predicted within {PREDICTION_TOLERANCE}: "
              f"{all(abs(t.miss) <= PREDICTION_TOLERANCE for t in mine)}{grid}")
        if any(len(t.stock_runs(seed)) > 1 for t in mine for seed in t.seeds):
            pooled_misses = [t.pooled_grid_miss for t in mine if t.pooled_grid_miss is not None]
            print(f"{arm}, every replay over the mean of its seed's stock runs: a win on every trace: "
                  f"{all(t.pooled_jct < 1.0 for t in mine)}; geomean {geomean(t.pooled_jct for t in mine):.3f}; "
                  f"makespan no worse than stock's mean in every replay: {all(t.pooled_worst_makespan <= 1.0 for t in mine)}; "
                  f"the grid's mean within {PREDICTION_TOLERANCE} on every gridded trace: "
                  f"{all(abs(g) <= PREDICTION_TOLERANCE for g in pooled_misses)}")
    return 0


def _rows(path: str) -> list | None:
    """A replay JSON's rows, or None (said on stderr) when the file is not one."""
    try:
        return list(json.load(open(path))["results"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"{path}: not a replay's JSON ({e})", file=sys.stderr)
        return None


def _opt(x: float | None, fmt: str) -> str:
    """`x` formatted, or a dash as wide."""
    width = int(fmt.lstrip("+").split(".")[0])
    return format(x, fmt) if x is not None else "-".rjust(width)


if __name__ == "__main__":
    sys.exit(main())
