"""How Slurm starts the jobs pald pins. Its start rule (engine.starts.StartRule, `SLURM_STARTS`):
a per-node job whose slots pald cannot bind is pinned to its nodes, and Slurm takes the lowest
free slots there (policy.shapes.slurm_picks), so pald reserves, and a simulator of Slurm starts,
those; every other launch starts as planned. And what its scheduling pass starts of the jobs
pald pinned (`started_at_pass`): the slots free at the pass, not at pald's answer."""

from __future__ import annotations

from typing import Collection, Mapping, Sequence

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.decision import JobId
from pal_slurm.policy.shapes import slurm_picks, slurm_picks_at_start, slurm_picks_slots


class SlurmStarts:
    changes_launches = True

    def start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView,
              free: Collection[int]) -> Sequence[int]:
        if slurm_picks_slots(job, gpus, cluster):
            return slurm_picks(gpus, cluster, free)
        return gpus


SLURM_STARTS = SlurmStarts()


def started_at_pass(pinned: Mapping[JobId, Sequence[int]], waiting: Mapping[JobId, JobRequest],
                    view: ClusterView) -> dict[JobId, tuple[int, ...]]:
    """The GPUs Slurm's pass starts the pinned jobs on, in submit order: pald's where it binds
    the slots, else the lowest free slots of the pinned nodes at this pass
    (`shapes.slurm_picks_at_start`); a job that finds too few is not started (it stays pinned).
    Why at the pass: pald answered with Slurm's pick as of its answer, but Slurm picks when it
    starts the job, and a GPU freed in between is a lower free slot then (the lab's
    workload-4, seed 1: a 6-GPU job pinned to two nodes while a 1-GPU job held slot 2 of one
    started after it ended, on slots 0-2 there, not 0, 1 and 3; the model kept 0, 1 and 3, and
    from there its later jobs ran on other nodes)."""
    free = set(view.free)
    out: dict[JobId, tuple[int, ...]] = {}
    for job_id in sorted(pinned, key=lambda k: (waiting[k].submit_time, str(k))):
        gpus: tuple[int, ...] | None = tuple(pinned[job_id])
        if slurm_picks_slots(waiting[job_id], pinned[job_id], view):
            gpus = slurm_picks_at_start(pinned[job_id], view, free)
        elif not free.issuperset(pinned[job_id]):
            gpus = None
        if gpus is None:
            continue
        out[job_id] = gpus
        free.difference_update(gpus)
    return out
