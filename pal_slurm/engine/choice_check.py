"""Does Slurm have what a placement names? The last check before pald answers or acts. Pure.

pald chooses GPUs from its cluster view, which is only as fresh as its last Slurm sync; Slurm
rejects a job outright ("Invalid node name specified", "Requested node configuration is not
available") if the hook writes a node it does not have, a GRES slot type the node lacks or more
GPUs than the node has. So every choice is checked against the facts of the last `sinfo`
(the `SiteView`'s `NodeFacts`), and on any doubt pald passes: the job then runs as submitted, without PAL.

Binding exact slots needs per-slot GRES types (``gpu:s0:1,...``, see pal_slurm.slurm.gres).
On nodes configured with plain ``Gres=gpu:4`` (or after gres.conf lost the types), a choice is
still useful for its nodes: the job is pinned to them and keeps its own GPU request.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping, Sequence

from pal_slurm.model.site import NodeFacts
from pal_slurm.slurm.gres import slot_type


class Binding(str, Enum):
    SLOTS = "slots"  # every chosen slot has its type on its node: bind the exact GPUs
    NODES = "nodes"  # otherwise: pin the nodes, the job keeps its GPU request (Slurm picks slots)


def vet(choice_nodes: Mapping[str, Sequence[int]], facts: Mapping[str, NodeFacts]) -> tuple[Binding | None, str]:
    """How a choice (node -> slots) can be written into a job, or (None, why) when Slurm could
    refuse or park it: a node it does not have or that takes no work, or a slot beyond the
    node's GPU count. Exact slots are bound only where every chosen slot has its own type."""
    bind_slots = True
    for node, slots in choice_nodes.items():
        fact = facts.get(node)
        if fact is None:
            return None, f"unknown_node:{node}"
        if not fact.usable:
            return None, f"node_unusable:{node}"
        if not slots or min(slots) < 0 or max(slots) >= fact.gpus:
            return None, f"no_such_gpu:{node}"
        bind_slots = bind_slots and all(slot_type(slot) in fact.gpu_types for slot in slots)
    return (Binding.SLOTS if bind_slots else Binding.NODES), ""
