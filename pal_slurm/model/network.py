"""The network's vocabulary, defined once: topology tiers and network-sensitivity classes.

Tiers are the levels a job's GPUs can span: one node, one rack (leaf switch), the spine. They
are small integers (compared in hot loops), named by TIERS. A job's network sensitivity says
how much it slows down when spread (the simulator's network model derives it per model; users
give it with `net=` in the comment)."""

from __future__ import annotations

from enum import Enum
from typing import Mapping

NODE, RACK, SPINE = 0, 1, 2
TIERS = ("node", "rack", "spine")
LEVELS = TIERS[:2]  # the tiers a job may wait for (the spine is always available)

#: delay timers: seconds a job of a sensitivity waits for nodes under one tier {(sensitivity, level): s}
DelayTimers = Mapping[tuple[str, str], float]


class Sensitivity(str, Enum):
    """How much spreading a job costs it; a str, so "medium" == Sensitivity.MEDIUM."""

    NONE = "none"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Sensitivity.NONE: 0, Sensitivity.LOW: 1, Sensitivity.MEDIUM: 2, Sensitivity.HIGH: 3}
SENSITIVITIES: tuple[str, ...] = ("low", "medium", "high")  # the classes jobs are sorted into
DEFAULT_SENSITIVITY = Sensitivity.MEDIUM.value


# by value and by member (a str Enum member hashes by its name, not its value)
_RANK_BY_NAME: dict[str, int] = {k: r for s, r in _RANK.items() for k in (s.value, s)}


def sensitivity_rank(name: str) -> int:
    """Sort key; an unknown name counts as the most sensitive. (A dict lookup: the
    preempting placements ask it for every running job of every plan.)"""
    return _RANK_BY_NAME.get(name, _RANK[Sensitivity.HIGH])
