"""Network-aware placements: delay scheduling, network-sensitive preemption, backfilling.

Each is a list of named stages (stages/: locality, filter, score, preempt, waits, backfill,
estimate) composed by `NetAwarePlacement` (compose); the registered ones are in `named`.
Allocation (PAL's locality x variability order with per-tier network factors) is in
`allocation`, the estimates it scores by in `estimates`, EASY's reservations in
`reservations`, the waits for faster bins in `later`.
"""

from pal_slurm.model.network import NODE, RACK, SPINE, span
from pal_slurm.policy.netaware.allocation import _pack, best_allocation
from pal_slurm.policy.netaware.compose import NetAwarePlacement
from pal_slurm.policy.netaware.estimates import (FALLBACK_PENALTY, NodeLocality, fallback_penalty, net_factor,
                                                 preferred_tier, tier_factor, wanted_tier)
from pal_slurm.policy.netaware.later import faster_node_later, faster_nodes_later
from pal_slurm.policy.netaware.named import (DALLY, NAMED, PAL_BACKFILL, PAL_FIT, PAL_NET, PAL_NET_NODELAY,
                                            PAL_NET_PREEMPT, PAL_NET_TUNED)
from pal_slurm.policy.netaware.reservations import _ready_last, _Releases, _Reservation, slurm_will_run
from pal_slurm.policy.netaware.stages.preempt import Preemption

PreemptConfig = Preemption  # the preemption stage, under the name configurations use

__all__ = [
    "DALLY", "FALLBACK_PENALTY", "NAMED", "NODE", "PAL_BACKFILL", "PAL_FIT", "PAL_NET", "PAL_NET_NODELAY",
    "PAL_NET_PREEMPT", "PAL_NET_TUNED", "RACK", "SPINE", "NetAwarePlacement", "NodeLocality", "PreemptConfig",
    "Preemption", "_Releases", "_Reservation", "_pack", "_ready_last", "best_allocation", "fallback_penalty",
    "faster_node_later", "faster_nodes_later", "net_factor", "preferred_tier", "slurm_will_run", "span",
    "tier_factor", "wanted_tier",
]
