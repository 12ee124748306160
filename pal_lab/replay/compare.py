"""Where a replayed arm and its prediction part ways: the jobs, in submission order, that the
lab and the simulator started at clearly different times or on different nodes.

A replay's avg JCT ratio can hang on one decision (a reservation tie, a job that came a second
after another's wait ran out); the ratio alone does not say which. The first job that parts is
where to look: every job after it may differ only because of it. Pure: the lab's per-job
results (`metrics.JobResult`, from the payloads' records) and the model's run
(`sim.metrics.RunResult`, each outcome with the GPUs it ended on) in, the partings out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pal_slurm.model import ClusterView
from pal_lab.replay.metrics import JobResult
from pal_lab.replay.plan import ReplayPlan
from pal_slurm.sim.metrics import RunResult


@dataclass(frozen=True)
class Placed:
    """One job's run in one of the two: start and end (trace s after the first submission) and
    the nodes it ran on (names as the lab's)."""

    start_s: float
    end_s: float
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Parting:
    """A job the lab and the model ran differently."""

    name: str
    gpus: int
    submit_s: float
    lab: Placed
    model: Placed
    model_submit_s: float | None = None  # the model's submission (trace s); None: the lab's

    @property
    def start_gap_s(self) -> float:
        """The lab's start less the model's (positive: the lab started it later)."""
        return self.lab.start_s - self.model.start_s

    @property
    def jct_gap_s(self) -> float:
        """The lab's JCT less the model's (positive: the job took longer in the lab)."""
        model_submit = self.submit_s if self.model_submit_s is None else self.model_submit_s
        return (self.lab.end_s - self.submit_s) - (self.model.end_s - model_submit)

    def describe(self, unit_s: float = 3600.0) -> str:
        def where(p: Placed) -> str:
            return f"{p.start_s / unit_s:.2f}-{p.end_s / unit_s:.2f} on {','.join(p.nodes)}"

        return (f"{self.name} ({self.gpus} GPUs, came {self.submit_s / unit_s:.2f}): lab {where(self.lab)}; "
                f"model {where(self.model)}")


def partings(plan: ReplayPlan, lab: Sequence[JobResult], model: RunResult, cluster: ClusterView,
             tolerance_s: float) -> list[Parting]:
    """The jobs of `plan`, in submission order, whose start in the lab and in the model differ
    by more than `tolerance_s` (trace s; a replay's own jitter is a pass or two: Slurm's
    bf_interval and pald's cycle, times the scale) or that ran on other nodes. `cluster`: the
    lab's (the model's GPU ids index it). A job missing from either side is left out."""
    return [p for p in _both(plan, lab, model, cluster)
            if abs(p.start_gap_s) > tolerance_s or p.lab.nodes != p.model.nodes]


def jct_gaps(plan: ReplayPlan, lab: Sequence[JobResult], model: RunResult, cluster: ClusterView) -> list[Parting]:
    """Every job run on both sides, the largest gap between the lab's JCT and the model's first
    (`Parting.jct_gap_s`): where a missed avg JCT comes from. One job can be most of it: stock's
    6-GPU GPT-2 job that the model's Slurm started over two leaf switches ran 30 trace hours
    there (7.8x its ideal), 3.9 in the lab on one leaf (workload-4 seed 0 at 160 jobs: 23 of
    the 53 hours the lab's jobs spent less than the model's)."""
    return sorted(_both(plan, lab, model, cluster), key=lambda p: -abs(p.jct_gap_s))


def _both(plan: ReplayPlan, lab: Sequence[JobResult], model: RunResult, cluster: ClusterView) -> list[Parting]:
    """The jobs of `plan` on both sides, in submission order, each as the lab and the model ran it."""
    by_name = {r.name: r for r in lab}
    by_id = {o.job_id: o for o in model.jobs}
    out = []
    for job in sorted(plan.jobs, key=lambda j: (j.submit_s, j.trace_job.job_id)):
        r, o = by_name.get(job.name), by_id.get(job.trace_job.job_id)
        if r is None or o is None:
            continue
        model_nodes = tuple(sorted({cluster.gpus[g].node for g in o.gpus}))
        out.append(Parting(job.name, r.gpus, r.submit_s, Placed(r.start_s, r.end_s, tuple(sorted(r.placement))),
                           Placed(o.first_start, o.finish, model_nodes), model_submit_s=o.submit))
    return out
