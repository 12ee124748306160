"""Several replays of a trace, taken together: the replay targets per trace, not per run.

One compressed replay is one draw: which of two jobs ending a trace minute apart Slurm or
pald sees first can decide where a 12-GPU job goes, and a GPT-2 job over two leaf switches
runs 7.8x slower (the model of workload-1 seed 0 at 160 jobs puts pal-fit's avg JCT at
0.38-0.90 of stock's over eight phases of Slurm's passes, stock's makespan at 183,000 or
311,000 trace s). A prediction made with what one replay measured still misses that replay
when the two fall on different sides of such a decision. Over several replays of a trace (seeds
and repeats) the draws average out: this module sets the mean of the replays' ratios beside
the mean of their predictions, per trace and arm.

Pure: rows as `palctl replay --json` writes them (one file per replay; a pald arm replayed
beside an earlier stock arm carries that stock row, `benchmarks/slurm_replay.py --stock-from`)
in, per-trace figures out. Where the replays were predicted over a timing grid
(`benchmarks/slurm_replay.py --predict-only --grid K`: the model's expected outcome over the
phases of Slurm's passes and pald's cycle), that prediction is set beside the point one, over
the replays that have it.

The stock arm is a draw too. Where a trace and seed has several stock runs (each pald replay
carries the one it was set beside), each replay is also set over the mean of those runs
(`TraceSummary.pooled_jct`, `pooled_worst_makespan`), and the runs' own spread is given
(`stock_runs`): a pald replay a hair over one stock run's makespan is judged against how far
stock's makespan moves between runs of the same lab.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

PREDICTION_TOLERANCE = 0.05  # the target "predicted ratio within +-0.05 of the replay's"


@dataclass(frozen=True)
class StockRun:
    """One lab run of the stock arm (trace seconds): the same run is carried by every pald replay
    set beside it, so runs are told apart by what they measured."""

    trace: str
    seed: int
    time_scale: float | None
    jobs: int | None
    avg_jct_s: float
    makespan_s: float

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> StockRun:
        jobs = row.get("jobs")
        return cls(row["trace"], int(row.get("seed", 0)), row.get("time_scale"), None if jobs is None else int(jobs),
                   float(row["avg_jct_s"]), float(row["makespan_s"]))


@dataclass(frozen=True)
class ReplayRatio:
    """One replay of one arm against the stock arm of the same trace, seed and lab: avg JCT
    and makespan over stock's, measured and predicted."""

    source: str
    trace: str
    arm: str
    seed: int
    jct: float
    predicted_jct: float
    makespan: float
    predicted_makespan: float
    stock: StockRun
    avg_jct_s: float
    makespan_s: float
    grid_jct: float | None = None  # the ratio of the timing grid's means (predict.timing_grid), if predicted

    @property
    def miss(self) -> float:
        """Predicted minus measured avg JCT ratio."""
        return self.predicted_jct - self.jct

    @property
    def grid_miss(self) -> float | None:
        return None if self.grid_jct is None else self.grid_jct - self.jct


