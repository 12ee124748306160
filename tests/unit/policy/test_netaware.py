import math
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.policy import PlacementContext, placement
from pal_slurm.policy import autotune
from pal_slurm.policy.netaware import (
    NAMED,
    NODE,
    RACK,
    SPINE,
    NetAwarePlacement,
    PreemptConfig,
    FALLBACK_PENALTY,
    best_allocation,
    fallback_penalty,
    net_factor,
    preferred_tier,
    span,
)
from pal_slurm.ranking import Ranking
from pal_slurm.sim.network import Congestion, NetworkModel

NET_POLICIES = [p.name for p in NAMED]
SENS = ("low", "medium", "high")
APPS = ("resnet50", "vgg19", "BERT", "GPT2", "DCGAN", "PointNet")


def make_ctx(c, scores=None, now=0.0, network=True, timers=None, seed=0):
    ranking = Ranking.from_scores(scores, "optimal") if scores else Ranking.uniform(c.size)
    return PlacementContext(
        cluster=c,
        ranking=ranking,
        rng=random.Random(seed),
        now=now,
        network=NetworkModel(congestion=Congestion(0.2, 0.5)) if network else None,
        delay_timers=timers,
    )


def req(job_id, n, app="BERT", sens="high", running_on=(), waiting_since=0.0, remaining=3600.0, **kw):
    return JobRequest(job_id=job_id, num_gpus=n, perf_class=kw.pop("cls", "B"), app=app, submit_time=float(kw.pop("submit", job_id)),
                      running_on=tuple(running_on), net_sensitivity=sens, waiting_since=waiting_since,
                      remaining_time=remaining, **kw)


# ---- properties of every network-aware placement ---------------------------------------


@st.composite
def scenarios(draw):
    nodes = draw(st.integers(1, 6))
    gpn = draw(st.integers(1, 4))
    per_rack = draw(st.integers(1, nodes))
    c = ClusterView.uniform(nodes, gpn, nodes_per_rack=per_rack)
    size = c.size
    scores = {k: [draw(st.sampled_from([0.95, 1.0, 1.05, 1.3, 2.8])) for _ in range(size)] for k in "ABCD"}
    gpus = list(range(size))
    random.Random(draw(st.integers(0, 1000))).shuffle(gpus)
    now = draw(st.floats(0.0, 50_000.0))
    jobs = []
    for i in range(draw(st.integers(0, 10))):
        n = draw(st.integers(1, size))
        running = ()
        if draw(st.booleans()) and len(gpus) >= n:
            running, gpus = tuple(sorted(gpus[:n])), gpus[n:]
        jobs.append(
            req(i, n, app=draw(st.sampled_from(APPS)), sens=draw(st.sampled_from(SENS)), running_on=running,
                waiting_since=draw(st.floats(0.0, now)), remaining=draw(st.floats(1.0, 40_000.0)),
                cls=draw(st.sampled_from("ABCDX")), preemptions=draw(st.integers(0, 3)))
        )
    held = {g for j in jobs for g in j.running_on}
    return c.with_free(set(range(size)) - held), scores, jobs, now, draw(st.booleans())


@pytest.mark.parametrize("name", NET_POLICIES)
@settings(max_examples=80, deadline=None)
@given(sc=scenarios(), seed=st.integers(0, 2**16))
def test_plans_are_consistent_exact_and_deterministic(name, sc, seed):
    c, scores, jobs, now, network = sc
    pol = placement(name)
    ctx = make_ctx(c, scores, now, network, seed=seed)
    plan = pol.plan(jobs, ctx)
    by_id = {j.job_id: j for j in jobs}
    owner = {}
    for j in jobs:
        if j.running_on and j.job_id not in plan.suspend:
            for g in j.running_on:
                owner[g] = j.job_id
    for jid, gpus in plan.launch.items():
        assert len(gpus) == len(set(gpus)) == by_id[jid].num_gpus  # exactly what it asked for
        assert not by_id[jid].running_on or jid in plan.suspend  # sticky: never moves a job
        for g in gpus:
            assert 0 <= g < c.size
            assert g not in owner, f"GPU {g} given twice"
            owner[g] = jid
    for jid in plan.suspend:  # only running jobs are stopped, within the bound
        assert by_id[jid].running_on
        assert pol.preempt is not None and by_id[jid].preemptions < pol.preempt.max_preemptions
    again = pol.plan(jobs, make_ctx(c, scores, now, network, seed=seed))
    assert again == plan


@pytest.mark.parametrize("name", [*NET_POLICIES, "pal-net:backfill=none", "pal-net:backfill=greedy"])
@settings(max_examples=80, deadline=None)
@given(sc=scenarios(), seed=st.integers(0, 2**16), bound=st.sampled_from([None, 0.0, 3600.0]),
       reserve_after=st.sampled_from([None, 0.0]), keep_order=st.booleans())
def test_a_plan_that_stops_once_no_later_job_fits_plans_what_the_whole_queue_plans(
        name, sc, seed, bound, reserve_after, keep_order):
    """A job too large for the GPUs left is passed over without the backfill stage's work when
    no job may reserve any more (Backfill.holds_more), and the plan ends once no later job fits
    (compose._fewest_gpus_from): the same plan as looking at every job in full, starved,
    reserving or site-ordered ones included."""
    from unittest import mock

    from pal_slurm.policy.netaware import compose

    c, scores, jobs, now, network = sc

    def ctx():
        return replace(make_ctx(c, scores, now, network, seed=seed), starvation_bound_s=bound,
                       reserve_after_s=reserve_after, keep_order=keep_order)

    base, _, backfill = name.partition(":backfill=")
    pol = placement(base) if not backfill else replace(placement(base), backfill=backfill)
    short = pol.plan(jobs, ctx())
    with mock.patch.object(compose, "_fewest_gpus_from", lambda waiting: [0] * len(waiting)), \
            mock.patch.object(type(pol.reserve), "holds_more", lambda self, rnd, starved: True):
        whole = pol.plan(jobs, ctx())
    assert short == whole


