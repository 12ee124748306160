"""`palctl trial report`: over a shadow period, the GPUs Slurm gave each job against those PAL
would have given it, in the current ranking's terms. Pure: decisions and a ranking in, a report
out (the CLI reads the store and prints).

The records it joins, by the hook's request id (model/modes.py):
- ``shadow:<reason>`` (job ``req:<id>``): what pald would have answered at submission (place
  with its GPUs, defer, pass);
- ``shadow_started:req=<id>;partition=<p>`` (the Slurm job id): the GPUs Slurm allocated;
- ``shadow_ended:req=<id>;run_s=<s>``: how long it ran.

A job runs at the pace of its slowest GPU, so a job's slowdown is the largest ranking score
(median slowness against the class median: 1.0 is the median GPU) among its GPUs; a GPU the
ranking lacks counts as 1.0. The implied run-time change is the job's run time times
(PAL's slowdown / Slurm's - 1); jobs PAL would have deferred have no PAL GPUs to compare (how
long they would have waited is not modelled: the shadow keeps no queue)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pal_slurm.model import DecisionKind
from pal_slurm.model.modes import PAL_ENDED, PAL_STARTED, SHADOW_ENDED, SHADOW_PREFIX, SHADOW_STARTED
from pal_slurm.ranking.snapshot import RankingEntry
from pal_slurm.store.records import DecisionRecord

Gpus = Mapping[str, Sequence[int]]  # node -> GPU slots


@dataclass(frozen=True)
class JobComparison:
    request: str  # the hook's request id
    job_id: str  # Slurm's
    perf_class: str
    partition: str
    gpus: int
    slurm_slowdown: float
    pal_slowdown: float
    slurm_nodes: int
    pal_nodes: int
    run_s: float | None  # None: not seen ending yet
    slurm_leaves: int | None = None  # leaf switches spanned (None: no topology given)
    pal_leaves: int | None = None

    @property
    def ratio(self) -> float:
        """PAL's slowdown over Slurm's: < 1 means PAL's GPUs would have run it faster."""
        return self.pal_slowdown / self.slurm_slowdown

    @property
    def saved_s(self) -> float | None:
        """Run time PAL's GPUs would have saved (negative: cost)."""
        return None if self.run_s is None else self.run_s * (1.0 - self.ratio)

    @property
    def worse(self) -> bool:
        more_leaves = self.pal_leaves is not None and self.slurm_leaves is not None and self.pal_leaves > self.slurm_leaves
        return self.pal_slowdown > self.slurm_slowdown * (1 + 1e-9) or self.pal_nodes > self.slurm_nodes or more_leaves


@dataclass(frozen=True)
class Summary:
    jobs: int  # compared jobs
    gpus: int
    weighted_ratio: float  # GPU-weighted mean of PAL's slowdown / Slurm's
    ratio_ci: tuple[float, float]  # 95% bootstrap interval of it
    run_gpu_h: float  # GPU hours the jobs that ended ran under Slurm
    saved_gpu_h: float  # GPU hours PAL's GPUs would have saved of it
    worse: int


@dataclass(frozen=True)
class RunSummary:
    """The jobs that ran under one mode: in `shadow` partitions where Slurm put them, in `on`
    ones where PAL did (the `pal_started:` records): how fast their GPUs were in the ranking's
    terms (the median GPU is 1.0) and how long they waited to start."""

    jobs: int
    gpus: int
    gpu_slowdown: float  # GPU-weighted mean of each job's slowdown (its slowest GPU's score)
    mean_wait_s: float | None  # submission to start (None: no wait recorded)
    run_gpu_h: float  # of the jobs seen ending


@dataclass(frozen=True)
class RanJob:
    """One job that ran under one mode: where (the GPUs Slurm gave it in `shadow`, PAL in `on`),
    its slowdown there in the ranking's terms (its slowest GPU's score) and how long it ran."""

    request: str  # the hook's request id
    job_id: str  # Slurm's
    partition: str
    perf_class: str
    gpus: int
    slowdown: float
    wait_s: float | None  # submission to start (None: not recorded)
    run_s: float | None  # None: not seen ending yet


