"""The per-read candidate index (pal_slurm/policy/site_index.py) gives eligibility exactly the
answers of judging every node on every request: checked on random site views and jobs against
that node-by-node judgement (`scanned`, the rule written out plainly), with one index kept for
a whole burst of jobs as pald keeps it; and a new read is never answered from an old index."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from pal_slurm.engine.where import Where
from pal_slurm.intake.constraints import ConstraintUnsupported, parse_constraint
from pal_slurm.intake.hostlist import HostSet
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model.site import NodeFacts, PartitionFacts, ReservationFacts, SiteView
from pal_slurm.policy import eligibility as el
from pal_slurm.policy.site_index import MAX_ASKS, SiteIndex

NOW = 1_000_000.0
NAMES = [f"n{i}" for i in range(12)]
FEATURES = ["a", "b", "c"]
CONSTRAINTS = [None, "a", "b", "a&b", "a|c", "(a|b)&c", "[a|b]", "a*2"]
EXCLUDES = ["", "n1", "n[0-3]", "n[5-7],n11", "x1"]


def scanned(job: JobRestrictions, site: SiteView, now: float) -> el.Eligibility:
    """Every node of each partition judged on its own: the rule the index must reproduce."""
    required = el._required(job, site)
    if isinstance(required, str):
        return el.passed(required)
    constraint = None
    if job.constraint:
        try:
            constraint = parse_constraint(job.constraint)
        except ConstraintUnsupported:
            return el.passed("unsupported")  # both answer a pass; the reason is eligibility's own
        if constraint.matching_or and job.nodes != 1:
            return el.passed("constraint_matching_or")
    reservation_nodes = None
    if job.reservation:
        r = site.reservations.get(job.reservation)
        if r is None or not r.active:
            return el.passed("reservation_not_active")
        if not r.admits(job.uid, job.account):
            return el.passed("reservation_access")
        reservation_nodes = r.nodes
    parts = el._partitions(job, site)
    if isinstance(parts, str):
        return el.passed(parts)
    groups: list[el.NodeGroup] = []
    for p in parts:
        blocked = el._reserved_elsewhere(job, site, now, p.max_time_min)
        eligible = set()
        for name in p.nodes:
            node = site.nodes.get(name)
            if node is None or not node.usable or name in job.exclude or name in blocked:
                continue
            if reservation_nodes is not None and name not in reservation_nodes:
                continue
            if required and name not in required:
                continue
            if constraint is not None and not constraint.matches(node.features):
                continue
            if job.gpu_model is not None and node.gpu_types != {job.gpu_model}:
                continue
            if node.cpus >= job.cpus_per_node and node.memory_mb >= job.memory_per_node_mb:
                eligible.add(name)
        if required and eligible != required:
            continue
        if job.nodes is not None and len(eligible) < job.nodes:
            continue
        fits = frozenset(n for n in eligible if el.fits_now(site.nodes[n], job))
        group = el.NodeGroup(p.name if len(job.partitions) > 1 else None, frozenset(eligible), fits)
        if all(g.eligible != group.eligible for g in groups):
            groups.append(group)
    return el.Eligibility(tuple(groups)) if groups else el.passed("no_eligible_node")


def same(got: el.Eligibility, want: el.Eligibility) -> bool:
    if want.passed == "unsupported":
        return got.passed is not None and got.groups == ()
    return got == want


@st.composite
def nodes(draw):
    out = {}
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=len(NAMES), unique=True)):
        cpus = draw(st.integers(1, 8))
        memory = draw(st.sampled_from([0, 1000, 4000]))
        out[name] = NodeFacts(name, draw(st.booleans()) or draw(st.booleans()), ("p",),
                              frozenset(draw(st.lists(st.sampled_from(FEATURES), max_size=3))), cpus,
                              draw(st.integers(0, cpus)), memory, draw(st.integers(0, memory)), 4,
                              draw(st.sampled_from([frozenset(), frozenset({"a100"}), frozenset({"a100", "h100"})])))
    return out


@st.composite
def sites(draw):
    facts = draw(nodes())
    members = st.frozensets(st.sampled_from(NAMES + ["ghost"]), max_size=len(NAMES))
    parts = {"p": PartitionFacts("p", draw(members), default=draw(st.booleans()) or draw(st.booleans())),
             "q": PartitionFacts("q", draw(members), max_time_min=draw(st.sampled_from([None, 30, 600]))),
             "r": PartitionFacts("r", draw(members), up=draw(st.booleans()))}
    resv = {}
    for name in draw(st.lists(st.sampled_from(["x", "y"]), unique=True)):
        start = NOW + draw(st.sampled_from([-100.0, 600.0, 100_000.0]))
        resv[name] = ReservationFacts(name, draw(members), start, start + 3600.0, start <= NOW,
                                      user_ids=draw(st.sampled_from([None, frozenset({7})])))
    return SiteView(facts, parts, resv)


@st.composite
def jobs(draw):
    count = draw(st.sampled_from([None, 1, 2, 3]))
    required = draw(st.sampled_from(["", "n1", "n[1-2]", "n[2-4]"])) if count else ""
    return JobRestrictions(
        partitions=tuple(draw(st.lists(st.sampled_from(["p", "q", "r", "nope"]), max_size=2, unique=True))),
        uid=draw(st.sampled_from([7, 8])),
        constraint=draw(st.sampled_from(CONSTRAINTS)),
        exclude=HostSet.from_expr(draw(st.sampled_from(EXCLUDES))),
        required=HostSet.from_expr(required),
        reservation=draw(st.sampled_from([None, None, "x", "y"])),
        exclusive=draw(st.booleans()),
        nodes=count,
        cpus_per_node=draw(st.integers(1, 9)),
        memory_per_node_mb=draw(st.sampled_from([0, 500, 4000, 5000])),
        time_limit_min=draw(st.sampled_from([None, 10, 100_000])),
        gpu_model=draw(st.sampled_from([None, None, "a100"])),
    )


@settings(max_examples=300, deadline=None)
@given(sites(), st.lists(jobs(), min_size=1, max_size=12))
def test_one_index_kept_for_a_burst_answers_as_judging_every_node(site, burst):
    index = SiteIndex(site)
    for job in burst + burst:  # each ask twice: the second answer comes from what the first kept
        assert same(el.eligible_nodes(job, site, NOW, index), scanned(job, site, NOW)), job


@settings(max_examples=100, deadline=None)
@given(sites(), jobs())
def test_without_an_index_or_with_another_sites_the_answer_is_the_same(site, job):
    other = SiteIndex(replace(site, nodes={}))
    want = scanned(job, site, NOW)
    assert same(el.eligible_nodes(job, site, NOW), want)
    assert same(el.eligible_nodes(job, site, NOW, other), want)


def test_a_repeated_ask_shares_the_node_sets_of_the_first():
    site = SiteView({n: NodeFacts(n, True, ("p",), frozenset(), 8, 8, 0, 0, 4) for n in NAMES},
                    {"p": PartitionFacts("p", frozenset(NAMES), default=True)})
    index = SiteIndex(site)
    first = el.eligible_nodes(JobRestrictions(uid=1), site, NOW, index)
    second = el.eligible_nodes(JobRestrictions(uid=2), site, NOW, index)
    assert first.groups[0].eligible == frozenset(NAMES)
    assert second.groups[0].eligible is first.groups[0].eligible
    assert second.groups[0].fits_now is first.groups[0].fits_now


def test_asks_past_the_limit_are_answered_without_being_kept():
    site = SiteView({"n1": NodeFacts("n1", True, ("p",), frozenset(), 8, 8, 10_000, 10_000, 4)},
                    {"p": PartitionFacts("p", frozenset({"n1"}), default=True)})
    index = SiteIndex(site)
    for mb in range(MAX_ASKS + 5):
        assert el.eligible_nodes(JobRestrictions(memory_per_node_mb=mb), site, NOW, index).fits_now == {"n1"}
    assert el.eligible_nodes(JobRestrictions(memory_per_node_mb=10_001), site, NOW, index).passed == "no_eligible_node"
    assert len(index._asks) == MAX_ASKS and len(index._narrowed) == MAX_ASKS


# ---- invalidation: a new read is a new index -------------------------------------------------
def lab(**changed) -> SiteView:
    facts = {n: NodeFacts(n, True, ("p",), frozenset({"a"}), 8, 8, 0, 0, 4) for n in ("n1", "n2", "n3")}
    facts.update(changed)
    return SiteView(facts, {"p": PartitionFacts("p", frozenset(facts), default=True)})


def nodes_for(where: Where, site: SiteView, job: JobRestrictions | None = None) -> frozenset[str]:
    return where.eligibility(job or JobRestrictions(), None, site, NOW, {}).fits_now


def test_where_keeps_one_index_per_site_read():
    where, site = Where(), lab()
    nodes_for(where, site)
    index = where.index_for(site)
    nodes_for(where, site, JobRestrictions(uid=5))
    assert where.index_for(site) is index
    assert where.index_for(lab()) is not index  # an equal read is still another read


def test_a_drained_node_is_gone_on_the_next_read():
    where = Where()
    assert nodes_for(where, lab()) == {"n1", "n2", "n3"}
    drained = lab(n2=NodeFacts("n2", False, ("p",), frozenset({"a"}), 8, 8, 0, 0, 4))
    where.site_changed()
    assert nodes_for(where, drained) == {"n1", "n3"}


def test_a_new_read_is_not_answered_from_the_old_index_even_unannounced():
    where = Where()
    assert nodes_for(where, lab(), JobRestrictions(constraint="a")) == {"n1", "n2", "n3"}
    refeatured = lab(n1=NodeFacts("n1", True, ("p",), frozenset({"b"}), 8, 8, 0, 0, 4))
    where._eligibility.clear()  # the per-restrictions memo is the service's to clear; the index checks its site
    assert nodes_for(where, refeatured, JobRestrictions(constraint="a")) == {"n2", "n3"}


def test_a_reservation_on_the_next_read_takes_its_nodes():
    where, job = Where(), JobRestrictions(uid=3)
    assert nodes_for(where, lab(), job) == {"n1", "n2", "n3"}
    reserved = replace(lab(), reservations={"m": ReservationFacts("m", frozenset({"n3"}), NOW - 1, NOW + 60, True)})
    where.site_changed(SiteIndex(reserved))
    assert nodes_for(where, reserved, job) == {"n1", "n2"}


def test_free_cpus_of_the_next_read_decide_what_fits_now():
    where, job = Where(), JobRestrictions(cpus_per_node=4)
    assert nodes_for(where, lab(), job) == {"n1", "n2", "n3"}
    busy = lab(n1=NodeFacts("n1", True, ("p",), frozenset({"a"}), 8, 2, 0, 0, 4))
    where.site_changed()
    assert nodes_for(where, busy, job) == {"n2", "n3"}
    assert where.eligibility(job, None, busy, NOW, {}).groups[0].eligible == {"n1", "n2", "n3"}