@pytest.mark.parametrize("name", NET_POLICIES)
def test_an_empty_queue_plans_nothing(name):
    c = ClusterView.uniform(2, 4)
    plan = placement(name).plan([], make_ctx(c))
    assert not plan.launch and not plan.suspend


# ---- allocation ---------------------------------------------------------------------------


def test_allocation_prefers_one_node_then_one_rack():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    ctx = make_ctx(c)
    gpus, tier, factor = best_allocation(req(0, 4), sorted(c.free), ctx)
    assert tier == NODE and span(gpus, c)[1] == 1 and factor == 1.0
    # nodes 0 and 2 half busy: 8 GPUs fit in rack 1? no: only node 3 full -> rack 1 has 6
    free = set(range(16)) - {0, 1, 8, 9}
    gpus, tier, _ = best_allocation(req(0, 8), sorted(free), make_ctx(c.with_free(free)))
    assert tier == SPINE  # no rack has 8 free
    free = set(range(16)) - {0, 1}
    gpus, tier, _ = best_allocation(req(0, 8), sorted(free), make_ctx(c.with_free(free)))
    assert tier == RACK and set(gpus) == set(range(8, 16))


def test_allocation_trades_variability_against_the_network():
    # node 0 has a slow GPU; a 4-GPU job goes to node 1 (all fast), not spread
    c = ClusterView.uniform(2, 4, nodes_per_rack=1)
    scores = {k: [2.8, 1, 1, 1, 1, 1, 1, 1] for k in "ABCD"}
    gpus, tier, _ = best_allocation(req(0, 4, cls="A"), sorted(c.free), make_ctx(c, scores))
    assert set(gpus) == {4, 5, 6, 7} and tier == NODE
    # without variability both nodes look the same: the lowest node wins
    gpus, _, _ = best_allocation(req(0, 4, cls="A"), sorted(c.free), make_ctx(c, scores), variability=False)
    assert set(gpus) == {0, 1, 2, 3}


def test_allocation_respects_the_tier_cap():
    c = ClusterView.uniform(2, 4, nodes_per_rack=1)
    free = {2, 3, 4, 5}
    ctx = make_ctx(c.with_free(free))
    assert best_allocation(req(0, 4), sorted(free), ctx, max_tier=NODE) is None
    assert best_allocation(req(0, 4), sorted(free), ctx, max_tier=RACK) is None
    assert best_allocation(req(0, 4), sorted(free), ctx, max_tier=SPINE)[1] == SPINE


def test_without_a_network_model_tier_penalties_still_apply():
    c = ClusterView.uniform(4, 2, nodes_per_rack=2)
    free = {0, 1, 2, 3, 4, 5}
    gpus, tier, factor = best_allocation(req(0, 4), sorted(free), make_ctx(c.with_free(free), network=False))
    assert tier == RACK and factor > 1.0


def test_a_declared_spread_factor_is_the_spine_penalty_without_a_network_model():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    ctx = make_ctx(c, network=False)
    job = req(0, 8, app="DCGAN", sens="2.22")
    assert net_factor(job, 2, 2, ctx) == 2.22 and net_factor(job, 1, 1, ctx) == 1.0
    assert 1.03 < net_factor(job, 2, 1, ctx) < 1.5  # between medium's and high's leaf penalties
    for name, pen in FALLBACK_PENALTY.items():
        assert fallback_penalty(name) == pen
    assert fallback_penalty("loud") == fallback_penalty("0.5") == FALLBACK_PENALTY["high"]  # unknown: the worst


@given(st.floats(1.0, 1000.0), st.floats(1.0, 1000.0))
def test_the_leaf_penalty_of_a_factor_grows_with_it_and_never_passes_it(a, b):
    lo, hi = sorted((a, b))
    (n1, r1, s1), (n2, r2, s2) = fallback_penalty(repr(lo)), fallback_penalty(repr(hi))
    assert n1 == n2 == 1.0 and (s1, s2) == (lo, hi)
    assert 1.0 <= r1 <= r2 + 1e-12 and r1 <= s1 and r2 <= s2


def test_a_factor_between_the_classes_waits_for_a_leaf_where_medium_would_spread():
    """Two leaves of 2 nodes x 4 GPUs; a 4-GPU job on one node of each; 8 GPUs free only across
    the leaves. The job on the first leaf ends in 2000 s; the newcomer runs 4000 s. Finish-aware,
    `medium` (1.35x across the spine: ends at 5400 s against 6000 waiting) spreads; a job that
    declares 2.2x (8800 s) waits for the leaf."""
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    soon = req(8, 4, app="vgg19", sens="low", running_on=range(4), remaining=2000.0, submit=0)
    late = req(9, 4, app="vgg19", sens="low", running_on=range(8, 12), remaining=50_000.0, submit=0)
    ctx = make_ctx(c.with_free(set(range(4, 8)) | set(range(12, 16))), network=False)
    started = {}
    for sens in ("medium", "2.22"):
        job = req(1, 8, app="DCGAN", sens=sens, remaining=4000.0, submit=1)
        plan = NetAwarePlacement("t", delay=False, finish_aware=True).plan([soon, late, job], ctx)
        started[sens] = job.job_id in plan.launch
    assert started == {"medium": True, "2.22": False}


