"""Eligibility: the nodes a job may use, as Slurm judges them (pal_slurm/policy/eligibility.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pal_slurm.model.site import Blocks, NodeFacts, PartitionFacts, ReservationFacts, SiteView
from pal_slurm.intake.constraints import ConstraintTooLarge, parse_constraint
from pal_slurm.intake.hostlist import HostSet
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.policy.eligibility import BLOCK_SPAN, NO_BLOCK_FITS, eligible_nodes

NOW = 1_000_000.0


def hosts(*names: str) -> HostSet:
    return HostSet.from_expr(",".join(names))


def node(name, features=(), usable=True, cpus=16, free_cpus=16, mem=4000, free_mem=4000, parts=("gpu",)):
    return NodeFacts(name, usable, tuple(parts), frozenset(features), cpus, free_cpus, mem, free_mem, 4)


def site(nodes, partitions=None, reservations=()):
    nodes = {n.name: n for n in nodes}
    if partitions is None:
        partitions = [PartitionFacts("gpu", frozenset(nodes), default=True)]
    return SiteView(nodes, {p.name: p for p in partitions}, {r.name: r for r in reservations})


LAB = site(
    [node("n1"), node("n2", ["big"]), node("n3", ["f3", "big"]), node("n4", ["f4"])],
    [PartitionFacts("gpu", frozenset({"n1", "n2", "n3", "n4"}), default=True),
     PartitionFacts("one", frozenset({"n4"})),
     PartitionFacts("two", frozenset({"n3", "n4"}), max_nodes=1, max_time_min=60)],
)


def fits(job, view=LAB):
    e = eligible_nodes(job, view, NOW)
    assert e.passed is None, e.passed
    return set(e.fits_now)


# ---- partitions ---------------------------------------------------------------------------------
def test_default_partition_when_none_asked():
    assert fits(JobRestrictions()) == {"n1", "n2", "n3", "n4"}


def test_only_the_asked_partitions_nodes():
    assert fits(JobRestrictions(partitions=("one",))) == {"n4"}


def test_several_partitions_give_one_group_each_with_the_partition_to_write():
    e = eligible_nodes(JobRestrictions(partitions=("one", "gpu"), exclude=hosts("n4")), LAB, NOW)
    assert [(g.partition, set(g.fits_now)) for g in e.groups] == [("gpu", {"n1", "n2", "n3"})]
    single = eligible_nodes(JobRestrictions(partitions=("one",)), LAB, NOW)
    assert single.groups[0].partition is None  # one partition asked: nothing to rewrite


def test_unknown_partition_passes():
    assert eligible_nodes(JobRestrictions(partitions=("nope",)), LAB, NOW).passed == "unknown_partition"


@pytest.mark.parametrize("job, reason", [
    (JobRestrictions(partitions=("two",), nodes=2), "partition_node_count"),
    (JobRestrictions(partitions=("two",), time_limit_min=61), "partition_time_limit"),
])
def test_partition_limits_that_refuse_the_job_make_it_pass(job, reason):
    assert eligible_nodes(job, LAB, NOW).passed == reason


def test_partition_limits_within_bounds_place():
    assert fits(JobRestrictions(partitions=("two",), time_limit_min=60)) == {"n3", "n4"}


def test_down_partition_is_skipped_in_favour_of_the_next():
    view = site([node("a"), node("b")], [PartitionFacts("p", frozenset({"a"}), up=False),
                                         PartitionFacts("q", frozenset({"b"}))])
    assert fits(JobRestrictions(partitions=("p", "q")), view) == {"b"}


@pytest.mark.parametrize("account, ok", [(None, False), ("physics", True), ("chem", False)])
def test_allow_accounts_needs_the_job_account(account, ok):
    view = site([node("a")], [PartitionFacts("p", frozenset({"a"}), default=True,
                                             allow_accounts=frozenset({"physics"}))])
    e = eligible_nodes(JobRestrictions(account=account), view, NOW)
    assert (e.passed is None) is ok


@pytest.mark.parametrize("qos, ok", [(None, False), ("normal", True), ("high", False)])
def test_deny_qos(qos, ok):
    view = site([node("a")], [PartitionFacts("p", frozenset({"a"}), default=True, deny_qos=frozenset({"high"}))])
    assert (eligible_nodes(JobRestrictions(qos=qos), view, NOW).passed is None) is ok


def test_allow_groups_trusts_slurms_own_partition_list():
    view = site([node("a")], [PartitionFacts("p", frozenset({"a"}), default=True, allow_groups=frozenset({"g"}))])
    assert eligible_nodes(JobRestrictions(), view, NOW).passed == "partition_groups_unknown"
    assert eligible_nodes(JobRestrictions(usable_partitions=frozenset({"p"})), view, NOW).passed is None
    assert eligible_nodes(JobRestrictions(usable_partitions=frozenset()), view, NOW).passed == "partition_not_usable"


# ---- nodes ----------------------------------------------------------------------------------------
def test_features_exclusions_and_nodelist():
    assert fits(JobRestrictions(constraint="big")) == {"n2", "n3"}
    assert fits(JobRestrictions(constraint="f3|f4", exclude=hosts("n3"))) == {"n4"}
    assert fits(JobRestrictions(required=hosts("n3"))) == {"n3"}


def test_constraint_over_its_caps_passes_with_one_short_reason():
    """600 nested groups were a RecursionError and a 110 kB traceback per submission."""
    deep = "(" * 600 + "a" + ")" * 600
    for text in (deep, "a&" * 30_000 + "a", "[" * 17 + "a" + "]" * 17):
        with pytest.raises(ConstraintTooLarge) as caught:
            parse_constraint(text)
        assert len(str(caught.value)) < 80
        assert eligible_nodes(JobRestrictions(constraint=text), LAB, NOW).passed == "input-too-large:constraint"
    assert parse_constraint("(" * 16 + "big" + ")" * 16).matches(frozenset({"big"}))


def test_nodelist_larger_than_the_site_is_never_listed():
    huge = HostSet.from_expr(",".join(["n[0-99999]"] * 10))
    assert eligible_nodes(JobRestrictions(required=huge, nodes=1), LAB, NOW).passed == "nodelist_partial"
    assert eligible_nodes(JobRestrictions(required=huge, nodes=1_000_000), LAB, NOW).passed == "unknown_required_node"
    every = JobRestrictions(exclude=HostSet.from_expr("n[0-999999999],m[1-2]b[0-99999]"))
    assert eligible_nodes(every, LAB, NOW).passed == "no_eligible_node"
    assert fits(JobRestrictions(exclude=HostSet.from_expr("n[3-999999999]"))) == {"n1", "n2"}


def test_unevaluated_constraint_passes():
    assert eligible_nodes(JobRestrictions(constraint="big*2"), LAB, NOW).passed == "constraint_not_evaluated"
    assert eligible_nodes(JobRestrictions(constraint="[f3|f4]", nodes=2), LAB, NOW).passed == "constraint_matching_or"


def test_nodelist_must_be_the_whole_job():
    assert eligible_nodes(JobRestrictions(required=hosts("n1"), nodes=2), LAB, NOW).passed == "nodelist_partial"
    assert eligible_nodes(JobRestrictions(required=hosts("n1"), nodes=None), LAB, NOW).passed
    excluded = JobRestrictions(required=hosts("n1"), exclude=hosts("n1"))
    assert eligible_nodes(excluded, LAB, NOW).passed == "no_eligible_node"


def test_drained_node_is_never_eligible():
    view = site([node("a", usable=False), node("b")])
    assert fits(JobRestrictions(), view) == {"b"}
    assert eligible_nodes(JobRestrictions(required=hosts("a")), view, NOW).passed == "no_eligible_node"


def test_reservations():
    r = ReservationFacts("r1", frozenset({"b"}), NOW - 10, NOW + 3600, active=True)
    later = ReservationFacts("r2", frozenset({"c"}), NOW + 600, NOW + 3600, active=False)
    view = site([node("a"), node("b"), node("c")], reservations=[r, later])
    assert fits(JobRestrictions(), view) == {"a"}  # unknown end: c's reservation may start during it
    assert fits(JobRestrictions(time_limit_min=5), view) == {"a", "c"}  # ends before r2 starts
    assert fits(JobRestrictions(reservation="r1"), view) == {"b"}
    assert eligible_nodes(JobRestrictions(reservation="r2"), view, NOW).passed == "reservation_not_active"


def test_cpus_and_memory_capacity_pass_and_free_wait():
    view = site([node("a", cpus=8, free_cpus=2, mem=1000, free_mem=100), node("b")])
    assert fits(JobRestrictions(cpus_per_node=4), view) == {"b"}
    e = eligible_nodes(JobRestrictions(cpus_per_node=4), view, NOW)
    assert set(e.groups[0].eligible) == {"a", "b"}  # a could run it later
    assert eligible_nodes(JobRestrictions(memory_per_node_mb=5000), view, NOW).passed == "no_eligible_node"


def test_gpu_model_requests_only_get_nodes_of_that_model():
    a100 = NodeFacts("a", True, ("gpu",), frozenset(), 16, 16, 4000, 4000, 4, frozenset({"a100"}))
    v100 = NodeFacts("v", True, ("gpu",), frozenset(), 16, 16, 4000, 4000, 4, frozenset({"v100"}))
    view = site([a100, v100])
    assert fits(JobRestrictions(gpu_model="v100"), view) == {"v"}
    assert fits(JobRestrictions(), view) == {"a", "v"}
    assert eligible_nodes(JobRestrictions(gpu_model="h100"), view, NOW).passed == "no_eligible_node"


def test_exclusive_needs_an_idle_node():
    view = site([node("a", free_cpus=15), node("b")])
    assert fits(JobRestrictions(exclusive=True), view) == {"b"}


# ---- the promise: never a node the job may not use -----------------------------------------------
NAMES = [f"n{i}" for i in range(6)]
FEATS = ["a", "b", "c"]


@st.composite
def sites(draw):
    mostly = st.sampled_from([True, True, True, False])
    nodes = [node(n, draw(st.sets(st.sampled_from(FEATS))), usable=draw(mostly),
                  free_cpus=draw(st.integers(0, 16)), free_mem=draw(st.integers(0, 4000)))
             for n in NAMES]
    parts = [PartitionFacts(f"p{i}", frozenset(draw(st.sets(st.sampled_from(NAMES), min_size=1))),
                            default=i == 0, up=draw(mostly),
                            max_nodes=draw(st.one_of(st.none(), st.integers(1, 3))))
             for i in range(3)]
    resv = [ReservationFacts("r", frozenset(draw(st.sets(st.sampled_from(NAMES), max_size=3))), NOW - 1,
                             NOW + 60, active=draw(mostly))]
    return site(nodes, parts, resv)


@st.composite
def jobs(draw):
    constraint = draw(st.one_of(st.none(), st.sampled_from(["a", "a&b", "a|c", "(a|b)&c", "[b|c]"])))
    return JobRestrictions(
        partitions=tuple(draw(st.lists(st.sampled_from(["p0", "p1", "p2"]), max_size=2, unique=True))),
        constraint=constraint,
        exclude=hosts(*draw(st.sets(st.sampled_from(NAMES), max_size=3))),
        required=hosts(*draw(st.sampled_from([(), (), (), ("n1",), ("n2",)]))),
        reservation=draw(st.sampled_from([None, None, None, "r"])),
        exclusive=draw(st.booleans()),
        nodes=draw(st.sampled_from([1, 1, 1, 2])),
        cpus_per_node=draw(st.integers(1, 8)),
        memory_per_node_mb=draw(st.integers(0, 3000)),
    )


def slurm_allows(job, view, name, partition):
    """An independent, literal reading of Slurm's rules for one node (the oracle)."""
    n = view.nodes[name]
    p = view.partitions[partition]
    features = n.features
    if job.constraint:
        text = job.constraint.replace("[", "(").replace("]", ")")
        expr = "".join(f" ({f!r} in features) " if f in FEATS else {"&": " and ", "|": " or "}.get(f, f)
                       for f in _tokens(text))
        if not eval(expr, {"features": features}):  # noqa: S307 - our own fixed vocabulary
            return False
    r = view.reservations["r"]
    in_r = name in r.nodes and r.active
    return (name in p.nodes and p.up and n.usable and name not in job.exclude
            and (not job.required or name in job.required)
            and (in_r if job.reservation else name not in r.nodes)
            and n.free_cpus >= job.cpus_per_node and n.free_memory_mb >= job.memory_per_node_mb
            and (not job.exclusive or n.free_cpus >= n.cpus)
            and (p.max_nodes is None or job.nodes <= p.max_nodes))


