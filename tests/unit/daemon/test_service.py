import pytest

from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.model import DecisionKind
from pal_slurm.policy import PLACEMENTS

from .builders import place, request, snapshot, view


def service(busy=(), snap=None, **kw):
    s = PlacementService(ServiceSettings(**kw))
    s.set_snapshot(snap)
    s.observe_cluster(view(busy=busy), now=0.0)
    return s


SLOW = snapshot({"A": {("gpu01", 1): (2.8, 2.8)}})


def test_places_a_single_node_job_on_exact_slots_avoiding_the_slow_gpu():
    s = service(snap=SLOW)
    r = place(s, request("resnet", gpn=4), now=0.1, key="r1")
    assert r.decision is DecisionKind.PLACE
    assert r.nodes == {"gpu02": (0, 1, 2, 3)}  # gpu01 holds the slow GPU
    assert r.gres == "gres:gpu:s0:1,gres:gpu:s1:1,gres:gpu:s2:1,gres:gpu:s3:1"
    assert r.rank == 3 and r.perf_class == "A" and r.warning is None


def test_best_fit_keeps_whole_nodes_free():
    s = service(busy=(4, 5))  # gpu02 has 2 free
    r = place(s, request("vgg19", gpn=2), now=0.1, key="r1")
    assert r.nodes == {"gpu02": (2, 3)}


def test_two_submissions_in_the_same_second_never_share_gpus():
    s = service()
    seen = set()
    for i in range(8):
        r = place(s, request("bert", gpn=2), now=0.5, key=f"r{i}")
        assert r.decision is DecisionKind.PLACE
        gpus = {(n, x) for n, slots in r.nodes.items() for x in slots}
        assert not gpus & seen
        seen |= gpus
    assert len(seen) == 16
    r = place(s, request("bert", gpn=2), now=0.5, key="r9")
    assert r.decision is DecisionKind.DEFER and r.reason == "no_room"


def test_reservations_end_when_slurm_shows_the_gpus_busy_or_after_the_ttl():
    s = service(reservation_ttl_s=30)
    r = place(s, request("bert", gpn=4), now=1.0, key="a")
    assert len(s.free_now()) == 12
    s.observe_cluster(view(busy=()), now=2.0)  # Slurm has not started it yet: still reserved
    assert len(s.reservations) == 1
    slots = {"gpu01": 0, "gpu02": 4, "gpu03": 8, "gpu04": 12}
    first = slots[next(iter(r.nodes))]
    s.observe_cluster(view(busy=range(first, first + 4)), now=3.0)
    assert not s.reservations and len(s.free_now()) == 12
    place(s, request("bert", gpn=4), now=4.0, key="b")
    s.observe_cluster(view(), now=40.0)  # never started: expires
    assert not s.reservations


def test_unknown_class_gets_the_default_and_a_warning():
    s = service()
    r = place(s, request("mystery-app", gpn=1), now=0, key="k")
    assert r.decision is DecisionKind.PLACE and r.perf_class == "A"
    assert "unknown class 'mystery-app'" in r.warning


@pytest.mark.parametrize("net", ["loud", "0.5", "nan", "5000"])
def test_a_net_that_is_neither_a_class_nor_a_factor_gets_a_warning_and_is_placed(net):
    s = service()
    r = place(s, request("resnet", gpn=1, net=net), now=0, key="k")
    assert r.decision is DecisionKind.PLACE
    assert f"unknown network sensitivity '{net}'" in r.warning and "net=2.2" in r.warning


@pytest.mark.parametrize("net", [None, "low", "HIGH", "1", "2.2", "7.78"])
def test_a_class_or_a_spread_factor_is_no_warning(net):
    assert place(service(), request("resnet", gpn=1, net=net), now=0, key="k").warning is None


def test_both_warnings_reach_the_user():
    r = place(service(), request("mystery-app", gpn=1, net="loud"), now=0, key="k")
    assert "unknown class 'mystery-app'" in r.warning and "unknown network sensitivity 'loud'" in r.warning


