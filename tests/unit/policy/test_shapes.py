"""Slurm shapes in the placements: per-node requests get g GPUs on each of k nodes from every
registered placement; `place_one` is `plan` of one job; the two per-node pickers agree."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from pal_slurm.model import JobShape
from pal_slurm.policy import PLACEMENTS, placement
from pal_slurm.policy.cache import RunCache
from pal_slurm.policy.shapes import ShapeIndex, per_node_pick, slurm_pick
from pal_slurm.ranking import Ranking

from .builders import cluster, ctx, job

ALL = sorted(PLACEMENTS)


@st.composite
def states(draw):
    nodes, gpn = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    size = nodes * gpn
    scores = {c: [draw(st.sampled_from([0.95, 1.0, 1.05, 1.3, 2.8])) for _ in range(size)] for c in "ABCD"}
    free = {g for g in range(size) if draw(st.booleans())}
    racks = draw(st.sampled_from([None, 1, 2]))
    k = draw(st.integers(1, 3))
    g = draw(st.integers(1, gpn))
    shape = draw(st.sampled_from([JobShape.on_nodes(k, g), JobShape.anywhere(draw(st.integers(1, size)))]))
    return cluster(nodes, gpn, free=free, racks=racks), scores, shape


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=40, deadline=None)
@given(state=states(), cls=st.sampled_from("ABCD"), seed=st.integers(0, 1000))
def test_place_one_is_a_plan_of_that_job_alone_for_every_shape(name, state, cls, seed):
    c, scores, shape = state
    pol = placement(name)
    j = job("new", shape.total, cls, shape=shape, remaining_time=600.0)
    alone = pol.plan([j], ctx(c, scores, seed)).launch.get("new")
    one = pol.place_one(j, ctx(c, scores, seed))
    assert (None if alone is None else tuple(sorted(alone))) == (None if one is None else tuple(sorted(one)))
    if one is not None:
        assert len(one) == shape.total and set(one) <= c.free
        if shape.is_per_node:
            per = {}
            for gid in one:
                per[c.node_of[gid]] = per.get(c.node_of[gid], 0) + 1
            assert len(per) == shape.nodes and set(per.values()) == {shape.per_node}


@settings(max_examples=200, deadline=None)
@given(state=states(), cls=st.sampled_from("ABCD"), one_rack=st.booleans(), takes=st.integers(0, 3))
def test_the_index_and_the_vectorised_pick_agree(state, cls, one_rack, takes):
    c, scores, shape = state
    sf = Ranking.from_scores(scores).sf(cls)
    index = ShapeIndex(c)
    free = set(c.free)
    rng = random.Random(takes)
    for _ in range(takes):  # the index must stay right as GPUs are taken
        gone = set(rng.sample(sorted(free), min(len(free), 2)))
        index.take(gone)
        free -= gone
    shape = shape if shape.is_per_node else JobShape.on_nodes(1, min(shape.total, c.gpus_per_node))
    assert index.pick(shape, sf, one_rack) == per_node_pick(shape, sorted(free), sf, c, one_rack)


def test_per_node_prefers_fast_gpus_then_best_fit_and_one_rack_when_asked():
    c = cluster(4, 4, free=set(range(16)) - {4, 5}, racks=2)  # node01 has 2 free
    scores = {"A": [1.0] * 16}
    scores["A"][0] = 2.8  # node00 slot 0 is slow
    sf = Ranking.from_scores(scores).sf("A")
    assert per_node_pick(JobShape.on_nodes(1, 2), sorted(c.free), sf, c) == (6, 7)  # best fit: node01
    assert per_node_pick(JobShape.on_nodes(1, 4), sorted(c.free), sf, c) == (8, 9, 10, 11)  # not node00
    assert per_node_pick(JobShape.on_nodes(2, 4), sorted(c.free), sf, c, one_rack=True) == tuple(range(8, 16))
    assert per_node_pick(JobShape.on_nodes(4, 4), sorted(c.free), sf, c) is None  # node01 has 2


def test_one_rack_ties_go_to_the_tightest_leaf_and_speed_still_comes_first():
    """Two leaves of 3 nodes x 4 GPUs can each hold a 2 x 4 job on equally fast GPUs: the job
    goes to the leaf with fewer free GPUs (leaf 1: 8; leaf 0: 10), as Slurm's topology/tree
    fits it, keeping the emptier leaf for the next multi-node job, not to the lowest node
    names. A slower GPU in the tighter leaf still sends it to the other (variability first).
    Both implementations (the rounds' pick and pald's index) choose alike."""
    c = cluster(6, 4, free=set(range(24)) - {8, 9} - set(range(20, 24)), racks=3)
    shape = JobShape.on_nodes(2, 4)
    fast = Ranking.from_scores({"A": [1.0] * 24}).sf("A")
    assert per_node_pick(shape, sorted(c.free), fast, c, one_rack=True) == tuple(range(12, 20))
    assert ShapeIndex(c).pick(shape, fast, one_rack=True) == tuple(range(12, 20))
    scores = [1.0] * 24
    scores[12] = 1.3  # node 3 slot 0
    slower = Ranking.from_scores({"A": scores}).sf("A")
    assert per_node_pick(shape, sorted(c.free), slower, c, one_rack=True) == tuple(range(0, 8))
    assert ShapeIndex(c).pick(shape, slower, one_rack=True) == tuple(range(0, 8))


def test_a_job_over_several_leaves_takes_as_few_as_equally_fast_nodes_allow():
    """Four leaves of 4 nodes x 4 GPUs; leaf 0's first two nodes are slower. A 12-node job
    has 14 equally fast nodes to choose 12 from: it takes leaves 1-3 whole (as Slurm's
    topology/tree would), not the 12 lowest names (over all four leaves, which leaves no whole
    leaf for the next multi-node job); its worst GPU is as fast either way. When the only 12
    fast nodes are spread over four leaves (a slow node in each), speed comes first and the
    job spans four. Both implementations choose alike."""
    c = cluster(16, 4, racks=4)
    shape = JobShape.on_nodes(12, 4)
    scores = [1.0] * 64
    for gpu in (0, 4):  # nodes 0 and 1
        scores[gpu] = 1.3
    sf = Ranking.from_scores({"A": scores}).sf("A")
    three_leaves = tuple(range(16, 64))
    assert per_node_pick(shape, sorted(c.free), sf, c) == three_leaves
    assert ShapeIndex(c).pick(shape, sf) == three_leaves
    scores = [1.0] * 64
    for gpu in (0, 16, 32, 48):  # nodes 0, 4, 8, 12: a slow node in every leaf
        scores[gpu] = 1.3
    sf = Ranking.from_scores({"A": scores}).sf("A")
    fast_nodes = tuple(g for g in range(64) if g // 4 not in (0, 4, 8, 12))
    assert per_node_pick(shape, sorted(c.free), sf, c) == fast_nodes
    assert ShapeIndex(c).pick(shape, sf) == fast_nodes


def test_stock_slurm_takes_the_lowest_slots_of_the_first_nodes():
    c = cluster(3, 4, free=set(range(12)) - {0})
    assert slurm_pick(JobShape.on_nodes(2, 2), c.free, c) == (1, 2, 4, 5)


def test_stock_slurm_fits_a_job_into_the_leaf_with_the_fewest_nodes_that_hold_it():
    # 3 racks of 2 nodes x 2 GPUs; rack 0 has one free node, rack 1 two, rack 2 two (one of them
    # with one GPU taken). A 1-node job goes to rack 0 (best fit), a 2-node job to rack 1 (the
    # only rack with 2 qualifying nodes); 3 nodes: the largest leaf first, then the best fit
    c = cluster(6, 2, free=set(range(12)) - {0, 1, 10}, racks=2)
    assert slurm_pick(JobShape.on_nodes(1, 2), c.free, c) == (2, 3)
    assert slurm_pick(JobShape.on_nodes(2, 2), c.free, c) == (4, 5, 6, 7)
    assert slurm_pick(JobShape.on_nodes(1, 1), c.free, c) == (2,)  # rack 0: one qualifying node
    assert slurm_pick(JobShape.on_nodes(3, 2), c.free, c) == (2, 3, 4, 5, 6, 7)
    assert slurm_pick(JobShape.on_nodes(5, 2), c.free, c) is None


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=25, deadline=None)
@given(state=states(), cls=st.sampled_from("ABCD"), seed=st.integers(0, 1000), taken=st.integers(0, 6))
def test_with_a_shape_index_the_index_is_the_free_set(name, state, cls, seed, taken):
    """pald keeps the index in step and does not rebuild the view after every reservation:
    place_one on (stale view + index) answers as on the exact view."""
    from dataclasses import replace

    c, scores, shape = state
    gone = set(random.Random(seed).sample(sorted(c.free), min(taken, len(c.free))))
    index = ShapeIndex(c)
    index.take(gone)
    j = job("new", shape.total, cls, shape=shape, remaining_time=600.0)
    exact = placement(name).place_one(j, ctx(c.with_free(c.free - gone), scores, seed))
    stale = placement(name).place_one(j, replace(ctx(c, scores, seed), shape_index=index))
    assert exact == stale



def test_the_pick_from_kept_arrays_is_the_pick_from_fresh_ones():
    """per_node_pick keeps the arrays of the tuples it is given (a view's node_of, a ranking's
    factors): the same tuple, an equal one and a list give the same picks, and a different
    ranking is not answered from the first one's array."""
    c = cluster(4, 4, free=set(range(16)) - {4, 5}, racks=2)
    slow0 = [1.0] * 16
    slow0[0] = 2.8
    fast0 = [2.8] * 16
    fast0[0] = 1.0
    cache = RunCache()
    for _ in range(2):  # the second pass reads the kept arrays
        for scores, want in ((slow0, (8, 9, 10, 11)), (fast0, (0, 1, 2, 3))):
            sf = Ranking.from_scores({"A": scores}).sf("A")
            assert isinstance(sf, tuple)
            for given_sf in (sf, tuple(sf), list(sf)):
                assert per_node_pick(JobShape.on_nodes(1, 4), sorted(c.free), given_sf, c, cache=cache) == want


