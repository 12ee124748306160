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