# ---- delay scheduling ----------------------------------------------------------------------


def test_delay_widens_the_accepted_tier_over_time():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    pol = NetAwarePlacement("t", cost_aware=False, timers={("high", "node"): 100.0, ("high", "rack"): 200.0})
    job = req(0, 2, waiting_since=1000.0)
    assert preferred_tier(2, c) == NODE and preferred_tier(8, c) == RACK and preferred_tier(12, c) == SPINE
    at = lambda t: pol.allowed_tier(job, make_ctx(c, now=t))  # noqa: E731
    assert at(1000.0) == NODE and at(1099.0) == NODE
    assert at(1100.0) == RACK and at(1299.0) == RACK
    assert at(1300.0) == SPINE
    assert pol.next_wakeup([job], make_ctx(c, now=1000.0)) == 1100.0
    assert pol.next_wakeup([job], make_ctx(c, now=1100.0)) == 1300.0
    assert pol.next_wakeup([job], make_ctx(c, now=1300.0)) is None


def test_hard_cap_prevents_starvation_whatever_the_timers():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    pol = NetAwarePlacement("t", cost_aware=False, max_wait_s=500.0,
                            timers={("high", "node"): 1e9, ("high", "rack"): 1e9})
    job = req(0, 2, waiting_since=0.0)
    assert pol.allowed_tier(job, make_ctx(c, now=499.0)) == NODE
    assert pol.allowed_tier(job, make_ctx(c, now=500.0)) == SPINE


def test_cost_aware_delay_never_waits_longer_than_it_saves():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    pol = NetAwarePlacement("t", timers={("high", "rack"): 3600.0})
    short = req(0, 8, remaining=60.0)  # a one-minute job
    deadlines = pol.tier_deadlines(short, make_ctx(c))
    saving = 60.0 * (NetworkModel(congestion=Congestion(0.2, 0.5)).factor("BERT", 8, 2, 2)
                     - NetworkModel(congestion=Congestion(0.2, 0.5)).factor("BERT", 8, 2, 1))
    assert deadlines[-1][0] == pytest.approx(saving)
    long = req(0, 8, remaining=36_000.0)
    assert pol.tier_deadlines(long, make_ctx(c))[-1][0] > 3600.0  # stretched by patience


def test_deadlines_kept_for_the_run_follow_the_timers_and_the_wait():
    """The deadline table lives for the run (one RunCache, one network model): a tuner's new
    timers, and a wait that starts again (a preempted or requeued job), give new deadlines."""
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    pol = NetAwarePlacement("t", cost_aware=False)
    run = make_ctx(c)
    waiting = req(0, 2, sens="medium")
    at = lambda now, timers=None, job=waiting: pol.allowed_tier(  # noqa: E731
        job, replace(run, now=now, delay_timers=timers))
    assert at(10.0) == NODE  # the default 120 s
    assert at(10.0, {("medium", "node"): 5.0}) == RACK  # the tuner shortened it
    assert at(10.0) == NODE  # and the defaults again
    assert at(200.0) == RACK
    assert at(200.0, job=req(0, 2, sens="medium", waiting_since=150.0)) == NODE  # waits again from 150
    assert len(pol.deadline_table(run)) == 2  # one entry per (job, wait) under the default timers


def test_context_timers_override_the_defaults():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    pol = NetAwarePlacement("t", cost_aware=False)
    job = req(0, 2, sens="medium")
    assert pol.allowed_tier(job, make_ctx(c, now=10.0, timers={("medium", "node"): 5.0})) == RACK
    assert pol.allowed_tier(job, make_ctx(c, now=10.0)) == NODE  # default 120 s


def test_delayed_job_lets_others_go():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    free = {0, 1, 2, 3, 8, 9, 10, 11}  # 8 GPUs, but across racks
    ctx = make_ctx(c.with_free(free), now=10.0)
    pol = NetAwarePlacement("t", backfill="easy")
    big = req(0, 8, waiting_since=0.0, remaining=36_000.0)
    small = req(1, 2, app="vgg19", sens="low", waiting_since=5.0)
    plan = pol.plan([big, small], ctx)
    assert 0 not in plan.launch and 1 in plan.launch
    eager = replace(pol, delay=False).plan([big, small], ctx)
    assert 0 in eager.launch


# ---- backfilling ---------------------------------------------------------------------------


def test_easy_backfill_protects_the_head_of_the_queue():
    c = ClusterView.uniform(2, 4, nodes_per_rack=1)
    running = req(9, 4, app="vgg19", sens="low", running_on=(0, 1, 2, 3), remaining=1000.0)
    free = {4, 5, 6, 7}
    head = req(0, 8, app="vgg19", sens="low", waiting_since=0.0)  # blocked until t=1000
    short = req(1, 4, app="vgg19", sens="low", remaining=500.0)  # ends before the head's start
    long = req(2, 4, app="vgg19", sens="low", remaining=5000.0)  # would delay the head
    pol = NetAwarePlacement("t", variability=False, reserve_after_s=0.0)
    ctx = make_ctx(c.with_free(free), now=10.0)
    assert set(pol.plan([running, head, short], ctx).launch) == {1}
    assert pol.plan([running, head, long], ctx).launch == {}
    greedy = replace(pol, backfill="greedy")
    assert set(greedy.plan([running, head, long], ctx).launch) == {2}
    strict = replace(pol, backfill="none")
    assert strict.plan([running, head, short], ctx).launch == {}
    # before reserve_after_s the head holds no reservation: the long job may pass
    aging = replace(pol, reserve_after_s=3600.0)
    assert set(aging.plan([running, head, long], ctx).launch) == {2}