@settings(max_examples=60, deadline=None)
@given(state=states(), allowed=st.frozensets(st.integers(0, 7)), takes=st.integers(0, 6))
def test_a_narrowed_index_frees_exactly_the_free_gpus_of_its_nodes(state, allowed, takes):
    """Whether few nodes or most are allowed (the two ways `free` is computed), the narrowed
    index's free set is the shared free set on the allowed nodes, after takes too."""
    c = state[0]
    index = ShapeIndex(c)
    index.take(sorted(c.free)[:takes])
    allowed = frozenset(n for n in allowed if n < len(c.nodes))
    want = {g for g in index.free if c.node_of[g] in allowed}
    narrowed = index.narrowed(allowed)
    assert narrowed.free == want
    # the narrowed set is kept between reads: a take through either view is seen by both
    for gone in ([g for g in sorted(want)[:1]], sorted(index.free)[-2:]):
        (narrowed if len(gone) == 1 else index).take(gone)
        assert narrowed.free == {g for g in index.free if c.node_of[g] in allowed}


def test_a_new_reads_equal_node_set_finds_the_kept_free_set_and_keeps_it_in_step():
    """Each read makes its node groups' allowed sets anew; the free set kept for the same
    nodes under the earlier object is found (not made again) and kept under the new one, and
    takes and gives through either view still reach it."""
    c = cluster(8, 4, racks=4)
    index = ShapeIndex(c)
    first = frozenset(range(1, 8))
    kept = index.narrowed(first).free
    again = frozenset(list(range(1, 8)))  # equal, another object
    assert again == first and again is not first
    narrowed = index.narrowed(again)
    assert narrowed.free is kept
    index.take([4, 5, 0])
    assert narrowed.free == {g for g in range(32) if g not in (0, 4, 5) and c.node_of[g] != 0}
    index.give([4])
    assert 4 in narrowed.free and 0 not in narrowed.free
    assert index.narrowed(frozenset(range(2, 8))).free == {g for g in index.free if c.node_of[g] >= 2}


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=20, deadline=None)
@given(state=states(), classes=st.lists(st.sampled_from("ABCD"), min_size=1, max_size=6),
       seed=st.integers(0, 1000))
