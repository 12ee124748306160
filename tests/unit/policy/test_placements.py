import random

import pytest
from hypothesis import given, settings, strategies as st

from pal_slurm.policy import PLACEMENTS, placement
from pal_slurm.policy.allocators import lxv_order, packed
from pal_slurm.policy.free import FreeGpus
from pal_slurm.policy.skeletons import class_first, head_window

from .builders import cluster, ctx, job

ALL = sorted(PLACEMENTS)


@st.composite
def scenarios(draw):
    nodes = draw(st.integers(1, 6))
    gpn = draw(st.integers(1, 8))
    size = nodes * gpn
    scores = {c: [draw(st.sampled_from([0.95, 1.0, 1.05, 1.3, 2.8])) for _ in range(size)] for c in "ABCD"}
    # some jobs already running on disjoint GPU sets
    gpus = list(range(size))
    random.Random(draw(st.integers(0, 1000))).shuffle(gpus)
    jobs = []
    for i in range(draw(st.integers(0, 12))):
        n = draw(st.integers(1, max(1, size)))
        running = ()
        if draw(st.booleans()) and len(gpus) >= n:
            running = tuple(sorted(gpus[:n]))
            gpus = gpus[n:]
        jobs.append(job(i, n, draw(st.sampled_from("ABCDX")), running_on=running, submit=float(i)))
    held = {g for j in jobs for g in j.running_on}
    c = cluster(nodes, gpn, free=set(range(size)) - held)
    return c, scores, jobs


def apply(plan, jobs, c):
    """GPU ownership after the plan; asserts the plan is consistent."""
    owner = {}
    for j in jobs:
        if j.running_on and j.job_id not in plan.suspend:
            for g in j.running_on:
                owner[g] = j.job_id
    for jid, gpus in plan.launch.items():
        for g in gpus:
            assert g not in owner, f"GPU {g} given twice ({owner.get(g)} and {jid})"
            owner[g] = jid
    return owner


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=60, deadline=None)
@given(sc=scenarios(), seed=st.integers(0, 2**16))
def test_placements_are_consistent_and_deterministic(name, sc, seed):
    c, scores, jobs = sc
    pol = placement(name)
    plan = pol.plan(jobs, ctx(c, scores, seed))
    owner = apply(plan, jobs, c)
    assert all(0 <= g < c.size for g in owner)  # never beyond capacity
    by_id = {j.job_id: j for j in jobs}
    for jid, gpus in plan.launch.items():
        assert len(gpus) == len(set(gpus)) == by_id[jid].num_gpus  # exactly what it asked
    assert plan.suspend <= {j.job_id for j in jobs if j.running_on}  # only running jobs suspend
    again = pol.plan(jobs, ctx(c, scores, seed))
    assert again == plan  # same seed, same plan


def test_pal_keeps_class_A_off_the_slow_gpu_and_packs_within_a_node():
    c = cluster(2, 4)
    scores = {"A": [1.0, 1.0, 2.8, 1.0, 1.0, 1.0, 1.0, 1.0]}
    plan = placement("pal").plan([job(1, 4, "A")], ctx(c, scores))
    assert plan.launch[1] == (4, 5, 6, 7)


def test_pal_goes_across_nodes_when_the_penalty_is_smaller_than_the_slowdown():
    # node 0: one slow GPU; node 1: two busy GPUs. A 4-GPU class-A job.
    c = cluster(2, 4, free={0, 1, 2, 3, 4, 5})
    scores = {"A": [1.0, 1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0]}
    within = placement("pal").plan([job(1, 4, "A")], ctx(c, scores, penalty=1.2)).launch[1]
    assert 3 not in within and c.nodes_spanned(within) == 2
    stay = placement("pal").plan([job(1, 4, "A")], ctx(c, scores, penalty=5.0)).launch[1]
    assert stay == (0, 1, 2, 3)


