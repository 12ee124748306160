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


def vet(choice_nodes: Mapping[str, Sequence[int]], facts: Mapping[str, NodeFacts]) -> tuple[Binding | None, str]:
    """How a choice (node -> slots) can be written into a job, or (None, why) when Slurm could
    refuse or park it: a node it does not have or that takes no work, a slot beyond the node's
    GPU count, or per-slot types missing for some chosen slots while others have them."""
    all_typed, any_typed = True, False
    for node, slots in choice_nodes.items():
        fact = facts.get(node)
        if fact is None:
            return None, f"unknown_node:{node}"
        if not fact.usable:
            return None, f"node_unusable:{node}"
        if not slots or min(slots) < 0 or max(slots) >= fact.gpus:
            return None, f"no_such_gpu:{node}"
        any_typed = any_typed or bool(fact.typed_slots)
        all_typed = all_typed and fact.typed_slots.issuperset(slots)
    if all_typed:
        return Binding.SLOTS, ""
    if not any_typed:
        return Binding.NODES, ""
    return None, "slot_types_missing"
