"""A node as `sinfo --json` reports it. Pure.

Apart from readers.py so that site.py (partitions and reservations, which readers.py's
SlurmReader reads) builds on these types without importing the reader: readers.py re-exports
them for its callers.
"""

from __future__ import annotations

from dataclasses import dataclass

# node states/flags in which a node takes no new work (its GPUs are not "free")
_USABLE_STATES = frozenset({"idle", "mixed", "allocated"})
_BLOCKING_FLAGS = frozenset(
    {
        "DRAIN",
        "FAIL",
        "MAINTENANCE",
        "NOT_RESPONDING",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWER_DOWN",
        "REBOOT_ISSUED",
        "REBOOT_REQUESTED",
        "INVALID_REG",
        "DOWN",
        "FUTURE",
    }
)


# ---- nodes ------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeResources:
    """A node's CPUs and memory from `sinfo --json` (MB; alloc_memory is 0 unless memory is a
    consumable resource)."""

    cpus: int
    alloc_cpus: int
    memory_mb: int
    alloc_memory_mb: int


@dataclass(frozen=True)
class NodeInfo:
    """One node as `sinfo --json` reports it."""

    name: str
    state: str  # base state, lower case: idle, mixed, allocated, down, future, ...
    state_flags: tuple[str, ...]  # DRAIN, NOT_RESPONDING, ...
    gpus: int  # configured GPU count
    gpus_used: int  # allocated GPU count
    used_slots: frozenset[int] | None  # allocated GPU indices; None if sinfo gave none
    weight: int
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    reason: str = ""
    gres: str = ""  # raw configured GRES string
    resources: NodeResources | None = None  # CPUs and memory (parse_node_resources)
    address: str = ""  # NodeAddr (what slurmctld connects to)
    hostname: str = ""  # NodeHostname

    @property
    def usable(self) -> bool:
        """Accepts new jobs: up, not drained/failing/powered down."""
        return self.state in _USABLE_STATES and not (set(self.state_flags) & _BLOCKING_FLAGS)