def test_lxv_order_tries_within_node_first_on_ties():
    opts = lxv_order([1.0, 1.0, 1.7], 1.7)
    assert [(v, w) for v, w, _ in opts] == [(1.0, True), (1.0, False), (1.7, True), (1.7, False)]


def test_head_window_and_class_first():
    jobs = [job(1, 3, "C"), job(2, 2, "A"), job(3, 4, "A"), job(4, 1, "A")]
    assert [j.job_id for j in head_window(jobs, 6)] == [1, 2]
    assert [j.job_id for j in class_first(jobs, 6)] == [2, 1, 3, 4]


def test_packed_prefers_exact_then_tightest_then_fullest():
    c = cluster(3, 4, free={0, 1, 4, 5, 6, 8, 9, 10, 11})
    x = ctx(c)
    assert packed(job(1, 2), FreeGpus(c.size, c.free), x) == (0, 1)  # exact fit on node 0
    assert packed(job(1, 3), FreeGpus(c.size, c.free), x) == (4, 5, 6)  # tightest node that fits
    assert packed(job(1, 6), FreeGpus(c.size, c.free), x) == (8, 9, 10, 11, 4, 5)  # fullest nodes first


def test_sticky_preempts_from_the_tail_of_the_queue():
    c = cluster(1, 4, free=set())
    jobs = [job(1, 2, running_on=(0, 1)), job(2, 2), job(3, 2, running_on=(2, 3))]
    plan = placement("packed-sticky").plan(jobs, ctx(c))
    assert plan.suspend == {3}
    assert plan.launch == {2: (2, 3)}


def test_firstfit_never_preempts_and_uses_lowest_node_first():
    c = cluster(2, 4, free={1, 2, 3, 4, 5, 6, 7})
    plan = placement("firstfit").plan([job(1, 3), job(2, 4)], ctx(c))
    assert plan.launch == {1: (1, 2, 3), 2: (4, 5, 6, 7)}
    full = cluster(1, 4, free=set())
    plan = placement("firstfit").plan([job(2, 2), job(1, 2, running_on=(0, 1, 2, 3))], ctx(full))
    assert not plan.suspend and not plan.launch


def test_nonsticky_keeps_jobs_that_land_on_the_same_gpus():
    c = cluster(2, 4, free={4, 5, 6, 7})
    plan = placement("pal").plan([job(1, 4, running_on=(0, 1, 2, 3))], ctx(c))
    assert not plan.suspend and not plan.launch


def test_unknown_policy_lists_the_known_ones():
    from pal_slurm.policy import UnknownPolicy

    with pytest.raises(UnknownPolicy, match="known: .*pal"):
        placement("nope")
    assert placement("Default-Packed-S").name == "packed-sticky"


@pytest.mark.parametrize("name", ["pal", "pmfirst", "packed-nonsticky"])
@settings(max_examples=60, deadline=None)
@given(sc=scenarios(), drop=st.integers(0, 12), seed=st.integers(0, 99))
def test_memo_never_changes_a_plan(name, sc, drop, seed):
    """The caller-owned memo (reuse of last round's allocations) gives the same plans as none."""
    import dataclasses

    c, scores, jobs = sc
    pol = placement(name)
    memo: dict = {}
    base = ctx(c, scores, seed)  # one ranking object for every round, as in the simulators
    rounds = [jobs, jobs, [j for i, j in enumerate(jobs) if i != drop], jobs[:drop] + [job(99, 1, "A")] + jobs[drop:]]
    hits = 0
    for order in rounds:
        held = {g for j in order for g in j.running_on}
        cl = c.with_free(set(range(c.size)) - held)
        fresh = pol.plan(order, dataclasses.replace(base, cluster=cl))
        hits += memo.get("sig") is not None
        with_memo = pol.plan(order, dataclasses.replace(base, cluster=cl, memo=memo))
        assert with_memo == fresh
    assert hits == len(rounds) - 1  # the memo was consulted after the first round
