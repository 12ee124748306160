"""A workload at the site's own timing (sim.site_timing): every placement on Slurm's passes,
the recorded time limits, the spread over the passes' phase, and the bound."""

from dataclasses import replace

from pal_slurm.sim.site_timing import STOCK, bound_of, format_site_timing, pass_phases, report, run_at_site_timing
from pal_slurm.sim.spec import RunSpec
from pal_slurm.sim.trace import Trace, synthetic_trace

from .builders import shaped_job

SPEC = RunSpec(mode="event", num_nodes=2, gpus_per_node=4, nodes_per_rack=2)


def test_phases_are_the_middles_of_equal_parts_of_the_period():
    assert pass_phases(30.0, 3) == [5.0, 15.0, 25.0]
    assert pass_phases(30.0, 1) == [15.0]


def test_the_bound_is_below_every_draw_of_every_placement():
    t = synthetic_trace(12, seed=1, jobs_per_hour=4.0, max_gpus=4)
    runs = run_at_site_timing(t, ["pal-fit", "firstfit"], SPEC, 30.0, 500, 3)
    assert [[r.policy for r in d] for d in runs] == [[STOCK, "pal-fit", "firstfit"]] * 3
    rep = report(runs, 30.0, 500)
    assert rep.phases_s == (5.0, 15.0, 25.0) and [r.policy for r in rep.rows] == [STOCK, "pal-fit", "firstfit"]
    for row in rep.rows:
        assert rep.bound.avg_jct_s <= row.avg_jct_s.lo <= row.avg_jct_s.mean <= row.avg_jct_s.hi
        assert rep.bound.makespan_s <= row.makespan_s.lo
        assert row.jct_over_bound.lo >= 1.0
    assert rep.rows[0].ratio.lo == rep.rows[0].ratio.hi == 1.0
    page = format_site_timing(rep, ["head"])
    assert page.startswith("head\n") and "\nbound " in page and "\npal-fit: " in page and "3 timing draw(s)" in page


def test_every_start_is_on_a_pass_of_its_draw():
    t = synthetic_trace(8, seed=2, jobs_per_hour=2.0, max_gpus=4)
    (stock,), = run_at_site_timing(t, [], SPEC, 60.0, None, 1)
    assert all(abs((j.first_start - 30.0) / 60.0 - round((j.first_start - 30.0) / 60.0)) < 1e-6 for j in stock.jobs)


def test_the_recorded_time_limits_judge_backfill():
    # A holds node 1 until 10000; B (both nodes) blocks; C (1 GPU, 100 s) arrives at 5000. With
    # C's limit past A's, Slurm does not backfill it; without limits it runs at once
    jobs = (shaped_job(0, 0, 10000, 1, 4), shaped_job(1, 10, 500, 2, 4), shaped_job(2, 5000, 100, 1, 1))
    exact = Trace("bf", tuple(replace(j, shape=None) for j in jobs))
    limited = Trace("bf", tuple(replace(j, time_limit_s=s) for j, s in zip(exact.jobs, (10000.0, 600.0, 20000.0))))
    (e,), = run_at_site_timing(exact, [], SPEC, 1.0, None, 1)
    (lim,), = run_at_site_timing(limited, [], SPEC, 1.0, None, 1)
    start = {j.job_id: j.first_start for j in e.jobs}
    start_limited = {j.job_id: j.first_start for j in lim.jobs}
    assert start[2] < 5002 and start_limited[2] > start_limited[1] >= 10000
    assert bound_of(lim).avg_jct_s == bound_of(e).avg_jct_s
