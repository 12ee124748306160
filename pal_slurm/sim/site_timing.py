"""A site's workload at its own timing: the model of stock Slurm and the candidates, beside the bound.

`palctl whatif`'s first answer. The jobs arrive at their recorded submit times (accounting
seconds, no compression) and every placement starts jobs at Slurm's backfill passes only
(`sim.stock_slurm.StockSlurm`: a pass every `bf_interval`, testing the first `bf_max_job_test`
waiting jobs, backfill judged on the jobs' recorded time limits): `slurm`, the model of stock
Slurm, and each candidate with its own placement on the same passes (what pald's pinned jobs
wait for on a site).

What the model cannot know is when slurmctld's passes fall against the first submission: the
draws are that phase, at the middles of `draws` equal parts of one `bf_interval`, and the
spread of the outcome over them is reported beside its mean. Each draw's ratio to stock is
paired (the same phase for both).

The bound is what the workload admits under any placement: every job on its best GPUs with no
wait (`JobOutcome.lower_bound_s`) gives the average JCT's; the makespan's is the later of the
last such finish and the jobs' best-case GPU-seconds spread over every GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from pal_slurm.policy import placement
from pal_slurm.policy.base import PlacementPolicy
from pal_slurm.policy.netaware import NetAwarePlacement
from pal_slurm.sim.event import simulator_for
from pal_slurm.sim.metrics import RunResult
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.stock_slurm import SLURM_WILL_RUN_WINDOW_S, StockSlurm
from pal_slurm.sim.trace import Trace

STOCK = "slurm"  # the registered placement that models stock Slurm's choice


@dataclass(frozen=True)
class Spread:
    """A figure over the timing draws: its mean, least and greatest."""

    mean: float
    lo: float
    hi: float

    @staticmethod
    def of(values: Sequence[float]) -> "Spread":
        return Spread(sum(values) / len(values), min(values), max(values))


@dataclass(frozen=True)
class TimingRow:
    """One placement over the draws; `ratio`: its avg JCT over stock's, draw by draw."""

    policy: str
    avg_jct_s: Spread
    makespan_s: Spread
    avg_wait_s: Spread
    jct_over_bound: Spread  # the jobs' mean JCT / their own bound
    ratio: Spread


@dataclass(frozen=True)
class Bound:
    avg_jct_s: float
    makespan_s: float


@dataclass(frozen=True)
class SiteTimingReport:
    pass_period_s: float
    queue_depth: int | None
    phases_s: tuple[float, ...]
    bound: Bound
    rows: tuple[TimingRow, ...]


def pass_phases(period_s: float, draws: int) -> list[float]:
    """The draws' phases of the passes against the first submission: the middles of `draws`
    equal parts of one period (one draw: half a period, the expected phase)."""
    return [period_s * (i + 0.5) / draws for i in range(draws)]


def _placement(name: str) -> PlacementPolicy:
    pol = placement(name)
    if name == STOCK and isinstance(pol, NetAwarePlacement):
        return replace(pol, will_run_window_s=SLURM_WILL_RUN_WINDOW_S)
    return pol


def run_at_site_timing(trace: Trace, candidates: Sequence[str], spec: RunSpec, pass_period_s: float,
                       queue_depth: int | None, draws: int,
                       progress: Callable[[float], None] | None = None) -> list[list[RunResult]]:
    """`runs[draw]`: stock's run, then each candidate's, at that draw's phase of the passes."""
    names = [STOCK] + [c for c in candidates if c != STOCK]
    limits = {j.job_id: j.time_limit_s for j in trace.jobs if j.time_limit_s}
    phases = pass_phases(pass_period_s, draws)
    out: list[list[RunResult]] = []
    for d, phase in enumerate(phases):
        row = []
        for k, name in enumerate(names):
            pol = _placement(name)
            decider = StockSlurm(pol, pass_period_s=pass_period_s, limits_s=limits, pass_offset_s=phase,
                                 queue_depth=queue_depth)
            row.append(replace(simulator_for(spec, 0).run(trace, pol, decider=decider), policy=name))
            if progress:
                progress((d * len(names) + k + 1) / (len(phases) * len(names)))
        out.append(row)
    return out


def bound_of(run: RunResult) -> Bound:
    """The bound of the workload a run ran (every job alone on its best GPUs, from its submit)."""
    jobs = run.jobs
    first = min(j.submit for j in jobs)
    last_alone = max(j.submit + j.lower_bound_s for j in jobs) - first
    work = sum(j.num_gpus * j.lower_bound_s for j in jobs) / run.num_gpus
    return Bound(sum(j.lower_bound_s for j in jobs) / len(jobs), max(last_alone, work))


