"""The simulator's model of stock Slurm (sim.stock_slurm): in-order starts at once, backfill at
each pass and judged on time limits, on a two-node cluster without variability or network."""

from pal_slurm.replay.predict import STOCK_SLURM
from pal_slurm.sim.event import EventConfig, EventSimulator
from pal_slurm.sim.stock_slurm import StockSlurm
from pal_slurm.sim.trace import Trace

from .builders import shaped_job

CONFIG = EventConfig(num_nodes=2, gpus_per_node=4, nodes_per_rack=None, network=False)


job = shaped_job


# A holds node 1 until 1000; B needs both nodes (blocked); C fits node 2 and runs 100 s
TRACE = Trace("bf", (job(0, 0, 1000, 1, 4), job(1, 10, 500, 2, 4), job(2, 20, 100, 1, 1)))


def starts(decider):
    seen: dict[int, float] = {}
    EventSimulator(CONFIG).run(TRACE, STOCK_SLURM, decider=decider, on_start=lambda t, j, g: seen.setdefault(j, t))
    return seen


def test_a_backfilled_job_starts_at_the_next_pass_and_in_order_ones_at_once():
    d = StockSlurm(STOCK_SLURM, backfill_period_s=300.0)
    seen = starts(d)
    assert seen[0] == 0.0 and seen[1] == 1000.0  # in order: at once
    assert seen[2] == 300.0  # behind blocked B: the first backfill pass
    assert d.starts == {"main": 2, "backfill": 1}


def test_backfill_judges_time_limits_not_real_length():
    # A holds node 1 until 10000; B (both nodes) has waited over an hour when C (1 GPU, 100 s)
    # arrives at 5000, so B holds a reservation. C's limit (20000 s) ends after B's shadow (A's
    # limit): Slurm does not backfill it and C starts after B, though it would really have
    # ended long before A; with exact lengths it is backfilled on arrival
    trace = Trace("bf", (job(0, 0, 10000, 1, 4), job(1, 10, 500, 2, 4), job(2, 5000, 100, 1, 1)))
    seen: dict[int, float] = {}
    d = StockSlurm(STOCK_SLURM, backfill_period_s=0.0, limits_s={0: 10000.0, 1: 600.0, 2: 20000.0})
    EventSimulator(CONFIG).run(trace, STOCK_SLURM, decider=d, on_start=lambda t, j, g: seen.setdefault(j, t))
    assert (seen[1], seen[2]) == (10000.0, 10500.0)
    exact: dict[int, float] = {}
    EventSimulator(CONFIG).run(trace, STOCK_SLURM, decider=StockSlurm(STOCK_SLURM, backfill_period_s=0.0),
                               on_start=lambda t, j, g: exact.setdefault(j, t))
    assert exact[2] == 5000.0
