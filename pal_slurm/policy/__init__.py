"""Pure policies: queue orders and placements, registered by name (see registry)."""

from pal_slurm.policy.base import PlacementContext
from pal_slurm.policy.registry import PLACEMENTS, QUEUE_ORDERS, UnknownPolicy, placement, queue_order

__all__ = ["PLACEMENTS", "PlacementContext", "QUEUE_ORDERS", "UnknownPolicy", "placement", "queue_order"]
