"""The network's vocabulary, defined once: topology tiers and network-sensitivity classes.

Tiers are the levels a job's GPUs can span: one node, one rack (leaf switch), the spine. They
are small integers (compared in hot loops), named by TIERS. A job's network sensitivity says
how much it slows down when spread (the simulator's network model derives it per model; users
give it with `net=` in the comment): a class name (`low`, `medium`, `high`) or a number, the
factor the job runs slower at when its 8 GPUs sit in two nodes under two leaf switches (what a
user measures by running it so once: `net=2.2`). A number is finer than the three classes
(a model that loses 2.2x across the spine is neither `medium`'s 1.35x nor `high`'s 8x, and
pald spread such a job where waiting was sooner: docs/results/slurm/); where a policy needs a
class (delay timers, preemption order) the number falls in the class its factor defines."""

from __future__ import annotations

import math
from enum import Enum
from typing import Iterable, Mapping

from pal_slurm.model.cluster import ClusterView

NODE, RACK, SPINE = 0, 1, 2
TIERS = ("node", "rack", "spine")
LEVELS = TIERS[:2]  # the tiers a job may wait for (the spine is always available)



def span(gpus: Iterable[int], cluster: ClusterView) -> tuple[int, int, int]:
    """(tier, nodes spanned, racks spanned) of a GPU set: the one definition of a placement's
    tier, which the placements' choices and the simulator's network slowdowns both read."""
    t = cluster.topology
    nodes = set(map(t.node_of.__getitem__, gpus))
    racks = set(map(t.rack_idx.__getitem__, nodes))
    return (NODE if len(nodes) <= 1 else RACK if len(racks) <= 1 else SPINE), len(nodes), len(racks)


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

# The classes by the factor of an 8-GPU placement over two nodes in two racks (no congestion):
# >= HIGH_AT -> high, >= MEDIUM_AT -> medium, else low. The simulator sorts its models by it
# (sim.network.NetworkModel.sensitivity) and a numeric `net=` falls in a class by it.
HIGH_AT = 3.0
MEDIUM_AT = 1.25
MAX_DECLARED_FACTOR = 1000.0  # a numeric net= above this is not a measurement: unknown (high)


# by value and by member (a str Enum member hashes by its name, not its value)
_RANK_BY_NAME: dict[str, int] = {k: r for s, r in _RANK.items() for k in (s.value, s)}


def sensitivity_rank(name: str) -> int:
    """Sort key; a numeric sensitivity ranks as its class, an unknown name as the most
    sensitive. (A dict lookup first: the preempting placements ask it for every running job of
    every plan.)"""
    rank = _RANK_BY_NAME.get(name)
    if rank is None:
        return _RANK_BY_NAME.get(sensitivity_class(name), _RANK[Sensitivity.HIGH])
    return rank


def declared_factor(net: str) -> float | None:
    """The spread factor a numeric sensitivity declares (`"2.2"` -> 2.2), None for a name or
    for a number that is no factor (below 1, above MAX_DECLARED_FACTOR, not finite)."""
    if not net or not (net[0].isdigit() or net[0] == "."):
        return None
    try:
        x = float(net)
    except ValueError:
        return None
    return x if math.isfinite(x) and 1.0 <= x <= MAX_DECLARED_FACTOR else None


def class_of_factor(factor: float) -> str:
    """The sensitivity class of a job whose 8-GPU two-rack placement runs `factor` x slower."""
    return "high" if factor >= HIGH_AT else "medium" if factor >= MEDIUM_AT else "low"


def sensitivity_class(net: str) -> str:
    """The class of a sensitivity as a job gives it: a numeric one's class by its factor; a
    name as it is (an unknown name stays unknown: policies treat it as the most sensitive)."""
    x = declared_factor(net)
    return net if x is None else class_of_factor(x)


def is_known_sensitivity(net: str) -> bool:
    """A class name or a valid numeric factor (pald warns the user of anything else)."""
    return net in _RANK_BY_NAME or declared_factor(net) is not None
