"""Frozen value types shared by every layer (no I/O, no behaviour beyond derived views)."""

from pal_slurm.model.classes import CLASS_ORDER, DEFAULT_APP_CLASSES, AppClassMap
from pal_slurm.model.cluster import ClusterView, Gpu, Node
from pal_slurm.model.decision import DecisionKind, PlannedStart, RoundPlan
from pal_slurm.model.job import JobRequest
from pal_slurm.model.shape import JobShape, ShapeError

__all__ = [
    "AppClassMap",
    "CLASS_ORDER",
    "ClusterView",
    "DEFAULT_APP_CLASSES",
    "DecisionKind",
    "Gpu",
    "JobRequest",
    "JobShape",
    "Node",
    "PlannedStart",
    "RoundPlan",
    "ShapeError",
]