@dataclass
class TrialReport:
    shadowed: int = 0  # submissions pald answered in shadow
    would: dict[str, int] = field(default_factory=dict)  # decision kind -> count
    started: int = 0  # of the shadowed submissions, those seen running
    compared: list[JobComparison] = field(default_factory=list)
    overall: Summary | None = None
    by_class: dict[str, Summary] = field(default_factory=dict)
    unranked_gpus: int = 0  # GPUs of compared jobs the ranking lacks (counted as 1.0)
    ran: dict[str, RunSummary] = field(default_factory=dict)  # "shadow" (Slurm's) / "on" (PAL's) -> summary
    ran_jobs: dict[str, list[RanJob]] = field(default_factory=dict)  # the same modes -> each job, oldest start first


def _fields(reason: str, prefix: str) -> dict[str, str]:
    body = reason.removeprefix(prefix)
    return dict(item.split("=", 1) for item in body.split(";") if "=" in item)


def job_slowdown(gpus: Gpus, perf_class: str, scores: Mapping[tuple[str, int, str], float]) -> tuple[float, int]:
    """(the job's slowdown: its slowest GPU's score, GPUs the ranking lacks)."""
    found = [scores.get((node, slot, perf_class)) for node, slots in gpus.items() for slot in slots]
    known = [s for s in found if s is not None]
    missing = len(found) - len(known)
    return max(known + [1.0] * missing, default=1.0), missing


def summarise(jobs: Sequence[JobComparison], seed: int = 0, draws: int = 2000) -> Summary | None:
    if not jobs:
        return None
    ratio = np.array([j.ratio for j in jobs])
    weight = np.array([j.gpus for j in jobs], dtype=float)
    mean = float(np.average(ratio, weights=weight))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(jobs), size=(draws, len(jobs)))
    boot = (ratio[picks] * weight[picks]).sum(axis=1) / weight[picks].sum(axis=1)
    low, high = (float(x) for x in np.quantile(boot, [0.025, 0.975]))
    ended = [j for j in jobs if j.run_s is not None]
    return Summary(jobs=len(jobs), gpus=int(weight.sum()), weighted_ratio=mean, ratio_ci=(low, high),
                   run_gpu_h=sum(j.run_s * j.gpus for j in ended if j.run_s is not None) / 3600,
                   saved_gpu_h=sum(j.saved_s * j.gpus for j in ended if j.saved_s is not None) / 3600,
                   worse=sum(j.worse for j in jobs))


def build(decisions: Iterable[DecisionRecord], ranking: Iterable[RankingEntry], partition: str | None = None,
          default_class: str = "A", racks: Mapping[str, str] | None = None) -> TrialReport:
    """The report over `decisions` (any order; the store's shadow records) in `ranking`'s terms;
    `partition`: only jobs Slurm ran there; `racks`: node -> leaf switch (Slurm's
    topology.conf), for the leaves each job spanned (a node it lacks is a leaf of its own)."""

    def leaves(gpus: Gpus) -> int | None:
        return None if racks is None else len({racks.get(node, node) for node in gpus})

    scores = {(e.node, e.slot, e.perf_class): e.score for e in ranking}
    records = sorted(decisions, key=lambda d: d.created_at)
    would: dict[str, DecisionRecord] = {}
    for d in records:
        if d.reason.startswith(SHADOW_PREFIX) and d.job_id.startswith("req:"):
            would.setdefault(d.job_id.removeprefix("req:"), d)
    shadow = runs(records, SHADOW_STARTED, SHADOW_ENDED, partition)
    started, run_s = shadow.started, shadow.run_s
    partition_of = {rid: f.get("partition", "") for rid, f in shadow.fields.items()}
    if partition is not None:  # a job's partition is known once it ran
        would = {r: d for r, d in would.items() if r in started}
    report = TrialReport(shadowed=len(would), started=len(started.keys() & would.keys()))
    for d in would.values():
        report.would[d.kind.value] = report.would.get(d.kind.value, 0) + 1
    for rid, w in sorted(would.items()):
        s = started.get(rid)
        if s is None or w.kind is not DecisionKind.PLACE or not w.nodes or not s.nodes:
            continue
        cls = w.perf_class or default_class
        slurm_sd, missing_slurm = job_slowdown(s.nodes, cls, scores)
        pal_sd, missing_pal = job_slowdown(w.nodes, cls, scores)
        report.unranked_gpus += missing_slurm + missing_pal
        report.compared.append(JobComparison(
            request=rid, job_id=s.job_id, perf_class=cls, partition=partition_of.get(rid, ""),
            gpus=sum(len(v) for v in s.nodes.values()), slurm_slowdown=slurm_sd, pal_slowdown=pal_sd,
            slurm_nodes=len(s.nodes), pal_nodes=len(w.nodes), run_s=run_s.get(rid),
            slurm_leaves=leaves(s.nodes), pal_leaves=leaves(w.nodes)))
    # a job's class as pald decided it: at submission (`req:` records) or in its cycle (job id)
    classes = {d.job_id: d.perf_class for d in records if d.perf_class}
    for mode, (start_prefix, end_prefix) in (("shadow", (SHADOW_STARTED, SHADOW_ENDED)),
                                             ("on", (PAL_STARTED, PAL_ENDED))):
        jobs = ran_jobs(records, start_prefix, end_prefix, scores, partition, default_class, classes)
        if jobs:
            report.ran_jobs[mode] = jobs
            report.ran[mode] = run_summary(jobs)
    report.overall = summarise(report.compared)
    for cls in sorted({j.perf_class for j in report.compared}):
        summary = summarise([j for j in report.compared if j.perf_class == cls])
        if summary is not None:
            report.by_class[cls] = summary
    return report


