"""pald's submit-time answer on a site with partitions, features and reservations: PAL chooses
only among the nodes Slurm would give the job (the decision path's one eligibility call)."""

from __future__ import annotations

from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.daemon.cycle import apply_releases
from pal_slurm.daemon.protocol import JobFields, PlaceRequest
from pal_slurm.daemon.service import PlacementService
from pal_slurm.model import DecisionKind
from dataclasses import replace

from pal_slurm.model.site import Blocks, NodeFacts, PartitionFacts, ReservationFacts, SiteView
from pal_slurm.policy.site_index import SiteIndex

from .builders import FakeActuator, held_job, place, view

NAMES = ("gpu01", "gpu02", "gpu03", "gpu04")
NOW = 1_000.0


SLOTS = frozenset({"s0", "s1", "s2", "s3"})


def site(busy_cpus=None, reservations=(), models=None):
    feats = {"gpu03": {"f3", "big"}, "gpu04": {"f4"}}
    nodes = {n: NodeFacts(n, True, ("gpu",), frozenset(feats.get(n, ())), 16, 16 - (busy_cpus or {}).get(n, 0),
                          4000, 4000, 4, frozenset({models[n]}) if models else SLOTS) for n in NAMES}
    parts = [PartitionFacts("gpu", frozenset(NAMES), default=True), PartitionFacts("one", frozenset({"gpu04"}))]
    return SiteView(nodes, {p.name: p for p in parts}, {r.name: r for r in reservations})


def service(busy=(), **kw):
    s = PlacementService()
    s.observe_cluster(view(busy=busy), now=0.0)
    s.observe_site(site(**kw))
    return s


def ask(s, key="r", gpn=1, nodes=None, mode=None, **job):
    req = PlaceRequest(JobFields(uid=1000, comment="pal:class=resnet" + (f",mode={mode}" if mode else ""),
                                 gpus_per_node=gpn, min_nodes=nodes, **job), CommentSpec("resnet", mode=mode))
    return place(s, req, now=NOW, key=key)


def test_partition_features_and_exclusions_limit_the_nodes():
    s = service()
    assert set(ask(s, "a", partition="one").nodes) == {"gpu04"}
    assert set(ask(s, "b", features="f3").nodes) == {"gpu03"}
    assert set(ask(s, "c", exc_nodes="gpu[01-03]").nodes) == {"gpu04"}
    assert set(ask(s, "d", req_nodes="gpu02").nodes) == {"gpu02"}


def test_a_full_partition_defers_instead_of_spilling_over():
    s = service(busy=range(12, 16))  # gpu04 full
    r = ask(s, partition="one")
    assert r.decision is DecisionKind.DEFER and r.reason == "no_room"


def test_several_partitions_name_the_one_used():
    s = service()
    r = ask(s, partition="one,gpu", exc_nodes="gpu04")
    assert r.decision is DecisionKind.PLACE and r.partition == "gpu"
    assert ask(s, "x", partition="one").partition is None


def test_what_pald_cannot_judge_passes():
    s = service()
    assert ask(s, features="f3*2").reason == "constraint_not_evaluated"
    assert ask(s, partition="nope").reason == "unknown_partition"
    assert ask(s, exc_nodes="gpu[01").reason == "bad-input:exclude"
    assert ask(s, array_inx="1-8%2").reason == "array_throttle"
    assert ask(s, priority=0).reason == "user_hold"
    for r in (ask(s, features="f3*2"), ask(s, array_inx="1-8%2")):
        assert r.decision is DecisionKind.PASS and not r.nodes
    array = ask(s, array_inx="1-8")  # its elements are placed one by one by the cycle
    assert array.decision is DecisionKind.DEFER and array.reason == "array" and not array.nodes


def test_busy_cpus_and_reservations_keep_pal_off_a_node():
    r1 = ReservationFacts("r1", frozenset({"gpu01"}), NOW - 1, NOW + 600, active=True)
    s = service(busy_cpus={"gpu02": 15}, reservations=[r1])
    r = ask(s, cpus_per_task=4)
    assert set(r.nodes) <= {"gpu03", "gpu04"}
    assert set(ask(s, "k", reservation="r1").nodes) == {"gpu01"}


def test_slots_are_bound_only_where_every_gpu_has_its_slot_type():
    s = service()
    assert ask(s, gpn=2).gres == "gres:gpu:s0:1,gres:gpu:s1:1"
    models = {"gpu01": "a100", "gpu02": "a100", "gpu03": "v100", "gpu04": "v100"}
    m = service(models=models)
    untyped = ask(m, "u", gpn=2)
    assert untyped.decision is DecisionKind.PLACE and untyped.gres is None  # Slurm picks the slots
    v100 = ask(m, "v", gpn=2, tres_per_node="gres:gpu:v100:2")
    assert set(v100.nodes) <= {"gpu03", "gpu04"} and v100.gres is None
    total = PlaceRequest(JobFields(uid=1, comment="pal:class=a", gpus_per_job=3, tres_per_job="gres:gpu:a100:3"),
                         CommentSpec("a"))
    assert set(place(m, total, now=NOW, key="t").nodes) <= {"gpu01", "gpu02"}
    assert ask(m, "x", tres_per_node="gres:gpu:h100:1").reason == "no_eligible_node"