def test_a_blocked_job_on_whole_nodes_in_its_grace_lets_only_jobs_no_longer_than_itself_pass():
    """`grace_reservation`: before `reserve_after_s` a held job on whole nodes (an hour long)
    still holds a reservation, which a job no longer than it passes (it would not with a
    reservation at once: it ends after the held job's shadow) and a longer one does not (it
    would with none). A held job that takes GPUs anywhere keeps the free pass."""
    c = ClusterView.uniform(2, 4, nodes_per_rack=1)
    running = req(9, 4, app="vgg19", sens="low", running_on=(0, 1, 2, 3), remaining=1000.0)
    head = _per_node(0, 2, 4, app="vgg19", sens="low", waiting_since=0.0, remaining=3600.0)  # shadow 1010
    shorter = req(1, 4, app="vgg19", sens="low", remaining=3000.0)
    longer = req(2, 4, app="vgg19", sens="low", remaining=5000.0)
    ctx = make_ctx(c.with_free({4, 5, 6, 7}), now=10.0)
    free_pass = NetAwarePlacement("t", variability=False, reserve_after_s=3600.0)
    bounded = replace(free_pass, grace_reservation=True)
    at_once = replace(free_pass, reserve_after_s=0.0)
    assert set(bounded.plan([running, head, shorter], ctx).launch) == {1}
    assert at_once.plan([running, head, shorter], ctx).launch == {}
    assert bounded.plan([running, head, longer], ctx).launch == {}
    assert set(free_pass.plan([running, head, longer], ctx).launch) == {2}
    assert bounded.plan([running, head, longer], ctx).planned[0].at == 1010.0
    # past its grace the held job's reservation is EASY's: the shorter job ends after its shadow
    late = replace(ctx, now=4000.0)
    assert bounded.plan([running, head, shorter], late).launch == {}
    # 8 GPUs anywhere (--gpus=8): no reservation in its grace, the longer job passes
    anywhere = req(0, 8, app="vgg19", sens="low", waiting_since=0.0, remaining=3600.0)
    assert set(bounded.plan([running, anywhere, longer], ctx).launch) == {2}


# ---- preemption ----------------------------------------------------------------------------


def test_preemption_takes_less_sensitive_recent_jobs_only():
    c = ClusterView.uniform(2, 4, nodes_per_rack=1)
    ctx = make_ctx(c.with_free({4, 5}), now=100.0)
    victim = req(5, 2, app="vgg19", sens="low", running_on=(0, 1), waiting_since=50.0)
    other = req(6, 2, app="vgg19", sens="low", running_on=(2, 3), waiting_since=50.0)
    peer = req(7, 2, app="BERT", sens="high", running_on=(6, 7), waiting_since=50.0)
    want = req(0, 4, waiting_since=90.0, remaining=36_000.0)
    pol = NetAwarePlacement("t", preempt=PreemptConfig(), cost_aware=False,
                            timers={("high", "node"): 1e6, ("high", "rack"): 1e6})
    plan = pol.plan([victim, other, peer, want], ctx)
    assert plan.suspend == {5, 6} and set(plan.launch[0]) == {0, 1, 2, 3}
    # an old victim (started long ago), a victim at its bound, or an equally sensitive one: no
    old = [replace(v, waiting_since=-10_000.0) for v in (victim, other)]
    assert not pol.plan(old + [peer, want], ctx).suspend
    worn = [replace(v, preemptions=2) for v in (victim, other)]
    assert not pol.plan(worn + [peer, want], ctx).suspend
    same = [replace(v, net_sensitivity="high") for v in (victim, other)]
    assert not pol.plan(same + [peer, want], ctx).suspend


# ---- the auto-tuner ------------------------------------------------------------------------


def test_tuner_converges_on_a_stationary_input():
    cfg = autotune.TunerConfig(window=32, alpha=0.25, min_s=0.0, max_s=3600.0)
    state = autotune.initial_state(cfg)
    rng = random.Random(1)
    history = []
    for i in range(600):
        got = 1 if rng.random() < 0.7 else 2
        obs = autotune.Observation("high", wanted=1, got=got, waited_s=rng.uniform(200, 400),
                                   comm_loss_s=rng.uniform(4000, 6000), time=float(i))
        state = autotune.observe(state, obs, cfg)
        history.append(state.timer("high", "rack"))
    tail = history[-200:]
    assert all(cfg.min_s <= v <= cfg.max_s for v in history)
    assert 300.0 < tail[-1] < 700.0  # about mean + 2 sd of the waits (U(200, 400) -> ~415)
    assert max(tail) - min(tail) < 0.25 * tail[-1]  # settled (the window still samples noise)
    # the deterministic version settles to a point
    s2 = autotune.initial_state(cfg)
    for _ in range(200):
        s2 = autotune.observe(s2, autotune.Observation("medium", 1, 1, 300.0, 0.0), cfg)
    assert s2.timer("medium", "rack") == pytest.approx(300.0, rel=1e-6)


