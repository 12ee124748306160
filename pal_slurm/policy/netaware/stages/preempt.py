"""Preempt stage: a sensitive job that cannot get its preferred tier may stop strictly less
sensitive jobs that started less than `recent_s` ago and were preempted fewer than
`max_preemptions` times, when that frees a node/rack for it and its saving exceeds the work the
victims lose plus their restart cost. Victims keep their queue position."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from pal_slurm.model import JobRequest
from pal_slurm.model.decision import JobId
from pal_slurm.model.network import NODE, SPINE, sensitivity_rank
from pal_slurm.policy.netaware.estimates import tier_factor, topo, wanted_tier
from pal_slurm.policy.netaware.round import Round


class Preemptible:
    """A plan's running jobs preemption may stop, with what every blocked job asks of them
    worked out once: their sensitivity ranks, and per network level the one group (node or
    rack) holding all their GPUs (None when they span several)."""

    def __init__(self, jobs: dict[JobId, JobRequest]) -> None:
        self.jobs = jobs
        self.ranks = {jid: sensitivity_rank(v.net_sensitivity) for jid, v in jobs.items()}
        self._groups: dict[tuple[int, JobId], int | None] = {}

    def below(self, rank: int, suspend: set[JobId]) -> list[JobRequest]:
        """The jobs less network-sensitive than `rank` that this plan has not stopped yet."""
        ranks = self.ranks
        return [v for jid, v in self.jobs.items() if ranks[jid] < rank and jid not in suspend]

    def group(self, level: int, job: JobRequest, group_of: Callable[[int], int]) -> int | None:
        key = (level, job.job_id)
        if key not in self._groups:
            groups = {group_of(g) for g in job.running_on}
            self._groups[key] = groups.pop() if len(groups) == 1 else None
        return self._groups[key]


@dataclass(frozen=True)
class Preemption:
    recent_s: float = 1800.0  # only jobs started less than this ago may be stopped
    max_preemptions: int = 2  # a job is stopped at most this many times
    restart_cost_s: float = 30.0  # the victims' restart cost the saving must beat

    def candidates(self, running: dict[JobId, JobRequest], now: float) -> Preemptible:
        """The running jobs it may stop (recent, seldom stopped): made once per plan."""
        return Preemptible({jid: v for jid, v in running.items()
                            if now - v.waiting_since < self.recent_s and v.preemptions < self.max_preemptions})

    def stop_for(self, job: JobRequest, preemptible: Preemptible, rnd: Round) -> list[JobId]:
        """Stop victims so that `job` gets its preferred tier (their GPUs join `rnd.free`, their
        ids `rnd.suspend`); returns the victims' ids."""
        cluster, suspend, rack_idx = rnd.cluster, rnd.suspend, rnd.rack_idx
        want = wanted_tier(job, cluster)
        if want == SPINE:
            return []
        rank = sensitivity_rank(job.net_sensitivity)
        now = rnd.now
        victims = preemptible.below(rank, suspend)
        if not victims:
            return []
        node_of = topo(cluster).node_of
        group_of: Callable[[int], int] = (lambda g: node_of[g]) if want == NODE else (lambda g: rack_idx[node_of[g]])
        by_group: dict[int, list[JobRequest]] = {}
        for v in victims:
            grp = preemptible.group(want, v, group_of)
            if grp is not None:  # only victims wholly inside one group free it for us
                by_group.setdefault(grp, []).append(v)
        if not by_group:
            return []
        free_in = Counter(map(group_of, rnd.free))
        saving = job.remaining_time * max(0.0, tier_factor(job, want + 1, cluster, rnd.ctx) - 1.0)
        best = None
        for grp, vs in by_group.items():
            have = free_in.get(grp, 0)
            chosen, lost = [], 0.0
            for v in sorted(vs, key=lambda v: ((now - v.waiting_since) * v.num_gpus, v.job_id)):
                if have >= job.num_gpus:
                    break
                chosen.append(v)
                have += v.num_gpus
                lost += ((now - v.waiting_since) + self.restart_cost_s) * v.num_gpus
            if have >= job.num_gpus and chosen and lost < saving * job.num_gpus:
                if best is None or lost < best[0]:
                    best = (lost, chosen)
        if best is None:
            return []
        for v in best[1]:
            suspend.add(v.job_id)
            rnd.give(v.running_on)
        return [v.job_id for v in best[1]]
