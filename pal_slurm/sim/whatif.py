"""`palctl whatif`: PAL and pal-net against stock-like placement on a site's own workload and GPUs.

The question an administrator brings: "what would PAL gain on MY GPUs with MY jobs?". The
answer is a paired comparison: every policy runs the same workload on the same cluster, and the
gain is the ratio of average JCTs to a baseline's (firstfit is what stock Slurm does: the lowest
free GPUs of the first nodes that fit).

Uncertainty comes from the workload: the weeks of accounting are one sample of what the site
runs. Sample 0 is the workload as recorded; samples 1..N-1 are bootstrap resamples (the same
number of jobs drawn with replacement, each keeping its submit time). The 95% confidence
interval of a ratio is Student's t over the samples' paired ratios.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from pal_slurm.sim.metrics import RunResult, mean_ci95
from pal_slurm.sim.trace import Trace

DEFAULT_POLICIES = ("pal", "pal-net", "pal-fit")
DEFAULT_BASELINES = ("firstfit", "packed-sticky")


def resample(trace: Trace, sample: int) -> Trace:
    """Sample 0: the trace itself; others: a bootstrap resample with the same number of jobs."""
    if sample == 0:
        return trace
    rng = random.Random(sample)
    picks = sorted((rng.randrange(len(trace.jobs)) for _ in trace.jobs), key=lambda i: (trace.jobs[i].submit_time, i))
    jobs = tuple(replace(trace.jobs[i], job_id=k) for k, i in enumerate(picks))
    return Trace(f"{trace.name}", jobs, ())


@dataclass(frozen=True)
class PolicyRow:
    """One policy over all samples: means and 95% half-widths; `ratio` is vs the baseline."""

    policy: str
    samples: int
    avg_jct_s: tuple[float, float]
    p99_jct_s: tuple[float, float]
    makespan_s: tuple[float, float]
    avg_queue_s: tuple[float, float]
    utilization: tuple[float, float]
    ratio: tuple[float, float] | None  # avg JCT / baseline's, paired per sample


def compare(runs: Sequence[Sequence[RunResult]], baseline: str) -> list[PolicyRow]:
    """`runs[sample]` = that sample's results (one per policy) -> one row per policy."""
    by_policy: dict[str, list[dict[str, Any]]] = {}
    ratios: dict[str, list[float]] = {}
    for sample in runs:
        summaries = {r.policy: r.summary() for r in sample}
        base = summaries.get(baseline)
        for policy, s in summaries.items():
            by_policy.setdefault(policy, []).append(s)
            if base and base["avg_jct_s"] > 0:
                ratios.setdefault(policy, []).append(s["avg_jct_s"] / base["avg_jct_s"])
    rows = []
    for policy, ss in by_policy.items():
        rows.append(PolicyRow(
            policy=policy,
            samples=len(ss),
            avg_jct_s=mean_ci95(s["avg_jct_s"] for s in ss),
            p99_jct_s=mean_ci95(s["p99_jct_s"] for s in ss),
            makespan_s=mean_ci95(s["makespan_s"] for s in ss),
            avg_queue_s=mean_ci95(s["avg_queue_delay_s"] for s in ss),
            utilization=mean_ci95(s["utilization"] for s in ss),
            ratio=mean_ci95(ratios[policy]) if policy in ratios else None,
        ))
    return rows


def _pm(v: tuple[float, float], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    mean, hw = v[0] / scale, v[1] / scale
    return fmt.format(mean) + ("" if hw == 0 else "±" + fmt.format(hw))


def format_page(rows: Sequence[PolicyRow], baseline: str, header: Sequence[str]) -> str:
    """The terminal page: what was simulated, a table, and one sentence per candidate policy."""
    lines = list(header) + [""]
    cols = ("policy", "avg JCT h", "p99 JCT h", "makespan h", "queue h", "util", f"avg JCT / {baseline} (95% CI)")
    table = []
    for r in rows:
        ratio = "-" if r.ratio is None else f"{r.ratio[0]:.3f} ({r.ratio[0] - r.ratio[1]:.3f}-{r.ratio[0] + r.ratio[1]:.3f})"
        table.append((r.policy, _pm(r.avg_jct_s, 3600), _pm(r.p99_jct_s, 3600), _pm(r.makespan_s, 3600, "{:.1f}"),
                      _pm(r.avg_queue_s, 3600), _pm(r.utilization, 1, "{:.3f}"), ratio))
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cols, widths))))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths))) for t in table]
    lines.append("")
    for r in rows:
        if r.policy == baseline or r.ratio is None:
            continue
        mean, hw = r.ratio
        lo, hi = (1 - (mean + hw)) * 100, (1 - (mean - hw)) * 100
        if hi < 0:
            verdict = f"{-(1 - mean) * 100:.1f}% LONGER average JCT than {baseline} (95% CI {-hi:.1f}% to {-lo:.1f}%)"
        elif lo <= 0:
            verdict = f"no gain that the samples can tell apart from none ({(1 - mean) * 100:+.1f}%, 95% CI {lo:+.1f}% to {hi:+.1f}%)"
        else:
            verdict = f"{(1 - mean) * 100:.1f}% shorter average JCT than {baseline} (95% CI {lo:.1f}% to {hi:.1f}%)"
        lines.append(f"{r.policy}: {verdict}")
    return "\n".join(lines)


def write_plot(path: str | Path, rows: Sequence[PolicyRow], first_sample: Sequence[RunResult], baseline: str,
               title: str) -> Path:
    """Left: avg JCT relative to the baseline with 95% CIs; right: the JCT CDF of the recorded workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    shown = [r for r in rows if r.ratio is not None]
    ratios = [r.ratio for r in shown if r.ratio is not None]
    ax1.bar(range(len(shown)), [mean for mean, _hw in ratios], yerr=[hw for _mean, hw in ratios], capsize=4,
            color=["#999999" if r.policy == baseline else "#1f77b4" for r in shown])
    ax1.axhline(1.0, color="black", linewidth=0.7)
    ax1.set_xticks(range(len(shown)))
    ax1.set_xticklabels([r.policy for r in shown], rotation=15)
    ax1.set_ylabel(f"average JCT / {baseline}")
    ax1.set_title("lower is better (bars: 95% CI over workload samples)", fontsize=9)
    for r in first_sample:
        jct = np.sort([j.jct / 3600.0 for j in r.jobs])
        ax2.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=r.policy)
    ax2.set_xscale("log")
    ax2.set_xlabel("job completion time (hours, log)")
    ax2.set_ylabel("fraction of jobs")
    ax2.set_title("JCT distribution, the workload as recorded", fontsize=9)
    ax2.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
