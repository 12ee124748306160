"""Slurm's multifactor formula against numbers worked out by hand from Slurm's documentation
(priority_multifactor.html) and priority_multifactor.c."""

from __future__ import annotations

import pytest

from pal_slurm.model.priority import (
    ACCRUE_ALWAYS,
    NO_NORMAL_QOS,
    SMALL_RELATIVE_TO_TIME,
    PriorityJob,
    PriorityWeights,
    SitePriority,
    age_factor,
    factors,
    job_size_factor,
    priority,
)

DAY = 86400.0


def site(**weights: object) -> SitePriority:
    return SitePriority(
        weights=PriorityWeights(**weights),  # type: ignore[arg-type]
        fairshare={("physics", "ana"): 0.25, ("physics", ""): 0.5},
        qos_priority={"normal": 0, "high": 100, "low": 25},
        partition_factor={"gpu": 2, "debug": 4},
        cluster_cpus=64,
        node_count=4,
    )


JOB = PriorityJob(submit_time=1000.0, account="physics", user="ana", partition="gpu", qos="low",
                  cpus=8, min_nodes=1)


def test_every_factor_weighted_and_truncated() -> None:
    # age: 1 day of a 2-day max age -> 0.5; fair share 0.25; size (1/4 + 8/64)/2 = 0.1875;
    # partition 2/4 = 0.5; QOS 25/100 = 0.25
    s = site(age=1000, fairshare=2000, job_size=300, partition=100, qos=400, max_age_s=2 * DAY)
    f = factors(JOB, s, now=1000.0 + DAY)
    assert (f.age, f.fairshare, f.job_size, f.partition, f.qos) == (0.5, 0.25, 0.1875, 0.5, 0.25)
    # 500 + 500 + 56.25 + 50 + 100 = 1206.25 -> 1206
    assert priority(JOB, s, now=1000.0 + DAY) == 1206


def test_nice_and_site_factor() -> None:
    s = site(qos=1000)
    job = PriorityJob(submit_time=0.0, qos="high", nice=100, site_factor=7)
    assert priority(job, s, now=0.0) == 1000 + 7 - 100


def test_never_below_one() -> None:
    # a held job has priority 0 in Slurm: a computed one is at least 1
    assert priority(PriorityJob(submit_time=0.0, nice=50), site(age=10), now=0.0) == 1


def test_age_counts_from_eligible_time_unless_accrue_always() -> None:
    job = PriorityJob(submit_time=0.0, eligible_time=DAY)
    assert age_factor(job, PriorityWeights(max_age_s=4 * DAY), now=2 * DAY) == 0.25
    assert age_factor(job, PriorityWeights(max_age_s=4 * DAY, flags=frozenset({ACCRUE_ALWAYS})),
                      now=2 * DAY) == 0.5
    assert age_factor(job, PriorityWeights(max_age_s=4 * DAY), now=0.5 * DAY) == 0.0
    assert age_factor(job, PriorityWeights(max_age_s=DAY), now=10 * DAY) == 1.0


def test_fairshare_falls_back_to_the_account_row() -> None:
    other = PriorityJob(submit_time=0.0, account="physics", user="bob")
    assert factors(other, site(fairshare=1), now=0.0).fairshare == 0.5
    assert factors(PriorityJob(submit_time=0.0, account="chem"), site(fairshare=1), now=0.0).fairshare == 0.0


def test_job_size_favour_large_small_and_relative_to_time() -> None:
    s = site(job_size=1)
    job = PriorityJob(submit_time=0.0, cpus=16, min_nodes=2, time_limit_min=60)
    assert job_size_factor(job, s) == (2 / 4 + 16 / 64) / 2  # 0.375
    small = site(job_size=1, favor_small=True)
    assert job_size_factor(job, small) == ((4 - 2) / 4 + (64 - 16) / 64) / 2  # 0.625
    rel = site(job_size=1, flags=frozenset({SMALL_RELATIVE_TO_TIME}))
    # max(16 cpus, 2 nodes * 16 cpus/node = 32) / 60 min / 64 cpus
    assert job_size_factor(job, rel) == pytest.approx(32 / 60 / 64)
    rel_small = site(job_size=1, favor_small=True, flags=frozenset({SMALL_RELATIVE_TO_TIME}))
    assert job_size_factor(job, rel_small) == pytest.approx(1 - 32 / 60 / 64)
    # no time limit: Slurm divides by INFINITE (2^32 - 1 minutes), so the size counts for ~nothing
    unlimited = PriorityJob(submit_time=0.0, cpus=16, min_nodes=2)
    assert job_size_factor(unlimited, rel) == pytest.approx(32 / (2**32 - 1) / 64)


def test_no_normal_qos_uses_the_raw_priority() -> None:
    s = site(qos=2, flags=frozenset({NO_NORMAL_QOS}))
    assert priority(PriorityJob(submit_time=0.0, qos="low"), s, now=0.0) == 50


def test_a_weight_of_zero_leaves_its_factor_zero() -> None:
    f = factors(JOB, site(qos=1), now=DAY)
    assert (f.age, f.fairshare, f.job_size, f.partition, f.qos) == (0.0, 0.0, 0.0, 0.0, 0.25)


def test_tres_factor_normalised_by_the_partition() -> None:
    s = SitePriority(weights=PriorityWeights(tres={"gres/gpu": 1000.0, "cpu": 100.0}),
                     partition_tres={"gpu": {"gres/gpu": 8, "cpu": 64}})
    job = PriorityJob(submit_time=0.0, partition="gpu", tres={"gres/gpu": 2, "cpu": 8})
    assert priority(job, s, now=0.0) == 250 + 12  # 1000*2/8 + 100*8/64 = 262.5
