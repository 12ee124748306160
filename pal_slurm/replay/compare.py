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
from pal_slurm.replay.metrics import JobResult
from pal_slurm.replay.plan import ReplayPlan
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

    @property
    def start_gap_s(self) -> float:
        """The lab's start less the model's (positive: the lab started it later)."""
        return self.lab.start_s - self.model.start_s

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
    by_name = {r.name: r for r in lab}
    by_id = {o.job_id: o for o in model.jobs}
    out = []
    for job in sorted(plan.jobs, key=lambda j: (j.submit_s, j.trace_job.job_id)):
        r, o = by_name.get(job.name), by_id.get(job.trace_job.job_id)
        if r is None or o is None:
            continue
        lab_nodes = tuple(sorted(r.placement))
        model_nodes = tuple(sorted({cluster.gpus[g].node for g in o.gpus}))
        if abs(r.start_s - o.first_start) <= tolerance_s and lab_nodes == model_nodes:
            continue
        out.append(Parting(job.name, r.gpus, r.submit_s, Placed(r.start_s, r.end_s, lab_nodes),
                           Placed(o.first_start, o.finish, model_nodes)))
    return out
