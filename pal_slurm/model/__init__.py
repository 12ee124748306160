"""Frozen value types shared by every layer (no I/O, no behaviour beyond derived views)."""

from pal_slurm.model.cluster import ClusterView, Gpu, Node
from pal_slurm.model.job import JobRequest
from pal_slurm.model.decision import Decision, DecisionKind, Placement, RoundPlan
from pal_slurm.model.classes import (
    CLASS_ORDER,
    DEFAULT_APP_CLASSES,
    AppClassMap,
)

__all__ = [
    "AppClassMap",
    "CLASS_ORDER",
    "ClusterView",
    "DEFAULT_APP_CLASSES",
    "Decision",
    "DecisionKind",
    "Gpu",
    "JobRequest",
    "Node",
    "Placement",
    "RoundPlan",
]
