"""Which nodes a job may use, as Slurm would judge them. Pure: restrictions and a SiteView in,
node sets out.

Why it exists: pald pins a job to nodes (req_nodes, or `scontrol update NodeList=`). Slurm
rejects a pinned job, or leaves it pending for ever, when a pinned node is outside what the
job asked for: another partition, a node without a --constraint feature, an --exclude'd node,
a reserved or drained node, a node without the CPUs or memory it wants. The first rule of
pal-slurm is that a PAL problem costs a job its placement, never its run; so every placement
is drawn from `eligible_nodes(...)`, and whatever this module cannot judge exactly (feature
counts, an access list it cannot evaluate, a reservation it does not know) makes the job
*pass*: it goes to Slurm untouched and runs where Slurm puts it.

Two levels: a node is *eligible* when Slurm would ever run the job there (partition, features,
exclusions, reservation, capacity), and *fits now* when it also has the free CPUs and memory
(and, for --exclusive, nothing running). No eligible node at all: pass (Slurm decides, e.g.
rejects a job that can never run). Eligible nodes but none fits now: the job waits (defer).

Under topology/block (SiteView.blocks) a multi-node job's groups are cut per base block
(`in_blocks`): it is placed inside one block, or waits until a block has room, as Slurm's own
block placement would; a job larger than a block passes (`block_span`).

The per-node judgement of what a node offers (partition, usable, features, GPU model, CPUs
and memory, exclusions) is made once per site read and kind of ask by policy/site_index.py;
this module decides what a job asks and assembles its node groups from those candidates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from pal_slurm.intake.constraints import ConstraintTooLarge, ConstraintUnsupported, parse_constraint
from pal_slurm.intake.refusals import TOO_LARGE
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model.site import NO_BLOCKS, Blocks, NodeFacts, PartitionFacts, SiteView
from pal_slurm.policy.site_index import SiteIndex


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one partition a job may be placed on together."""

    partition: str | None  # the partition to write into the job (several asked), else None
    eligible: frozenset[str]  # Slurm would run the job there at some point
    fits_now: frozenset[str]  # ... and it has the CPUs/memory (exclusive: is idle) now


@dataclass(frozen=True)
class Eligibility:
    groups: tuple[NodeGroup, ...] = ()
    passed: str | None = None  # set: place nothing, the job goes to Slurm untouched (reason)

    @property
    def fits_now(self) -> frozenset[str]:
        return frozenset().union(*(g.fits_now for g in self.groups)) if self.groups else frozenset()


def passed(reason: str) -> Eligibility:
    return Eligibility(passed=reason)


# ---- partitions -------------------------------------------------------------------------------
def _allowed(value: str | None, allow: frozenset[str] | None, deny: frozenset[str]) -> bool:
    """An access list check; an unknown value (the user's defaults) passes only open lists."""
    if value is None:
        return allow is None and not deny
    return (allow is None or value in allow) and value not in deny


def partition_refusal(p: PartitionFacts, job: JobRestrictions) -> str | None:
    """Why Slurm would not run `job` in partition `p` (or pald cannot tell); None: it may."""
    if not p.up:
        return "partition_not_up"
    if job.usable_partitions is not None and p.name not in job.usable_partitions:
        return "partition_not_usable"  # Slurm's own AllowGroups / RootOnly verdict
    if job.usable_partitions is None and (p.allow_groups is not None or p.root_only):
        return "partition_groups_unknown"
    if not _allowed(job.account, p.allow_accounts, p.deny_accounts):
        return "partition_account"
    if not _allowed(job.qos, p.allow_qos, p.deny_qos):
        return "partition_qos"
    if p.req_resv and not job.reservation:
        return "partition_needs_reservation"
    k = job.nodes
    if k is not None and ((p.max_nodes is not None and k > p.max_nodes) or k < p.min_nodes):
        return "partition_node_count"
    if job.time_limit_min is not None and p.max_time_min is not None and job.time_limit_min > p.max_time_min:
        return "partition_time_limit"
    return None