def test_store_class_map_is_used():
    s = service()
    s.set_class_map({"mystery-app": "D"})
    r = place(s, request("mystery-app", gpn=1), now=0, key="k")
    assert r.perf_class == "D" and r.warning is None


def test_modes_and_queue_order():
    s = service(busy=range(16))
    assert place(s, request(gpn=1, mode="now"), now=0, key="a").decision is DecisionKind.PASS
    assert place(s, request(gpn=1), now=0, key="b").decision is DecisionKind.DEFER
    s.observe_cluster(view(), now=1.0, held_jobs=1)  # room again, but an older job is held
    assert place(s, request(gpn=1), now=1, key="c").decision is DecisionKind.DEFER
    assert place(s, request(gpn=1, mode="now"), now=1, key="d").decision is DecisionKind.PLACE
    assert place(s, request(gpn=1, mode="defer"), now=1, key="e").decision is DecisionKind.DEFER


def test_requests_that_cannot_be_placed_pass():
    s = service()
    assert place(s, request(gpn=8), now=0, key="a").reason == "too_many_gpus_per_node"
    assert place(s, request(gpj=64), now=0, key="b").reason == "bigger_than_cluster"
    assert place(s, request(), now=0, key="c").reason == "no_gpus"
    fresh = PlacementService()
    assert place(fresh, request(gpn=1), now=0, key="d").reason == "no_cluster_view"


def test_multi_node_per_node_shape_and_total_shape():
    s = service(busy=(0,))
    r = place(s, request(gpn=2, nodes=2), now=0, key="a")
    assert len(r.nodes) == 2 and all(len(v) == 2 for v in r.nodes.values())
    r = place(s, request(gpj=6), now=0, key="b")
    assert r.decision is DecisionKind.PLACE and sum(len(v) for v in r.nodes.values()) == 6
    assert r.gres is None  # a total request keeps its own GRES; the hook pins the nodes


def test_a_job_that_started_and_ended_between_two_views_frees_its_reservation():
    from pal_slurm.daemon.sync import started_keys

    from .builders import held_job

    s = service()
    place(s, request("bert", gpn=4), now=1.0, key="req:h1")
    done = held_job(9, tag="pal:placed=gpu01;rank=v3;req=h1")
    done = done.__class__(**{**done.__dict__, "state": "COMPLETED"})
    assert started_keys([done, held_job(10)]) == {"job:9", "req:h1"}
    s.observe_cluster(view(), now=2.0, started=started_keys([done]))
    assert not s.reservations


@pytest.mark.parametrize("name", sorted(PLACEMENTS))
def test_every_registered_placement_answers_every_shape(name):
    from .builders import held_job

    s = service(busy=(0, 1, 4), placement=name)
    for req in (request("resnet", gpn=2), request("bert", gpn=2, nodes=2), request("vgg19", gpj=3)):
        r = place(s, req, now=1.0, key=f"{name}-{req.job}")
        assert r.decision is DecisionKind.PLACE, (name, r)
        slots = [x for v in r.nodes.values() for x in v]
        assert len(slots) == (req.job.gpus_per_node or 0) * (req.job.min_nodes or 1) or len(slots) == req.job.gpus_per_job
    plan = s.plan_cycle([held_job(7, gpn=1, nodes=2, submit=0), held_job(8, gpj=2, submit=1)], now=2.0)
    assert {r.job_id for r in plan.releases} == {7, 8} and all(r.choice for r in plan.releases)
    assert len(s.free_now()) == 16 - 3 - 2 - 4 - 3 - 2 - 2  # every answer reserved its GPUs


