from click.testing import CliRunner

from pal_slurm.cli.main import cli


def test_unknown_arm_is_refused_before_any_lab_starts():
    r = CliRunner().invoke(cli, ["replay", "--trace", "workload-1", "--arms", "stock,magic"])
    assert r.exit_code == 2 and "unknown arm(s) ['magic']" in r.output


def test_unknown_trace_is_a_clear_error():
    r = CliRunner().invoke(cli, ["replay", "--trace", "no-such-trace", "--arms", "stock"])
    assert r.exit_code != 0 and "no-such-trace" in r.output


def test_each_arms_json_row_carries_what_its_prediction_was_made_from(tmp_path, monkeypatch):
    """The JSON row of an arm: Slurm's records summarised, the prediction, the measured inputs
    of that prediction (launch cost, release latency, the lab's pass clock, pald's cycle), and where the lab
    ran a job otherwise than the model (the first such job: where a prediction miss starts)."""
    import json

    from pal_lab.replay import harness, predict
    from pal_lab.replay.ctldlog import PassClock
    from pal_lab.replay.metrics import ArmSummary, JobResult
    from pal_slurm.sim.metrics import JobOutcome, RunResult

    def fake_run(plan, arm, work, seed, shape, on_progress):
        summary = ArmSummary("workload-1", arm, 3, 100.0, 90.0, 200.0, 400.0, 0.5, 1.1, 5.0)
        # the lab ran the second job an hour later than the model (below) in the pal-fit arm
        late = 3600.0 if arm == "pal-fit" else 0.0
        jobs = [JobResult(j.name, 1, 10.0, 0.0, i * 10.0 + (late if i == 1 else 0.0), i * 10.0 + 5.0 + late,
                          1.0, 1.0, {"gpu01": (0,)}) for i, j in enumerate(plan.jobs)]
        return harness.ArmRun(arm, jobs, summary, work / "lab", 0.2, 0.15, None if arm == "stock" else 0.25,
                              PassClock(phase_s=0.5, period_s=1.004, jitter_s=(-0.01, 0.0, 0.0, 0.02)),
                              None if arm == "stock" else PassClock(phase_s=0.12, period_s=0.3))

    def fake_model(plan, run, seed, shape):
        outcomes = [JobOutcome(j.trace_job.job_id, 1, "x", 0.0, i * 10.0, 420.0 if i == 0 else 10.0, 5.0, 5.0,
                               gpus=(0,)) for i, j in enumerate(plan.jobs)]
        return RunResult("workload-1", run.arm, seed, "event", 64, outcomes, 0.0)

    monkeypatch.setattr(harness, "run_arm", fake_run)
    monkeypatch.setattr(predict, "predicted_run_measured", fake_model)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["replay", "--trace", "workload-1", "--arms", "stock,pal-fit", "--jobs", "3",
                                 "--work-dir", str(tmp_path / "w"), "--output", str(out)])
    assert r.exit_code == 0, r.output
    rows = {row["arm"]: row for row in json.loads(out.read_text())["results"]}
    assert rows["pal-fit"]["release_wall_s"] == 0.25 and rows["stock"]["release_wall_s"] is None
    assert rows["pal-fit"]["pald_cycle_phase_s"] == 0.12 and rows["stock"]["pald_cycle_phase_s"] is None
    for row in rows.values():
        assert row["launch_wall_s"] == 0.15 and row["avg_jct_s"] == 100.0
        assert row["slurm_pass_phase_s"] == 0.5 and row["slurm_pass_period_s"] == 1.004
        assert row["slurm_pass_offset_p10_p90_s"] == [-0.01, 0.02]
        assert row["predicted_makespan_s"] == 420.0 and row["predicted_by"] == f"event:{row['arm']}"
    assert rows["stock"]["jobs_run_otherwise_than_predicted"] == 0 and rows["stock"]["first_run_otherwise"] is None
    assert rows["pal-fit"]["jobs_run_otherwise_than_predicted"] == 1
    assert rows["pal-fit"]["first_run_otherwise"].startswith("replay-1 (1 GPUs")
    assert "1 of 3 jobs ran otherwise than predicted" in r.output