def _partitions(job: JobRestrictions, site: SiteView) -> list[PartitionFacts] | str:
    if job.partitions:
        unknown = [n for n in job.partitions if n not in site.partitions]
        if unknown:
            return "unknown_partition"
        wanted = [site.partitions[n] for n in job.partitions]
    else:
        default = site.default_partition
        if default is None:
            return "no_default_partition"
        wanted = [default]
    usable = [p for p in wanted if partition_refusal(p, job) is None]
    return usable or partition_refusal(wanted[0], job) or "no_partition"


# ---- nodes ------------------------------------------------------------------------------------
def _reserved_elsewhere(job: JobRestrictions, site: SiteView, now: float,
                        max_time_min: int | None) -> frozenset[str]:
    """Nodes of reservations the job is not in, that are active or start before the job
    could end (unknown end: any reservation counts)."""
    limit = job.time_limit_min if job.time_limit_min is not None else max_time_min
    horizon = float("inf") if limit is None else now + 60.0 * limit
    out: set[str] = set()
    for r in site.reservations.values():
        if r.name != job.reservation and r.end > now and (r.active or r.start < horizon):
            out |= r.nodes
    return frozenset(out)


def fits_now(node: NodeFacts, job: JobRestrictions) -> bool:
    """The node has the CPUs and memory the job asks for free now (is idle for --exclusive)."""
    return _fits_free(node.free_cpus, node.free_memory_mb, node.cpus, job)


def _fits_free(free_cpus: int, free_memory_mb: int, cpus: int, job: JobRestrictions) -> bool:
    """fits_now on a node of `cpus` CPUs with that much free (idle: no CPU allocated)."""
    if job.exclusive and free_cpus < cpus:
        return False
    return free_cpus >= job.cpus_per_node and free_memory_mb >= job.memory_per_node_mb


def _required(job: JobRestrictions, site: SiteView) -> frozenset[str] | str:
    """The --nodelist's nodes, or why the job passes. Listed only when the size counted from
    its ranges is at most the site's nodes (an upper bound, since a list may repeat a name;
    exact for any list without repeats), so a user's list costs no more than the site."""
    if not job.required:
        return frozenset()
    if job.nodes is None:
        return "nodelist_without_node_count"
    bound = job.required.size_bound
    if bound > len(site.nodes):  # more names than the site has: not all of them are its nodes
        return "unknown_required_node" if bound == job.nodes else "nodelist_partial"
    required = frozenset(job.required.hosts(limit=len(site.nodes)))
    if len(required) != job.nodes:
        return "nodelist_partial"
    if required - set(site.nodes):
        return "unknown_required_node"
    return required