def test_unbound_slots_reserve_what_slurm_will_take():
    """Fault seen in a replay on the lab: a 2 x 3 GPU job got different slots on its two nodes,
    so pald pinned only the nodes (Slurm then takes the lowest free slots), but reserved its own
    slots; the next 1-GPU job was bound to a slot Slurm gave the first job and waited behind it
    for its whole run (13.5 trace hours). The reservation must be what Slurm takes."""
    slow = snapshot({"A": {("gpu01", 0): (2.8, 2.8), ("gpu02", 3): (2.8, 2.8)}})
    s = service(busy=tuple(range(8, 16)), snap=slow)  # only gpu01 and gpu02 free
    r = place(s, request("resnet", gpn=3, nodes=2), now=0.1, key="a")
    # PAL avoided 0 on gpu01 and 3 on gpu02: slots pald cannot bind (they differ between the
    # nodes), so Slurm takes its lowest free ones; the answer, the binding and the reservation
    # all say so (the same slots on both nodes now, so they are bound exactly)
    assert r.decision is DecisionKind.PLACE
    assert r.nodes == {"gpu01": (0, 1, 2), "gpu02": (0, 1, 2)}
    assert r.gres == "gres:gpu:s0:1,gres:gpu:s1:1,gres:gpu:s2:1"
    assert s.reservations["a"].gpu_ids == frozenset({0, 1, 2, 4, 5, 6})  # Slurm's lowest free slots
    r2 = place(s, request("resnet", gpn=1), now=0.2, key="b")
    assert r2.decision is DecisionKind.PLACE
    assert r2.nodes in ({"gpu01": (3,)}, {"gpu02": (3,)})  # never a slot Slurm gives job a


def test_after_a_read_with_nothing_held_the_first_held_job_does_not_hold_the_newcomers():
    """pald runs no cycle while nothing is held, so before this fix the submit path's list of
    held jobs stayed unknown (pald's start) or the last cycle's (jobs since started): the
    first job held after a quiet spell held every newcomer until the next cycle."""
    from .builders import held_job

    s = service(busy=range(12), placement="pal-fit")
    s.observe_cluster(view(busy=range(12)), now=0.0, held_jobs=0)  # a read: nothing held
    big = place(s, request(gpn=4, nodes=2), now=0.5, key="big")
    assert (big.decision, big.reason) == (DecisionKind.DEFER, "no_room")
    small = place(s, request(gpn=1), now=0.6, key="small")
    assert small.decision is DecisionKind.PLACE  # behind `big`, as the cycle would
    s.plan_cycle([held_job(1, gpn=4, nodes=2, time_limit_s=3600)], now=1.0)
    s.observe_cluster(view(busy=range(13)), now=2.0, held_jobs=0)  # it started or went: nothing held
    assert s.queue.waiting == [] and not s.queue.deferred_unplanned


def test_slots_slurm_picks_follow_what_each_read_shows_free_until_the_job_starts():
    """Fault seen in a replay on the lab (workload-4): pald's view still showed slot 2 of gpu01
    busy, so a 2 x 3 GPU job got slots 0, 1, 3 there and 0-2 on gpu02 (they differ: Slurm picks);
    slot 2 freed before Slurm's pass, Slurm gave it to that job, and pald promised it to the next
    1-GPU job, which waited behind it. The reservation must follow Slurm's pick."""
    s = service(busy=(2, *range(8, 16)))
    a = place(s, request("resnet", gpn=3, nodes=2), now=0.1, key="a")
    assert a.decision is DecisionKind.PLACE and a.gres is None  # slots differ: Slurm picks
    assert s.reservations["a"].gpu_ids == frozenset({0, 1, 3, 4, 5, 6})
    s.observe_cluster(view(busy=range(8, 16)), now=0.5)  # slot 2 free; job a not started yet
    slurm_takes = frozenset({0, 1, 2, 4, 5, 6})  # the lowest free slots on its nodes at the pass
    assert s.reservations["a"].gpu_ids == slurm_takes
    b = place(s, request("resnet", gpn=1), now=0.6, key="b")
    assert b.decision is DecisionKind.PLACE and b.nodes in ({"gpu01": (3,)}, {"gpu02": (3,)})
    s.observe_cluster(view(busy=(0, 1, 2, 4, 5, 6, *range(8, 16))), now=1.0, started={"a"})
    assert "a" not in s.reservations and "b" in s.reservations  # started: Slurm's own record now


