"""pal-fit's decision rule (policy.fragmentation): pack first, a better bin only when it pays.

The cluster in most cases: 4 nodes x 4 GPUs, 2 nodes per leaf (rack 0 = nodes 0-1, rack 1 =
nodes 2-3); GPU 0 is busy, so node 0 is the partly used node a first fit fills next."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.network import NODE, RACK
from pal_slurm.policy import PlacementContext, placement
from pal_slurm.policy.fragmentation import FragmentationCost, opened, packed_first_allocation
from pal_slurm.policy.netaware import PAL_FIT, _pack, best_allocation, net_factor
from pal_slurm.ranking import Ranking


PAL_FIT_COST = FragmentationCost()


@dataclass(frozen=True)
class Bins:
    """A ranking with the binned factors given as they are (no binning step), for exact cases."""

    factors: tuple[float, ...]

    def sf(self, perf_class: str) -> tuple[float, ...]:
        return self.factors

    def scores(self, perf_class: str) -> tuple[float, ...]:
        return self.factors


def cluster(free: set[int] | None = None) -> ClusterView:
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    return c.with_free(free if free is not None else set(range(1, 16)))


def context(c: ClusterView, factors: list[float]) -> PlacementContext:
    return PlacementContext(cluster=c, ranking=Bins(tuple(factors)), rng=random.Random(0))  # type: ignore[arg-type]


def job(n: int, sens: str = "high") -> JobRequest:
    return JobRequest(job_id=1, num_gpus=n, perf_class="A", app="BERT", net_sensitivity=sens,
                      remaining_time=3600.0)


def decide(n: int, factors: list[float], free: set[int] | None = None, sens: str = "high",
           cost: FragmentationCost = PAL_FIT_COST) -> tuple[tuple[int, ...], int, float] | None:
    c = cluster(free)
    ctx = context(c, factors)
    rack_idx = c.topology.rack_idx
    return packed_first_allocation(job(n, sens), sorted(c.free), ctx, True, 2, rack_idx, cost, _pack, net_factor)


def node_of(gpus: tuple[int, ...]) -> set[int]:
    return {g // 4 for g in gpus}


def test_packs_when_the_better_bin_gains_less_than_opening_a_node_costs():
    # node 0 (partly used) is 2% slower than the whole free nodes: not worth breaking one
    factors = [1.02] * 4 + [1.0] * 12
    got = decide(1, factors)
    assert got is not None and node_of(got[0]) == {0} and got[1] == NODE
    # PAL's own choice takes the better bin and opens a whole node
    c = cluster()
    pal = best_allocation(job(1), sorted(c.free), context(c, factors), True, 2, c.topology.rack_idx)
    assert pal is not None and node_of(pal[0]) != {0}


def test_takes_a_better_bin_when_its_gain_beats_the_fragmentation_cost():
    factors = [1.5] * 4 + [1.0] * 12
    got = decide(1, factors)
    assert got is not None and node_of(got[0]) != {0}


def test_does_not_fragment_a_whole_rack_for_a_marginally_better_bin():
    # node 2 (in the wholly free rack 1) is 1% better than node 1 (rack 0 is already partly used):
    # PAL takes node 2 and breaks rack 1; pal-fit opens node 1 and keeps rack 1 whole
    factors = [1.5] * 4 + [1.0] * 4 + [0.99] * 8
    got = decide(1, factors)
    assert got is not None and node_of(got[0]) == {1}
    c = cluster()
    pal = best_allocation(job(1), sorted(c.free), context(c, factors), True, 2, c.topology.rack_idx)
    assert pal is not None and node_of(pal[0]) == {2}


def test_takes_the_best_gpus_of_the_packed_node_for_free():
    # the packed node is node 0; its GPU 3 is in a better bin than GPUs 1-2: same node, no cost
    factors = [1.0, 1.2, 1.2, 1.0] + [1.0] * 12
    got = decide(1, factors)
    assert got is not None and got[0] == (3,)


def test_keeps_a_network_sensitive_job_in_one_rack_over_a_better_bin_across_the_spine():
    # 8 GPUs: rack 1 is whole (nodes 2-3, factor 1.1); a 1.0 bin exists only spread over racks
    free = {4, 5, 6, 7} | set(range(8, 16)) | {1, 2, 3}
    factors = [1.0] * 8 + [1.1] * 8
    got = decide(8, factors, free=free)
    assert got is not None and node_of(got[0]) == {2, 3} and got[1] == RACK


def test_without_fragmentation_cost_it_is_pal_s_cheapest_bin():
    factors = [1.02] * 4 + [1.0] * 12
    got = decide(1, factors, cost=FragmentationCost(0.0, 0.0))
    assert got is not None and node_of(got[0]) != {0}


def test_nothing_fits_gives_none():
    assert decide(4, [1.0] * 16, free={1, 2, 3}) is None


def test_opened_counts_whole_free_nodes_and_racks_only_partly_taken():
    c = cluster()
    rack_idx = c.topology.rack_idx
    assert opened((1,), c.free, c, rack_idx) == (0, 0)  # node 0 was already partly used
    assert opened((4,), c.free, c, rack_idx) == (1, 0)  # rack 0 was already partly used
    assert opened((8,), c.free, c, rack_idx) == (1, 1)  # breaks node 2 and rack 1
    assert opened((8, 9, 10, 11), c.free, c, rack_idx) == (0, 1)  # whole node 2, half of rack 1
    assert opened(tuple(range(8, 16)), c.free, c, rack_idx) == (0, 0)  # all of rack 1


def test_opened_with_a_grouping_of_its_own_counts_its_groups_not_the_layouts_racks():
    c = cluster()
    one_rack = (0,) * len(c.nodes)  # one group: no rack tier
    assert opened((8,), c.free, c, one_rack) == (1, 0)
    per_node = tuple(range(len(c.nodes)))  # each node its own "rack"
    assert opened((8,), c.free, c, per_node) == (1, 1)
    assert opened((8, 9, 10, 11), c.free, c, per_node) == (0, 0)


def test_negative_costs_are_refused():
    with pytest.raises(ValueError, match="must be >= 0"):
        FragmentationCost(node=-0.1)


def test_pal_fit_is_registered_and_plans_through_the_engine_s_interface():
    assert placement("pal-fit") is PAL_FIT
    assert PAL_FIT.traits.backfills and PAL_FIT.traits.sticky and PAL_FIT.traits.variability
    # real binning: node 0's GPUs (1.5) and the rest (~1.0) fall in two bins
    c = cluster()
    scores = {k: [1.5] * 4 + [1.0] * 12 for k in "ABCD"}
    ctx = PlacementContext(cluster=c, ranking=Ranking.from_scores(scores, "optimal"), rng=random.Random(0))
    plan = PAL_FIT.plan([job(1, "low")], ctx)
    assert node_of(plan.launch[1]) == {1}
    # a 2% gap is not worth a node: the packed node 0
    scores = {k: [1.02] * 4 + [1.0] * 12 for k in "ABCD"}
    ctx = PlacementContext(cluster=c, ranking=Ranking.from_scores(scores, "optimal"), rng=random.Random(0))
    assert node_of(PAL_FIT.plan([job(1, "low")], ctx).launch[1]) == {0}


def test_the_per_node_reservation_waits_for_k_nodes_with_g_free_each_not_for_a_gpu_count():
    from pal_slurm.policy.netaware import _Releases, _Reservation

    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    # rack 0: node 0 has 3 free, node 1 has 1 free (4 GPUs free in the rack, but not 2 x 2);
    # node 1's running job (slots 4-6) ends at t=50; rack 1 is busy until t=90
    free = {0, 1, 2, 7}
    holding = {"a": (4, 5, 6), "b": (8, 9, 10, 11, 12, 13, 14, 15)}
    ends = {"a": 50.0, "b": 90.0}
    releases = _Releases(dict(holding), ends, c, {})
    r = _Reservation.for_nodes(2, 2, free, releases, c, c.topology.rack_idx, now=0.0)
    assert r.shadow == 50.0 and r.group == frozenset(range(8)) and r.spare == 0
    assert _Reservation.make(4, RACK, free, releases, c, c.topology.rack_idx, now=0.0).shadow == 0.0  # the count says now


def test_opening_fewer_nodes_than_the_packed_choice_earns_no_credit():
    # node 0 (rack 0) wholly free, node 1 busy; node 2 has 2 GPUs free and node 3 one (rack 1),
    # in a slightly better bin (0.995). A 3-GPU job: the packed choice takes 3 of node 0's 4
    # (it opens node 0); the better bin spans nodes 2 and 3 and opens none. Its gain (0.5%) is
    # less than its rack penalty (1% for a low-sensitivity job), so the packed choice stays:
    # opening fewer nodes than the anchor is no credit that could make up for it
    factors = [1.0] * 16
    for g in (10, 11, 15):
        factors[g] = 0.995
    got = decide(3, factors, free={0, 1, 2, 3, 10, 11, 15}, sens="low")
    assert got is not None and node_of(got[0]) == {0}
