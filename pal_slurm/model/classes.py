"""Application -> variability class mapping, as data.

Classes are ordered by variability sensitivity: A (compute-bound, ResNet-50-like, most
sensitive) .. D (memory-bound, PageRank-like, least). The defaults follow the PAL artifact's
Sia-Philly mapping; unknown applications get the most sensitive class ("assume the worst").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

CLASS_ORDER: tuple[str, ...] = ("A", "B", "C", "D")

DEFAULT_APP_CLASSES: Mapping[str, str] = {
    "resnet50": "A",
    "resnet": "A",
    "gpt2": "B",
    "dcgan": "B",
    "bert": "B",
    "vgg19": "C",
    "vgg": "C",
    "pointnet": "D",
    "pagerank": "D",
}


# The PAL artifact's Sia-Philly mapping of the trace models (the simulators' default).
ARTIFACT_APP_CLASSES: Mapping[str, str] = {
    "resnet50": "A", "vgg19": "C", "pointnet": "D", "gpt2": "B", "dcgan": "B", "bert": "B",
}


def class_rank(perf_class: str) -> int:
    """Sort key: most variability-sensitive first; unknown classes sort last."""
    try:
        return CLASS_ORDER.index(perf_class)
    except ValueError:
        return len(CLASS_ORDER)


@dataclass(frozen=True)
class AppClassMap:
    """Maps application names (case-insensitive) to classes, with a default for unknown ones."""

    mapping: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_APP_CLASSES))
    default: str = CLASS_ORDER[0]

    def lookup(self, app: str) -> tuple[str, bool]:
        """(class, known?) for an application name."""
        key = app.strip().lower()
        if key in self.mapping:
            return self.mapping[key], True
        if key in CLASS_ORDER or key.upper() in CLASS_ORDER and len(key) == 1:
            return key.upper(), True
        return self.default, False

    def class_of(self, app: str) -> str:
        return self.lookup(app)[0]


# The artifact's map as the simulators use it: anything unknown is class A.
ARTIFACT_CLASSES = AppClassMap(dict(ARTIFACT_APP_CLASSES), default="A")
