import random

from pal_slurm.engine import Engine, EngineSettings, ManualClock, WallClock
from pal_slurm.model import ClusterView, JobRequest, JobShape
from pal_slurm.policy.netaware import FALLBACK_PENALTY
from pal_slurm.policy.slurm_starts import SLURM_STARTS
from pal_slurm.ranking import Ranking

VIEW = ClusterView.uniform(4, 4, nodes_per_rack=2)
RANKING = Ranking.uniform(VIEW.size)


def job(jid, n, submit=0.0, running_on=(), **kw):
    return JobRequest(job_id=jid, num_gpus=n, submit_time=submit, waiting_since=submit, running_on=tuple(running_on), **kw)


def test_under_slurm_running_jobs_are_not_moved():
    running = job("r", 2, running_on=(0, 4))  # spread over two nodes: pal would move it
    view = VIEW.with_free(set(range(16)) - {0, 4})
    moving = Engine(EngineSettings(placement="pal")).decide([running, job("w", 2, 1.0)], view, RANKING, 1.0)
    assert "r" in moving.suspend  # the artifact's model: non-sticky placements move jobs
    slurm = Engine(EngineSettings(placement="pal", running_jobs_move=False), start_rule=SLURM_STARTS)
    plan = slurm.decide([running, job("w", 2, 1.0)], view, RANKING, 1.0)
    assert not plan.suspend and set(plan.launch) == {"w"} and not set(plan.launch["w"]) & {0, 4}


def test_under_slurm_only_a_placement_that_plans_around_running_jobs_sees_them_and_none_is_launched():
    from pal_slurm.policy import placement as placement_by_name
    from pal_slurm.policy.registry import PLACEMENTS

    running = job("r", 2, running_on=(0, 4), remaining_time=50.0)
    waiting = job("w", 2, 1.0, remaining_time=100.0)
    view = VIEW.with_free(set(range(16)) - {0, 4})
    for name in sorted(PLACEMENTS):
        eng = Engine(EngineSettings(placement=name, running_jobs_move=False), rng=random.Random(1), start_rule=SLURM_STARTS)
        seen = [j.job_id for j in eng.order_jobs([running, waiting])]
        assert seen == (["r", "w"] if placement_by_name(name).traits.plans_around_running else ["w"]), name
        plan = eng.decide([running, waiting], view, RANKING, 1.0)
        assert not plan.suspend and "r" not in plan.launch, name
        fresh = Engine(EngineSettings(placement=name, running_jobs_move=False), rng=random.Random(1), start_rule=SLURM_STARTS)
        assert fresh.place_behind(waiting, (), view, RANKING, 1.0, [running]) == plan.launch.get("w"), name
    assert {n for n in PLACEMENTS if placement_by_name(n).traits.plans_around_running} >= {"pal-net", "pal-fit"}
    assert not placement_by_name("pal-net-preempt").traits.plans_around_running  # it would stop them


def test_backfill_lets_later_jobs_pass_for_placements_that_do_not_backfill():
    view = VIEW.with_free(range(12, 16))  # 4 GPUs free on node03
    jobs = [job("big", 8, 0.0), job("small", 2, 1.0, shape=JobShape.on_nodes(1, 2))]
    strict = Engine(EngineSettings(placement="pal", running_jobs_move=False), start_rule=SLURM_STARTS)
    assert not strict.decide(jobs, view, RANKING, 2.0).launch
    passing = Engine(EngineSettings(placement="pal", running_jobs_move=False, backfill=True), start_rule=SLURM_STARTS)
    assert passing.decide(jobs, view, RANKING, 2.0).launch == {"small": (12, 13)}


def test_the_submit_path_is_a_cycle_of_one_job():
    view = VIEW.with_free(set(range(16)) - {0, 1, 2, 5})
    for name in ("pal", "pmfirst", "pal-net", "dally", "firstfit"):
        eng = Engine(EngineSettings(placement=name, running_jobs_move=False), rng=random.Random(1), start_rule=SLURM_STARTS)
        for shape in (JobShape.anywhere(3), JobShape.on_nodes(2, 2), JobShape.on_nodes(1, 4)):
            j = job("n", shape.total, 5.0, shape=shape, remaining_time=100.0)
            assert eng.place_new(j, view, RANKING, 5.0) == eng.decide([j], view, RANKING, 5.0).launch.get("n"), (name, shape)


