"""Several replays of a trace taken together (replay.summary): each pald arm over the stock arm
beside it, then the means per trace and arm."""

import pytest

from pal_lab.replay.summary import by_trace, ratios_of, stock_runs_of


def row(arm, avg, pred, makespan=100.0, pred_makespan=100.0, trace="workload-1", seed=0, scale=150.0):
    return {"trace": trace, "arm": arm, "seed": seed, "time_scale": scale, "avg_jct_s": avg, "predicted_avg_jct_s": pred,
            "makespan_s": makespan, "predicted_makespan_s": pred_makespan}


def test_a_pald_arm_is_set_over_the_stock_arm_of_its_own_trace_and_seed():
    rows = [row("stock", 200.0, 100.0, 400.0, 200.0), row("pal-fit", 150.0, 90.0, 300.0, 190.0),
            row("stock", 1.0, 1.0, trace="workload-3")]
    (r,) = ratios_of("f.json", rows)
    assert (r.arm, r.trace, r.seed) == ("pal-fit", "workload-1", 0)
    assert r.jct == pytest.approx(0.75) and r.predicted_jct == pytest.approx(0.9) and r.miss == pytest.approx(0.15)
    assert r.makespan == pytest.approx(0.75) and r.predicted_makespan == pytest.approx(0.95)


def test_an_arm_without_a_stock_arm_or_a_prediction_gives_nothing():
    assert ratios_of("a", [row("pal-fit", 1.0, 1.0)]) == []
    assert ratios_of("b", [row("stock", 1.0, 1.0, seed=1), row("pal-fit", 1.0, 1.0, seed=0)]) == []
    assert ratios_of("c", [row("stock", 1.0, 1.0), row("pal-fit", 1.0, None)]) == []


def test_a_trace_is_judged_on_the_mean_of_its_replays_and_counts_the_runs_that_missed():
    one = ratios_of("1", [row("stock", 100.0, 100.0), row("pal-fit", 70.0, 80.0, 101.0)])  # miss +0.10
    two = ratios_of("2", [row("stock", 100.0, 100.0, seed=1), row("pal-fit", 80.0, 74.0, seed=1)])  # -0.06
    other = ratios_of("3", [row("stock", 100.0, 100.0, trace="workload-4"), row("pal-fit", 50.0, 50.0, trace="workload-4")])
    (w1, w4) = by_trace(one + two + other)
    assert (w1.trace, len(w1.replays), w4.trace) == ("workload-1", 2, "workload-4")
    assert w1.jct == pytest.approx(0.75) and w1.predicted_jct == pytest.approx(0.77)
    assert w1.miss == pytest.approx(0.02) and w1.runs_missed == 2
    assert w1.worst_makespan == pytest.approx(1.01) and w4.runs_missed == 0


def test_the_timing_grids_prediction_is_set_beside_the_replays_that_have_one():
    gridded = dict(row("pal-fit", 70.0, 80.0), predicted_avg_jct_s_grid_mean=72.0)
    stock = dict(row("stock", 100.0, 100.0), predicted_avg_jct_s_grid_mean=90.0)
    (r,) = ratios_of("g", [stock, gridded])
    assert r.grid_jct == pytest.approx(0.8) and r.grid_miss == pytest.approx(0.1) and r.miss == pytest.approx(0.1)
    plain = ratios_of("p", [row("stock", 100.0, 100.0, seed=1), row("pal-fit", 60.0, 60.0, seed=1)])
    assert plain[0].grid_jct is None
    (both,) = by_trace([r] + plain)
    assert both.jct == pytest.approx(0.65) and both.gridded == (r,)
    # the grid is judged against the replay it predicts (0.70), not the mean of all (0.65)
    assert both.grid_jct == pytest.approx(0.8) and both.grid_miss == pytest.approx(0.1)
    (none,) = by_trace(plain)
    assert none.grid_jct is None and none.grid_miss is None and none.gridded == ()


def test_replays_beside_different_stock_runs_are_also_set_over_the_mean_of_those_runs():
    first = [row("stock", 100.0, 100.0, makespan=1000.0), row("pal-fit", 60.0, 60.0, makespan=1001.0)]
    again = ratios_of("2", [row("stock", 100.0, 100.0, makespan=1000.0), row("pal-fit", 80.0, 80.0, makespan=990.0)])
    second_stock = ratios_of("3", [row("stock", 140.0, 140.0, makespan=1010.0), row("pal-fit", 90.0, 90.0, makespan=995.0)])
    other_seed = ratios_of("4", [row("stock", 50.0, 50.0, seed=2, makespan=500.0), row("pal-fit", 40.0, 40.0, seed=2, makespan=400.0)])
    (w1,) = by_trace(ratios_of("1", first) + again + second_stock + other_seed)
    assert w1.seeds == (0, 2)
    # the stock run carried by two replays counts once
    assert [(s.avg_jct_s, s.makespan_s) for s in w1.stock_runs(0)] == [(100.0, 1000.0), (140.0, 1010.0)]
    assert len(w1.stock_runs(2)) == 1
    # each replay over its own stock run: 0.6, 0.8, 90/140, 0.8; over the seed's stock mean (120): 0.5, 2/3, 0.75, 0.8
    assert w1.jct == pytest.approx((0.6 + 0.8 + 90 / 140 + 0.8) / 4)
    assert w1.pooled_jct == pytest.approx((0.5 + 80 / 120 + 0.75 + 0.8) / 4)
    # 1001 is over its own stock run's 1000 and under the two runs' mean, 1005
    assert w1.worst_makespan == pytest.approx(1.001)
    assert w1.pooled_worst_makespan == pytest.approx(1001 / 1005)


def test_with_one_stock_run_per_seed_the_pooled_figures_are_the_plain_ones():
    rs = ratios_of("1", [dict(row("stock", 100.0, 100.0), predicted_avg_jct_s_grid_mean=100.0),
                         dict(row("pal-fit", 70.0, 75.0, makespan=102.0), predicted_avg_jct_s_grid_mean=75.0)])
    (w1,) = by_trace(rs)
    assert w1.pooled_jct == pytest.approx(w1.jct) and w1.pooled_worst_makespan == pytest.approx(w1.worst_makespan)
    assert w1.pooled_grid_miss == pytest.approx(w1.grid_miss)


def test_a_stock_run_no_replay_was_set_beside_joins_its_own_trace_seed_and_scale_only():
    rs = ratios_of("1", [row("stock", 100.0, 100.0, makespan=1000.0), row("pal-fit", 90.0, 90.0, makespan=1001.0)])
    lent = stock_runs_of([row("stock", 80.0, 80.0, makespan=1004.0), row("pal-fit", 1.0, 1.0)])
    elsewhere = stock_runs_of([row("stock", 1.0, 1.0, seed=1), row("stock", 1.0, 1.0, scale=600.0),
                               row("stock", 1.0, 1.0, trace="workload-3")])
    (w1,) = by_trace(rs, lent + elsewhere)
    assert [(s.avg_jct_s, s.makespan_s) for s in w1.stock_runs(0)] == [(100.0, 1000.0), (80.0, 1004.0)]
    assert w1.jct == pytest.approx(0.9) and w1.pooled_jct == pytest.approx(1.0)
    assert w1.worst_makespan == pytest.approx(1.001) and w1.pooled_worst_makespan == pytest.approx(1001 / 1002)