@dataclass(frozen=True)
class Runs:
    """One mode's runs, by request id: the first `*_started:` record of each (with its fields:
    partition, wait_s) and the run time of its `*_ended:` one."""

    started: dict[str, DecisionRecord]
    fields: dict[str, dict[str, str]]
    run_s: dict[str, float]


def runs(records: Sequence[DecisionRecord], start_prefix: str, end_prefix: str, partition: str | None) -> Runs:
    """`records` oldest first; `partition`: only the jobs that ran there."""
    out = Runs({}, {}, {})
    for d in records:
        if d.reason.startswith(start_prefix):
            f = _fields(d.reason, start_prefix)
            if "req" in f and f["req"] not in out.started and d.nodes:
                if partition is None or partition in f.get("partition", "").split(","):
                    out.started[f["req"]] = d
                    out.fields[f["req"]] = f
        elif d.reason.startswith(end_prefix):
            f = _fields(d.reason, end_prefix)
            try:
                out.run_s[f["req"]] = float(f["run_s"])
            except (KeyError, ValueError):
                continue
    return out


def ran_jobs(records: Sequence[DecisionRecord], start_prefix: str, end_prefix: str,
             scores: Mapping[tuple[str, int, str], float], partition: str | None, default_class: str,
             classes: Mapping[str, str]) -> list[RanJob]:
    """The jobs of one mode's runs, with their slowdowns, waits and run times. A job's class:
    `classes` by request (`req:<id>`, what pald decided at submission), else by Slurm job id
    (what its cycle decided), else the default class."""
    ran = runs(records, start_prefix, end_prefix, partition)
    out = []
    for rid, d in ran.started.items():
        f = ran.fields[rid]
        try:
            wait_s: float | None = float(f["wait_s"])
        except (KeyError, ValueError):
            wait_s = None
        cls = classes.get(f"req:{rid}") or classes.get(str(d.job_id)) or default_class
        out.append(RanJob(request=rid, job_id=d.job_id, partition=f.get("partition", ""), perf_class=cls,
                          gpus=sum(len(v) for v in d.nodes.values()), slowdown=job_slowdown(d.nodes, cls, scores)[0],
                          wait_s=wait_s, run_s=ran.run_s.get(rid)))
    return out


def run_summary(jobs: Sequence[RanJob]) -> RunSummary:
    """One mode's jobs (at least one) summed up: GPU-weighted slowdown, mean wait, GPU hours run."""
    weights = [j.gpus for j in jobs]
    waits = [j.wait_s for j in jobs if j.wait_s is not None]
    return RunSummary(jobs=len(jobs), gpus=sum(weights),
                      gpu_slowdown=float(np.average([j.slowdown for j in jobs], weights=weights)) if sum(weights) else 1.0,
                      mean_wait_s=sum(waits) / len(waits) if waits else None,
                      run_gpu_h=sum(j.run_s * j.gpus for j in jobs if j.run_s is not None) / 3600)