def test_tuner_caps_timers_at_what_consolidation_saves():
    cfg = autotune.TunerConfig(alpha=1.0)
    s = autotune.initial_state(cfg)
    for _ in range(10):
        s = autotune.observe(s, autotune.Observation("medium", 1, 1, 2000.0, 0.0), cfg)
        s = autotune.observe(s, autotune.Observation("medium", 1, 2, 0.0, 100.0), cfg)
    assert s.timer("medium", "rack") == pytest.approx(100.0)


def test_tuner_is_pure_and_ignores_levels_a_job_could_not_have():
    cfg = autotune.TunerConfig()
    s0 = autotune.initial_state(cfg)
    s1 = autotune.observe(s0, autotune.Observation("high", wanted=2, got=2, waited_s=99.0, comm_loss_s=0.0), cfg)
    assert s1.timers == s0.timers and s1.updates == 1
    assert s0.updates == 0 and s0.waits == ()
    with pytest.raises(ValueError):
        autotune.TunerConfig(alpha=0.0)


def test_place_one_answers_at_the_accepted_tier():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    free = {0, 1, 2, 3, 8, 9, 10, 11}
    pol = placement("pal-net")
    fresh = req(0, 8, waiting_since=0.0, remaining=36_000.0)
    assert pol.place_one(fresh, make_ctx(c.with_free(free), now=0.0)) is None  # defer: wants a rack
    got = pol.place_one(fresh, make_ctx(c.with_free(set(range(16))), now=0.0))
    assert got is not None and span(got, c)[0] == RACK
    # unknown length (remaining 0): the class timer still applies
    unknown = req(1, 8, waiting_since=0.0, remaining=0.0)
    assert pol.allowed_tier(unknown, make_ctx(c, now=10.0)) == RACK


def test_topology_blind_ablation_ignores_racks():
    # fast GPUs on node 0 (rack 0) and node 2 (rack 1), slow ones on node 1 (rack 0): the
    # topology-aware policy keeps the BERT job in rack 0; the blind one takes the fast pair
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    free = set(range(12))
    scores = {k: [0.9] * 4 + [1.3] * 4 + [0.9] * 4 + [1.3] * 4 for k in "ABCD"}
    job = req(0, 8, cls="A", waiting_since=0.0)
    ctx = make_ctx(c.with_free(free), scores, now=0.0)
    aware = placement("pal-net-nodelay").plan([job], ctx).launch[0]
    blind = placement("pal-backfill").plan([job], ctx).launch[0]
    assert span(aware, c)[0] == RACK and set(aware) == set(range(8))
    assert span(blind, c)[0] == SPINE and set(blind) == {0, 1, 2, 3, 8, 9, 10, 11}


def test_slurm_s_will_run_takes_running_jobs_off_in_doubling_windows():
    """Nodes free at 0, 100, 500 and 2000; a 30-s window from the first end rounded up (120):
    up to 150 two nodes, then the window doubles until the next end is in (600: three nodes,
    starting at the last end taken, 500), then again (2040: four, at 2000)."""
    from pal_slurm.policy.netaware import slurm_will_run

    c = ClusterView.uniform(4, 1, nodes_per_rack=4)
    ready = [(0.0, 0), (100.0, 1), (500.0, 2), (2000.0, 3)]
    assert slurm_will_run(2, 1, ready, c, 0.0, 30.0) == (100.0, frozenset({0, 1}))
    assert slurm_will_run(3, 1, ready, c, 0.0, 30.0) == (500.0, frozenset({0, 1, 2}))
    assert slurm_will_run(4, 1, ready, c, 0.0, 30.0) == (2000.0, frozenset({0, 1, 2, 3}))
    assert slurm_will_run(1, 1, ready, c, 0.0, 30.0) == (0.0, frozenset({0}))  # fits now
    assert slurm_will_run(5, 1, ready, c, 0.0, 30.0)[0] == math.inf


def _per_node(job_id, k, g, **kw):
    from pal_slurm.model.shape import JobShape

    return req(job_id, k * g, shape=JobShape(k * g, nodes=k, per_node=g), **kw)


def _a_blocked_three_node_job():
    """(context, running jobs, a 3-node job that waited 0 s): node 1 free, node 0 free at 10,
    node 2 at 100, node 3 at 1000; 2 nodes per leaf, no network model."""
    c = ClusterView.uniform(4, 4, nodes_per_rack=2).with_free({4, 5, 6, 7})
    running = [req(10, 4, running_on=(0, 1, 2, 3), remaining=10.0, submit=0),
               req(11, 4, running_on=(8, 9, 10, 11), remaining=100.0, submit=0),
               req(12, 4, running_on=(12, 13, 14, 15), remaining=1000.0, submit=0)]
    return make_ctx(c, network=False), running, _per_node(1, 3, 4, sens="low", waiting_since=0.0)


def test_a_site_s_reserve_after_s_in_the_context_overrides_the_placement_s():
    """A blocked 3-node job (an hour long) that has waited 0 s: with the placement's own hour it
    is in its grace and a one-node job no longer than it, ending long after its shadow, takes the
    free node it needs; with the site's `reserve_after_s` = 0 (pald's `[policy]`, through the
    context) it reserves that node and the other job waits. Node 1 free, node 0 free at 10,
    node 2 at 100, node 3 at 1000."""
    pal_fit = placement("pal-fit")
    ctx, running, blocked = _a_blocked_three_node_job()
    long_job = _per_node(2, 1, 4, sens="low", remaining=3000.0)
    order = [*running, blocked, long_job]
    assert pal_fit.plan(order, ctx).launch == {2: (4, 5, 6, 7)}
    assert pal_fit.plan(order, replace(ctx, reserve_after_s=0.0)).launch == {}