def report(runs: Sequence[Sequence[RunResult]], pass_period_s: float, queue_depth: int | None) -> SiteTimingReport:
    """`runs` as `run_at_site_timing` gives them -> the rows (stock first) and the bound."""
    by_policy: dict[str, list[dict[str, float]]] = {}
    ratios: dict[str, list[float]] = {}
    for draw in runs:
        stock = draw[0].summary()
        for r in draw:
            s = r.summary()
            by_policy.setdefault(r.policy, []).append(s)
            ratios.setdefault(r.policy, []).append(s["avg_jct_s"] / stock["avg_jct_s"])
    rows = tuple(TimingRow(policy, Spread.of([s["avg_jct_s"] for s in ss]), Spread.of([s["makespan_s"] for s in ss]),
                           Spread.of([s["avg_queue_delay_s"] for s in ss]), Spread.of([s["jct_lb_ratio"] for s in ss]),
                           Spread.of(ratios[policy]))
                 for policy, ss in by_policy.items())
    return SiteTimingReport(pass_period_s, queue_depth, tuple(pass_phases(pass_period_s, len(runs))),
                            bound_of(runs[0][0]), rows)


def _spread(v: Spread, scale: float, fmt: str) -> str:
    text = fmt.format(v.mean / scale)
    if v.hi - v.lo <= 1e-9 * max(1.0, abs(v.mean)):
        return text
    return f"{text} ({fmt.format(v.lo / scale)}-{fmt.format(v.hi / scale)})"


def format_site_timing(rep: SiteTimingReport, header: Sequence[str]) -> str:
    """The page's section: what was assumed, a table (mean over the draws, least-greatest in
    brackets when they differ; hours, or minutes when stock's average JCT is under an hour),
    the bound's row, one sentence per candidate."""
    scale, unit = (3600.0, "h") if rep.rows[0].avg_jct_s.mean >= 3600.0 else (60.0, "min")
    cols = ("policy", f"avg JCT {unit}", f"makespan {unit}", f"mean wait {unit}", "JCT / own bound", f"avg JCT / {STOCK}")
    table = [("bound", f"{rep.bound.avg_jct_s / scale:.3f}", f"{rep.bound.makespan_s / scale:.2f}", "0.000", "1.000", "-")]
    for r in rep.rows:
        table.append((r.policy, _spread(r.avg_jct_s, scale, "{:.3f}"), _spread(r.makespan_s, scale, "{:.2f}"),
                      _spread(r.avg_wait_s, scale, "{:.3f}"), _spread(r.jct_over_bound, 1, "{:.3f}"),
                      _spread(r.ratio, 1, "{:.3f}")))
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines = list(header) + ["", line(cols), "  ".join("-" * w for w in widths)] + [line(t) for t in table] + [""]
    stock = rep.rows[0]
    for r in rep.rows[1:]:
        gain, lo, hi = (1 - r.ratio.mean) * 100, (1 - r.ratio.hi) * 100, (1 - r.ratio.lo) * 100
        spread = f"{lo:+.1f}% to {hi:+.1f}%" if gain >= 0 else f"{-hi:.1f}% to {-lo:.1f}% longer"
        lines.append(f"{r.policy}: {abs(gain):.1f}% {'shorter' if gain >= 0 else 'LONGER'} average JCT than the {STOCK} "
                     f"model at this site's timing (over {len(rep.phases_s)} timing draw(s): {spread})")
    room = (1 - rep.bound.avg_jct_s / stock.avg_jct_s.mean) * 100 if stock.avg_jct_s.mean > 0 else 0.0
    lines.append(f"bound: no placement can bring the average JCT more than {room:.1f}% below the {STOCK} model's "
                 f"(every job on its best GPUs with no wait)")
    return "\n".join(lines)


def as_json(rep: SiteTimingReport) -> dict[str, object]:
    def spread(v: Spread) -> dict[str, float]:
        return {"mean": v.mean, "min": v.lo, "max": v.hi}

    return {"stock": STOCK, "pass_period_s": rep.pass_period_s, "queue_depth": rep.queue_depth,
            "draws": len(rep.phases_s), "pass_phases_s": list(rep.phases_s),
            "bound": {"avg_jct_s": rep.bound.avg_jct_s, "makespan_s": rep.bound.makespan_s},
            "rows": [{"policy": r.policy, "avg_jct_s": spread(r.avg_jct_s), "makespan_s": spread(r.makespan_s),
                      "avg_wait_s": spread(r.avg_wait_s), "jct_over_bound": spread(r.jct_over_bound),
                      "ratio": spread(r.ratio)} for r in rep.rows]}
