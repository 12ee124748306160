"""Small builders for policy tests."""

from __future__ import annotations

import random

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.policy import PlacementContext
from pal_slurm.ranking import Ranking


def cluster(nodes: int = 4, gpus: int = 4, free=None, racks: int | None = None) -> ClusterView:
    c = ClusterView.uniform(nodes, gpus, nodes_per_rack=racks)
    return c if free is None else c.with_free(free)


def job(job_id, n, cls="A", running_on=(), submit=0.0, **kw) -> JobRequest:
    return JobRequest(job_id=job_id, num_gpus=n, perf_class=cls, submit_time=submit, running_on=tuple(running_on), **kw)


def ctx(c: ClusterView, scores=None, seed: int = 0, method: str = "optimal", penalty: float = 1.7) -> PlacementContext:
    ranking = Ranking.from_scores(scores, method) if scores else Ranking.uniform(c.size)
    return PlacementContext(cluster=c, ranking=ranking, rng=random.Random(seed), locality_penalty=penalty)