def test_a_plan_reports_the_start_and_nodes_it_reserved_for_a_blocked_job():
    """The reservation a plan holds for a blocked job is in its output (RoundPlan.planned: what
    pald logs and `palctl explain` shows): the 3 nodes ready first (node 1 now, 0 at 10, 2 at
    100), from 100; a job that starts has none."""
    pal_fit = placement("pal-fit")
    ctx, running, blocked = _a_blocked_three_node_job()
    short = _per_node(2, 1, 4, sens="low", remaining=50.0)
    plan = pal_fit.plan([*running, blocked, short], replace(ctx, reserve_after_s=0.0))
    assert plan.launch == {2: (4, 5, 6, 7)}  # ends before the reservation's start: it passes
    assert list(plan.planned) == [1]
    assert plan.planned[1].at == ctx.now + 100.0 and plan.planned[1].gpus == frozenset(range(12))
    # in its grace it holds the same reservation (jobs no longer than it pass it)
    assert pal_fit.plan([*running, blocked, short], ctx).planned == plan.planned


def test_a_per_node_reservation_holds_the_nodes_that_free_last_and_leaves_a_free_leaf_to_pass():
    """Workload-3 at 80 jobs, made small: two leaves of four nodes; leaf 0 free now, leaf 1 busy
    until its job ends (100 s of work, later on its GPUs). A blocked 6-node job needs every node
    of leaf 1 and two of leaf 0 then, whichever two. Holding the nodes ready first (0-5) kept a long 2-node job that wants one
    leaf off nodes 2 and 3 until the blocked job ended; pal-fit holds those ready last (4-7,
    then 0 and 1), the long job starts on 2 and 3 now, and the blocked job's planned start is
    the same."""
    c = ClusterView.uniform(8, 4, nodes_per_rack=4).with_free(set(range(16)))
    running = [req(10, 16, running_on=tuple(range(16, 32)), remaining=100.0, submit=0)]
    blocked = _per_node(1, 6, 4, sens="low", waiting_since=0.0)
    long_job = _per_node(2, 2, 4, sens="high", remaining=5000.0)
    ctx = replace(make_ctx(c, network=False), reserve_after_s=0.0)
    pal_fit = placement("pal-fit")
    plan = pal_fit.plan([*running, blocked, long_job], ctx)
    assert plan.launch == {2: tuple(range(8, 16))}
    starts = plan.planned[1].at
    assert starts >= 100.0 and plan.planned[1].gpus == frozenset(range(8)) | frozenset(range(16, 32))
    first = replace(pal_fit, reserve_ready_last=False)  # the k nodes ready first, lowest names first
    plan = first.plan([*running, blocked, long_job], ctx)
    assert plan.launch == {}
    assert plan.planned[1].at == starts and plan.planned[1].gpus == frozenset(range(24))


def test_the_nodes_a_reservation_holds_free_last_keep_leaves_whole_and_fill_best_fit():
    """`_ready_last` on three leaves of four nodes (0-3, 4-7, 8-11): with enough busy nodes, the
    busy ones under the fewest leaves; with too few, the busy ones, then free nodes of the
    leaves already held, then of the leaf with the fewest free, so the whole free leaf stays
    whole for jobs that pass."""
    from pal_slurm.policy.netaware import _ready_last

    rack_idx = (0,) * 4 + (1,) * 4 + (2,) * 4
    busy = [(50.0, 4), (60.0, 8), (70.0, 5), (80.0, 9), (90.0, 10)]
    assert sorted(_ready_last(busy, 3, rack_idx, now=0.0)) == [8, 9, 10]
    assert sorted(_ready_last(busy, 2, rack_idx, now=0.0)) == [4, 5]
    mixed = [(50.0, 4)] + [(0.0, nd) for nd in (0, 1, 2, 3, 6, 8)]
    assert _ready_last(mixed, 3, rack_idx, now=0.0) == [4, 6, 8]


def _a_long_job_and_a_slow_free_node(remaining, running_left=100.0):
    """(context, running job, a one-node 4-GPU job of `remaining` s): two nodes of 4 GPUs, node
    0 free with one slow GPU (1.3x), node 1 fast and busy until its job ends (`running_left`)."""
    c = ClusterView.uniform(2, 4, nodes_per_rack=2).with_free({0, 1, 2, 3})
    ctx = make_ctx(c, scores={"B": [1.0, 1.0, 1.0, 1.3, 1.0, 1.0, 1.0, 1.0]}, network=False)
    running = req(10, 4, running_on=(4, 5, 6, 7), remaining=running_left, submit=0)
    return ctx, running, _per_node(1, 1, 4, sens="low", remaining=remaining)


def test_a_long_one_node_job_waits_for_a_faster_node_that_frees_soon_and_holds_it():
    """Workload-4 made small: a 7.4-hour ResNet-50 job came while short jobs held the fast
    nodes and took the one whole node left, 8.7% slower, for all its hours. A one-node job
    whose work on the slow node (10,000 s x 1.3) ends later than waiting 100 s for the fast one
    waits, and its plan says for what (node 1, from 100)."""
    ctx, running, job = _a_long_job_and_a_slow_free_node(remaining=10_000.0)
    plan = placement("pal-fit").plan([running, job], ctx)
    assert plan.launch == {}
    assert plan.planned[1].at == 100.0 and plan.planned[1].gpus == frozenset({4, 5, 6, 7})
    blind = replace(placement("pal-fit"), waits_for_faster_node=False)
    assert blind.plan([running, job], ctx).launch == {1: (0, 1, 2, 3)}