def test_exactly_bound_slots_are_never_moved():
    s = service(busy=range(8, 16))
    a = place(s, request("resnet", gpn=3, nodes=2), now=0.1, key="a")
    assert a.gres is not None and not s.reservations["a"].slurm_picks  # same slots on both nodes: bound
    before = s.reservations["a"].gpu_ids
    s.observe_cluster(view(busy=(7, *range(8, 16))), now=0.5)
    assert s.reservations["a"].gpu_ids == before


def test_a_backfilling_placement_places_a_newcomer_the_cycle_would_start_behind_held_jobs():
    """Held behind an older PAL job, a new job is placed at once when the cycle over the held
    jobs and it would start it (pal-fit backfills: Engine.place_behind), not a cycle later;
    placements that do not backfill, and pald before its first cycle, hold it as before."""
    from .builders import held_job

    for placement, placed in (("pal-fit", True), ("pal", False)):
        s = service(busy=range(12), placement=placement)
        s.observe_cluster(view(busy=range(12)), now=0.0, held_jobs=1)
        early = place(s, request(gpn=1), now=0.5, key="x")  # no cycle yet: the held job is unknown
        assert (early.decision, early.reason) == (DecisionKind.DEFER, "queued")
        s.retract("x", early.decision)
        assert not s.plan_cycle([held_job(1, gpn=4, nodes=2, time_limit_s=3600)], now=1.0).releases
        small = place(s, request(gpn=1), now=1.5, key="a")
        assert (small.decision is DecisionKind.PLACE) == placed, placement
        big = place(s, request(gpn=4, nodes=2), now=1.6, key="b")  # does not fit: held with them
        assert (big.decision, big.reason) == (DecisionKind.DEFER, "queued")
        assert "b" in s.queue.deferred_since_sync
        if placed:
            assert small.nodes == {"gpu04": (0,)} and len(s.free_now()) == 3  # reserved: never promised twice
            s.observe_cluster(view(busy=range(13)), now=2.0, held_jobs=2)  # Slurm shows both held
            assert not s.queue.deferred_since_sync and "b" in s.queue.deferred_unplanned  # the next cycle plans b


def test_between_a_read_and_the_cycle_that_plans_it_a_newcomer_is_placed_behind_the_held_jobs():
    """pald reads Slurm, then plans the held jobs it read (the lock released in between). A
    job submitted in that window was held because the read counted a deferral the last cycle
    had not planned (a lab replay of workload-1: 6 of 40 jobs, each then waiting for pald's
    next cycle and often Slurm's next pass); it is planned behind them as after the cycle.
    A held job pald knows nothing of (requeued by Slurm, ...) still holds newcomers."""
    from .builders import held_job

    s = service(busy=range(12), placement="pal-fit")
    s.observe_cluster(view(busy=range(12)), now=0.0, held_jobs=1)
    s.plan_cycle([held_job(1, gpn=4, nodes=2, time_limit_s=3600)], now=1.0)
    big = place(s, request(gpn=4, nodes=2), now=1.6, key="b")  # does not fit: held
    assert (big.decision, big.reason) == (DecisionKind.DEFER, "queued")
    s.observe_cluster(view(busy=range(12)), now=2.0, held_jobs=2)  # the read: both held; no cycle yet
    c = place(s, request(gpn=1), now=2.5, key="c")
    assert c.decision is DecisionKind.PLACE and c.nodes == {"gpu04": (0,)}
    held = [held_job(1, gpn=4, nodes=2, time_limit_s=3600), held_job(2, gpn=4, nodes=2, time_limit_s=3600)]
    s.plan_cycle(held, now=3.0)  # the cycle plans that read
    assert not s.queue.deferred_unplanned and [w.job_id for w in s.queue.waiting] == [1, 2]
    s.observe_cluster(view(busy=range(13)), now=4.0, held_jobs=3)  # one more held that pald never saw
    assert place(s, request(gpn=1), now=4.5, key="d").decision is DecisionKind.DEFER
    s.observe_cluster(view(busy=range(13)), now=5.0, held_jobs=0)  # nothing held: nothing to plan behind
    assert not s.queue.deferred_unplanned and not s.queue.deferred_since_sync


