import pytest

from pal_slurm.sim.metrics import JobOutcome, RunResult, mean_ci95, summarize


def outcome(i, submit, start, finish, ideal=100.0, n=1):
    return JobOutcome(i, n, "m", submit, start, finish, ideal, ideal)


def test_summary_definitions():
    run = RunResult("t", "p", 0, "compat", 4, [outcome(0, 0, 0, 100), outcome(1, 0, 100, 300, ideal=100, n=2)], busy_gpu_s=600)
    s = summarize(run)
    assert s["avg_jct_s"] == 200
    assert s["makespan_s"] == 300
    assert s["utilization"] == pytest.approx(600 / (4 * 300))
    assert s["useful_utilization"] == pytest.approx((100 + 200) / (4 * 300))
    assert s["avg_queue_delay_s"] == 50
    assert s["makespan_lb_ratio"] == pytest.approx(300 / (300 / 4))
    assert s["jct_lb_ratio"] == pytest.approx((1 + 3) / 2)


def test_ci():
    m, hw = mean_ci95([1.0, 1.0, 1.0])
    assert m == 1.0 and hw == 0.0
    m, hw = mean_ci95([1.0, 2.0, 3.0])
    assert m == 2.0 and hw == pytest.approx(4.303 * 1.0 / 3 ** 0.5, rel=1e-3)


def test_empty_run_is_an_error():
    with pytest.raises(ValueError, match="no job finished"):
        summarize(RunResult("t", "p", 0, "compat", 4, [], 0))
