"""The rule the lab test of ordinary jobs beside PAL jobs (tests/integration/
test_slurm_priority_lab.py) judges passes by (tests/support/site_order_workload.py,
`ordinary_passes`), on hand-made records: a job that starts ahead of a waiting ordinary job of
higher priority is allowed by Slurm's backfill only if it ends, by its time limit, before that
job's planned start, or runs off its planned nodes."""

from __future__ import annotations

from tests.support.site_order_workload import NOT_BACKFILL, Plan, Ran, WorkloadRun, ordinary_passes

T0 = 1_000.0
BOTH = frozenset({"gpu01", "gpu02"})


def run_with(ahead: Ran, planned_start: int | None, planned_nodes: frozenset[str] | None) -> WorkloadRun:
    """An ordinary 2-node job (job 1, priority 500) that starts at T0 + 100, planned as given
    when read at T0 + 5, and `ahead` (priority 100) that starts before it."""
    behind = Ran(1, "heavy", 120.0, int(T0) + 100, frozenset({("gpu01", 0), ("gpu02", 0)}), 2, pal=False)
    run = WorkloadRun(T0, jobs={1: behind, ahead.job_id: ahead})
    run.plans[1] = [Plan(T0 + 5, 500, planned_start, planned_nodes)]
    return run


def passer(limit_s: float, node: str = "gpu01", pal: bool = True) -> Ran:
    return Ran(2, "heavy", limit_s, int(T0) + 10, frozenset({(node, 1)}), 4, pal=pal)


def whys(run: WorkloadRun, priorities: dict[int, int]) -> list[str]:
    return [p.why for p in ordinary_passes(run, priorities, slack_s=1)]


def test_a_passer_that_ends_by_the_planned_start_is_backfill() -> None:
    run = run_with(passer(60.0), int(T0) + 70, BOTH)
    assert whys(run, {1: 500, 2: 100}) == ["ends by its planned start"]


def test_a_passer_off_the_planned_nodes_is_backfill() -> None:
    run = run_with(passer(120.0, node="gpu02"), int(T0) + 70, frozenset({"gpu01"}))
    assert whys(run, {1: 500, 2: 100}) == ["off its planned nodes"]


def test_a_passer_that_holds_planned_nodes_past_the_planned_start_is_not() -> None:
    assert whys(run_with(passer(120.0), int(T0) + 70, BOTH), {1: 500, 2: 100}) == [NOT_BACKFILL]
    # no plan (N/A) and no nodes named: nothing lets it pass
    assert whys(run_with(passer(60.0), None, None), {1: 500, 2: 100}) == [NOT_BACKFILL]


def test_only_lower_priority_jobs_that_started_first_after_a_plan_was_read_are_judged() -> None:
    assert whys(run_with(passer(120.0), int(T0) + 70, BOTH), {1: 500, 2: 600}) == []  # higher: its turn
    early = Ran(2, "heavy", 120.0, int(T0) + 2, frozenset({("gpu01", 1)}), 4, pal=True)
    assert whys(run_with(early, int(T0) + 70, BOTH), {1: 500, 2: 100}) == []  # before any plan read
    # an ordinary job is judged as the one behind, a PAL job only as the one ahead
    run = run_with(passer(120.0), int(T0) + 70, BOTH)
    run.jobs[1] = Ran(1, "heavy", 120.0, int(T0) + 100, frozenset({("gpu01", 0)}), 2, pal=True)
    assert whys(run, {1: 500, 2: 100}) == []
