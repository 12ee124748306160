"""benchmarks/robustness.py's accounts: the rule that gives the synthetic traces' jobs an
account, and the mean wait per account it reports."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from pal_slurm.sim.metrics import JobOutcome, RunResult

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "robustness.py"


def _script():
    spec = importlib.util.spec_from_file_location("robustness_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _job(job_id: int, submit: float, start: float) -> JobOutcome:
    return JobOutcome(job_id, 1, "m", submit, start, start + 10.0, 10.0, 10.0)


def test_every_third_job_in_submission_order_is_the_light_accounts():
    r = _script()
    jobs = [_job(i, submit=100.0 - i, start=200.0) for i in range(9)]  # submitted in reverse id order
    account = r.accounts(jobs)
    order = sorted(account, key=lambda i: -i)  # submission order: 8, 7, ..., 0
    assert [account[i] for i in order] == [r.HEAVY, r.HEAVY, r.LIGHT] * 3
    assert account == r.accounts(list(reversed(jobs)))  # the rule reads the jobs, not their listing


def test_the_mean_wait_per_account_is_first_start_less_submit():
    r = _script()
    jobs = [_job(0, 0.0, 10.0), _job(1, 0.0, 30.0), _job(2, 5.0, 105.0)]
    result = RunResult("t", "p", 0, "event", 4, jobs, 0.0)
    waits = r.mean_waits(result, {0: r.HEAVY, 1: r.HEAVY, 2: r.LIGHT})
    assert waits == {r.HEAVY: 20.0, r.LIGHT: 100.0}


def test_a_jittered_plan_moves_each_length_within_the_share_and_keeps_the_time_limits():
    from pal_lab.replay.plan import plan_replay
    from pal_slurm.sim.trace import synthetic_trace

    r = _script()
    plan = plan_replay(synthetic_trace(30, seed=3), 5.0, 4, 64)
    moved = r.jittered(plan, 0.01, seed=7)
    assert moved == r.jittered(plan, 0.01, seed=7)  # a draw of its seed
    assert moved != r.jittered(plan, 0.01, seed=8)
    ratios = [m.trace_job.iterations / j.trace_job.iterations for m, j in zip(moved.jobs, plan.jobs)]
    assert all(0.99 <= x <= 1.01 for x in ratios) and len(set(ratios)) == len(ratios)
    assert [m.limit_minutes for m in moved.jobs] == [j.limit_minutes for j in plan.jobs]
    assert [m.submit_s for m in moved.jobs] == [j.submit_s for j in plan.jobs]


def test_the_stock_draws_never_use_the_controls_seed():
    r = _script()
    assert r.baseline_draws(4, 1) == []
    draws = r.baseline_draws(4, 5)
    assert len(set(draws)) == 4 and 4 not in draws


def test_against_several_stock_runs_takes_the_mean_ratios_and_each_jobs_median_start():
    r = _script()
    runs = [RunResult("t", "stock", 0, "event", 4, [_job(0, 0.0, s0), _job(1, 0.0, s1)], 0.0)
            for s0, s1 in ((0.0, 10.0), (0.0, 20.0), (30_000.0, 40.0))]
    arm = RunResult("t", "pal-fit", 0, "event", 4, [_job(0, 0.0, 20_000.0), _job(1, 0.0, 0.0)], 0.0)
    o = r.against(arm, runs, 14_400.0, {0: r.HEAVY, 1: r.LIGHT})
    jct = sum(x.summary()["avg_jct_s"] for x in runs) / 3
    span = sum(x.summary()["makespan_s"] for x in runs) / 3
    assert o.jct == arm.summary()["avg_jct_s"] / jct and o.span == arm.summary()["makespan_s"] / span
    # job 0's median start is 0: 20,000 s later, over the 4 h bound; job 1 starts earlier
    assert (o.extra_s, o.over_bound) == (20_000.0, 1)
    assert r.against(arm, runs[2:], 14_400.0, {0: r.HEAVY, 1: r.LIGHT}).over_bound == 0