def _tokens(text):
    out, word = [], ""
    for ch in text:
        if ch in "&|()":
            if word:
                out.append(word)
            out.append(ch)
            word = ""
        else:
            word += ch
    return out + ([word] if word else [])


@settings(max_examples=400, deadline=None)
@given(sites(), jobs())
def test_never_returns_a_node_the_job_may_not_use(view, job):
    e = eligible_nodes(job, view, NOW)
    if e.passed:
        return
    default = next(p for p in view.partitions.values() if p.default).name
    for group in e.groups:
        partitions = [group.partition] if group.partition else list(job.partitions or (default,))
        assert group.fits_now <= group.eligible
        for name in group.fits_now:
            assert any(slurm_allows(job, view, name, p) for p in partitions), (name, group, job)
        if group.partition is None and len(partitions) == 1:
            assert all(slurm_allows(job, view, name, partitions[0]) for name in group.fits_now)


# ---- topology/block -----------------------------------------------------------------------
BLOCKED = SiteView({n.name: n for n in (node(f"n{i}") for i in range(1, 9))},
                   {"gpu": PartitionFacts("gpu", frozenset(f"n{i}" for i in range(1, 9)), default=True)},
                   blocks=Blocks({f"n{i}": "b1" if i <= 4 else "b2" for i in range(1, 9)}, 4))