def test_only_tuned_placements_learn_and_the_loss_is_the_work_times_the_factor_gap():
    spread = job("s", 8, 0.0, remaining_time=1000.0, net_sensitivity="high")  # 8 GPUs: best is one rack
    plain = Engine(EngineSettings(placement="pal-net"))
    plain.observe_start(spread, (0, 1, 2, 3, 8, 9, 10, 11), VIEW, 50.0)
    assert plain.tuner.updates == 0
    tuned = Engine(EngineSettings(placement="pal-net-tuned"))
    tuned.observe_start(spread, (0, 1, 2, 3, 8, 9, 10, 11), VIEW, 50.0)
    losses = dict(tuned.tuner.losses)
    _node, rack, spine = FALLBACK_PENALTY["high"]
    assert tuned.tuner.updates == 1 and losses[("high", "rack")] == (1000.0 * (spine - rack),)  # spine vs rack penalty


def test_clocks():
    c = ManualClock(5.0)
    c.set(7)
    assert c.now() == 7.0
    assert WallClock().now() > 1.7e9


def test_under_slurm_a_launch_is_the_slots_slurm_takes_and_later_jobs_plan_on_what_is_left():
    """A 2-node job whose best slots differ between its nodes cannot be bound slot by slot: pald
    pins its nodes and Slurm takes the lowest free slots there. The cycle launches (and pald
    reserves) those, and the jobs after it in the same cycle are placed on what really is left,
    as the one-at-a-time submit path places them."""
    from pal_slurm.ranking.snapshot import CLASS_ORDER

    slow = {0, 7}  # node 1 slot 0, node 2 slot 3
    ranking = Ranking.from_scores({c: tuple(2.8 if g in slow else 1.0 for g in range(16)) for c in CLASS_ORDER})
    view = VIEW.with_free(range(8))  # nodes 1 and 2 free, the others busy
    big = job("a", 6, 0.0, shape=JobShape.on_nodes(2, 3), remaining_time=100.0)
    small = job("b", 1, 1.0, shape=JobShape.on_nodes(1, 1), remaining_time=100.0)
    eng = Engine(EngineSettings(placement="pal", running_jobs_move=False), start_rule=SLURM_STARTS)
    plan = eng.decide([big, small], view, ranking, 2.0)
    assert plan.launch["a"] == (0, 1, 2, 4, 5, 6)  # PAL wanted 1,2,3 and 4,5,6: Slurm takes 0,1,2 on node 1
    assert plan.launch["b"] == (3,)  # the fast GPU left, never one Slurm gives job a
    first = eng.place_new(big, view, ranking, 2.0)
    assert first == plan.launch["a"]
    assert eng.place_new(small, view.with_free(set(range(8)) - set(first)), ranking, 2.0) == plan.launch["b"]
    # the artifact's model (the simulator's own loop, nothing pinned by Slurm) keeps PAL's slots
    free_run = Engine(EngineSettings(placement="pal")).decide([big, small], view, ranking, 2.0)
    assert free_run.launch["a"] == (1, 2, 3, 4, 5, 6)
    # the start rule, not the running jobs' rule, is what takes Slurm's slots
    staying = Engine(EngineSettings(placement="pal", running_jobs_move=False)).decide([big, small], view, ranking, 2.0)
    assert staying.launch["a"] == (1, 2, 3, 4, 5, 6)


def test_jobs_handed_in_submit_order_skip_only_a_submit_ordered_queues_sort():
    """`in_submit_order` lets FIFO keep the list as it is; an order that reads anything else
    (SRTF: remaining time) still sorts it."""
    jobs = [JobRequest(job_id=i, num_gpus=1, submit_time=float(i), remaining_time=float(10 - i)) for i in range(4)]
    fifo = Engine(EngineSettings(queue="fifo"))
    srtf = Engine(EngineSettings(queue="srtf"))
    assert [j.job_id for j in fifo.order_jobs(jobs, in_submit_order=True)] == [0, 1, 2, 3]
    assert [j.job_id for j in srtf.order_jobs(jobs, in_submit_order=True)] == [3, 2, 1, 0]


