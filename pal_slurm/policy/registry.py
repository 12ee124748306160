"""Policies by name: the one table that maps a name in config or on the command line to code."""

from __future__ import annotations

from pal_slurm.policy import netaware, placements, queue
from pal_slurm.policy.base import PlacementPolicy, QueueOrder

PLACEMENTS: dict[str, PlacementPolicy] = {
    p.name: p
    for p in (
        placements.PAL,
        placements.PM_FIRST,
        placements.PACKED_STICKY,
        placements.PACKED_NONSTICKY,
        placements.RANDOM_STICKY,
        placements.RANDOM_NONSTICKY,
        placements.FIRST_FIT,
        *netaware.NAMED,
    )
}

# The PAL artifact's names, accepted as aliases.
ALIASES = {
    "PAL": "pal",
    "PMFirst": "pmfirst",
    "pm-first": "pmfirst",
    "Default-Packed-S": "packed-sticky",
    "Default-Packed-NS": "packed-nonsticky",
    "Default-Random-S": "random-sticky",
    "Default-Random-NS": "random-nonsticky",
    "first-fit": "firstfit",
}

# the queue order by Slurm's multifactor priority: pald scores each held job for it (daemon.service)
SLURM_PRIORITY_QUEUE = "slurm"
QUEUE_ORDERS: dict[str, QueueOrder] = {"fifo": queue.fifo, "las": queue.las, "srtf": queue.srtf,
                                     "srtf-aged": queue.aged_srtf(), SLURM_PRIORITY_QUEUE: queue.slurm_priority}
# the queue orders that are the site's own priority order: a later job passes a waiting one only
# as Slurm's backfill would let it (PlacementContext.keep_order)
SITE_ORDER_QUEUES = frozenset({SLURM_PRIORITY_QUEUE})
# the queue orders that read running jobs' progress (attained service, remaining time): an
# engine with one renews running jobs' requests at every decision; fifo reads only priority and
# submit time (tests/unit/policy/test_queue.py checks the split on every order)
PROGRESS_READING_QUEUES = frozenset({"las", "srtf", "srtf-aged"})
# the queue orders that keep jobs already sorted by submit time, all of one priority, as they
# are: a caller that hands jobs in that order (the simulator's clocks, whose jobs arrive in time
# order) may skip their sort, the largest cost of a decision over thousands of waiting jobs
SUBMIT_ORDER_QUEUES = frozenset({"fifo"})


class UnknownPolicy(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want a sentence
        return str(self.args[0])


def placement(name: str) -> PlacementPolicy:
    key = ALIASES.get(name, name)
    if key not in PLACEMENTS:
        raise UnknownPolicy(f"unknown placement {name!r}; known: {', '.join(sorted(PLACEMENTS))}")
    return PLACEMENTS[key]


def queue_order(name: str) -> QueueOrder:
    if name not in QUEUE_ORDERS:
        raise UnknownPolicy(f"unknown queue order {name!r}; known: {', '.join(QUEUE_ORDERS)}")
    return QUEUE_ORDERS[name]
