"""The replay's prediction (replay.predict): the event simulator's run of an arm on the replay's
plan, without a Slurm."""

import pytest

from pal_lab.replay.plan import plan_replay
from pal_lab.replay.predict import predict, predicted_run
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
    assert summary["policy"] == run.policy == {"stock": "slurm", "pal-fit": "pal-fit-on-slurm"}[arm]


@pytest.mark.parametrize("arm", ["stock", "pal-fit"])
def test_the_prediction_runs_slurms_passes_on_the_clock_the_lab_ran_them(arm):
    """The first job waits for the lab's first pass (its phase), not for a pass at the trace's
    start; with the measured clock, every start is on a pass of it."""
    from pal_lab.replay.ctldlog import PassClock

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


def test_the_phase_spread_predicts_a_pald_arm_at_each_phase_of_its_cycle_and_nothing_for_stock(tmp_path):
    """Each point is the model with pald's cycle at one phase and everything else as measured:
    the point at the measured phase is the measured prediction itself, the others are the
    model with its cycle there."""
    from pal_lab.replay.ctldlog import PassClock
    from pal_lab.replay.harness import ArmRun, LabShape
    from pal_lab.replay.predict import cycle_phase_spread, predict_measured

    plan = plan_replay(bundled_trace("workload-3"), 600, 4, 64, jobs=20)  # jobs wait for pald's releases
    shape = LabShape()
    cycle = PassClock(phase_s=0.2, period_s=0.8)
    run = ArmRun("pal-fit", [], None, tmp_path / "lab", 0.0, 0.1, release_wall_s=0.3,  # type: ignore[arg-type]
                 pald_cycle=cycle)
    spread = cycle_phase_spread(plan, run, 0, shape, 4)
    assert [round(phase, 6) for phase, _ in spread] == [0.0, 0.2, 0.4, 0.6]
    assert spread[1][1] == predict_measured(plan, run, 0, shape)
    for phase, headline in spread:
        direct = predicted_run(plan, "pal-fit", 0, 16, 4, 4, launch_s=0.1 * 600, cluster=shape.cluster(),
                               pald_cycle=PassClock(phase_s=phase, period_s=0.8))
        assert headline["avg_jct_s"] == pytest.approx(direct.summary()["avg_jct_s"])
    assert len({round(h["avg_jct_s"], 3) for _, h in spread}) > 1  # the phase is not ignored
    stock = ArmRun("stock", [], None, tmp_path / "lab", 0.0, 0.1)  # type: ignore[arg-type]
    assert cycle_phase_spread(plan, stock, 0, shape, 4) == []


def test_a_held_job_is_released_at_a_tick_of_palds_cycle_on_its_phase():
    """pald's cycle at phase 0.2 of a 0.8-wall-s period (600x: ticks at 120 + k x 480 trace
    s): every job pald held starts after a tick, and moving the phase moves its release."""
    from pal_lab.replay.ctldlog import PassClock

    plan = plan_replay(bundled_trace("workload-3"), 600, 4, 64, jobs=20)
    runs = {phase: predicted_run(plan, "pal-fit", 0, 16, 4, 4, pald_cycle=PassClock(phase_s=phase, period_s=0.8))
            for phase in (0.2, 0.6)}
    waited = {phase: sorted(o.first_start for o in run.jobs if o.first_start - o.submit > 600.0)
              for phase, run in runs.items()}
    assert waited[0.2] and waited[0.2] != waited[0.6]


def test_the_timing_grid_predicts_every_pass_phase_and_for_pald_every_cycle_phase(tmp_path):
    """k x k cells for a pald arm (Slurm's pass phases outer, pald's cycle phases inner), k for
    stock; each cell is the model at those phases with everything else as measured."""
    from pal_lab.replay.ctldlog import PassClock
    from pal_lab.replay.harness import ArmRun, LabShape
    from pal_lab.replay.predict import timing_grid

    plan = plan_replay(bundled_trace("workload-3"), 600, 4, 64, jobs=20)
    shape = LabShape()
    run = ArmRun("pal-fit", [], None, tmp_path / "lab", 0.0, 0.1, release_wall_s=0.3,  # type: ignore[arg-type]
                 pald_cycle=PassClock(phase_s=0.2, period_s=0.8), slurm_pass=PassClock(phase_s=0.4, period_s=1.0))
    cells = timing_grid(plan, run, 0, shape, 2)
    assert [(c["slurm_pass_phase_s"], c["pald_cycle_phase_s"]) for c in cells] == [
        (0.25, 0.0), (0.25, 0.4), (0.75, 0.0), (0.75, 0.4)]
    direct = predicted_run(plan, "pal-fit", 0, 16, 4, 4, launch_s=0.1 * 600, cluster=shape.cluster(),
                           pald_cycle=PassClock(phase_s=0.4, period_s=0.8),
                           slurm_pass=PassClock(phase_s=0.75, period_s=1.0))
    assert cells[3]["avg_jct_s"] == pytest.approx(direct.summary()["avg_jct_s"])
    stock = ArmRun("stock", [], None, tmp_path / "lab", 0.0, 0.1)  # type: ignore[arg-type]
    assert [c["pald_cycle_phase_s"] for c in timing_grid(plan, stock, 0, shape, 3)] == [None] * 3


