from click.testing import CliRunner

from pal_slurm.cli.main import cli


def test_unknown_arm_is_refused_before_any_lab_starts():
    r = CliRunner().invoke(cli, ["replay", "--trace", "workload-1", "--arms", "stock,magic"])
    assert r.exit_code == 2 and "unknown arm(s) ['magic']" in r.output


def test_unknown_trace_is_a_clear_error():
    r = CliRunner().invoke(cli, ["replay", "--trace", "no-such-trace", "--arms", "stock"])
    assert r.exit_code != 0 and "no-such-trace" in r.output


def test_each_arms_json_row_carries_what_its_prediction_was_made_from(tmp_path, monkeypatch):
    """The JSON row of an arm: Slurm's records summarised, the prediction, and the measured
    inputs of that prediction (launch cost, release latency, the lab's pass clock)."""
    import json

    from pal_slurm.replay import harness, predict
    from pal_slurm.replay.ctldlog import PassClock
    from pal_slurm.replay.metrics import ArmSummary

    def fake_run(plan, arm, work, seed, shape, on_progress):
        summary = ArmSummary("workload-1", arm, 3, 100.0, 90.0, 200.0, 400.0, 0.5, 1.1, 5.0)
        return harness.ArmRun(arm, [], summary, work / "lab", 0.2, 0.15, None if arm == "stock" else 0.25,
                              PassClock(phase_s=0.5, period_s=1.004))

    monkeypatch.setattr(harness, "run_arm", fake_run)
    monkeypatch.setattr(predict, "predict_measured",
                        lambda plan, run, seed, shape: {"policy": run.arm, "avg_jct_s": 110.0, "makespan_s": 420.0})
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["replay", "--trace", "workload-1", "--arms", "stock,pal-fit", "--jobs", "3",
                                 "--work-dir", str(tmp_path / "w"), "--json", str(out)])
    assert r.exit_code == 0, r.output
    rows = {row["arm"]: row for row in json.loads(out.read_text())["results"]}
    assert rows["pal-fit"]["release_wall_s"] == 0.25 and rows["stock"]["release_wall_s"] is None
    for row in rows.values():
        assert row["launch_wall_s"] == 0.15 and row["avg_jct_s"] == 100.0
        assert row["slurm_pass_phase_s"] == 0.5 and row["slurm_pass_period_s"] == 1.004
        assert row["predicted_avg_jct_s"] == 110.0 and row["predicted_by"] == f"event:{row['arm']}"
