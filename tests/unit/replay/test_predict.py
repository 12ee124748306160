"""The replay's prediction (replay.predict): the event simulator's run of an arm on the replay's
plan, without a Slurm."""

import pytest

from pal_slurm.replay.plan import plan_replay
from pal_slurm.replay.predict import predict, predicted_run
from pal_slurm.sim.trace import bundled_trace


@pytest.mark.parametrize("arm", ["stock", "pal-fit"])
def test_predict_summarises_the_predicted_run_of_every_planned_job(arm):
    plan = plan_replay(bundled_trace("workload-1"), 600, 4, 64, jobs=12)
    run = predicted_run(plan, arm, 0, 16, 4, 4, launch_s=60.0)
    assert sorted(o.job_id for o in run.jobs) == sorted(j.trace_job.job_id for j in plan.jobs)
    assert all(o.first_start >= o.submit and o.finish > o.first_start for o in run.jobs)
    summary = predict(plan, arm, 0, 16, 4, 4, launch_s=60.0)
    assert summary["avg_jct_s"] == pytest.approx(run.summary()["avg_jct_s"])
    assert summary["makespan_s"] == pytest.approx(run.summary()["makespan_s"])
    assert summary["policy"] == run.policy == {"stock": "slurm-stock", "pal-fit": "pal-fit-on-slurm"}[arm]


@pytest.mark.parametrize("arm", ["stock", "pal-fit"])
def test_the_prediction_runs_slurms_passes_on_the_clock_the_lab_ran_them(arm):
    """The first job waits for the lab's first pass (its phase), not for a pass at the trace's
    start; with the measured clock, every start is on a pass of it."""
    from pal_slurm.replay.ctldlog import PassClock

    plan = plan_replay(bundled_trace("workload-1"), 600, 4, 64, jobs=12)
    first = min(plan.jobs, key=lambda j: j.submit_s).trace_job.job_id
    clock = PassClock(phase_s=0.75, period_s=1.004)
    run = predicted_run(plan, arm, 0, 16, 4, 4, launch_s=60.0, slurm_pass=clock)
    starts = {o.job_id: o.first_start for o in run.jobs}
    assert starts[first] == pytest.approx(0.75 * 600)
    for t in starts.values():
        k = round((t - 450.0) / 602.4)
        assert t == pytest.approx(450.0 + k * 602.4, abs=1e-6)
    default = {o.job_id: o.first_start for o in predicted_run(plan, arm, 0, 16, 4, 4, launch_s=60.0).jobs}
    assert default[first] == pytest.approx(0.5 * 600)  # the replay's clock: the trace starts mid-interval