def test_a_deferral_the_read_already_shows_is_planned_behind_once():
    """A job deferred as Slurm's read is taken (the same instant: the read may or may not have
    it) stays among the deferrals since that read; when the cycle over that read plans it (its
    admin_comment's req= names the deferral), the submit path stops counting it a second time.
    Counted twice, it held a second reservation in the submit path's plan and a newcomer the
    cycle would start was held or placed elsewhere (pald and the simulator parted)."""
    from .builders import held_job

    s = service(busy=range(12), placement="pal-fit")
    s.observe_cluster(view(busy=range(12)), now=0.0, held_jobs=1)
    s.plan_cycle([held_job(1, gpn=4, nodes=2, time_limit_s=3600, tag="pal:defer;req=a")], now=1.0)
    big = place(s, request(gpn=4, nodes=2), now=2.0, key="req:b")
    assert (big.decision, big.reason) == (DecisionKind.DEFER, "queued")
    s.observe_cluster(view(busy=range(12)), now=2.0, held_jobs=2)  # the read, at the deferral's instant
    assert "req:b" in s.queue.deferred_since_sync  # not known to be in the read
    held = [held_job(1, gpn=4, nodes=2, time_limit_s=3600, tag="pal:defer;req=a"),
            held_job(2, gpn=4, nodes=2, time_limit_s=3600, tag="pal:defer;rank=v1;req=b")]
    s.plan_cycle(held, now=2.0)  # ... but it was: the cycle plans job 2, which is b
    assert "req:b" not in s.queue.deferred_since_sync and [w.job_id for w in s.queue.waiting] == [1, 2]
    s.observe_cluster(view(busy=range(12)), now=3.0, held_jobs=2)
    assert not s.queue.deferred_unplanned  # nothing for the submit path to plan behind a second time


# ---- running jobs: a placement that plans around them reads their ends from their limits ----
def running_info(job_id, node, slots, limit_s, start=1, comment="pal:class=resnet"):
    from dataclasses import replace

    from .builders import held_job
    return replace(held_job(job_id), state="RUNNING", reason="None", priority=1000, comment=comment,
                   nodes=(node,), gpu_slots={node: frozenset(slots)}, start_time=start, time_limit_s=limit_s)


def with_running(placement, now, jobs):
    s = PlacementService(ServiceSettings(placement=placement))
    s.observe_cluster(view(nodes=2, busy=[0, 1, 2, 4, 5, 6]), now=now)  # 1 GPU free on each node
    s.observe_running(jobs, now)
    return s


def talkative(gpj=2):
    from dataclasses import replace
    r = request("bert", gpj=gpj)
    r = replace(r, job=replace(r.job, comment="pal:class=bert,net=high", time_limit=600), pal=replace(r.pal, net="high"))
    return r


RUNNING = [running_info(11, "gpu01", (0, 1, 2), 100.0, comment="pal:class=vgg19,net=low"),
           running_info(12, "gpu02", (0, 1, 2), 90_000.0, comment="odd comment")]


def test_the_running_jobs_are_seen_with_their_limit_less_their_run_time():
    s = with_running("pal-fit", 40.0, RUNNING + [running_info(13, "gpu02", (3,), None)])
    got = {r.job_id: r for r in s.running}
    assert got[11].running_on == (0, 1, 2) and got[12].running_on == (4, 5, 6) and got[13].running_on == (7,)
    assert (got[11].remaining_time, got[12].remaining_time, got[13].remaining_time) == (61.0, 89_961.0, 0.0)
    assert (got[11].net_sensitivity, got[11].app) == ("low", "vgg19")
    assert got[12].net_sensitivity == "medium" and got[12].app == ""  # a comment that is not ours
    assert with_running("pal", 40.0, RUNNING).running == []  # pal does not plan around them