def test_a_followed_job_gets_its_start_in_every_cell_and_an_unknown_one_is_named(tmp_path):
    """`timing_grid(follow=...)`: when the model started that job in each cell, the same as
    the cell's own run says; a name not in the replay is an error that says which are."""
    from pal_lab.replay.ctldlog import PassClock
    from pal_lab.replay.harness import ArmRun, LabShape
    from pal_lab.replay.predict import timing_grid

    plan = plan_replay(bundled_trace("workload-3"), 600, 4, 64, jobs=20)
    shape = LabShape()
    run = ArmRun("pal-fit", [], None, tmp_path / "lab", 0.0, 0.1, release_wall_s=0.3,  # type: ignore[arg-type]
                 pald_cycle=PassClock(phase_s=0.2, period_s=0.8), slurm_pass=PassClock(phase_s=0.4, period_s=1.0))
    cells = timing_grid(plan, run, 0, shape, 2, follow="replay-7")
    direct = predicted_run(plan, "pal-fit", 0, 16, 4, 4, launch_s=0.1 * 600, cluster=shape.cluster(),
                           pald_cycle=PassClock(phase_s=0.4, period_s=0.8),
                           slurm_pass=PassClock(phase_s=0.75, period_s=1.0))
    seventh = next(o for o in direct.jobs if o.job_id == plan.jobs[7].trace_job.job_id)
    assert cells[3]["follow_start_s"] == pytest.approx(seventh.first_start)
    assert all(c["follow_start_s"] >= plan.jobs[7].submit_s for c in cells)
    with pytest.raises(ValueError, match="no job 'replay-99'.*replay-0..replay-19"):
        timing_grid(plan, run, 0, shape, 1, follow="replay-99")


def test_the_pass_phases_are_the_measured_phase_moved_by_the_passes_offsets():
    """`pass_phases`: with the passes' offsets observed, the measured phase plus their k
    quantiles (a pald arm's passes stay within a few hundredths of a second: its grid must
    not run phases the lab never had); without, the middles of k parts of the period."""
    from pal_lab.replay.ctldlog import PassClock
    from pal_lab.replay.predict import pass_phases

    jitter = tuple(sorted([-0.02, -0.01, 0.0, 0.0, 0.01, 0.01, 0.02, 0.03]))
    clock = PassClock(phase_s=0.5, period_s=1.0, jitter_s=jitter)
    assert pass_phases(clock, 2) == pytest.approx([0.5, 0.52])  # the 3rd and the 7th of 8
    assert all(0.47 <= p <= 0.53 for p in pass_phases(clock, 8))
    assert pass_phases(PassClock(phase_s=0.5, period_s=1.0), 2) == pytest.approx([0.25, 0.75])
    assert pass_phases(None, 4)[0] > 0.0
    near_end = PassClock(phase_s=0.99, period_s=1.0, jitter_s=(0.02,))
    assert pass_phases(near_end, 1) == pytest.approx([0.01])  # within the period


def test_near_start_keeps_the_cells_that_started_the_job_where_the_lab_did():
    from pal_lab.replay.predict import near_start

    stock = [{"avg_jct_s": 100.0}, {"avg_jct_s": 200.0}]  # two pass phases: stock's mean 150
    cells = [{"avg_jct_s": 60.0, "follow_start_s": 1000.0}, {"avg_jct_s": 90.0, "follow_start_s": 5000.0},
             {"avg_jct_s": 120.0, "follow_start_s": 1300.0}, {"avg_jct_s": 180.0, "follow_start_s": 4000.0}]
    # each cell over stock's mean (the arms ran on labs of their own)
    assert near_start(cells, stock, 1100.0, 300.0) == pytest.approx([0.4, 0.8])
    assert near_start(cells, stock, 4500.0, 500.0) == pytest.approx([0.6, 1.2])
    assert near_start(cells, stock, 9000.0, 100.0) == []


@pytest.mark.parametrize("queue, keeps", [(None, False), ("fifo", False), ("slurm", True)])
def test_the_queue_order_reaches_the_models_pald(monkeypatch, queue, keeps):
    """`queue` is the order pald's service in the model keeps its held jobs in: `slurm` (Slurm's
    priority order) makes its engine keep the order (every held job reserves, no free backfill);
    the arm's own order (fifo for pal-fit) otherwise."""
    from pal_lab.replay import pald_model

    made: list[pald_model.PaldModel] = []

    class Recorded(pald_model.PaldModel):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(pald_model, "PaldModel", Recorded)
    plan = plan_replay(bundled_trace("workload-1"), 600, 4, 64, jobs=6)
    predicted_run(plan, "pal-fit", 0, 16, 4, 4, launch_s=60.0, queue=queue)
    [model] = made
    assert model.service.settings.queue == (queue or "fifo")
    assert model.service.engine.keeps_order is keeps
