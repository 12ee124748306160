from pal_slurm.daemon.cycle import apply_releases, gpus_per_node, is_pal_held, plan_releases
from pal_slurm.daemon.service import PlacementService

from .builders import FakeActuator, held_job, view


def svc(busy=()):
    s = PlacementService()
    s.observe_cluster(view(busy=busy), now=0)
    return s


def test_only_jobs_held_by_the_hook_count():
    assert is_pal_held(held_job(1))
    assert not is_pal_held(held_job(2, tag="pal:placed=gpu01"))


def test_gpus_per_node_parses_typed_and_plain():
    assert gpus_per_node("gres:gpu:4") == 4
    assert gpus_per_node("gres:gpu:s2:1,gres:gpu:s3:1") == 2
    assert gpus_per_node("") is None


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
    s = svc(busy=range(14))
    jobs = [held_job(1, gpn=4, submit=1), held_job(2, gpn=1, submit=2)]
    assert plan_releases(jobs, s).releases == []
    assert [r.job_id for r in plan_releases(jobs, s, backfill=True).releases] == [2]


def test_apply_releases_reserves_and_keeps_failures_held():
    s = svc()
    s.held_jobs = 2
    plan = plan_releases([held_job(1, gpn=2, submit=1), held_job(2, gpn=2, submit=2)], s)
    act = FakeActuator(fail_for={2})
    recorded = []
    errors = apply_releases(plan, act, s, now=1.0, record=recorded.append)
    assert [c[1] for c in act.calls] == [1]
    assert errors and errors[0][0] == 2 and "refused" in errors[0][1]
    assert [r.job_id for r in recorded] == [1]
    assert len(s.reservations) == 1 and s.held_jobs == 1


def test_held_job_with_malformed_comment_is_released_untouched():
    s = svc()
    bad = held_job(5)
    bad = bad.__class__(**{**bad.__dict__, "comment": "pal:class="})
    plan = plan_releases([bad], s)
    assert plan.releases[0].choice is None and plan.releases[0].reason.startswith("bad_comment")


def racked_service(busy=()):
    from pal_slurm.model import ClusterView

    v = ClusterView.from_layout([(f"gpu{i + 1:02d}", 4) for i in range(4)],
                                racks={"gpu01": "leaf1", "gpu02": "leaf1", "gpu03": "leaf2", "gpu04": "leaf2"})
    s = PlacementService()
    s.observe_cluster(v.with_free(set(range(16)) - set(busy)), now=0)
    return s


def test_multi_node_jobs_wait_for_one_rack_then_spread():
    s = racked_service(busy=(0, 1, 2, 3, 8, 9, 10, 11))  # gpu01 and gpu03 busy: one free node per rack
    job = held_job(1, gpn=4, nodes=2, submit=100)
    waiting = plan_releases([job, held_job(2, gpn=2, submit=200)], s, now=300, rack_wait_s=600)
    assert [r.job_id for r in waiting.releases] == [2] and waiting.delayed == 1  # the small job passes it
    later = plan_releases([job], s, now=800, rack_wait_s=600)  # waited 700 s > 600 s
    assert later.releases[0].choice.nodes.keys() == {"gpu02", "gpu04"}
    impatient = held_job(3, gpn=4, nodes=2, submit=100)
    impatient = impatient.__class__(**{**impatient.__dict__, "comment": "pal:class=bert,net=low"})
    assert plan_releases([impatient], s, now=101, rack_wait_s=600).releases[0].choice is not None


def test_one_rack_is_preferred_when_available():
    s = racked_service(busy=(0,))
    plan = plan_releases([held_job(1, gpn=4, nodes=2, submit=0)], s, now=1, rack_wait_s=600)
    assert set(plan.releases[0].choice.nodes) == {"gpu03", "gpu04"}


def test_tuner_learns_from_releases_of_jobs_that_wanted_a_rack():
    from pal_slurm.daemon.cycle import tuner_observation
    from pal_slurm.policy import autotune

    s = racked_service()
    got = plan_releases([held_job(1, gpn=4, nodes=2, submit=0)], s, now=50, rack_wait_s=600).releases[0]
    obs = tuner_observation(got, spine_penalty=1.7)
    assert obs.got == 1 and obs.waited_s == 50
    state = autotune.initial_state(timers={("medium", "rack"): 600.0})
    for _ in range(30):
        state = autotune.observe(state, obs)
    assert autotune.timers(state)[("medium", "rack")] < 120  # slots show up fast: wait less
    single = plan_releases([held_job(2, gpn=1, submit=0)], s, now=5).releases[0]
    assert tuner_observation(single, 1.7) is None  # nothing to learn from one-node jobs


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