def test_a_completing_or_configuring_job_is_seen_with_its_limit_like_a_running_one():
    """A job Slurm shows COMPLETING (its epilog runs) holds its GPUs in the view; seen as no
    job at all, its GPUs never freed for a plan, and a 32-GPU job that could wait a minute for
    fast nodes was released onto slower ones (a lab replay of workload-4, seed 2). It counts
    as running with its limit less its run time, as does a CONFIGURING one; a SUSPENDED or
    pending one does not."""
    from dataclasses import replace
    jobs = [replace(running_info(21, "gpu01", (0,), 100.0), state="COMPLETING"),
            replace(running_info(22, "gpu01", (1,), 100.0), state="CONFIGURING"),
            replace(running_info(23, "gpu02", (0,), 100.0), state="SUSPENDED"),
            replace(running_info(24, "gpu02", (1,), 100.0), state="PENDING")]
    got = {r.job_id: r for r in with_running("pal-fit", 40.0, jobs).running}
    assert sorted(got) == [21, 22]
    assert got[21].running_on == (0,) and got[21].remaining_time == 61.0


def test_gpus_no_job_holds_any_more_free_in_a_moment_so_a_talkative_job_waits_instead_of_spreading():
    """Job 11 on gpu01's slots 0-2 ended between sinfo's read and squeue's: sinfo still counts
    its GPUs, squeue has no job on them. As GPUs with no end a plan never saw them free, and a
    network-sensitive 2-GPU job was spread over both nodes at once (a lab replay of workload-1:
    a 12-GPU GPT-2 job over two leaf switches, 7.8x slower). Seen ending a second after the
    read, the job waits for gpu01 (pald's next cycle places it there); on a node whose GPUs
    stay busy with no end (a suspended job's) it still spreads."""
    def after_read(unheld):
        s = PlacementService(ServiceSettings(placement="pal-fit"))
        s.observe_cluster(view(nodes=2, busy=[0, 1, 2, 4, 5, 6]), now=10.0)
        s.observe_running(RUNNING[1:], 10.0, unheld=unheld)
        return s

    s = after_read({"gpu01": [0, 1, 2]})
    ended = [r for r in s.running if r.job_id == "ended-on-gpu01"]
    assert len(ended) == 1 and ended[0].running_on == (0, 1, 2) and ended[0].remaining_time == 1.0
    r = place(s, talkative(), now=10.0, key="r1")
    assert r.decision is DecisionKind.DEFER and r.reason == "no_room"
    r = place(after_read({}), talkative(), now=10.0, key="r1")  # as before: busy with no end
    assert r.decision is DecisionKind.PLACE and set(r.nodes) == {"gpu01", "gpu02"}
    # still unheld past the window (a job pald cannot see holds them): busy with no end again
    s.observe_cluster(view(nodes=2, busy=[0, 1, 2, 4, 5, 6]), now=14.0)
    s.observe_running(RUNNING[1:], 14.0, unheld={"gpu01": [0, 1, 2]})
    assert any(r.job_id == "ended-on-gpu01" for r in s.running)
    s.observe_cluster(view(nodes=2, busy=[0, 1, 2, 4, 5, 6]), now=16.0)
    s.observe_running(RUNNING[1:], 16.0, unheld={"gpu01": [0, 1, 2]})
    assert not any(r.job_id == "ended-on-gpu01" for r in s.running)


