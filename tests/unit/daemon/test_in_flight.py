"""Promises whose job never arrives: dropped at the first read that should show it; at most
`user_reservations_max` placements per user Slurm has not shown yet (service.observe_cluster,
PlacementService.place)."""

from dataclasses import replace

from pal_slurm.daemon.sync import queue_keys
from pal_slurm.daemon.service import PlacementService, ServiceSettings
from pal_slurm.model import DecisionKind

from .builders import held_job, place, request, view


def service(**settings):
    s = PlacementService(ServiceSettings(placement="pal", **settings))
    s.observe_cluster(view(), now=0.0)
    return s


def asks(uid, rid, gpn=1, mode=None):
    r = request(gpn=gpn, rid=rid, mode=mode)
    return replace(r, job=replace(r.job, uid=uid))


def test_a_promise_whose_job_a_later_read_misses_is_dropped_within_the_grace_rule():
    s = service(submit_grace_s=2.0)
    assert place(s, asks(1000, "gone"), now=10.0, key="req:gone").decision is DecisionKind.PLACE
    assert place(s, asks(1000, "here"), now=10.0, key="req:here").decision is DecisionKind.PLACE
    # a read started 1 s after the answers: the job may not exist yet (created after the hook)
    s.observe_cluster(view(), now=11.5, in_queue=set(), queue_read_at=11.0)
    assert set(s.reservations) == {"req:gone", "req:here"}
    # a read started 2 s after: the job that is not there never came; its GPUs are free again
    s.observe_cluster(view(), now=12.5, in_queue={"req:here"}, queue_read_at=12.0)
    assert set(s.reservations) == {"req:here"} and s.reservations["req:here"].seen
    assert len(s.free_now()) == 15


def test_queue_keys_name_every_job_a_read_shows():
    keys = queue_keys([held_job(7, tag="pal:placed=gpu01;req=ab"), replace(held_job(8), state="RUNNING")])
    assert {"job:7", "req:ab", "job:8", "req:x"} <= keys


def test_one_user_gets_at_most_the_cap_of_unseen_placements_and_others_are_not_held_back():
    s = service(user_reservations_max=3)
    got = [place(s, asks(1000, f"a{i}"), now=1.0, key=f"req:a{i}") for i in range(5)]
    assert [r.decision for r in got] == [DecisionKind.PLACE] * 3 + [DecisionKind.DEFER] * 2
    assert got[3].reason == "user_in_flight"
    assert place(s, asks(1000, "n", mode="now"), now=1.0, key="req:n").reason == "user_in_flight"
    other = place(s, asks(2000, "b"), now=1.0, key="req:b")
    assert other.decision is DecisionKind.PLACE  # another user's job: placed, not queued behind
    assert len([r for r in s.reservations.values() if r.user == 1000]) == 3
    # a read shows them: no longer in flight, the user may be promised more
    s.observe_cluster(view(), now=2.0, in_queue={"req:a0", "req:a1", "req:a2", "req:b"}, queue_read_at=1.5)
    assert place(s, asks(1000, "a5"), now=2.5, key="req:a5").decision is DecisionKind.PLACE
