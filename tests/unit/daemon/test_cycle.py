from hypothesis import given
from hypothesis import strategies as st

from pal_slurm.daemon.cycle import apply_releases, is_pal_held, until_next_tick
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.engine import ManualClock

from .builders import FakeActuator, acts, held_job, view


def svc(busy=(), **settings):
    s = PlacementService(ServiceSettings(**settings))
    s.observe_cluster(view(busy=busy), now=0)
    return s


def plan_releases(jobs, s, now=0.0):
    return s.plan_cycle(jobs, now)


def test_only_jobs_held_by_the_hook_count():
    assert is_pal_held(held_job(1))
    assert not is_pal_held(held_job(2, tag="pal:placed=gpu01"))


def test_fifo_releases_in_submit_order_and_stops_at_the_first_that_does_not_fit():
    s = svc(busy=range(10))  # 6 free: gpu03 slots 2-3, gpu04 all
    jobs = [held_job(12, gpn=2, submit=20), held_job(11, gpn=4, submit=10), held_job(13, gpn=4, submit=30)]
    plan = plan_releases(jobs, s)
    assert [r.job_id for r in plan.releases] == [11, 12]
    assert plan.waiting == 1
    assert plan.releases[0].choice.nodes == {"gpu04": (0, 1, 2, 3)}
    assert plan.releases[0].gres_spec == "gpu:s0:1,gpu:s1:1,gpu:s2:1,gpu:s3:1"
    assert plan.releases[1].choice.nodes == {"gpu03": (2, 3)}


def test_without_backfill_a_big_head_blocks_and_with_backfill_it_does_not():
    jobs = [held_job(1, gpn=4, submit=1), held_job(2, gpn=1, submit=2)]
    assert plan_releases(jobs, svc(busy=range(14))).releases == []
    assert [r.job_id for r in plan_releases(jobs, svc(busy=range(14), backfill=True)).releases] == [2]


def test_planning_reserves_and_a_failed_release_gives_its_gpus_back():
    s = svc()
    plan = plan_releases([held_job(1, gpn=2, submit=1), held_job(2, gpn=2, submit=2)], s)
    assert len(s.reservations) == 2 and len(s.free_now()) == 12  # reserved before acting
    act = FakeActuator(fail_for={2})
    recorded = []
    errors = apply_releases(plan, act, done=recorded.append, failed=lambda rel, exc: s.unreserve(rel.key))
    assert [c[1] for c in act.calls] == [1]
    assert errors and errors[0][0] == 2 and "refused" in errors[0][1]
    assert [r.job_id for r in recorded] == [1]
    assert list(s.reservations) == ["job:1"] and len(s.free_now()) == 14


def test_held_job_with_malformed_comment_is_released_untouched():
    s = svc()
    bad = held_job(5)
    bad = bad.__class__(**{**bad.__dict__, "comment": "pal:class="})
    plan = plan_releases([bad], s)
    assert plan.releases[0].choice is None and plan.releases[0].reason.startswith("bad_comment")


def racked_service(busy=(), **settings):
    from pal_slurm.model import ClusterView

    v = ClusterView.from_layout([(f"gpu{i + 1:02d}", 4) for i in range(4)],
                                racks={"gpu01": "leaf1", "gpu02": "leaf1", "gpu03": "leaf2", "gpu04": "leaf2"})
    s = PlacementService(ServiceSettings(**{"placement": "pal-net", **settings}))
    s.observe_cluster(v.with_free(set(range(16)) - set(busy)), now=0)
    return s


def test_multi_node_jobs_wait_for_one_rack_then_spread():
    """pal-net's delay rule (the simulator's): a 2-node job waits for one leaf switch for its
    rack timer (600 s for medium), then takes the best nodes anywhere."""
    s = racked_service(busy=(0, 1, 2, 3, 8, 9, 10, 11))  # gpu01 and gpu03 busy: one free node per rack
    job = held_job(1, gpn=4, nodes=2, submit=100)
    waiting = plan_releases([job, held_job(2, gpn=2, submit=200)], s, now=300)
    assert [r.job_id for r in waiting.releases] == [2] and waiting.waiting == 1  # the small job passes it
    s = racked_service(busy=(0, 1, 2, 3, 8, 9, 10, 11))
    later = plan_releases([job], s, now=800)  # waited 700 s > 600 s
    assert later.releases[0].choice.nodes.keys() == {"gpu02", "gpu04"}
    impatient = held_job(3, gpn=4, nodes=2, submit=100)
    impatient = impatient.__class__(**{**impatient.__dict__, "comment": "pal:class=bert,net=low"})
    fresh = racked_service(busy=(0, 1, 2, 3, 8, 9, 10, 11))
    assert plan_releases([impatient], fresh, now=101).releases[0].choice is not None  # low: no wait


def test_rack_wait_s_sets_the_rack_timers():
    from pal_slurm.policy import autotune

    s = racked_service(busy=(0, 1, 2, 3, 8, 9, 10, 11), delay_timers=autotune.rack_timers(60.0))
    assert s.rack_timers() == {"low": 0.0, "medium": 60.0, "high": 180.0}
    assert plan_releases([held_job(1, gpn=4, nodes=2, submit=100)], s, now=170).releases  # 70 s > 60 s


