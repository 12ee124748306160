"""A cluster of several GPU models in the event simulator (sim.gpu_models): model jobs run only
on their model, a model's time factor is what its GPUs cost a job, bad specs are clear errors."""

import random

import pytest

from pal_slurm.model import ClusterView
from pal_slurm.sim.compat import CompatConfig, CompatSimulator
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.gpu_models import GpuModelGroup, GpuModelsError, parse_gpu_models, scaled_scores, with_gpu_models
from pal_slurm.sim.trace import Trace, TraceError, TraceJob, UNCLASSED, fit_gpu_models

MIXED = parse_gpu_models("a100=4:0.5,v100=12")


def mixed_trace(n=120, seed=2):
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 300)
        jobs.append(TraceJob(i, rng.choice([1, 1, 2, 4, 8]), round(t, 1), float(rng.randint(3000, 30000)),
                             rng.choice(["resnet50", "vgg19", "BERT"]), gpu_model=rng.choice([None, "a100", "v100"])))
    return Trace("mixed", tuple(jobs))


def test_parse_and_errors():
    assert MIXED == (GpuModelGroup("a100", 4, 0.5), GpuModelGroup("v100", 12, 1.0))
    for bad, what in [("a100", "MODEL=NODES"), ("a100=0", "at least one node"), ("a100=2:0", "time factor"),
                      ("a100=2:nan", "MODEL=NODES"), ("a100=2:1e400", "time factor"), ("a100=1,a100=2", "named twice"), ("a 100=2", "MODEL=NODES")]:
        with pytest.raises(GpuModelsError, match=what):
            parse_gpu_models(bad)


def test_groups_take_nodes_in_order_and_must_cover_the_cluster():
    cluster = with_gpu_models(ClusterView.uniform(16, 4), MIXED)
    assert [n.gpu_model for n in cluster.nodes] == ["a100"] * 4 + ["v100"] * 12
    assert cluster.gpus_by_model["a100"] == frozenset(range(16))
    with pytest.raises(GpuModelsError, match="names 16 nodes; the cluster has 8"):
        with_gpu_models(ClusterView.uniform(8, 4), MIXED)


def test_the_time_factor_scales_every_class_on_that_models_gpus():
    cluster = with_gpu_models(ClusterView.uniform(2, 2), parse_gpu_models("fast=1:0.5,slow=1"))
    out = scaled_scores({"A": [1.0, 1.2, 1.0, 1.2], UNCLASSED: [1.0] * 4}, cluster, parse_gpu_models("fast=1:0.5,slow=1"))
    assert out == {"A": (0.5, 0.6, 1.0, 1.2), UNCLASSED: (0.5, 0.5, 1.0, 1.0)}


@pytest.mark.parametrize("policy", ["pal", "pmfirst", "packed-nonsticky", "pal-net", "pal-fit", "firstfit"])
def test_model_jobs_run_only_on_their_model_and_every_job_finishes(policy):
    trace = mixed_trace()
    sim = EventSimulator(EventConfig(gpu_models=MIXED))
    starts = []
    result = sim.run(trace, policy, on_start=lambda t, jid, gpus: starts.append((jid, gpus)))
    by_id = {j.job_id: j for j in trace.jobs}
    assert len(result.jobs) == len(trace.jobs)
    for jid, gpus in starts:
        model = by_id[jid].gpu_model
        if model is not None:
            assert set(gpus) <= sim.cluster.gpus_by_model[model], (policy, jid, model, gpus)
    assert any(by_id[j].gpu_model is None and set(g) & sim.cluster.gpus_by_model["a100"] for j, g in starts)


def test_a_faster_model_shortens_its_jobs_and_their_lower_bound():
    one = Trace("one", (TraceJob(0, 4, 0.0, 10000.0, "resnet50", gpu_model="a100"),))
    outcomes = {}
    for factor in ("1", "0.5"):
        sim = EventSimulator(EventConfig(gpu_models=parse_gpu_models(f"a100=4:{factor},v100=12"), network=False))
        outcomes[factor] = sim.run(one, "pal").jobs[0]
    slow, fast = outcomes["1"], outcomes["0.5"]
    assert fast.finish - fast.first_start == pytest.approx((slow.finish - slow.first_start) / 2)
    assert fast.lower_bound_s == pytest.approx(slow.lower_bound_s / 2)


def test_a_job_whose_model_the_cluster_lacks_is_a_clear_error():
    trace = Trace("t", (TraceJob(0, 1, 0.0, 100.0, "resnet50", gpu_model="h100"),))
    with pytest.raises(TraceError, match="needs GPU model 'h100'; the cluster's models: a100, v100"):
        EventSimulator(EventConfig(gpu_models=MIXED)).run(trace, "pal")
    big = Trace("t", (TraceJob(0, 20, 0.0, 100.0, "resnet50", gpu_model="a100"),))
    with pytest.raises(TraceError, match="needs 20 a100 GPUs; the cluster has 16"):
        EventSimulator(EventConfig(gpu_models=MIXED)).run(big, "pal")



def test_on_a_cluster_that_names_no_models_the_requests_are_dropped_with_a_warning():
    trace = Trace("t", (TraceJob(0, 1, 0.0, 100.0, "resnet50", gpu_model="h100"), TraceJob(1, 2, 5.0, 100.0, "vgg19")))
    plain = fit_gpu_models(trace, ClusterView.uniform(2, 4))
    assert [j.gpu_model for j in plain.jobs] == [None, None]
    assert plain.warnings == ("t: 1 job(s) ask for a GPU model (h100); the simulated cluster names none "
                              "(--gpu-models), so they run on any GPU",)
    assert fit_gpu_models(plain, ClusterView.uniform(2, 4)) == plain  # once
    assert len(CompatSimulator(CompatConfig()).run(trace, "pal").jobs) == 2
    assert len(EventSimulator(EventConfig()).run(trace, "pal").jobs) == 2
