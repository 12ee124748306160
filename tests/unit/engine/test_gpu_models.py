"""Jobs that need one GPU model (the simulator's mixed clusters): the engine places them only
on that model's GPUs, for every registered placement, in the cycle and on the submit path."""

import random

import pytest

from pal_slurm.engine import AS_PLANNED, Engine, EngineSettings
from pal_slurm.engine.cycle import eligible_view
from pal_slurm.model import ClusterView, JobRequest, JobShape
from pal_slurm.policy import PLACEMENTS
from pal_slurm.policy.slurm_starts import SLURM_STARTS
from pal_slurm.ranking import Ranking

# node00-01 a100, node02-03 v100; node00's GPUs rank best, so a blind best-GPU choice is a100
VIEW = ClusterView.uniform(4, 4, nodes_per_rack=2).with_gpu_models(
    {"node00": "a100", "node01": "a100", "node02": "v100", "node03": "v100"})
A100, V100 = VIEW.gpus_by_model["a100"], VIEW.gpus_by_model["v100"]
RANKING = Ranking.from_scores({c: [1.0 + 0.01 * g for g in range(16)] for c in "ABCD"})


def job(jid, n, submit=0.0, model=None, **kw):
    return JobRequest(job_id=jid, num_gpus=n, submit_time=submit, waiting_since=submit, gpu_model=model,
                      remaining_time=100.0, **kw)


def test_the_model_table_is_the_nodes_gpus_and_copies_share_it():
    assert A100 == frozenset(range(8)) and V100 == frozenset(range(8, 16))
    assert VIEW.with_free({1, 9}).gpus_by_model is VIEW.gpus_by_model
    assert ClusterView.uniform(2, 4).gpus_by_model == {}


def test_a_view_for_jobs_of_one_model_is_that_models_free_gpus():
    view = VIEW.with_free({0, 1, 8, 9})
    assert eligible_view(view, [job(1, 1, model="v100")]).free == {8, 9}
    assert eligible_view(view, [job(1, 1, model="v100"), job(2, 1)]).free == {0, 1, 8, 9}  # mixed: per job
    assert eligible_view(view, [job(1, 1)]).free == {0, 1, 8, 9}
    plain = ClusterView.uniform(4, 4).with_free({0, 1, 8, 9})  # names no models: no restriction
    assert eligible_view(plain, [job(1, 1, model="v100")]).free == {0, 1, 8, 9}
    eng = Engine(EngineSettings(placement="pal"))
    j = job("m", 2, model="v100")
    assert eng.place_new(j, plain, RANKING, 1.0) == eng.decide([j], plain, RANKING, 1.0).launch["m"]


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
@pytest.mark.parametrize("moving", [True, False])
def test_every_placement_puts_model_jobs_on_their_model_only(name, moving):
    eng = Engine(EngineSettings(placement=name, running_jobs_move=moving, backfill=not moving), rng=random.Random(3),
                 start_rule=AS_PLANNED if moving else SLURM_STARTS)
    jobs = [job("any", 2, 0.0), job("v1", 2, 1.0, model="v100"), job("a1", 4, 2.0, model="a100"),
            job("v2", 1, 3.0, model="v100", shape=JobShape.on_nodes(1, 1))]
    plan = eng.decide(jobs, VIEW, RANKING, 10.0)
    launch = plan.launch
    assert set(launch) >= {"v1", "a1", "v2"}, (name, launch)  # the cluster is idle: all fit
    assert set(launch["v1"]) <= V100 and set(launch["v2"]) <= V100 and set(launch["a1"]) <= A100, (name, launch)
    taken = [g for gpus in launch.values() for g in gpus]
    assert len(taken) == len(set(taken)), (name, launch)  # no GPU twice
    one = eng.place_new(job("new", 2, 11.0, model="v100"), VIEW.with_free(set(range(16)) - set(taken)), RANKING, 11.0)
    assert one is None or set(one) <= V100, (name, one)


def test_the_submit_path_is_a_cycle_of_one_model_job():
    view = VIEW.with_free(set(range(16)) - {8, 9, 12})
    for name in ("pal", "pmfirst", "pal-net", "pal-fit", "firstfit"):
        eng = Engine(EngineSettings(placement=name, running_jobs_move=False), rng=random.Random(1), start_rule=SLURM_STARTS)
        j = job("n", 3, 5.0, model="v100")
        got = eng.place_new(j, view, RANKING, 5.0)
        assert got is not None and set(got) <= V100 - {8, 9, 12}, (name, got)
        assert got == eng.decide([j], view, RANKING, 5.0).launch.get("n"), name


def test_without_backfill_a_model_job_that_does_not_fit_holds_the_ones_behind_it():
    view = VIEW.with_free({0, 1, 8, 9, 10, 11})  # 2 a100 and 4 v100 free
    jobs = [job("a-big", 4, 0.0, model="a100"), job("v", 2, 1.0, model="v100"), job("any", 2, 2.0)]
    strict = Engine(EngineSettings(placement="pal", running_jobs_move=False), start_rule=SLURM_STARTS).decide(jobs, view, RANKING, 5.0)
    assert "a-big" not in strict.launch and "v" not in strict.launch and "any" in strict.launch
    passing = Engine(EngineSettings(placement="pal", running_jobs_move=False, backfill=True), start_rule=SLURM_STARTS)
    plan = passing.decide(jobs, view, RANKING, 5.0)
    assert "a-big" not in plan.launch and set(plan.launch["v"]) <= V100
    assert not set(plan.launch["v"]) & set(plan.launch["any"])


def test_a_running_model_job_keeps_its_gpus_when_others_are_moved():
    running = job("r", 2, 0.0, model="v100", running_on=(8, 12))  # spread: pal would move a plain job
    view = VIEW.with_free(set(range(16)) - {8, 12})
    plan = Engine(EngineSettings(placement="pal")).decide([running, job("w", 2, 1.0)], view, RANKING, 1.0)
    assert "r" not in plan.suspend and "r" not in plan.launch
    assert not set(plan.launch["w"]) & {8, 12}