def test_one_rack_is_preferred_when_available():
    s = racked_service(busy=(0,))
    plan = plan_releases([held_job(1, gpn=4, nodes=2, submit=0)], s, now=1)
    assert set(plan.releases[0].choice.nodes) == {"gpu03", "gpu04"}


def test_tuned_placements_learn_from_releases():
    s = racked_service(placement="pal-net-tuned")
    before = s.rack_timers()["medium"]
    for i in range(30):
        rel = plan_releases([held_job(i, gpn=4, nodes=2, submit=0)], s, now=50).releases[0]
        s.engine.observe_start(rel.request, rel.choice.gpu_ids, s.view, now=50)
        s.unreserve(rel.key)
    assert s.rack_timers()["medium"] < before / 4  # one-rack slots show up fast: wait less


def test_a_deferred_gpus_n_job_is_placed_by_pal_when_the_cluster_frees(tmp_path):
    """Regression: `sbatch --gpus=4 --comment=pal:class=resnet` on a full cluster is deferred;
    when GPUs free, the cycle must place it (PAL's choice), not release it untouched."""
    from pal_slurm.config import Config, DaemonConfig
    from pal_slurm.daemon.app import Pald
    from pal_slurm.model import DecisionKind

    from .builders import FakeReader, node_info, request

    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")))
    full = [node_info(f"gpu{i:02d}", used=range(4)) for i in range(1, 5)]
    reader = FakeReader(full)
    act = FakeActuator()
    pald = Pald(cfg, None, reader, act, clock=ManualClock(100.0))
    pald.sync_and_cycle()
    reply = pald.handle(request("resnet", gpj=4))
    assert reply.decision is DecisionKind.DEFER and reply.reason == "no_room"

    reader._nodes = [node_info("gpu01", used=range(4)), node_info("gpu02", used=(0, 1)),
                     node_info("gpu03"), node_info("gpu04", used=range(4))]
    reader._jobs = [held_job(7, gpj=4, nodes=1, submit=90)]
    pald.sync_and_cycle()
    assert acts(act.calls) == [("nodes", 7, ("gpu03",))]  # PAL packed it on the free node
    assert pald.counts["released"] == 1


def test_defer_tag_matches_exactly_not_as_a_substring():
    assert is_pal_held(held_job(1, tag="pal:defer"))
    assert is_pal_held(held_job(2, tag="site-note pal:defer;rank=v3;req=ab"))
    assert not is_pal_held(held_job(3, tag="pal:pass=pal:defer;req=x"))  # a forged reason
    assert not is_pal_held(held_job(4, tag="pal:deferred"))
    assert not is_pal_held(held_job(5, tag=""))


def test_held_job_whose_record_did_not_parse_is_released_untouched():
    s = svc()
    bad = held_job(6)
    bad = bad.__class__(**{**bad.__dict__, "unreadable": "bad gres_detail", "tres_per_node": ""})
    plan = plan_releases([bad, held_job(7, submit=1)], s)
    assert [(r.job_id, r.choice is None, r.reason) for r in plan.releases][0] == (6, True, "unreadable_record")
    assert plan.releases[1].job_id == 7 and plan.releases[1].choice is not None


def test_a_sites_reserve_after_s_and_bound_reach_the_placement_through_palds_engine(tmp_path):
    """`[policy] reserve_after_s` and `starvation_bound_s` are what the engine's placements read
    (PlacementContext), not their built-in hour and no bound; the bound's default is 4 h."""
    from pal_slurm.config import Config, DaemonConfig, PolicyConfig
    from pal_slurm.daemon.app import Pald
    from pal_slurm.ranking import Ranking

    from .builders import FakeReader, node_info

    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "s"), heartbeat_file=str(tmp_path / "hb")),
                 policy=PolicyConfig(placement="pal-fit", reserve_after_s=120.0, starvation_bound_s=900.0))
    pald = Pald(cfg, None, FakeReader([node_info("gpu01")]), FakeActuator(), clock=ManualClock(100.0))
    ctx = pald.service.engine.context(view(), Ranking.uniform(16), 0.0)
    assert (ctx.reserve_after_s, ctx.starvation_bound_s) == (120.0, 900.0)
    assert PolicyConfig().starvation_bound_s == 4 * 3600.0


@given(now=st.floats(min_value=1.6e9, max_value=2.0e9), cycle=st.sampled_from([0.1, 0.3, 1.0, 5.0]))
def test_cycles_run_at_the_multiples_of_cycle_s_on_the_epoch_clock(now, cycle):
    delay = until_next_tick(now, cycle)
    assert 0 < delay <= cycle + 1e-3
    ticks = (now + delay) / cycle
    assert abs(ticks - round(ticks)) * cycle < 1e-5  # at a multiple, whenever the last cycle ended


def test_a_wake_up_a_hair_before_a_tick_does_not_run_that_tick_twice():
    tick = 3_333_334 * 0.3  # a multiple of 0.3 s
    assert until_next_tick(tick - 0.0005, 0.3) > 0.3  # the tick this wake-up stands for is done
    assert abs(until_next_tick(tick - 0.05, 0.3) - 0.05) < 1e-6
    assert abs(until_next_tick(tick + 0.01, 0.3) - 0.29) < 1e-6  # a cycle of 10 ms: the rest of it