def test_a_multi_node_job_gets_one_group_per_block():
    """Slurm leaves a pin across two blocks pending for ever: a 2-node job's nodes come from one."""
    got = eligible_nodes(JobRestrictions(nodes=2), BLOCKED, NOW)
    assert [g.eligible for g in got.groups] == [frozenset({"n1", "n2", "n3", "n4"}),
                                                 frozenset({"n5", "n6", "n7", "n8"})]
    assert got.groups[0].fits_now == got.groups[0].eligible


def test_a_one_node_job_is_not_cut_by_block():
    got = eligible_nodes(JobRestrictions(nodes=1), BLOCKED, NOW)
    assert len(got.groups) == 1 and len(got.groups[0].eligible) == 8


def test_a_job_larger_than_a_block_is_left_to_slurm():
    assert eligible_nodes(JobRestrictions(nodes=5), BLOCKED, NOW).passed == BLOCK_SPAN


def test_a_block_short_of_eligible_nodes_is_no_group_and_none_left_passes():
    """--exclude leaves b1 three nodes: a 4-node job may only use b2; with one gone from b2
    too, no block holds it."""
    one_block = eligible_nodes(JobRestrictions(nodes=4, exclude=hosts("n1")), BLOCKED, NOW)
    assert [g.eligible for g in one_block.groups] == [frozenset({"n5", "n6", "n7", "n8"})]
    assert eligible_nodes(JobRestrictions(nodes=4, exclude=hosts("n1", "n5")), BLOCKED, NOW).passed == NO_BLOCK_FITS


def test_a_busy_block_still_is_a_group_the_job_waits_for():
    """No block has room now: the groups stay (the job waits for one), none fits now."""
    busy = {name: (node(name, free_cpus=0) if name in ("n2", "n3", "n4", "n6", "n7", "n8") else n)
            for name, n in BLOCKED.nodes.items()}
    got = eligible_nodes(JobRestrictions(nodes=2), SiteView(busy, BLOCKED.partitions, blocks=BLOCKED.blocks), NOW)
    assert got.passed is None and len(got.groups) == 2
    assert [g.fits_now for g in got.groups] == [frozenset({"n1"}), frozenset({"n5"})]