@dataclass(frozen=True)
class TraceSummary:
    """All replays of one trace and arm taken together."""

    trace: str
    arm: str
    replays: tuple[ReplayRatio, ...]
    other_stock: tuple[StockRun, ...] = ()  # stock runs no replay here was set beside (`by_trace`)

    @property
    def jct(self) -> float:
        return _mean(r.jct for r in self.replays)

    @property
    def predicted_jct(self) -> float:
        return _mean(r.predicted_jct for r in self.replays)

    @property
    def miss(self) -> float:
        return self.predicted_jct - self.jct

    @property
    def gridded(self) -> tuple[ReplayRatio, ...]:
        """The replays predicted over a timing grid (older replays' JSON may have none, and
        their work dirs, which a grid needs, are gone)."""
        return tuple(r for r in self.replays if r.grid_jct is not None)

    @property
    def grid_jct(self) -> float | None:
        """The mean of the grid predictions of the replays that have one; None when none has."""
        grids = [r.grid_jct for r in self.gridded if r.grid_jct is not None]
        return _mean(grids) if grids else None

    @property
    def grid_miss(self) -> float | None:
        """`grid_jct` less the mean measured ratio of the same replays (not of all: a grid is
        set beside the draws it predicts)."""
        grid = self.grid_jct
        return None if grid is None else grid - _mean(r.jct for r in self.gridded)

    @property
    def worst_makespan(self) -> float:
        return max(r.makespan for r in self.replays)

    def stock_runs(self, seed: int) -> tuple[StockRun, ...]:
        """The distinct stock runs of `seed`: those the replays were set beside, then the others
        given, in first-seen order."""
        carried = [r.stock for r in self.replays if r.seed == seed]
        return tuple(dict.fromkeys(carried + [s for s in self.other_stock if s.seed == seed]))

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(sorted({r.seed for r in self.replays}))

    def pooled(self, seed: int | None = None) -> list[tuple[float, float]]:
        """Per replay (of `seed`, or all): its avg JCT and makespan over the means of its seed's
        stock runs."""
        return [self._over_stock_mean(r) for r in self.replays if seed is None or r.seed == seed]

    def _over_stock_mean(self, r: ReplayRatio) -> tuple[float, float]:
        runs = self.stock_runs(r.seed)
        return r.avg_jct_s / _mean(s.avg_jct_s for s in runs), r.makespan_s / _mean(s.makespan_s for s in runs)

    @property
    def pooled_jct(self) -> float:
        """The mean over replays of each one's avg JCT over the mean of its seed's stock runs (with
        one stock run per seed this is `jct`)."""
        return _mean(j for j, _ in self.pooled())

    @property
    def pooled_worst_makespan(self) -> float:
        """The worst replay's makespan over the mean of its seed's stock runs' makespans."""
        return max(m for _, m in self.pooled())

    @property
    def pooled_grid_miss(self) -> float | None:
        """`grid_jct` less the pooled ratio of the gridded replays."""
        grid = self.grid_jct
        if grid is None:
            return None
        return grid - _mean(self._over_stock_mean(r)[0] for r in self.gridded)

    @property
    def runs_missed(self) -> int:
        """Replays whose own prediction missed by more than the tolerance."""
        return sum(abs(r.miss) > PREDICTION_TOLERANCE for r in self.replays)


def ratios_of(source: str, rows: Sequence[Mapping[str, Any]]) -> list[ReplayRatio]:
    """The pald arms of one replay's rows, each over the stock row of the same trace and seed
    (rows without a stock row beside them, or without a prediction, give nothing)."""
    out = []
    for r in rows:
        if r["arm"] == "stock":
            continue
        base = next((b for b in rows if b["arm"] == "stock" and b["trace"] == r["trace"]
                     and b.get("seed") == r.get("seed") and b.get("time_scale") == r.get("time_scale")), None)
        if base is None or not r.get("predicted_avg_jct_s") or not base.get("predicted_avg_jct_s"):
            continue
        out.append(ReplayRatio(
            source=source, trace=r["trace"], arm=r["arm"], seed=int(r.get("seed", 0)),
            jct=r["avg_jct_s"] / base["avg_jct_s"],
            predicted_jct=r["predicted_avg_jct_s"] / base["predicted_avg_jct_s"],
            makespan=r["makespan_s"] / base["makespan_s"],
            predicted_makespan=r["predicted_makespan_s"] / base["predicted_makespan_s"],
            stock=StockRun.of(base),
            avg_jct_s=float(r["avg_jct_s"]), makespan_s=float(r["makespan_s"]),
            grid_jct=(r["predicted_avg_jct_s_grid_mean"] / base["predicted_avg_jct_s_grid_mean"]
                      if r.get("predicted_avg_jct_s_grid_mean") and base.get("predicted_avg_jct_s_grid_mean") else None)))
    return out


def stock_runs_of(rows: Sequence[Mapping[str, Any]]) -> list[StockRun]:
    """The stock arms among one replay's rows (a replay whose pald arms are not to be counted can
    still lend its stock run to the pooled figures)."""
    return [StockRun.of(r) for r in rows if r["arm"] == "stock"]


def by_trace(ratios: Iterable[ReplayRatio], other_stock: Iterable[StockRun] = ()) -> list[TraceSummary]:
    """Replays grouped per (trace, arm), in trace order; `other_stock` adds stock runs of the
    same trace, seed, time scale and jobs to each group's pooled figures."""
    groups: dict[tuple[str, str], list[ReplayRatio]] = {}
    for r in ratios:
        groups.setdefault((r.trace, r.arm), []).append(r)
    extra = list(other_stock)
    out = []
    for (trace, arm), rs in sorted(groups.items()):
        shapes = {(r.stock.seed, r.stock.time_scale, r.stock.jobs) for r in rs}
        mine = tuple(s for s in extra if s.trace == trace and (s.seed, s.time_scale, s.jobs) in shapes)
        out.append(TraceSummary(trace, arm, tuple(rs), mine))
    return out


def _mean(xs: Iterable[float]) -> float:
    vals = list(xs)
    return sum(vals) / len(vals) if vals else float("nan")
