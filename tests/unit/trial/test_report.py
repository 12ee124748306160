"""The trial report's arithmetic on hand-made shadow records."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from pal_slurm.model import DecisionKind
from pal_slurm.ranking.snapshot import RankingEntry
from pal_slurm.store.records import DecisionRecord
from pal_slurm.trial.report import build, job_slowdown

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
RANKING = [RankingEntry(n, s, "A", score, score, 0) for n, s, score in
           [("g1", 0, 1.0), ("g1", 1, 1.0), ("g2", 0, 1.3), ("g2", 1, 1.1)]]


def would(rid, nodes, kind=DecisionKind.PLACE, cls="A", at=0):
    return DecisionRecord(f"req:{rid}", kind, "shadow:pal-fit", nodes, 1, cls, T0 + timedelta(seconds=at))


def started(job, rid, nodes, partition="gpu", at=1):
    return DecisionRecord(job, DecisionKind.PASS, f"shadow_started:req={rid};partition={partition}", nodes, None, None,
                          T0 + timedelta(seconds=at))


def ended(job, rid, run_s, at=2):
    return DecisionRecord(job, DecisionKind.PASS, f"shadow_ended:req={rid};run_s={run_s}", {}, None, None,
                          T0 + timedelta(seconds=at))


def test_a_job_runs_at_its_slowest_gpu_and_an_unranked_gpu_is_the_median():
    scores = {(e.node, e.slot, e.perf_class): e.score for e in RANKING}
    assert job_slowdown({"g2": (0, 1)}, "A", scores) == (1.3, 0)
    assert job_slowdown({"g1": (0,), "g9": (3,)}, "A", scores) == (1.0, 1)
    assert job_slowdown({"g2": (1,)}, "B", scores) == (1.0, 1)  # another class's scores do not count


def test_report_joins_by_request_and_weights_by_gpus():
    records = [
        would("a", {"g1": (0, 1)}), started("10", "a", {"g2": (0, 1)}), ended("10", "a", 3600),
        would("b", {"g2": (1,)}), started("11", "b", {"g1": (0,)}),  # PAL worse; not ended
        would("c", {}, kind=DecisionKind.DEFER), started("12", "c", {"g1": (1,)}),
        started("13", "zz", {"g1": (0,)}),  # no shadow decision: not a shadow submission of this period
    ]
    report = build(records, RANKING)
    assert report.shadowed == 3 and report.would == {"place": 2, "defer": 1} and report.started == 3
    by_job = {j.job_id: j for j in report.compared}
    assert set(by_job) == {"10", "11"}
    a, b = by_job["10"], by_job["11"]
    assert a.ratio == pytest.approx(1.0 / 1.3) and a.saved_s == pytest.approx(3600 * (1 - 1 / 1.3)) and not a.worse
    assert b.ratio == pytest.approx(1.1) and b.saved_s is None and b.worse
    s = report.overall
    assert s is not None and s.jobs == 2 and s.gpus == 3 and s.worse == 1
    assert s.weighted_ratio == pytest.approx((2 * (1 / 1.3) + 1 * 1.1) / 3)
    assert s.ratio_ci[0] <= s.weighted_ratio <= s.ratio_ci[1]
    assert s.run_gpu_h == pytest.approx(2.0) and s.saved_gpu_h == pytest.approx(2 * (1 - 1 / 1.3))
    assert set(report.by_class) == {"A"}


def test_partition_filter_and_an_empty_period():
    records = [would("a", {"g1": (0,)}), started("10", "a", {"g2": (0,)}, partition="gpu"),
               would("b", {"g1": (1,)}), started("11", "b", {"g2": (1,)}, partition="debug")]
    assert [j.job_id for j in build(records, RANKING, partition="debug").compared] == ["11"]
    empty = build([], RANKING)
    assert empty.shadowed == 0 and empty.overall is None and empty.compared == []


def test_leaf_switches_spanned_with_a_topology():
    records = [would("a", {"g1": (0,), "g2": (0,)}), started("10", "a", {"g1": (0, 1)})]
    report = build(records, RANKING, racks={"g1": "leaf1", "g2": "leaf2"})
    (job,) = report.compared
    assert (job.slurm_leaves, job.pal_leaves) == (1, 2) and job.worse
    assert build(records, RANKING).compared[0].slurm_leaves is None


def test_where_the_jobs_ran_under_slurm_in_shadow_and_under_pal_when_on():
    records = [
        would("a", {"g1": (0,)}), started("10", "a", {"g2": (0, 1)}), ended("10", "a", 3600),
        DecisionRecord("11", DecisionKind.PASS, "pal_started:req=b;partition=gpu;wait_s=30", {"g1": (0, 1)}, None,
                       None, T0),
        DecisionRecord("11", DecisionKind.PASS, "pal_ended:req=b;run_s=1800", {}, None, None, T0),
        DecisionRecord("12", DecisionKind.PASS, "pal_started:req=c;partition=debug;wait_s=90", {"g2": (0,)}, None,
                       None, T0),
    ]
    report = build([*records[:1], *(replace_reason(r) for r in records[1:2]), *records[2:]], RANKING)
    shadow, on = report.ran["shadow"], report.ran["on"]
    assert (shadow.jobs, shadow.gpus, shadow.gpu_slowdown, shadow.mean_wait_s) == (1, 2, 1.3, 5.0)
    assert shadow.run_gpu_h == pytest.approx(2.0)
    assert (on.jobs, on.gpus) == (2, 3) and on.gpu_slowdown == pytest.approx((2 * 1.0 + 1 * 1.3) / 3)
    assert on.mean_wait_s == 60.0 and on.run_gpu_h == pytest.approx(1.0)
    only_gpu = build(records, RANKING, partition="gpu").ran["on"]
    assert only_gpu.jobs == 1
    # each job as well: the slowdown of its own GPUs, its partition, wait and run time
    shadow_jobs = [(j.job_id, j.partition, j.gpus, j.slowdown, j.wait_s, j.run_s) for j in report.ran_jobs["shadow"]]
    assert shadow_jobs == [("10", "gpu", 2, 1.3, 5.0, 3600.0)]
    on_jobs = [(j.job_id, j.partition, j.perf_class, j.slowdown, j.wait_s, j.run_s) for j in report.ran_jobs["on"]]
    assert on_jobs == [("11", "gpu", "A", 1.0, 30.0, 1800.0), ("12", "debug", "A", 1.3, 90.0, None)]


def replace_reason(d):
    """A shadow start with its wait, as pald records it."""
    from dataclasses import replace

    return replace(d, reason=d.reason + ";wait_s=5")


def test_a_job_run_by_pal_is_scored_in_the_class_pald_decided_for_it():
    """The class comes from pald's own decision: at submission (by request) or in its cycle
    (by job id); only a job with neither counts in the default class."""
    ranking = [*RANKING, RankingEntry("g2", 0, "B", 2.0, 2.0, 0)]
    records = [
        DecisionRecord("req:b", DecisionKind.PLACE, "pal-fit", {"g2": (0,)}, 1, "B", T0),
        DecisionRecord("11", DecisionKind.PASS, "pal_started:req=b;partition=gpu;wait_s=0", {"g2": (0,)}, None, None, T0),
        DecisionRecord("12", DecisionKind.PLACE, "released:pal-fit", {"g2": (0,)}, 1, "B", T0),
        DecisionRecord("12", DecisionKind.PASS, "pal_started:req=c;partition=gpu;wait_s=9", {"g2": (0,)}, None, None, T0),
        DecisionRecord("13", DecisionKind.PASS, "pal_started:req=d;partition=gpu;wait_s=0", {"g2": (0,)}, None, None, T0),
    ]
    on = build(records, ranking).ran_jobs["on"]
    assert [(j.job_id, j.perf_class, j.slowdown) for j in on] == [("11", "B", 2.0), ("12", "B", 2.0), ("13", "A", 1.3)]