def test_a_burst_answered_from_the_index_is_the_burst_answered_on_exact_views(name, state, classes, seed):
    """pald's burst: each answer is taken out of the index (its per-node picks read from it
    inside the plan) and never out of the view; every answer is the one on the exact view."""
    from dataclasses import replace

    c, scores, shape = state
    index, free = ShapeIndex(c), set(c.free)
    for i, cls in enumerate(classes):
        j = job(f"n{i}", shape.total, cls, shape=shape, remaining_time=600.0)
        exact = placement(name).place_one(j, ctx(c.with_free(free), scores, seed))
        kept = placement(name).place_one(j, replace(ctx(c, scores, seed), shape_index=index))
        assert exact == kept
        assert index.free == free  # the plan read the index's free set and left it as it was
        if kept is not None:
            index.take(kept)
            free -= set(kept)


@settings(max_examples=80, deadline=None)
@given(state=states(), cls=st.sampled_from("ABCD"),
       steps=st.lists(st.tuples(st.sampled_from(["take", "give", "follow"]), st.integers(0, 2**16)), max_size=8),
       rebuild=st.booleans())
def test_an_index_kept_through_takes_gives_and_reads_is_the_index_built_afresh(state, cls, steps, rebuild):
    """pald keeps the index across reads and dropped reservations (give, follow): after any
    sequence its per-node lists and preference orders are those of an index built on the
    free set it ends with, and so are its picks; whether a read moves it node by node or
    has it built again (`rebuild`: every read changes too many nodes)."""
    c, scores, _shape = state
    sf = Ranking.from_scores(scores).sf(cls)
    index = ShapeIndex(c)
    index.REBUILD_SHARE = 10**6 if rebuild else 0
    narrowed = index.narrowed(frozenset(range(0, len(c.nodes), 2)))
    index.pick(JobShape.on_nodes(1, 1), sf)  # the class's index exists before the changes
    free = set(c.free)
    for what, seed in steps:
        rng = random.Random(seed)
        if what == "take":
            gone = set(rng.sample(sorted(free), min(len(free), rng.randint(0, 4))))
            index.take(gone)
            free -= gone
        elif what == "give":
            busy = sorted(set(range(c.size)) - free)
            back = set(rng.sample(busy, min(len(busy), rng.randint(0, 4))))
            index.give(back)
            free |= back
        else:  # a read: any free set of the same layout
            free = {g for g in range(c.size) if rng.random() < 0.5}
            index.follow(frozenset(free))
        assert narrowed.free == {g for g in free if c.node_of[g] % 2 == 0}
    fresh = ShapeIndex(c.with_free(free))
    assert index.free == free
    for k in (1, 2):
        for g in range(1, c.gpus_per_node + 1):
            for one_rack in (False, True):
                shape = JobShape.on_nodes(k, g)
                assert index.pick(shape, sf, one_rack) == fresh.pick(shape, sf, one_rack)
    kept, built = index._shared.by_sf[id(sf)][1], fresh._shared.by_sf[id(sf)][1]
    assert {n: v for n, v in kept.free.items() if v} == {n: v for n, v in built.free.items() if v}
    assert kept.orders == built.orders


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=20, deadline=None)
@given(state=states(), classes=st.lists(st.sampled_from("ABCD"), min_size=2, max_size=4),
       seed=st.integers(0, 1000))
def test_a_plan_of_several_jobs_on_an_index_leaves_its_free_set_and_answers_as_on_the_view(name, state, classes, seed):
    """A plan copies the free set it is given only when it first changes it (Round.take):
    a plan that starts one job and then asks about more, read from a shape index, answers
    as the plan on the exact view and leaves the index's free set untouched."""
    from dataclasses import replace

    c, scores, shape = state
    index = ShapeIndex(c)
    jobs = [job(f"n{i}", shape.total, cls, shape=shape, remaining_time=600.0) for i, cls in enumerate(classes)]
    exact = placement(name).plan(jobs, ctx(c, scores, seed))
    kept = placement(name).plan(jobs, replace(ctx(c, scores, seed), shape_index=index))
    assert exact.launch == kept.launch and exact.suspend == kept.suspend
    assert index.free == set(c.free)