def test_a_short_job_takes_the_slow_node_now_rather_than_wait_longer_than_it_gains():
    """500 s x 0.3 = 150 s saved would need a 100-s wait: a gain, it waits; 300 s x 0.3 = 90 s
    is less than the wait: it starts now on the slow node."""
    for remaining, waits in ((500.0, True), (300.0, False)):
        ctx, running, job = _a_long_job_and_a_slow_free_node(remaining=remaining)
        plan = placement("pal-fit").plan([running, job], ctx)
        assert (plan.launch == {}) is waits, remaining
        if not waits:
            assert plan.launch == {1: (0, 1, 2, 3)}


def test_a_job_running_past_its_estimate_frees_nothing_to_wait_for():
    """A running job whose estimated end has passed (it runs over its limit: 0 s left) may run
    on for any time: no job waits for its GPUs."""
    ctx, running, job = _a_long_job_and_a_slow_free_node(remaining=10_000.0, running_left=0.0)
    assert placement("pal-fit").plan([running, job], ctx).launch == {1: (0, 1, 2, 3)}


def test_the_gpus_a_job_waits_for_are_reserved_from_the_moment_it_chooses_to_wait():
    """Workload-3 at 60x: a job that chose to wait for a better bin without a claim
    saw smaller jobs take the GPUs and started 16 hours later. Node 1 has two fast GPUs free
    and two held until 100; the 4-GPU job waits for all four, and a long 1-GPU job behind it
    (which would take a fast free GPU) goes to node 0 instead; a 1-GPU job that ends before 100
    may use node 1."""
    c = ClusterView.uniform(2, 4, nodes_per_rack=2).with_free({0, 1, 2, 3, 4, 5})
    ctx = make_ctx(c, scores={"B": [1.0, 1.0, 1.3, 1.3, 1.0, 1.0, 1.0, 1.0]}, network=False)
    running = req(10, 2, running_on=(6, 7), remaining=100.0, submit=0)
    job = _per_node(1, 1, 4, sens="low", remaining=10_000.0)
    long_one = _per_node(2, 1, 1, sens="low", remaining=10_000.0)
    plan = placement("pal-fit").plan([running, job, long_one], ctx)
    assert 1 not in plan.launch and plan.planned[1].gpus == frozenset({4, 5, 6, 7})
    assert plan.launch == {2: (0,)}
    short_one = _per_node(3, 1, 1, sens="low", remaining=50.0)
    plan = placement("pal-fit").plan([running, job, short_one], ctx)
    assert plan.launch == {3: (4,)}


def test_a_job_waits_for_a_faster_node_only_when_nobody_ahead_of_it_waits():
    """Workload-6 at 80 jobs, seed 1: a 5-hour ResNet-50 job waited for a fast node while a
    48-GPU job ahead of it also waited; when the GPUs freed, the job ahead took them, and the
    one-node job, its slower node long gone to jobs behind it, started 13 hours later. A job
    ahead comes first for whatever frees, so with one waiting the one-node job starts now."""
    c = ClusterView.uniform(3, 4, nodes_per_rack=3).with_free({0, 1, 2, 3})
    ctx = make_ctx(c, scores={"B": [1.0, 1.0, 1.0, 1.3] + [1.0] * 8}, network=False)
    running = [req(10, 4, running_on=(4, 5, 6, 7), remaining=100.0, submit=0),
               req(11, 4, running_on=(8, 9, 10, 11), remaining=1000.0, submit=0)]
    ahead = _per_node(1, 3, 4, sens="low", remaining=20_000.0)  # longer: the job may pass it
    job = _per_node(2, 1, 4, sens="low", remaining=10_000.0)
    pal_fit = placement("pal-fit")
    assert pal_fit.plan([*running, job], ctx).launch == {}  # alone: it waits for node 1
    assert pal_fit.plan([*running, ahead, job], ctx).launch == {2: (0, 1, 2, 3)}


def _a_long_two_node_job_and_a_slow_free_node(remaining, per_rack=4, sens="low"):
    """(context, running jobs, a 2-node x 4-GPU job of `remaining` s): four nodes of 4 GPUs,
    nodes 0 and 1 free (node 1 with one GPU at 1.3x), node 2 fast and busy until 100, node 3
    busy until 100,000; `per_rack` nodes per leaf, no network model."""
    c = ClusterView.uniform(4, 4, nodes_per_rack=per_rack).with_free(set(range(8)))
    ctx = make_ctx(c, scores={"B": [1.0] * 7 + [1.3] + [1.0] * 8}, network=False)
    running = [req(10, 4, running_on=(8, 9, 10, 11), remaining=100.0, submit=0),
               req(11, 4, running_on=(12, 13, 14, 15), remaining=100_000.0, submit=0)]
    return ctx, running, _per_node(1, 2, 4, sens=sens, remaining=remaining)


