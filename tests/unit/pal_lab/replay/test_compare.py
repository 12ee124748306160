"""Where the lab and the model part ways (replay.compare): jobs in submission order whose start
differs beyond the tolerance or that ran on other nodes."""

from pal_slurm.model import ClusterView
from pal_lab.replay.compare import jct_gaps, partings
from pal_lab.replay.metrics import JobResult
from pal_lab.replay.plan import plan_replay
from pal_slurm.sim.metrics import JobOutcome, RunResult
from pal_slurm.sim.trace import Trace, TraceJob

CLUSTER = ClusterView.from_layout([("gpu01", 4), ("gpu02", 4)])
PLAN = plan_replay(Trace("t", (TraceJob(1, 4, 0.0, 100.0, "BERT"), TraceJob(2, 1, 10.0, 10.0, "BERT"),
                               TraceJob(3, 1, 20.0, 10.0, "BERT"))), 10.0, 4, 8)


def lab(name, start, nodes, gpus=1):
    return JobResult(name, gpus, 10.0, 0.0, start, start + 10.0, 1.0, 1.0, {n: (0,) for n in nodes})


def outcome(job_id, start, gpus):
    return JobOutcome(job_id, len(gpus), "BERT", 0.0, start, start + 10.0, 10.0, 10.0, gpus=tuple(gpus))


def model(*outcomes):
    return RunResult("t", "pal-fit-on-slurm", 0, "event", 8, list(outcomes), 0.0)


def test_jobs_run_alike_do_not_part_and_the_first_that_does_comes_first():
    ran = [lab("replay-1", 0.0, ["gpu01"], 4), lab("replay-2", 50.0, ["gpu02"]), lab("replay-3", 20.0, ["gpu02"])]
    same = model(outcome(1, 5.0, range(4)), outcome(2, 45.0, [4]), outcome(3, 20.0, [5]))
    assert partings(PLAN, ran, same, CLUSTER, tolerance_s=10.0) == []
    later = model(outcome(1, 5.0, range(4)), outcome(2, 70.0, [4]), outcome(3, 20.0, [0]))
    found = partings(PLAN, ran, later, CLUSTER, tolerance_s=10.0)
    assert [p.name for p in found] == ["replay-2", "replay-3"]  # 20 s apart; other nodes
    assert found[0].start_gap_s == -20.0 and found[1].model.nodes == ("gpu01",) and found[1].lab.nodes == ("gpu02",)
    assert "replay-3 (1 GPUs" in found[1].describe(unit_s=1.0) and "lab 20.00-30.00 on gpu02" in found[1].describe(1.0)


def test_a_job_missing_on_one_side_is_left_out():
    ran = [lab("replay-1", 0.0, ["gpu01"], 4)]
    assert partings(PLAN, ran, model(outcome(2, 0.0, [4])), CLUSTER, tolerance_s=1.0) == []


def test_jct_gaps_list_every_job_on_both_sides_the_largest_gap_first():
    ran = [lab("replay-1", 0.0, ["gpu01"], 4), lab("replay-2", 50.0, ["gpu02"]), lab("replay-3", 20.0, ["gpu02"])]
    ran_model = model(outcome(1, 5.0, range(4)), outcome(2, 20.0, [4]), outcome(3, 30.0, [5]))
    gaps = jct_gaps(PLAN, ran, ran_model, CLUSTER)
    assert [p.name for p in gaps] == ["replay-2", "replay-3", "replay-1"]
    assert [p.jct_gap_s for p in gaps] == [30.0, -10.0, -5.0]  # the lab ended job 2 30 s later
    assert [p.name for p in jct_gaps(PLAN, ran[:1], ran_model, CLUSTER)] == ["replay-1"]  # one side only: left out
