"""Slurm's multifactor job priority, computed from what Slurm publishes. Pure.

Why pald computes it: a held job has priority 0 in squeue and is absent from sprio
(docs/decisions/site-priority.md), so the priority Slurm would give a held PAL job is never
shown; pald orders its held jobs by this computation instead (the `slurm` queue order).

The formula is `priority/multifactor`'s (Slurm's src/plugins/priority/multifactor/
priority_multifactor.c, `set_priority_factors` and `_get_priority_internal`)::

    priority = W_age * age + W_assoc * assoc + W_fairshare * fairshare + W_jobsize * size
             + W_partition * partition + W_qos * qos + sum(W_tres * tres)
             + site_factor - nice

each factor in [0, 1]; the result is truncated to an integer and at least 1 (0 means held).

- age: min(now - accrue time, PriorityMaxAge) / PriorityMaxAge; no age before the job accrues
  (its eligible time, or its submit time under PriorityFlags=ACCRUE_ALWAYS).
- fair share: the association's factor as `sshare` prints it (FairShare column).
- job size: favour large (default): (min_nodes / nodes + cpus / cluster cpus) / 2; favour small
  (PriorityFavorSmall): ((nodes - min_nodes) / nodes + (cluster cpus - cpus) / cluster cpus) / 2;
  SMALL_RELATIVE_TO_TIME: max(cpus, min_nodes * cluster cpus / nodes) / time limit (minutes;
  Slurm's INFINITE, 2^32 - 1, for none) / cluster cpus, then 1 - that when favouring small;
  clamped to [0, 1].
- partition: PriorityJobFactor / the largest PriorityJobFactor of any partition
  (NO_NORMAL_PARTITION: PriorityJobFactor itself).
- QOS: the QOS's priority / the largest QOS priority (NO_NORMAL_QOS: the priority itself).
- assoc: the association's priority / the largest (NO_NORMAL_ASSOC: itself).
- TRES: the job's count of each TRES / the partition's count, times PriorityWeightTRES's weight
  (NO_NORMAL_TRES: the count itself).

Not modelled (the job is scored as if it had none of them): a job submitted to several
partitions or QOS (Slurm keeps one priority per pair; here its first partition and its QOS
count), INCR_ONLY (priorities that never fall), a priority an administrator set directly,
`PriorityFlags=CALCULATE_RUNNING`, and Slurm's own rounding of the time a factor was last
computed (slurmctld recomputes every PriorityCalcPeriod; this computes at `now`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

# the PriorityFlags this module reads (Slurm prints them in `scontrol show config`)
ACCRUE_ALWAYS = "ACCRUE_ALWAYS"
SMALL_RELATIVE_TO_TIME = "SMALL_RELATIVE_TO_TIME"
NO_NORMAL_ASSOC = "NO_NORMAL_ASSOC"
NO_NORMAL_PARTITION = "NO_NORMAL_PART"
NO_NORMAL_QOS = "NO_NORMAL_QOS"
NO_NORMAL_TRES = "NO_NORMAL_TRES"
PRIORITY_MAX = 0xFFFFFFFF  # Slurm keeps a job's priority in 32 bits
UNLIMITED_MIN = 0xFFFFFFFF  # Slurm's INFINITE time limit, in minutes: what it divides by for no limit


@dataclass(frozen=True)
class PriorityWeights:
    """A site's multifactor settings (slurm.conf's Priority* lines)."""

    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    job_size: float = 0.0
    partition: float = 0.0
    qos: float = 0.0
    tres: Mapping[str, float] = field(default_factory=dict)  # "cpu", "mem", "gres/gpu" -> weight
    max_age_s: float = 7 * 24 * 3600.0  # PriorityMaxAge (Slurm's default: 7 days)
    favor_small: bool = False  # PriorityFavorSmall
    flags: frozenset[str] = frozenset()  # PriorityFlags, upper case


@dataclass(frozen=True)
class SitePriority:
    """What the factors are normalised by: the site's weights, shares, QOS and partitions.

    `fairshare` maps (account, user) to sshare's FairShare factor; a job whose pair is missing
    takes its account's row (user ""), else 0. `cluster_cpus`/`node_count` are the CPUs and
    nodes Slurm counts for the job size factor."""

    weights: PriorityWeights = PriorityWeights()
    fairshare: Mapping[tuple[str, str], float] = field(default_factory=dict)
    qos_priority: Mapping[str, int] = field(default_factory=dict)  # QOS name -> Priority
    partition_factor: Mapping[str, int] = field(default_factory=dict)  # partition -> PriorityJobFactor
    partition_tres: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # partition -> TRES counts
    assoc_priority: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (account, user) -> Priority
    cluster_cpus: int = 0
    node_count: int = 0


@dataclass(frozen=True)
class PriorityJob:
    """What the formula reads of one job (from squeue's record of it)."""

    submit_time: float
    eligible_time: float = 0.0  # when it may start (its begin time); 0: at submit
    account: str = ""
    user: str = ""
    partition: str = ""
    qos: str = ""
    cpus: int = 0
    min_nodes: int = 1
    time_limit_min: float | None = None  # its own, else its partition's; None: unlimited
    nice: int = 0
    site_factor: int = 0
    tres: Mapping[str, float] = field(default_factory=dict)  # "cpu" -> 4, "gres/gpu" -> 2


@dataclass(frozen=True)
class PriorityFactors:
    """Each factor in [0, 1] (or the raw value under a NO_NORMAL flag), before weighting."""

    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    job_size: float = 0.0
    partition: float = 0.0
    qos: float = 0.0
    tres: Mapping[str, float] = field(default_factory=dict)


def age_factor(job: PriorityJob, weights: PriorityWeights, now: float) -> float:
    """min(time accrued, PriorityMaxAge) / PriorityMaxAge."""
    since = job.submit_time if ACCRUE_ALWAYS in weights.flags else max(job.submit_time, job.eligible_time)
    if weights.max_age_s <= 0:
        return 1.0 if now > since else 0.0
    return min(max(0.0, now - since), weights.max_age_s) / weights.max_age_s


def job_size_factor(job: PriorityJob, site: SitePriority) -> float:
    """Slurm's job size factor (module docstring), 0 when the cluster's size is unknown."""
    nodes, cpus_all = site.node_count, site.cluster_cpus
    if nodes <= 0 or cpus_all <= 0:
        return 0.0
    w = site.weights
    if SMALL_RELATIVE_TO_TIME in w.flags:
        size = max(float(job.cpus), job.min_nodes * cpus_all / nodes)
        limit = job.time_limit_min if job.time_limit_min else UNLIMITED_MIN
        value = size / limit / cpus_all
        if w.favor_small:
            value = 1.0 - value
    elif w.favor_small:
        value = (nodes - job.min_nodes) / nodes if nodes > job.min_nodes else 0.0
        if job.cpus:
            value = (value + (cpus_all - job.cpus) / cpus_all) / 2
    else:
        value = job.min_nodes / nodes
        if job.cpus:
            value = (value + job.cpus / cpus_all) / 2
    return min(1.0, max(0.0, value))


def _normalised(value: float, largest: float, raw: bool) -> float:
    if raw:
        return value
    return value / largest if largest > 0 else 0.0


def factors(job: PriorityJob, site: SitePriority, now: float) -> PriorityFactors:
    """The job's unweighted factors at `now` (a weight of 0 leaves its factor 0, as Slurm does)."""
    w = site.weights
    fair = site.fairshare.get((job.account, job.user), site.fairshare.get((job.account, ""), 0.0))
    part = site.partition_factor.get(job.partition, 0)
    qos = site.qos_priority.get(job.qos, 0)
    assoc = site.assoc_priority.get((job.account, job.user), site.assoc_priority.get((job.account, ""), 0))
    counts = site.partition_tres.get(job.partition, {})
    tres = {}
    for name in w.tres:
        have = job.tres.get(name, 0.0)
        if NO_NORMAL_TRES in w.flags:
            tres[name] = have
        else:
            tres[name] = have / counts[name] if have and counts.get(name) else 0.0
    return PriorityFactors(
        age=age_factor(job, w, now) if w.age else 0.0,
        assoc=_normalised(assoc, max(site.assoc_priority.values(), default=0), NO_NORMAL_ASSOC in w.flags)
        if w.assoc else 0.0,
        fairshare=fair if w.fairshare else 0.0,
        job_size=job_size_factor(job, site) if w.job_size else 0.0,
        partition=_normalised(part, max(site.partition_factor.values(), default=0), NO_NORMAL_PARTITION in w.flags)
        if w.partition else 0.0,
        qos=_normalised(qos, max(site.qos_priority.values(), default=0), NO_NORMAL_QOS in w.flags)
        if w.qos else 0.0,
        tres=tres,
    )


def weighted_sum(f: PriorityFactors, w: PriorityWeights) -> float:
    """The factors times their weights, summed (before site factor and nice)."""
    return (w.age * f.age + w.assoc * f.assoc + w.fairshare * f.fairshare + w.job_size * f.job_size
            + w.partition * f.partition + w.qos * f.qos
            + sum(w.tres.get(name, 0.0) * value for name, value in f.tres.items()))


def priority(job: PriorityJob, site: SitePriority, now: float) -> int:
    """The priority Slurm's multifactor plugin gives `job` at `now`: truncated, in [1, 2^32-1]."""
    value = weighted_sum(factors(job, site, now), site.weights) + job.site_factor - job.nice
    return int(min(max(value, 1.0), PRIORITY_MAX))