def eligible_nodes(job: JobRestrictions, site: SiteView, now: float, index: SiteIndex | None = None) -> Eligibility:
    """The node groups (one per usable partition) a job may be placed on, or why it passes.
    `index`: the site's SiteIndex, kept by the caller for the read (without it, or for another
    site, one is built for this call: the same answer, at the cost of indexing every node)."""
    required = _required(job, site)
    if isinstance(required, str):
        return passed(required)
    constraint = None
    if job.constraint:
        try:
            constraint = parse_constraint(job.constraint)
        except ConstraintTooLarge:
            return passed(f"{TOO_LARGE}:constraint")
        except ConstraintUnsupported:
            return passed("constraint_not_evaluated")
        if constraint.matching_or and job.nodes != 1:
            return passed("constraint_matching_or")
    reservation_nodes = None
    if job.reservation:
        r = site.reservations.get(job.reservation)
        if r is None or not r.active:
            return passed("reservation_not_active")
        if not r.admits(job.uid, job.account):  # Slurm refuses it (or pald cannot tell): no promise
            return passed("reservation_access")
        reservation_nodes = r.nodes
    parts = _partitions(job, site)
    if isinstance(parts, str):
        return passed(parts)
    blocks = site.blocks if job.nodes != 1 else NO_BLOCKS  # one node is always in one block
    if blocks and job.nodes is not None and job.nodes > blocks.size:
        return passed(BLOCK_SPAN)
    index = index if index is not None and index.site is site else SiteIndex(site)
    groups: list[NodeGroup] = []
    for p in parts:
        found = index.candidates(p.name, job, constraint, _reserved_elsewhere(job, site, now, p.max_time_min))
        eligible = found.eligible
        if required:  # the job's own lists: proportional to them, not to the partition
            eligible = required & eligible
        if reservation_nodes is not None:
            eligible = eligible & reservation_nodes
        if required and eligible != required:
            continue
        if job.nodes is not None and len(eligible) < job.nodes:
            continue
        fits = found.fits_now if eligible is found.eligible else found.fits_now & eligible
        group = NodeGroup(p.name if len(job.partitions) > 1 else None, eligible, fits)
        for part in (in_blocks(group, blocks, job.nodes) if blocks else (group,)):
            if all(g.eligible != part.eligible for g in groups):
                groups.append(part)
    if not groups:
        return passed(NO_BLOCK_FITS if blocks else "no_eligible_node")
    return Eligibility(tuple(groups))


# pass reasons under topology/block (docs/decisions/block-topology.md)
BLOCK_SPAN = "block_span"  # more nodes than a base block holds: Slurm's own block placement
NO_BLOCK_FITS = "no_block_fits"  # no block holds enough of the nodes the job may use


BLOCK_DEFER = "block"  # a multi-node job under topology/block: placed by the cycle, never at submit


def multi_node_in_blocks(site: SiteView, job: JobRestrictions) -> bool:
    """Whether `job` may span nodes on a site with topology/block. Such a job is never pinned
    at submit: Slurm 24.11 shows the hook no --segment, and refuses the submission outright
    when a pin sits beside one ("Requested topology configuration is not available"); pinned
    later by the cycle, a --segment job is only left pending (BadConstraints), and pald drops
    that pin (daemon/held_jobs.unpin_limited), so the job still runs as its user asked."""
    return bool(site.blocks) and job.nodes != 1


def in_blocks(group: NodeGroup, blocks: Blocks, nodes: int | None) -> list[NodeGroup]:
    """`group` cut into one group per base block that holds at least `nodes` of its nodes:
    Slurm keeps a job of up to a block's size inside one block and leaves a node pin across
    two pending for ever (BadConstraints), so a multi-node placement is drawn from one block.
    Nodes in no block are left out (Slurm's block plugin places no multi-node job there)."""
    out = []
    for members in blocks.members().values():
        eligible = group.eligible & members
        if eligible and len(eligible) >= (nodes or 1):
            out.append(NodeGroup(group.partition, eligible, group.fits_now & members))
    return out


def short_after_promises(job: JobRestrictions, site: SiteView, promised: Mapping[str, tuple[int, int]]
                         ) -> frozenset[str]:
    """Nodes that fit `job` in Slurm's last view but not once the CPUs and memory pald already
    promised to jobs Slurm does not show running yet (`promised`: node -> (cpus, MB)) are
    taken off: two decisions between two Slurm reads must not overcommit a node."""
    out = set()
    for name, (cpus, memory) in promised.items():
        node = site.nodes.get(name)
        if node is None or not fits_now(node, job):
            continue
        if not _fits_free(node.free_cpus - cpus, node.free_memory_mb - memory, node.cpus, job):
            out.add(name)
    return frozenset(out)


def without(eligibility: Eligibility, nodes: frozenset[str]) -> Eligibility:
    """`eligibility` with `nodes` no longer fitting now (still eligible: they may free up)."""
    if not nodes or not eligibility.groups:
        return eligibility
    return replace(eligibility, groups=tuple(replace(g, fits_now=g.fits_now - nodes) for g in eligibility.groups))