def test_cycle_keeps_a_model_request_and_pins_nodes_only():
    m = service(models={"gpu01": "a100", "gpu02": "a100", "gpu03": "v100", "gpu04": "v100"})
    job = held_job(9, gpn=1)
    job = job.__class__(**{**job.__dict__, "tres_per_node": "gres:gpu:v100:1"})
    plan = m.plan_cycle([job], NOW)
    act = FakeActuator()
    apply_releases(plan, act)
    assert len(act.calls) == 1 and act.calls[0][0] == "nodes" and act.calls[0][2][0] in {"gpu03", "gpu04"}


def test_exclusive_takes_a_node_with_every_gpu_free():
    s = service(busy=(0, 4, 8))  # only gpu04 is whole
    assert set(ask(s, shared=0).nodes) == {"gpu04"}


def test_cycle_places_held_jobs_by_the_same_rules_and_narrows_the_partition():
    s = service()
    job = held_job(7, gpn=1)
    job = job.__class__(**{**job.__dict__, "partition": "one,gpu"})
    plan = s.plan_cycle([job], NOW)
    (rel,) = plan.releases
    assert set(rel.choice.nodes) == {"gpu04"} and rel.partition == "one"
    act = FakeActuator()
    apply_releases(plan, act)
    assert act.calls == [("place", 7, ("gpu04",), "gpu:s0:1", "one")]


def test_cycle_releases_untouched_what_it_cannot_judge():
    s = service()
    job = held_job(8, gpn=1)
    job = job.__class__(**{**job.__dict__, "partition": "nope"})
    (rel,) = s.plan_cycle([job], NOW).releases
    assert rel.choice is None and rel.reason == "unknown_partition"


# ---- CPUs and memory pald promised (reservations carry them until Slurm shows the job) -----------
def test_two_submissions_between_slurm_reads_do_not_overcommit_a_nodes_cpus_or_memory():
    s = service(busy=range(4, 16))  # only gpu01 has free GPUs (4), and 16 CPUs, 4000 MB free
    first = ask(s, "a", cpus_per_task=12)
    assert first.decision is DecisionKind.PLACE and set(first.nodes) == {"gpu01"}
    assert s.promised() == {"gpu01": (12, 0)}
    second = ask(s, "b", cpus_per_task=12, mode="now")  # GPUs are free on gpu01, its CPUs are promised
    assert second.decision is DecisionKind.PASS and second.reason == "no_room"
    small = ask(s, "c", cpus_per_task=4)  # what is left still fits
    assert small.decision is DecisionKind.PLACE and set(small.nodes) == {"gpu01"}
    assert ask(s, "d", mode="now").reason == "no_room"  # 12 + 4 CPUs promised: none left on gpu01
    s.unreserve("a")
    assert ask(s, "e", min_mem_per_node=3000).decision is DecisionKind.PLACE
    assert ask(s, "f", min_mem_per_node=3000, mode="now").reason == "no_room"  # 4000 MB, 3000 promised


def test_the_cycle_does_not_release_two_jobs_onto_one_nodes_cpus():
    from dataclasses import replace

    from pal_slurm.slurm.readers import JobPlacementRequest

    s = service(busy=range(4, 16))  # gpu01 alone has free GPUs
    needs = JobPlacementRequest(min_cpus_per_node=10)
    jobs = [replace(held_job(i, gpn=1, submit=i), placement_request=needs) for i in (1, 2)]
    plan = s.plan_cycle(jobs, now=NOW)
    assert [r.job_id for r in plan.releases] == [1] and plan.waiting == 1
    assert s.promised() == {"gpu01": (10, 0)}
    s.unreserve(plan.releases[0].key)  # the release failed: its CPUs are free again
    assert s.promised() == {}


def test_a_read_s_index_is_kept_with_its_site_and_another_site_s_is_not():
    s, read = PlacementService(), site()
    own = SiteIndex(read)
    s.observe_site(read, own)
    assert s.where.index_for(read) is own
    stale = SiteIndex(site(busy_cpus={"gpu01": 16}))
    s.observe_site(read, stale)  # an index of another read never answers for this one
    assert s.where.index_for(read) is not stale
    assert s.where.index_for(read).site is read


def test_under_topology_block_a_multi_node_job_is_never_pinned_at_submit():
    """topology/block (two blocks of two nodes): Slurm 24.11 shows the hook no --segment and
    rejects a submission with a pin beside one, so a multi-node job is held for the cycle
    (reason `block`); a one-node job is placed at once; a job larger than a block passes."""
    s = PlacementService()
    s.observe_cluster(view(), now=0.0)
    blocks = Blocks({"gpu01": "b1", "gpu02": "b1", "gpu03": "b2", "gpu04": "b2"}, 2)
    s.observe_site(replace(site(), blocks=blocks))
    assert ask(s, "one", gpn=2).decision is DecisionKind.PLACE
    two = ask(s, "two", gpn=4, nodes=2)
    assert two.decision is DecisionKind.DEFER and two.reason == "block"
    big = ask(s, "big", gpn=1, nodes=3)
    assert big.decision is DecisionKind.PASS and big.reason == "block_span"
