"""The cluster as policies see it: GPUs in nodes, nodes optionally under racks (leaf switches).

GPU ids are dense integers 0..G-1 in (node order, slot) order. Every policy breaks ties by GPU
id or node index, so the id order *is* the tie-break order; builders must respect it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Gpu:
    """One GPU slot."""

    gpu_id: int  # dense cluster-wide index; also the tie-break order
    node: str  # node name (Slurm NodeName)
    node_index: int  # position of the node in the cluster's node order
    slot: int  # local index on the node (gres.conf order, CUDA index outside cgroups)
    uuid: str | None = None  # NVML UUID when known (real clusters); None in simulation


@dataclass(frozen=True)
class Node:
    """One machine."""

    name: str
    index: int  # position in the cluster's node order
    gpu_ids: tuple[int, ...]  # its GPUs, ascending
    rack: str = "rack0"  # leaf switch / rack name (topology tier above the node)
    weight: int = 1  # Slurm node Weight (first fit prefers the lowest)
    gpu_model: str | None = None  # its GPUs' model (a100, v100) on a mixed cluster; None: not named


def _frozen_array(values: tuple[int, ...]) -> "np.ndarray":
    import numpy as np  # here, not at the top: the prolog's not-due path imports the model without numpy

    arr = np.asarray(values, dtype=np.int64)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class Topology:
    """What the network-aware placements derive from the node list (once per layout)."""

    node_of: tuple[int, ...]  # gpu -> node index
    rack_idx: tuple[int, ...]  # node index -> dense rack index (racks in order of first node)
    gpus_per_node: int
    rack_cap: int  # GPUs under the largest leaf
    rack_nodes: int  # nodes under the largest leaf

    @cached_property
    def node_of_array(self) -> "np.ndarray":
        """node_of as a read-only array, made once per layout (a packing over thousands of
        eligible GPUs indexes it; converting the tuple per packing is a pass over every GPU)."""
        return _frozen_array(self.node_of)

    @cached_property
    def rack_idx_array(self) -> "np.ndarray":
        """rack_idx as a read-only array, made once per layout (as node_of_array)."""
        return _frozen_array(self.rack_idx)

    @cached_property
    def rack_of_gpu(self) -> tuple[int, ...]:
        """gpu -> dense rack index."""
        return tuple(self.rack_idx[n] for n in self.node_of)

    def group_of(self, level: int) -> tuple[int, ...]:
        """gpu -> its group at a network level (model.network: 0 node, 1 rack, else one group)."""
        return self.node_of if level == 0 else self.rack_of_gpu if level == 1 else self._one_group

    @cached_property
    def _one_group(self) -> tuple[int, ...]:
        return (0,) * len(self.node_of)

    def members(self, level: int) -> dict[int, frozenset[int]]:
        """{group: its GPUs} at a network level (made once per layout and level)."""
        table = self._members.get(level)
        if table is None:
            by_group: dict[int, list[int]] = {}
            for g, grp in enumerate(self.group_of(level)):
                by_group.setdefault(grp, []).append(g)
            table = self._members[level] = {grp: frozenset(gs) for grp, gs in by_group.items()}
        return table

    @cached_property
    def _members(self) -> dict[int, dict[int, frozenset[int]]]:
        return {}


@dataclass(frozen=True)
class ClusterView:
    """An immutable snapshot: topology plus which GPUs are free right now."""

    gpus: tuple[Gpu, ...]
    nodes: tuple[Node, ...]
    free: frozenset[int] = field(default_factory=frozenset)

    # ---- builders -------------------------------------------------------------------
    @classmethod
    def uniform(
        cls,
        num_nodes: int,
        gpus_per_node: int,
        nodes_per_rack: int | None = None,
        prefix: str = "node",
    ) -> "ClusterView":
        """A homogeneous cluster with every GPU free (the simulator's default builder)."""
        if num_nodes <= 0 or gpus_per_node <= 0:
            raise ValueError("a cluster needs at least one node and one GPU per node")
        width = max(2, len(str(num_nodes - 1)))
        names = [f"{prefix}{i:0{width}d}" for i in range(num_nodes)]
        return cls.from_layout(
            [(n, gpus_per_node) for n in names],
            racks=None
            if not nodes_per_rack
            else {n: f"rack{i // nodes_per_rack}" for i, n in enumerate(names)},
        )

    @classmethod
    def from_layout(
        cls,
        layout: Iterable[tuple[str, int]],
        racks: Mapping[str, str] | None = None,
        weights: Mapping[str, int] | None = None,
        uuids: Mapping[tuple[str, int], str] | None = None,
        models: Mapping[str, str] | None = None,
    ) -> "ClusterView":
        """Build from [(node name, gpu count), ...] in the order given; all GPUs free.
        `models`: node -> its GPUs' model, for a cluster of several GPU models."""
        gpus: list[Gpu] = []
        nodes: list[Node] = []
        for index, (name, count) in enumerate(layout):
            ids = []
            for slot in range(count):
                gid = len(gpus)
                gpus.append(
                    Gpu(gid, name, index, slot, (uuids or {}).get((name, slot)))
                )
                ids.append(gid)
            nodes.append(
                Node(
                    name,
                    index,
                    tuple(ids),
                    rack=(racks or {}).get(name, "rack0"),
                    weight=(weights or {}).get(name, 1),
                    gpu_model=(models or {}).get(name),
                )
            )
        return cls(tuple(gpus), tuple(nodes), frozenset(g.gpu_id for g in gpus))

    def with_gpu_models(self, models: Mapping[str, str]) -> "ClusterView":
        """The same cluster with its nodes' GPU models set (node -> model; others unchanged)."""
        nodes = tuple(replace(n, gpu_model=models.get(n.name, n.gpu_model)) for n in self.nodes)
        return ClusterView(self.gpus, nodes, self.free)

    def with_free(self, free: Iterable[int]) -> "ClusterView":
        """The same cluster with another free set (layout caches are shared, not recomputed)."""
        out = ClusterView(self.gpus, self.nodes, frozenset(free))
        for name in _LAYOUT_CACHES:  # made here once, so that every copy shares them
            out.__dict__[name] = getattr(self, name)
        return out

    # ---- derived views ---------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.gpus)

    @cached_property
    def gpus_per_node(self) -> int:
        """GPUs on the first node (the artifact assumes homogeneous nodes)."""
        return len(self.nodes[0].gpu_ids) if self.nodes else 0

    @cached_property
    def max_gpus_per_node(self) -> int:
        """GPUs on the biggest node (no per-node request can ask for more)."""
        return max((len(n.gpu_ids) for n in self.nodes), default=0)

    @cached_property
    def node_of(self) -> tuple[int, ...]:
        """gpu_id -> node index."""
        return tuple(g.node_index for g in self.gpus)

    @cached_property
    def rack_of_node(self) -> tuple[str, ...]:
        return tuple(n.rack for n in self.nodes)

    @cached_property
    def topology(self) -> Topology:
        names: dict[str, int] = {}
        rack_idx = tuple(names.setdefault(n.rack, len(names)) for n in self.nodes)
        cap: dict[int, int] = {}
        members: dict[int, int] = {}
        for node in self.nodes:
            r = rack_idx[node.index]
            cap[r] = cap.get(r, 0) + len(node.gpu_ids)
            members[r] = members.get(r, 0) + 1
        return Topology(self.node_of, rack_idx, self.gpus_per_node, max(cap.values(), default=0),
                        max(members.values(), default=0))

    @cached_property
    def gpus_by_model(self) -> dict[str, frozenset[int]]:
        """{GPU model: its GPUs} for the nodes whose model is named ({} on a one-model cluster)."""
        out: dict[str, set[int]] = {}
        for node in self.nodes:
            if node.gpu_model is not None:
                out.setdefault(node.gpu_model, set()).update(node.gpu_ids)
        return {m: frozenset(g) for m, g in out.items()}

    def free_by_node(self) -> dict[int, list[int]]:
        """{node index: [free GPU ids ascending]} for nodes with at least one free GPU, in node order."""
        out: dict[int, list[int]] = {}
        for gid in sorted(self.free):
            out.setdefault(self.node_of[gid], []).append(gid)
        return out

    def nodes_spanned(self, gpu_ids: Iterable[int]) -> int:
        return len({self.node_of[g] for g in gpu_ids})

    def racks_spanned(self, gpu_ids: Iterable[int]) -> int:
        return len({self.rack_of_node[self.node_of[g]] for g in gpu_ids})

    def gpu_by_location(self) -> dict[tuple[str, int], int]:
        """(node name, slot) -> gpu_id."""
        return {(g.node, g.slot): g.gpu_id for g in self.gpus}


_LAYOUT_CACHES = ("gpus_per_node", "max_gpus_per_node", "node_of", "rack_of_node", "topology", "gpus_by_model")