def test_a_long_job_of_several_nodes_waits_for_faster_nodes_that_free_soon_and_holds_them():
    """Workload-4, seed 0, replayed at 150: a 32-GPU, 30-hour ResNet-50 job took the only eight
    free nodes, one with a GPU at 1.113x, 750 trace seconds before a short job freed four fast
    ones; it ran 2.4% longer than under stock and set a makespan 1.024 of stock's. Made small:
    a 2-node job whose work on the free pair (10,000 s x 1.3) ends later than waiting 100 s for
    fast node 2 waits, and its plan holds nodes 0 and 2 from 100. Without the rule it starts
    on the slow pair."""
    ctx, running, job = _a_long_two_node_job_and_a_slow_free_node(remaining=10_000.0)
    plan = placement("pal-fit").plan([*running, job], ctx)
    assert plan.launch == {}
    assert plan.planned[1].at == 100.0 and plan.planned[1].gpus == frozenset({0, 1, 2, 3, 8, 9, 10, 11})
    blind = replace(placement("pal-fit"), waits_for_faster_nodes=False)
    assert blind.plan([*running, job], ctx).launch == {1: (0, 1, 2, 3, 4, 5, 6, 7)}


def test_a_short_job_of_several_nodes_starts_now_rather_than_wait_longer_than_it_gains():
    """500 s x 0.3 = 150 s saved pays a 100-s wait; 300 s x 0.3 = 90 s does not: it starts now
    on the slower pair."""
    for remaining, waits in ((500.0, True), (300.0, False)):
        ctx, running, job = _a_long_two_node_job_and_a_slow_free_node(remaining=remaining)
        plan = placement("pal-fit").plan([*running, job], ctx)
        assert (plan.launch == {}) is waits, remaining
        if not waits:
            assert plan.launch == {1: (0, 1, 2, 3, 4, 5, 6, 7)}


def test_faster_nodes_that_would_spread_the_job_over_more_leaves_are_not_worth_waiting_for():
    """Two nodes per leaf: the free pair (nodes 0, 1) is under one leaf, the faster pair after
    100 s (nodes 0, 2) spans two. For a network-sensitive job the second leaf costs more than
    the slow GPU (`high`: far above 1.3x), so it starts now; for a job that barely minds the
    network (`net=1.05`: a 1.05x spine factor) the faster pair still pays."""
    ctx, running, job = _a_long_two_node_job_and_a_slow_free_node(remaining=10_000.0, per_rack=2, sens="high")
    assert placement("pal-fit").plan([*running, job], ctx).launch == {1: (0, 1, 2, 3, 4, 5, 6, 7)}
    ctx, running, job = _a_long_two_node_job_and_a_slow_free_node(remaining=10_000.0, per_rack=2, sens="1.05")
    plan = placement("pal-fit").plan([*running, job], ctx)
    assert plan.launch == {} and plan.planned[1].gpus == frozenset({0, 1, 2, 3, 8, 9, 10, 11})


def test_a_job_of_several_nodes_waits_only_when_nobody_ahead_of_it_waits():
    """The guard of the one-node wait holds for several nodes: a job ahead that waits comes
    first for whatever frees, so the 2-node job starts now on the free pair."""
    ctx, running, job = _a_long_two_node_job_and_a_slow_free_node(remaining=10_000.0)
    ahead = _per_node(0, 4, 4, sens="low", remaining=20_000.0, submit=-1)
    plan = placement("pal-fit").plan([*running, ahead, job], ctx)
    assert plan.launch == {1: (0, 1, 2, 3, 4, 5, 6, 7)}


def _a_leaf_held_for_a_blocked_job(app, sens):
    """Three leaves of two nodes (0-1, 2-3, 4-5), pald's engine (no network model). Nodes 1
    and 5 are busy until 10000; nodes 2 and 3 have one GPU busy until 50, so the held 2x4 job
    waits for that leaf (its reservation, from 50, for two hours) rather than spread over the
    free nodes 0 and 4. A long 2x3 job then fits leaf 2-3 now but would end after the
    reservation's start; around it, only nodes 0 and 4 (two leaves)."""
    c = ClusterView.uniform(6, 4, nodes_per_rack=2)
    running = [req(10, 4, running_on=(4, 5, 6, 7), remaining=10_000.0, submit=0),
               req(11, 4, running_on=(20, 21, 22, 23), remaining=10_000.0, submit=0),
               req(12, 1, running_on=(8,), remaining=50.0, submit=0),
               req(13, 1, running_on=(12,), remaining=50.0, submit=0)]
    held = _per_node(0, 2, 4, app="vgg19", sens="low", waiting_since=0.0, remaining=7200.0)
    job = _per_node(1, 2, 3, app=app, sens=sens, remaining=36_000.0)
    busy = {g for j in running for g in j.running_on}
    ctx = replace(make_ctx(c.with_free(set(range(c.size)) - busy), network=False), reserve_after_s=0.0)
    return ctx, [*running, held, job]


def test_a_job_backfill_would_spread_around_a_reservation_waits_when_a_leaf_finishes_it_sooner():
    """pal-fit's finish-aware test covers the detour as well as the first choice: a 10-hour
    GPT-2 job (8x across leaves, 1.5x in one) waits for a leaf (the held job's, free at 7250)
    rather than run 80 hours over two, while a VGG job (1.15x, 1.01x) takes the two leaves
    now: waiting until 7250 would finish it later than 1.15 x 36000. Before, the detour took
    two leaves for both (the model of workload-5's 160 jobs: a GPT-2 job at 8x for 145 h)."""
    pal_fit = placement("pal-fit")
    ctx, order = _a_leaf_held_for_a_blocked_job("GPT2", "high")
    plan = pal_fit.plan(order, ctx)
    assert plan.launch == {} and list(plan.planned) == [0]
    ctx, order = _a_leaf_held_for_a_blocked_job("vgg19", "low")
    assert set(pal_fit.plan(order, ctx).launch) == {1}
    assert {g // 4 for g in pal_fit.plan(order, ctx).launch[1]} == {0, 4}
