"""Traces replayed on real Slurm labs, stock Slurm against pal-slurm (docs/results/slurm/).

    python3 benchmarks/slurm_replay.py --traces workload-1,workload-3,workload-4 \
        --arms stock,pal-fit --scales 150 --jobs 160 --out /tmp/replay

Drives `palctl replay` once per trace (each arm on its own freshly started 16x4 lab), then
prints per trace and arm the measured avg JCT / makespan ratio to `stock`, the simulator's
predicted ratio and the difference, and the geomean over traces. `--scales 150,60` replays
each trace at several time scales (the compression must not decide the result).
`--predict-only` replays nothing and predicts the replays under --out again with the current
simulator (what pald measured is read back from each arm's work dir). `--stock-from DIR`
lets pald arms replayed alone (`--arms pal-fit`) be compared with the stock arm of an earlier
replay of the same trace, scale, jobs and seed under DIR (its row and work dir are borrowed:
stock does not run pald's code, so a change to pald needs only its own arms replayed again).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPLAY_JSONS = "*-n*-seed*.json"  # each replay's `<tag>.json` under --out (`replay` names the tags)


def replay(trace: str, arms: str, scale: float, jobs: int, seed: int, out: Path) -> list[dict]:
    tag = f"{trace}-s{scale:g}-n{jobs}-seed{seed}"
    json_path = out / f"{tag}.json"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "pal_slurm.cli", "replay", "--trace", trace, "--arms", arms,
           "--time-scale", str(scale), "--jobs", str(jobs), "--seed", str(seed),
           "--work-dir", str(out / tag), "--output", str(json_path), "--plots", str(out / "plots" / tag)]
    print("$ palctl " + " ".join(cmd[3:]), flush=True)
    subprocess.run(cmd, check=True, env=env, cwd=str(REPO))
    return json.loads(json_path.read_text())["results"]


def borrow_arm(out: Path, source: Path, arm: str = "stock") -> list[str]:
    """Borrow `arm` from the replays under `source` for the replays under `out` that lack it:
    per replay (`<tag>.json` with `<tag>/`, the layout `replay` writes) whose tag `source` has
    too, link `source/<tag>/<arm>` as `out/<tag>/<arm>` and add that arm's row to
    `out/<tag>.json`. The tags borrowed for, sorted; a tag whose JSON already has the arm is
    left as it is. Raises FileNotFoundError when `source` has no replay under any of `out`'s
    tags (a wrong directory should not pass for "nothing to compare")."""
    borrowed, matched = [], False
    for path in sorted(out.glob(REPLAY_JSONS)):
        tag = path.stem
        theirs = source / f"{tag}.json"
        if not theirs.exists():
            continue
        matched = True
        doc = json.loads(path.read_text())
        if any(r["arm"] == arm for r in doc["results"]):
            continue
        rows = [r for r in json.loads(theirs.read_text())["results"] if r["arm"] == arm]
        if not rows or not (source / tag / arm).is_dir():
            raise FileNotFoundError(f"{theirs}: no {arm} arm to borrow (row and work dir {source / tag / arm})")
        link = out / tag / arm
        if not link.exists():
            link.symlink_to((source / tag / arm).resolve(), target_is_directory=True)
        doc["results"] += rows
        path.write_text(json.dumps(doc, indent=2))
        borrowed.append(tag)
    if not matched:
        raise FileNotFoundError(f"{source}: no replay with any tag under {out}")
    return borrowed


def repredict(out: Path, gpus_per_node: int = 4, num_nodes: int = 16, nodes_per_rack: int = 4,
              partings: int = 0, spread: int = 0, gaps: int = 0, grid: int = 0,
              follow: str | None = None) -> list[dict]:
    """The predictions of replays already run (their JSON and work dirs under `out`) made again
    with the current simulator and the current reading of what each arm measured (`harness.measure_arm`
    on its work dir: Slurm's launch cost and pass clock, pald's ranking and cycle);
    nothing is replayed. `partings` > 0: print, per arm, the first that many jobs the lab and
    the model ran differently (`replay.compare`). `spread` > 0: also predict each pald arm
    with its cycle at that many phases (`predict.cycle_phase_spread`), kept as the row's
    "phase_spread" and summed up by `print_spread`. `gaps` > 0: print, per arm, the lab's JCT
    less the model's in all and the that many jobs with the largest gaps. `grid` > 0: also
    predict each arm over a grid of that many phases of Slurm's passes (x as many of pald's
    cycle for a pald arm, `predict.timing_grid`), kept as "timing_grid" with its means as
    "predicted_avg_jct_s_grid_mean" / "predicted_makespan_s_grid_mean", and summed up by
    `print_grid`; with `follow` (a job's name) each cell also says when the model started that
    job, kept with the lab's start as "grid_follow" and summed up by `print_follow`."""
    from pal_lab.replay.harness import LabShape, measure_arm
    from pal_lab.replay.plan import plan_replay
    from pal_lab.replay.predict import cycle_phase_spread, predict_arm, timing_grid
    from pal_slurm.sim.trace import resolve_trace

    shape = LabShape(num_nodes, gpus_per_node, nodes_per_rack)
    rows = []
    for path in sorted(out.glob(REPLAY_JSONS)):
        results = json.loads(path.read_text())["results"]
        tag = path.stem
        jobs = int(tag.rsplit("-n", 1)[1].split("-")[0])
        for r in results:
            plan = plan_replay(resolve_trace(r["trace"]), r["time_scale"], gpus_per_node, num_nodes * gpus_per_node, jobs)
            run = measure_arm(plan, r["arm"], out / tag / r["arm"], num_nodes * gpus_per_node)
            pred = predict_arm(plan, run, r["seed"], shape)
            headline = pred.headline()
            r.update(**run.measured_inputs(),
                     predicted_avg_jct_s=headline["avg_jct_s"], predicted_makespan_s=headline["makespan_s"],
                     predicted_by=f"event:{headline['policy']}")
            if spread:
                r["phase_spread"] = [{"pald_cycle_phase_s": phase, "avg_jct_s": h["avg_jct_s"],
                                      "makespan_s": h["makespan_s"]}
                                     for phase, h in cycle_phase_spread(plan, run, r["seed"], shape, spread)]
            if grid:
                cells = timing_grid(plan, run, r["seed"], shape, grid, follow=follow)
                r["timing_grid"] = cells
                if follow is not None:
                    lab = next((j for j in run.jobs if j.name == follow), None)
                    r["grid_follow"] = {"job": follow, "lab_start_s": lab.start_s if lab else None}
                r["predicted_avg_jct_s_grid_mean"] = sum(c["avg_jct_s"] for c in cells) / len(cells)
                r["predicted_makespan_s_grid_mean"] = sum(c["makespan_s"] for c in cells) / len(cells)
            if partings:
                print(f"{tag} {r['arm']}: {pred.partings_line(len(plan.jobs))}")
                for p in pred.partings[1:partings]:  # the first is in that line
                    print("   then " + p.describe())
            if gaps:
                print(f"{tag} {r['arm']}: {pred.gaps_line(gaps)}")
        path.write_text(json.dumps({"results": results}, indent=2))
        rows += [dict(r, tag=tag, jobs=jobs) for r in results]  # which replay each row came from
    return rows


def stock_row(rows: list[dict], r: dict) -> dict | None:
    """The stock arm of `r`'s replay (same trace, scale and replay tag) among `rows`, if any."""
    return next((b for b in rows if b["trace"] == r["trace"] and b["arm"] == "stock"
                 and b["time_scale"] == r["time_scale"] and b.get("tag") == r.get("tag")), None)


def print_grid(rows: list[dict]) -> None:
    """Per pald arm predicted over a timing grid (`repredict(grid=K)`): the replay's avg JCT /
    stock's, the point prediction, the ratio of the grid's means (the arm's over stock's) and
    the range of the per-cell ratios (`predict.cell_ratios`), and the makespan ratio of the
    grid's means."""
    from pal_lab.replay.predict import cell_ratios

    print(f"\n{'trace':12} {'jobs':>4} {'seed':>4} {'arm':8} {'replay':>6} {'point':>6} {'grid':>6} {'miss':>7} "
          f"{'min':>6} {'max':>6}  makespan: replay  grid")
    for r in rows:
        base = stock_row(rows, r)
        if r["arm"] == "stock" or base is None or "timing_grid" not in r or "timing_grid" not in base:
            continue
        cells = cell_ratios(r["timing_grid"], base["timing_grid"])
        lab = r["avg_jct_s"] / base["avg_jct_s"]
        point = r["predicted_avg_jct_s"] / base["predicted_avg_jct_s"]
        mean = r["predicted_avg_jct_s_grid_mean"] / base["predicted_avg_jct_s_grid_mean"]
        mk = r["predicted_makespan_s_grid_mean"] / base["predicted_makespan_s_grid_mean"]
        print(f"{r['trace']:12} {r.get('jobs', 0):4d} {r['seed']:4d} {r['arm']:8} {lab:6.3f} {point:6.3f} {mean:6.3f} "
              f"{mean - lab:+7.3f} {min(cells):6.3f} {max(cells):6.3f}  {r['makespan_s'] / base['makespan_s']:16.3f} "
              f"{mk:5.3f}  ({len(cells)} x {len(base['timing_grid'])} runs)")


def print_follow(rows: list[dict], within_s: float) -> None:
    """Per pald arm predicted over a grid that follows a job (`repredict(grid=K, follow=JOB)`):
    when the lab started that job and the replay's ratio to stock; when the grid's cells
    started it (sorted, trace h) and the mean ratio of the cells that started it within
    `within_s` of the lab (`predict.near_start`): the model given that one draw."""
    from pal_lab.replay.predict import near_start

    for r in rows:
        base, follow = stock_row(rows, r), r.get("grid_follow")
        if r["arm"] == "stock" or base is None or follow is None or "timing_grid" not in base:
            continue
        lab = r["avg_jct_s"] / base["avg_jct_s"]
        starts = " ".join(f"{c['follow_start_s'] / 3600:.2f}" for c in sorted(r["timing_grid"], key=lambda c: c["follow_start_s"]))
        print(f"\n{r['trace']} seed {r['seed']} {r['arm']}: {follow['job']} started by the grid's cells at (trace h) {starts}")
        if follow["lab_start_s"] is None:
            print(f"   the lab has no record of {follow['job']}")
            continue
        near = near_start(r["timing_grid"], base["timing_grid"], follow["lab_start_s"], within_s)
        model = (f"the {len(near)} cells within {within_s / 3600:.2f} h of it: mean {sum(near) / len(near):.3f} "
                 f"({min(near):.3f}-{max(near):.3f}), {sum(near) / len(near) - lab:+.3f}") if near else "no cell near it"
        print(f"   lab: {follow['lab_start_s'] / 3600:.2f} h, ratio {lab:.3f}; {model}")


def print_spread(rows: list[dict]) -> None:
    """Per pald arm with a phase spread: its avg JCT / stock's predicted over the spread
    (min / mean / max, and the outcomes it takes, to 0.01, with how often), the replay's
    ratio, and whether the replay is within 0.05 of the point prediction, of the spread's
    mean, and of one of its outcomes."""
    print(f"\n{'trace':12} {'jobs':>4} {'seed':>4} {'arm':8} {'replay':>6} {'point':>6} {'min':>6} {'mean':>6} "
          f"{'max':>6}  outcomes (ratio x share; makespan ratio)")
    for r in rows:
        base = stock_row(rows, r)
        if not r.get("phase_spread") or base is None:
            continue
        ratios = [(x["avg_jct_s"] / base["predicted_avg_jct_s"], x["makespan_s"] / base["predicted_makespan_s"])
                  for x in r["phase_spread"]]
        outcomes: dict[float, list[float]] = {}
        for jr, mr in ratios:
            outcomes.setdefault(round(jr, 2), []).append(mr)
        shown = ", ".join(f"{k:.2f} x{len(v)} ({min(v):.3f}-{max(v):.3f})" for k, v in sorted(outcomes.items()))
        xs = [jr for jr, _ in ratios]
        lab = r["avg_jct_s"] / base["avg_jct_s"]
        point = r["predicted_avg_jct_s"] / base["predicted_avg_jct_s"]
        mean = sum(xs) / len(xs)
        print(f"{r['trace']:12} {r.get('jobs', 0):4d} {r['seed']:4d} {r['arm']:8} {lab:6.3f} {point:6.3f} "
              f"{min(xs):6.3f} {mean:6.3f} {max(xs):6.3f}  {shown}")
        print(f"{'':36}within 0.05: point {'yes' if abs(point - lab) <= 0.05 else 'NO'}, "
              f"mean {'yes' if abs(mean - lab) <= 0.05 else 'NO'}, "
              f"an outcome {'yes' if any(abs(x - lab) <= 0.05 for x in xs) else 'NO'}")


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default="workload-1,workload-3,workload-4")
    ap.add_argument("--arms", default="stock,pal,pal-net")
    ap.add_argument("--scales", default="600")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="/tmp/pal-slurm-replay")
    ap.add_argument("--predict-only", action="store_true",
                    help="replay nothing: predict the replays already under --out again (the current simulator)")
    ap.add_argument("--spread", type=int, default=0, metavar="K",
                    help="with --predict-only: predict each pald arm with its cycle at K phases")
    ap.add_argument("--partings", type=int, default=0, metavar="K",
                    help="with --predict-only: per arm, the first K jobs the lab and the model ran differently")
    ap.add_argument("--grid", type=int, default=0, metavar="K",
                    help="with --predict-only: each arm over K phases of Slurm's passes (x K of pald's cycle)")
    ap.add_argument("--follow", default=None, metavar="JOB",
                    help="with --grid: when each cell started this job (e.g. replay-80), and the cells near the lab's start")
    ap.add_argument("--gaps", type=int, default=0, metavar="K",
                    help="with --predict-only: per arm, the lab's JCT less the model's and the K jobs that differ most")
    ap.add_argument("--stock-from", default="", metavar="DIR",
                    help="compare with the stock arm of the same replays under DIR (an earlier --out)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    rows = []
    if not a.predict_only:
        for scale in [float(s) for s in a.scales.split(",")]:
            for trace in a.traces.split(","):
                rows += replay(trace, a.arms, scale, a.jobs, a.seed, out)
    if a.stock_from:
        print(f"stock arm borrowed from {a.stock_from} for: {', '.join(borrow_arm(out, Path(a.stock_from))) or '-'}")
    if a.predict_only or a.stock_from:  # with the stock rows and every prediction made now
        rows = repredict(out, partings=a.partings, spread=a.spread, gaps=a.gaps, grid=a.grid, follow=a.follow)
    (out / "all.json").write_text(json.dumps({"results": rows}, indent=2))
    print(f"\n{'trace':12} {'scale':>6} {'arm':8} {'avgJCT h':>9} {'ratio':>6} {'pred':>6} {'diff':>6} "
          f"{'makespan':>9} {'ratio':>6} {'pred':>6}")
    ratios: dict[tuple[float, str], list[float]] = {}
    for r in rows:
        base = stock_row(rows, r)
        if base is None:  # pald arms replayed alone (beside an earlier stock replay): no ratio here
            print(f"{r['trace']:12} {r['time_scale']:6g} {r['arm']:8} {r['avg_jct_s'] / 3600:9.3f} {'-':>6} {'-':>6} "
                  f"{'-':>6} {r['makespan_s'] / 3600:9.3f}  (no stock arm under --out: --stock-from DIR)")
            continue
        jr = r["avg_jct_s"] / base["avg_jct_s"]
        jp = r["predicted_avg_jct_s"] / base["predicted_avg_jct_s"]
        mr = r["makespan_s"] / base["makespan_s"]
        mp = r["predicted_makespan_s"] / base["predicted_makespan_s"]
        ratios.setdefault((r["time_scale"], r["arm"]), []).append(jr)
        print(f"{r['trace']:12} {r['time_scale']:6g} {r['arm']:8} {r['avg_jct_s'] / 3600:9.3f} {jr:6.3f} {jp:6.3f} "
              f"{jp - jr:+6.3f} {r['makespan_s'] / 3600:9.3f} {mr:6.3f} {mp:6.3f}")
    for (scale, arm), xs in sorted(ratios.items()):
        print(f"geomean avg JCT {arm} / stock at scale {scale:g}: {geomean(xs):.3f} over {len(xs)} trace(s)")
    if a.spread:
        print_spread(rows)
    if a.grid:
        print_grid(rows)
    if a.grid and a.follow:
        from pal_lab.replay.harness import ALIKE_WITHIN_WALL_S

        print_follow(rows, ALIKE_WITHIN_WALL_S * rows[0]["time_scale"] if rows else 0.0)
    print(f"wall {time.monotonic() - t0:.0f} s; results in {out / 'all.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