def test_jobs_planned_again_after_slurm_s_slots_still_see_the_running_jobs_end():
    """After a launch changes to Slurm's slots, the jobs after it are planned again around the
    running jobs and that launch. Before, that second plan saw no running jobs: no GPU ever came
    free, and a finish-aware placement spread a network-bound job it would have waited for (the
    replay's model of workload-3: a 12-GPU GPT2 job over two leaf switches, 7.8x slower)."""
    from pal_slurm.ranking.snapshot import CLASS_ORDER

    slow = {8, 15}  # node 3 slot 0, node 4 slot 3: PAL's best slots differ between the nodes
    ranking = Ranking.from_scores({c: tuple(2.8 if g in slow else 1.0 for g in range(16)) for c in CLASS_ORDER})
    short = job("r", 2, running_on=(0, 1), remaining_time=50.0)  # node 1 is whole again at 50
    long = job("l", 4, running_on=(4, 5, 6, 7), remaining_time=10_000.0)
    view = VIEW.with_free(set(range(16)) - {0, 1, 4, 5, 6, 7})
    pinned = job("a", 6, 0.0, shape=JobShape.on_nodes(2, 3), remaining_time=1000.0)  # nodes 3 and 4
    talkative = job("b", 4, 1.0, remaining_time=10_000.0, net_sensitivity="high")
    eng = Engine(EngineSettings(placement="pal-fit", running_jobs_move=False), start_rule=SLURM_STARTS)
    plan = eng.decide([short, long, pinned, talkative], view, ranking, 2.0)
    assert plan.launch["a"] == (8, 9, 10, 12, 13, 14)  # Slurm's lowest slots, not PAL's 9-11 and 12-14
    assert "b" not in plan.launch  # it waits for node 1 (at 50) rather than spread over three nodes
    # ... and the cycle reports that wait as the second plan made it (RoundPlan.planned)
    assert set(plan.planned) == {"b"} and plan.planned["b"].at == 52.0
    assert plan.planned["b"].gpus is not None and set(range(4)) <= plan.planned["b"].gpus


# ---- the site's priority order (queue "slurm"): a later job passes only as Slurm's backfill would
ORDER_VIEW = ClusterView.uniform(2, 4, nodes_per_rack=2)


def _site_order_cycle(queue: str, placement: str = "pal-fit", backfill: bool = False):
    """A job on node 0's four GPUs ends in 100 s; `high` (priority 20, 8 GPUs, submitted
    now: within pal-fit's reserve_after_s grace) cannot start before then. `long` (priority
    10) fits now and would run past it; `short` (priority 5) ends before it."""
    running = job("run", 4, running_on=(0, 1, 2, 3), remaining_time=100.0)
    high = job("high", 8, 10.0, remaining_time=600.0, site_priority=20)
    long = job("long", 2, 11.0, remaining_time=500.0, site_priority=10)
    short = job("short", 2, 12.0, remaining_time=60.0, site_priority=5)
    eng = Engine(EngineSettings(placement=placement, queue=queue, running_jobs_move=False, backfill=backfill),
                 start_rule=SLURM_STARTS)
    return eng.decide([running, high, long, short], ORDER_VIEW.with_free(set(range(4, 8))), Ranking.uniform(8), 20.0)


def test_in_the_sites_order_a_lower_job_that_would_delay_a_waiting_one_waits():
    # under fifo pal-fit's grace lets both pass the 8-GPU job (the long one delays it 400 s)
    assert set(_site_order_cycle("fifo").launch) == {"long", "short"}
    plan = _site_order_cycle("slurm")
    # the site's order: `high` reserves at once; only the job that ends before it passes
    assert set(plan.launch) == {"short"} and plan.planned["high"].at == 120.0


def test_in_the_sites_order_the_engines_own_backfill_passes_no_one():
    # `pal` does not backfill; the engine's greedy backfill would pass the blocked head
    assert set(_site_order_cycle("fifo", "pal", backfill=True).launch) == {"long", "short"}
    assert not _site_order_cycle("slurm", "pal", backfill=True).launch
