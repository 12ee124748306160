import pytest

from pal_slurm.model import ClusterView
from pal_slurm.model.comment_grammar import parse_comment
from pal_slurm.model.network import sensitivity_class
from pal_lab.replay.plan import PlanError, payload_spec, plan_replay, slurm_shape, time_limit_minutes
from pal_slurm.sim.network import NetworkModel
from pal_slurm.sim.trace import Trace, TraceJob


@pytest.mark.parametrize("n,k,g", [(1, 1, 1), (4, 1, 4), (6, 2, 3), (8, 2, 4), (12, 3, 4), (16, 4, 4),
                                   (24, 6, 4), (32, 8, 4), (48, 12, 4)])
def test_every_sia_philly_count_has_a_per_node_shape(n, k, g):
    s = slurm_shape(n, 4)
    assert (s.nodes, s.per_node, s.total) == (k, g, n)


def test_uneven_count_is_refused_with_the_reason():
    with pytest.raises(PlanError, match="5 GPUs do not split evenly over 2 nodes"):
        slurm_shape(5, 4)


def test_time_limit_is_whole_wall_minutes_rounded_up():
    assert time_limit_minutes(10.0, 600.0) == 1  # at least one minute
    assert time_limit_minutes(18000.0, 600.0) == 1  # 2 x 5 h / 600 = 60 s exactly
    assert time_limit_minutes(18001.0, 600.0) == 2
    assert time_limit_minutes(3600.0, 60.0) == 2


def _trace():
    jobs = (TraceJob(7, 6, 100.0, 1000.0, "resnet50"), TraceJob(3, 1, 40.0, 100.0, "BERT"),
            TraceJob(9, 100, 500.0, 1.0, "vgg19"))
    return Trace("t", jobs)


def test_plan_orders_by_submission_and_compresses_times():
    plan = plan_replay(_trace(), 10.0, 4, 64, jobs=2)
    assert [j.trace_job.job_id for j in plan.jobs] == [3, 7]
    assert [j.submit_s for j in plan.jobs] == [0.0, 60.0]
    assert plan.jobs[1].submit_wall == 6.0
    assert plan.jobs[1].perf_class == "A" and plan.jobs[0].perf_class == "B"
    job = plan.jobs[1]
    assert job.limit_s == job.limit_minutes * 60.0 * 10.0 >= 2 * job.base_s
    assert "--nodes=2" in job.sbatch_args() and "--gres=gpu:3" in job.sbatch_args()


def test_a_model_only_plan_rounds_limits_at_another_scale_and_cannot_be_submitted():
    # a 100-s job at scale 5 asks for 1 wall minute (300 trace s); rounded as at 150, 9,000 trace s
    tight, coarse = (plan_replay(_trace(), 5.0, 4, 64, jobs=2, limit_scale=s).jobs[0] for s in (None, 150.0))
    assert tight.limit_s == 300.0 and coarse.limit_s == 9000.0
    assert coarse.submit_s == tight.submit_s and coarse.scale == 5.0
    with pytest.raises(PlanError, match="for the model only"):
        coarse.sbatch_args()
    assert plan_replay(_trace(), 5.0, 4, 64, jobs=2, limit_scale=5.0).jobs[0].sbatch_args() == tight.sbatch_args()
    with pytest.raises(PlanError, match="must be > 0"):
        plan_replay(_trace(), 5.0, 4, 64, limit_scale=0.0)


def test_each_comment_declares_its_model_s_spread_factor_in_the_simulator_s_class():
    net = NetworkModel()
    trace = Trace("t", tuple(TraceJob(i, 8, float(i), 100.0, m) for i, m in enumerate(("DCGAN", "BERT", "vgg19"))))
    for job in plan_replay(trace, 10.0, 4, 64).jobs:
        model = job.trace_job.model
        comment = next(a for a in job.sbatch_args() if a.startswith("--comment="))[len("--comment="):]
        declared = parse_comment(comment).net
        assert declared == job.net_sensitivity == f"{net.spread_factor(model):.2f}"
        assert sensitivity_class(declared) == net.sensitivity(model)
    assert plan_replay(trace, 10.0, 4, 64).jobs[0].net_sensitivity == "2.22"  # DCGAN: neither 1.35x nor 8x


def test_plan_refuses_a_job_bigger_than_the_cluster():
    with pytest.raises(PlanError, match="job 9 needs 100 GPUs"):
        plan_replay(_trace(), 10.0, 4, 64)


def test_payload_spec_holds_the_class_draw_and_network_factors():
    plan = plan_replay(_trace(), 10.0, 4, 64, jobs=2)
    cluster = ClusterView.from_layout([(f"gpu{i:02d}", 4) for i in range(1, 5)],
                                      racks={"gpu01": "l1", "gpu02": "l1", "gpu03": "l2", "gpu04": "l2"})
    slow = {c: [1.0 + i / 100 for i in range(16)] for c in "ABCD"}
    spec = payload_spec(plan.jobs[1], cluster, slow, NetworkModel())
    assert spec["slowdown"]["gpu02"] == [1.04, 1.05, 1.06, 1.07]
    assert spec["rack"]["gpu03"] == "l2"
    assert spec["net"]["1,1"] == 1.0
    assert spec["net"]["2,2"] >= spec["net"]["2,1"] > 1.0
