"""Reports: a terminal table, JSON, and PNG plots (JCT CDF, utilisation, normalised bars)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from pal_slurm.sim.metrics import RunResult, geomean, mean_ci95

TABLE_COLUMNS = (
    ("trace", "trace", "{}"),
    ("policy", "policy", "{}"),
    ("avg JCT h", "avg_jct_s", "{:.2f}"),
    ("geo JCT h", "geomean_jct_s", "{:.2f}"),
    ("p99 JCT h", "p99_jct_s", "{:.2f}"),
    ("makespan h", "makespan_s", "{:.1f}"),
    ("util", "utilization", "{:.3f}"),
    ("useful", "useful_utilization", "{:.3f}"),
    ("queue h", "avg_queue_delay_s", "{:.2f}"),
    ("JCT/LB", "jct_lb_ratio", "{:.2f}"),
)
HOURS = {"avg_jct_s", "geomean_jct_s", "p99_jct_s", "makespan_s", "avg_queue_delay_s"}


def aggregate(summaries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean over seeds per (trace, policy), with 95% half-widths as `<key>_ci95`."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for s in summaries:
        groups[(s["trace"], s["policy"])].append(s)
    out = []
    for (trace, policy), rows in groups.items():
        agg = {"trace": trace, "policy": policy, "seeds": len(rows)}
        for _label, key, _fmt in TABLE_COLUMNS[2:]:
            mean, hw = mean_ci95(r[key] for r in rows)
            agg[key] = mean
            agg[f"{key}_ci95"] = hw
        out.append(agg)
    return out


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    multi = any(r.get("seeds", 1) > 1 for r in rows)
    header = [c[0] for c in TABLE_COLUMNS]
    lines = []
    for r in rows:
        cells = []
        for _label, key, fmt in TABLE_COLUMNS:
            v = r[key]
            if key in HOURS:
                v = v / 3600.0
            cell = fmt.format(v)
            if multi and f"{key}_ci95" in r and r.get("seeds", 1) > 1:
                hw = r[f"{key}_ci95"] / (3600.0 if key in HOURS else 1.0)
                cell += "±" + fmt.format(hw).lstrip()
            cells.append(cell)
        lines.append(cells)
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]

    def fmt_line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [fmt_line(header), fmt_line(["-" * w for w in widths])]
    out += [fmt_line(l) for l in lines]
    return "\n".join(out)


def normalised_gains(rows: Sequence[dict[str, Any]], baseline: str, key: str = "avg_jct_s") -> dict[str, float]:
    """Geomean over traces of each policy's `key` relative to the baseline's."""
    by_trace: dict[str, dict[str, float]] = defaultdict(dict)
    for r in rows:
        by_trace[r["trace"]][r["policy"]] = r[key]
    ratios: dict[str, list[float]] = defaultdict(list)
    for per_policy in by_trace.values():
        base = per_policy.get(baseline)
        if not base:
            continue
        for p, v in per_policy.items():
            ratios[p].append(v / base)
    return {p: geomean(v) for p, v in ratios.items()}


def json_document(results: Sequence[RunResult], meta: dict[str, Any]) -> dict[str, Any]:
    """What `palctl simulate --json` prints: meta, per-run summaries, aggregates (NaN as null)."""
    summaries = [r.summary() for r in results]
    doc: dict[str, Any] = _finite({"meta": meta, "results": summaries, "aggregate": aggregate(summaries)})
    return doc


def write_json(path: str | Path, results: Sequence[RunResult], meta: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(json_document(results, meta), indent=1, allow_nan=False) + "\n")


def _finite(v: Any) -> Any:
    """NaN and infinities as null: json.dumps would write the non-JSON tokens NaN/Infinity."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def write_plots(directory: str | Path, results: Sequence[RunResult], baseline: str) -> list[Path]:
    """JCT CDF and utilisation per trace, and a bar chart normalised to the baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    traces = sorted({r.trace for r in results})
    first_seed: dict[tuple[str, str], RunResult] = {}
    for r in results:
        first_seed.setdefault((r.trace, r.policy), r)
    for trace in traces:
        runs = [r for (t, _p), r in first_seed.items() if t == trace]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        for r in runs:
            jct = np.sort([j.jct / 3600.0 for j in r.jobs])
            ax1.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=r.policy)
            if r.util_series:
                ts = [t / 3600.0 for t, _ in r.util_series]
                us = [b / r.num_gpus for _, b in r.util_series]
                ax2.step(ts, us, where="post", label=r.policy, linewidth=0.8)
        ax1.set_xscale("log")
        ax1.set_xlabel("JCT (hours, log)")
        ax1.set_ylabel("fraction of jobs")
        ax1.set_title(f"{trace}: JCT CDF")
        ax1.legend(fontsize=7)
        ax2.set_xlabel("time (hours)")
        ax2.set_ylabel("GPUs allocated (fraction)")
        ax2.set_title(f"{trace}: utilisation")
        fig.tight_layout()
        p = d / f"{trace}-jct-util.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)
    rows = aggregate([r.summary() for r in results])
    policies = sorted({r["policy"] for r in rows}, key=lambda p: (p != baseline, p))
    if baseline in policies:
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(traces) + 3), 4))
        width = 0.8 / max(1, len(policies))
        for i, p in enumerate(policies):
            vals = []
            for t in traces:
                base = next((r["avg_jct_s"] for r in rows if r["trace"] == t and r["policy"] == baseline), None)
                mine = next((r["avg_jct_s"] for r in rows if r["trace"] == t and r["policy"] == p), None)
                vals.append(mine / base if base and mine else float("nan"))
            ax.bar(np.arange(len(traces)) + i * width, vals, width, label=p)
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xticks(np.arange(len(traces)) + 0.4 - width / 2)
        ax.set_xticklabels(traces, rotation=20)
        ax.set_ylabel(f"avg JCT / {baseline}")
        ax.set_title("average JCT normalised to the baseline")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = d / "avg-jct-normalised.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)
    return written
