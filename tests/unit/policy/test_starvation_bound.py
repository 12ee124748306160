"""The starvation bound (policy.netaware.stages.bound): a large job that a stream of small ones
keeps passing starts no later than stock Slurm would start it plus the bound; without a bound
pal-fit lets them pass it for its whole `reserve_after_s` grace."""

from dataclasses import replace

import pytest

from pal_slurm.model import JobRequest
from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.netaware.named import PAL_FIT, SLURM
from pal_slurm.policy.netaware.stages.bound import StarvationBound
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.trace import Trace

from ..sim.builders import shaped_job

CONFIG = EventConfig(num_nodes=2, gpus_per_node=4, nodes_per_rack=None, network=False)
BIG = 8  # the job id of the one that needs both nodes


def starved_trace() -> Trace:
    """Eight one-GPU jobs ending 100 s apart, a two-node job at 10 s, then a one-GPU job every
    100 s, each 1000 s long: a GPU frees every 100 s and a small job is always waiting for it."""
    first = [shaped_job(i, 0, 1000 + 100 * i, 1, 1) for i in range(8)]
    big = shaped_job(BIG, 10, 3600, 2, 4)
    stream = [shaped_job(9 + k, 20 + 100 * k, 1000, 1, 1) for k in range(80)]
    return Trace("starved", (*first, big, *stream))


def start_of(job_id: int, policy, config: EventConfig = CONFIG) -> float:
    seen: dict[int, float] = {}
    EventSimulator(config).run(starved_trace(), policy, on_start=lambda t, j, g: seen.setdefault(j, t))
    return seen[job_id]


BOUND_S = 600.0


def test_without_a_bound_the_stream_starves_the_large_job():
    stock = start_of(BIG, SLURM)
    unbounded = start_of(BIG, PAL_FIT)
    assert stock <= 1800.0  # stock reserves both nodes at once: they drain by the first jobs' ends
    assert unbounded > stock + BOUND_S  # pal-fit lets the small ones pass for its hour of grace


def test_the_bound_starts_it_within_the_bound_of_stock():
    stock = start_of(BIG, SLURM)
    bounded = start_of(BIG, PAL_FIT, replace(CONFIG, starvation_bound_s=BOUND_S))
    assert bounded <= stock + BOUND_S


def test_a_bound_no_job_reaches_changes_nothing():
    """No job of a light trace waits an hour: with that bound every start is the same."""
    def starts(config):
        seen: dict[int, float] = {}
        light = Trace("light", tuple(shaped_job(i, 2000 * i, 1000, 1, 2) for i in range(10)))
        EventSimulator(config).run(light, PAL_FIT, on_start=lambda t, j, g: seen.setdefault(j, t))
        return seen

    assert starts(replace(CONFIG, starvation_bound_s=3600.0)) == starts(CONFIG)


@pytest.mark.parametrize(("waited", "bound", "starved"), [(100.0, 600.0, False), (700.0, 600.0, True),
                                                          (1e9, None, False)])
def test_a_job_is_starved_once_it_waited_longer_than_the_bound(waited, bound, starved):
    job = JobRequest(job_id="1", num_gpus=1, waiting_since=0.0)
    ctx = PlacementContext(cluster=None, ranking=None, now=waited, starvation_bound_s=bound)  # type: ignore[arg-type]
    stage = StarvationBound()
    assert stage.starved(job, ctx) is starved
    assert stage.latest_start(job, ctx) == (0.0 + bound if bound is not None else float("inf"))


def test_no_wait_for_a_faster_node_past_the_bound():
    """A one-node job that pal-fit would hold 100 s for a faster node (test_netaware) takes the
    slow one at once when that wait would end past its bound (50 s), or when it already waited
    longer than its bound."""
    from .test_netaware import _a_long_job_and_a_slow_free_node

    ctx, running, job = _a_long_job_and_a_slow_free_node(remaining=10_000.0)
    assert PAL_FIT.plan([running, job], ctx).launch == {}  # no bound: it waits
    assert PAL_FIT.plan([running, job], replace(ctx, starvation_bound_s=200.0)).launch == {}  # 100 s is within
    assert PAL_FIT.plan([running, job], replace(ctx, starvation_bound_s=50.0)).launch == {1: (0, 1, 2, 3)}
    starved = replace(ctx, now=500.0, starvation_bound_s=400.0)
    assert PAL_FIT.plan([running, job], starved).launch == {1: (0, 1, 2, 3)}
