"""Slurm's start rule (engine.starts.StartRule): a per-node job whose slots pald cannot bind is
pinned to its nodes, and Slurm takes the lowest free slots there (policy.shapes.slurm_picks), so
pald reserves, and a simulator of Slurm starts, those; every other launch starts as planned."""

from __future__ import annotations

from typing import Collection, Sequence

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.policy.shapes import slurm_picks, slurm_picks_slots


class SlurmStarts:
    changes_launches = True

    def start(self, job: JobRequest, gpus: Sequence[int], cluster: ClusterView,
              free: Collection[int]) -> Sequence[int]:
        if slurm_picks_slots(job, gpus, cluster):
            return slurm_picks(gpus, cluster, free)
        return gpus


SLURM_STARTS = SlurmStarts()
