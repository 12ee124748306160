"""The registered network-aware placements are lists of stages; the keywords that name stage
swaps build exactly those lists; the stages declare the placements' traits."""

from dataclasses import replace

import pytest

from pal_slurm.policy import netaware
from pal_slurm.policy.base import Traits
from pal_slurm.policy.fragmentation import FragmentationCost
from pal_slurm.policy.netaware import NAMED, NetAwarePlacement, PreemptConfig
from pal_slurm.policy.netaware.stages.accept import AnyTier, DelayScheduling
from pal_slurm.policy.netaware.stages.backfill import Easy, SkipBlocked, StopAtFirst
from pal_slurm.policy.netaware.stages.bound import StarvationBound
from pal_slurm.policy.netaware.stages.estimate import Stretched, WallLimit
from pal_slurm.policy.netaware.stages.locality import NodeOnly, Topology
from pal_slurm.policy.netaware.stages.score import CheapestBin, PackedFirst, SlurmNodes
from pal_slurm.policy.netaware.stages.waits import ForFasterBins, ForTighterTier

# each registered placement as the keywords name it (the configurations they replaced)
BY_KEYWORDS = {
    "pal-net": {},
    "pal-net-preempt": {"preempt": PreemptConfig()},
    "pal-net-tuned": {"autotune": True},
    "pal-net-nodelay": {"delay": False},
    "pal-backfill": {"delay": False, "finish_aware": False, "topology_aware": False},
    "pal-fit": {"delay": False, "finish_aware": True, "fragmentation": FragmentationCost(), "reserve_ready_last": True,
                "waits_for_faster_node": True, "waits_for_faster_nodes": True, "grace_reservation": True,
                "detour_finish_aware": True, "bound": StarvationBound()},
    "dally": {"variability": False, "backfill": "greedy", "preempt": PreemptConfig(), "autotune": True,
              "cost_aware": False, "finish_aware": False},
    "slurm": {"variability": False, "delay": False, "finish_aware": False, "topology_aware": True,
              "reserve_after_s": 0.0, "remaining_is_wall_limit": True, "node_choice": "slurm"},
}


@pytest.mark.parametrize("pol", NAMED, ids=lambda p: p.name)
def test_the_keywords_build_each_registered_placement_s_stages(pol):
    assert NetAwarePlacement(pol.name, **BY_KEYWORDS[pol.name]) == pol


def test_every_registered_placement_has_its_keywords_listed():
    assert sorted(BY_KEYWORDS) == sorted(p.name for p in NAMED)


def test_each_keyword_swaps_its_one_stage():
    base = netaware.PAL_NET
    assert replace(base, topology_aware=False).locality == NodeOnly() and base.locality == Topology()
    assert replace(base, delay=False).accept == AnyTier()
    assert replace(base, cost_aware=False).accept == DelayScheduling(cost_aware=False)
    assert replace(base, variability=False).score == CheapestBin(variability=False)
    assert replace(base, fragmentation=FragmentationCost()).score == PackedFirst(FragmentationCost())
    assert replace(base, node_choice="slurm").score == SlurmNodes(CheapestBin())
    assert replace(base, finish_aware=False).tier_wait is None and base.tier_wait == ForTighterTier()
    assert replace(base, backfill="greedy").reserve == SkipBlocked()
    assert replace(base, backfill="none").reserve == StopAtFirst()
    assert replace(base, reserve_after_s=0.0).reserve == Easy(reserve_after_s=0.0)
    assert replace(base, remaining_is_wall_limit=True).estimate == WallLimit() and base.estimate == Stretched()
    assert replace(netaware.PAL_FIT, waits_for_faster_node=False).bin_wait is None
    assert replace(netaware.PAL_FIT, waits_for_faster_nodes=False).bin_wait == ForFasterBins(several=False)
    # a swap leaves every other stage as it was
    swapped = replace(netaware.PAL_FIT, backfill="greedy")
    assert (swapped.locality, swapped.accept, swapped.score, swapped.tier_wait, swapped.bin_wait) == (
        netaware.PAL_FIT.locality, netaware.PAL_FIT.accept, netaware.PAL_FIT.score, netaware.PAL_FIT.tier_wait,
        netaware.PAL_FIT.bin_wait)


@pytest.mark.parametrize("bad", [{"backfill": "eager"}, {"node_choice": "fastest"}])
def test_an_unknown_keyword_value_is_refused(bad):
    with pytest.raises(ValueError):
        NetAwarePlacement("t", **bad)


def test_the_stages_declare_the_traits():
    assert netaware.PAL_NET.traits == Traits(sticky=True, backfills=True, plans_around_running=True)
    assert netaware.DALLY.traits == Traits(sticky=True, tuned=True, backfills=True, variability=False)
    assert replace(netaware.PAL_NET, backfill="none").traits.backfills is False
    assert replace(netaware.PAL_NET, preempt=PreemptConfig()).traits.plans_around_running is False


def _round_for_around(res, free=frozenset(range(8))):  # type: ignore[no-untyped-def]
    """The parts of a plan's Round that Easy.around reads: a job runs its remaining time, and
    every allocation it asks for is recorded."""
    from types import SimpleNamespace

    asked = []

    def allocate(job, free_ids, tier):  # type: ignore[no-untyped-def]
        asked.append(tuple(free_ids))
        return (tuple(free_ids[:job.num_gpus]), 0, 1.0) if len(free_ids) >= job.num_gpus else None

    rnd = SimpleNamespace(res=res, now=0.0, runtime=lambda job, gpus: job.remaining_time, free=set(free),
                          allocate=allocate, cluster=None)
    return rnd, asked


def test_a_count_reservation_with_nothing_to_spare_refuses_a_job_ending_after_it_without_a_detour():
    from pal_slurm.model import JobRequest
    from pal_slurm.policy.netaware.reservations import _Reservation

    job = JobRequest(job_id="j", num_gpus=2, remaining_time=100.0)
    got = ((0, 1), 0, 1.0)
    refusing = _Reservation(50.0, None, 0)  # the whole cluster at 50, no GPU to spare
    rnd, asked = _round_for_around([refusing])
    assert Easy().around(job, got, 2, rnd) is None
    assert asked == [] and refusing.spare == 0  # no detour asked for, nothing taken
    # ending by the shadow it passes, and takes nothing from the reservation
    rnd, asked = _round_for_around([_Reservation(100.0, None, 0)])
    assert Easy().around(job, got, 2, rnd) == got
    # a group reservation is gone around: the detour from the GPUs outside its group
    group = _Reservation(50.0, frozenset({0, 1, 2, 3}), 0)
    rnd, asked = _round_for_around([group])
    assert Easy().around(job, got, 2, rnd) == ((4, 5), 0, 1.0)
    assert asked == [(4, 5, 6, 7)]
