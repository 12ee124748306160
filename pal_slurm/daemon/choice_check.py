"""Does Slurm have what a placement names? The last check before pald answers or acts. Pure.

pald chooses GPUs from its cluster view, which is only as fresh as its last Slurm sync; Slurm
rejects a job outright ("Invalid node name specified", "Requested node configuration is not
available") if the hook writes a node it does not have, a GRES slot type the node lacks or more
GPUs than the node has. So every choice is checked against the facts of the last `sinfo`
(`NodeFacts`), and on any doubt pald passes: the job then runs as submitted, without PAL.

Binding exact slots needs per-slot GRES types (``gpu:s0:1,...``, see pal_slurm.slurm.gres).
On nodes configured with plain ``Gres=gpu:4`` (or after gres.conf lost the types), a choice is
still useful for its nodes: the job is pinned to them and keeps its own GPU request.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping, Sequence

from pal_slurm.slurm.readers import NodeFacts


class Binding(str, Enum):
    SLOTS = "slots"  # every chosen slot has its type on its node: bind the exact GPUs
    NODES = "nodes"  # no chosen node has per-slot types: pin the nodes, keep the GPU request


def doubt(choice_nodes: Mapping[str, Sequence[int]], facts: Mapping[str, NodeFacts]) -> str | None:
    """Why Slurm could refuse (or park) a job placed on `choice_nodes`, or None if it cannot."""
    for node, slots in choice_nodes.items():
        fact = facts.get(node)
        if fact is None:
            return f"unknown_node:{node}"
        if not fact.usable:
            return f"node_unusable:{node}"
        if not slots or min(slots) < 0 or max(slots) >= fact.gpus:
            return f"no_such_gpu:{node}"
    return None


def binding(choice_nodes: Mapping[str, Sequence[int]], facts: Mapping[str, NodeFacts]) -> Binding | None:
    """How the choice can be written into the job; None when the nodes disagree (some have
    the slot types, some do not): a doubt, so the caller passes."""
    typed = [set(slots) <= fact.typed_slots for node, slots in choice_nodes.items()
             for fact in (facts[node],)]
    if all(typed):
        return Binding.SLOTS
    if not any(facts[node].typed_slots for node in choice_nodes):
        return Binding.NODES
    return None