def test_a_talkative_job_waits_for_the_running_job_whose_limit_ends_soon_instead_of_spreading():
    # 2 GPUs, network-sensitive: spread over both nodes now, or on gpu01 when job 11's limit
    # ends in 90 s? pal-fit waits (deferred: pald's cycle places it); pal spreads it at once
    r = place(with_running("pal-fit", 10.0, RUNNING), talkative(), now=10.0, key="r1")
    assert r.decision is DecisionKind.DEFER and r.reason == "no_room"
    r = place(with_running("pal", 10.0, RUNNING), talkative(), now=10.0, key="r1")
    assert r.decision is DecisionKind.PLACE and set(r.nodes) == {"gpu01", "gpu02"}
    # `mode=now` asks for GPUs now: no wait for a running job's end
    now_job = talkative()
    from dataclasses import replace
    now_job = replace(now_job, pal=replace(now_job.pal, mode="now"))
    assert place(with_running("pal-fit", 10.0, RUNNING), now_job, now=10.0, key="r1").decision is DecisionKind.PLACE
    # job 11 has outrun its limit: its end is no longer known to be near, so it spreads now
    assert place(with_running("pal-fit", 500.0, RUNNING), talkative(), now=500.0, key="r1").decision is DecisionKind.PLACE


def limited(req, minutes):
    from dataclasses import replace
    return replace(req, job=replace(req.job, time_limit=minutes))


def test_gpus_promised_to_jobs_slurm_has_not_started_free_at_their_limit_not_never():
    """Each node holds 3 GPUs pald promised to a job Slurm has not started yet (no running job
    at all), one with a 2-minute limit. A talkative 2-GPU job waits for that one's end rather
    than spreading over both nodes: to pald the promised job runs until its limit. Before,
    promised GPUs had no end, no node could ever hold the job, and it was spread at once
    (on the replay's model of workload-1: a 16-GPU GPT2 job spread over two leaves, 7.8x slower)."""
    s = PlacementService(ServiceSettings(placement="pal-fit"))
    s.observe_cluster(view(nodes=2), now=0.0)
    s.observe_running([], 0.0)
    short = place(s, limited(request("vgg19", gpn=3), 2), now=1.0, key="a")
    long = place(s, limited(request("vgg19", gpn=3), 1500), now=1.0, key="b")
    assert short.decision is DecisionKind.PLACE and long.decision is DecisionKind.PLACE
    assert set(short.nodes) != set(long.nodes)  # 1 GPU left free on each node
    assert [j.remaining_time for j in s.planning_running()] == [120.0, 90_000.0]
    r = place(s, talkative(), now=2.0, key="c")
    assert r.decision is DecisionKind.DEFER and r.reason == "no_room"
    # once Slurm shows them running, they count once (as Slurm's), not again as promises
    started = [running_info(11, next(iter(short.nodes)), (0, 1, 2), 120.0, start=2),
               running_info(12, next(iter(long.nodes)), (0, 1, 2), 90_000.0, start=2)]
    s.observe_running(started, 3.0)
    assert len(s.planning_running()) == 2
    # a placement that does not plan around running jobs sees no promises either
    p = PlacementService(ServiceSettings(placement="pal"))
    p.observe_cluster(view(nodes=2), now=0.0)
    place(p, limited(request("vgg19", gpn=3), 2), now=1.0, key="a")
    assert p.planning_running() == []


def test_a_read_of_another_layout_places_on_it_not_on_the_index_kept_for_the_last():
    """The index is kept across reads and cleared reservations of one layout, and dropped with
    the reservations when the layout changes (gpu ids change meaning)."""
    s = service()
    assert place(s, request("resnet", gpn=4), now=0.1, key="r1").decision is DecisionKind.PLACE
    kept = s.book.index(s.view)
    s.clear_reservations()
    assert s.book.index(s.view) is kept and kept.free == s.view.free  # moved onto what the clear freed
    s.observe_cluster(view(nodes=2, gpus=8, busy=range(4)), now=1.0)  # two nodes of 8, gpu01 half busy
    assert not s.reservations and s.book.index(s.view) is not kept
    r = place(s, request("resnet", gpn=6), now=1.1, key="r2")  # more than a node of the old layout
    assert r.decision is DecisionKind.PLACE and r.nodes == {"gpu02": (0, 1, 2, 3, 4, 5)}
