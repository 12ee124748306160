"""What a site's Slurm configuration says about where a job may run: partitions, node
features, CPUs and memory, reservations. Frozen values, no I/O.

`ClusterView` (model/cluster.py) is the GPU picture every policy and the simulator share;
`SiteView` is the rest of what Slurm checks before it accepts a placement. pald keeps both,
read from Slurm each cycle (pal_slurm/slurm/site.py), and pal_slurm/policy/eligibility.py
turns a job's restrictions and a `SiteView` into the nodes the job may use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

UNLIMITED = None  # a limit Slurm prints as UNLIMITED / INFINITE / NONE


@dataclass(frozen=True)
class NodeFacts:
    """One node: its static capacity (what Slurm accepts at all) and what is free now."""

    name: str
    usable: bool  # up and taking work (not down, drained, failing, powered down)
    partitions: tuple[str, ...] = ()
    features: frozenset[str] = frozenset()  # active features (what --constraint matches)
    cpus: int = 0  # configured CPUs
    free_cpus: int = 0  # cpus - allocated
    memory_mb: int = 0  # RealMemory
    free_memory_mb: int = 0  # RealMemory - allocated (allocated is 0 when memory is not consumable)
    gpus: int = 0  # configured GPUs
    gpu_types: frozenset[str] = frozenset()  # GRES types of its GPUs: models (a100) or pal's slot types (s0..)

    @property
    def idle(self) -> bool:
        """No CPU allocated: what an --exclusive job needs."""
        return self.free_cpus >= self.cpus


@dataclass(frozen=True)
class PartitionFacts:
    """One partition as `scontrol show partition` prints it. `None` limits are unlimited;
    `None` allow lists are ALL; deny lists are empty when not set."""

    name: str
    nodes: frozenset[str]
    default: bool = False
    up: bool = True  # State=UP (DOWN, DRAIN and INACTIVE partitions start no jobs)
    max_nodes: int | None = UNLIMITED
    min_nodes: int = 0
    max_time_min: int | None = UNLIMITED
    allow_accounts: frozenset[str] | None = None
    deny_accounts: frozenset[str] = frozenset()
    allow_qos: frozenset[str] | None = None
    deny_qos: frozenset[str] = frozenset()
    allow_groups: frozenset[str] | None = None
    root_only: bool = False
    req_resv: bool = False  # ReqResv=YES: only jobs in a reservation


@dataclass(frozen=True)
class ReservationFacts:
    """One advance reservation. Nodes in it are off limits to jobs outside it while it is
    active (and, for a job whose time limit reaches into it, before it starts)."""

    name: str
    nodes: frozenset[str]
    start: float  # epoch seconds
    end: float
    active: bool
    # who may use it (Users=, Accounts=; a list of `-name`s names who may not): None: no list
    user_ids: frozenset[int] | None = None  # the Users= names as uids (a name that does not resolve is left out)
    users_except: bool = False
    accounts: frozenset[str] | None = None
    accounts_except: bool = False
    groups: bool = False  # a Groups= list, which pald does not evaluate

    def admits(self, uid: int | None, account: str | None) -> bool:
        """Whether a job of `uid` charged to `account` may use it, as far as pald can tell
        (False when it cannot: an unknown uid or default account against a list, a Groups=
        list). Both lists must admit the job: Slurm asks a job to match both when both are
        given, and a job matching both is admitted under any reading."""
        if self.groups:
            return False
        if self.user_ids is not None and (uid is None or (uid in self.user_ids) == self.users_except):
            return False
        if self.accounts is not None and (account is None or (account in self.accounts) == self.accounts_except):
            return False
        return True


@dataclass(frozen=True)
class Blocks:
    """Slurm's topology/block (NVLink domains and the like): the base blocks and the nodes in
    each. Slurm runs a job of up to `size` nodes inside one base block, and refuses a node
    pin that spans two (docs/decisions/block-topology.md), so a block is both the locality
    unit (as a leaf switch is) and a limit on where a multi-node job may be pinned. Empty
    (`size` 0): the site does not use topology/block."""

    block_of: Mapping[str, str] = field(default_factory=dict)  # node -> its base block
    size: int = 0  # the base block size (BlockSizes' first value): nodes a job may span in one block

    def __bool__(self) -> bool:
        return bool(self.block_of)

    def members(self) -> dict[str, frozenset[str]]:
        """block -> its nodes, in the order Slurm lists the blocks."""
        out: dict[str, set[str]] = {}
        for node, block in self.block_of.items():
            out.setdefault(block, set()).add(node)
        return {block: frozenset(nodes) for block, nodes in out.items()}


NO_BLOCKS = Blocks()


@dataclass(frozen=True)
class SiteView:
    nodes: Mapping[str, NodeFacts] = field(default_factory=dict)
    partitions: Mapping[str, PartitionFacts] = field(default_factory=dict)
    reservations: Mapping[str, ReservationFacts] = field(default_factory=dict)
    blocks: Blocks = NO_BLOCKS  # topology/block's base blocks (empty: another topology, or none)

    @property
    def default_partition(self) -> PartitionFacts | None:
        return next((p for p in self.partitions.values() if p.default), None)
