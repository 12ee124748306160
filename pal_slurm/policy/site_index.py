"""The nodes of each partition that a kind of ask may use, indexed per Slurm site read: what
policy/eligibility.eligible_nodes draws its candidates from. Pure: a SiteView in, node sets out.

Why it exists: at a large site (8,192 nodes) judging every node of a partition on every
request costs tens of milliseconds, yet what a node offers (up, in the partition, its
features, its GPU model, its CPUs and memory, configured and free) is the same for every job
until the next read. So the index is built once per read (pald's sync builds it outside its
lock) as NumPy columns per partition, each kind of ask (constraint, GPU model, CPUs and
memory per node, --exclusive) is judged once over those columns, and the nodes a request
takes out on top (reservations it is not in, its --exclude) are kept per kind of ask too, so
a request that repeats an ask costs a dictionary lookup and shares the same node sets.

Invalidation: an index belongs to one SiteView and is never patched. A node's state, a drain,
a reservation or a partition change comes with the next read, which gets a new index
(engine/where.Where drops the old one whenever the site it is asked about is another object).
Pald's own promises of CPUs and memory between two reads are not in it: they are taken off
per request (eligibility.short_after_promises).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from pal_slurm.intake.constraints import Constraint
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model.site import NodeFacts, SiteView

MAX_ASKS = 512  # kinds of ask kept per read (keys hold user text: a burst of distinct ones is not kept)
_INT64 = np.iinfo(np.int64)


@dataclass(frozen=True)
class Candidates:
    """Nodes of one partition an ask may use: `eligible` (Slurm would run it there at some
    point) and, of those, `fits_now` (free CPUs and memory now; idle for --exclusive)."""

    eligible: frozenset[str]
    fits_now: frozenset[str]


class _Columns:
    """One partition's usable nodes as columns (one row per node)."""

    def __init__(self, nodes: Sequence[NodeFacts], kinds: dict[tuple[frozenset[str], frozenset[str]], int]):
        self.names = np.array([n.name for n in nodes], dtype=object)
        self.everyone = frozenset(n.name for n in nodes)
        self.kind = np.array([kinds.setdefault((n.features, n.gpu_types), len(kinds)) for n in nodes], dtype=np.intp)
        self.cpus = np.array([n.cpus for n in nodes], dtype=np.int64)
        self.memory = np.array([n.memory_mb for n in nodes], dtype=np.int64)
        self.free_cpus = np.array([n.free_cpus for n in nodes], dtype=np.int64)
        self.free_memory = np.array([n.free_memory_mb for n in nodes], dtype=np.int64)

    def subset(self, mask: np.ndarray, everyone_if: bool) -> frozenset[str]:
        return self.everyone if everyone_if else frozenset(self.names[mask].tolist())


def _bounded(value: int) -> int:
    """A job's ask as an int64 comparand (the node columns are int64; the answer is the same)."""
    return min(max(value, _INT64.min), _INT64.max)


class SiteIndex:
    """The candidates of each (partition, kind of ask) on one site read (see the module's
    docstring). Not thread-safe: its owner (pald's service, under pald's lock) asks it."""

    def __init__(self, site: SiteView):
        self.site = site
        kinds: dict[tuple[frozenset[str], frozenset[str]], int] = {}
        self._columns: dict[str, _Columns] = {}
        for name, p in site.partitions.items():
            members = [site.nodes[n] for n in p.nodes if n in site.nodes]
            self._columns[name] = _Columns([n for n in members if n.usable], kinds)
        self._kinds = list(kinds)  # (features, GPU types) of each kind id
        self._asks: dict[Hashable, Candidates] = {}
        self._narrowed: dict[Hashable, Candidates] = {}

    def candidates(self, partition: str, job: JobRestrictions, constraint: Constraint | None,
                   blocked: frozenset[str]) -> Candidates:
        """The usable nodes of `partition` that have what `job` asks (features matching
        `constraint`, parsed from job.constraint; its GPU model; its CPUs and memory per node),
        less its --exclude and the `blocked` nodes (reservations it is not in)."""
        ask = (partition, job.constraint if constraint is not None else None, job.gpu_model,
               job.cpus_per_node, job.memory_per_node_mb, job.exclusive)
        key = (ask, blocked, job.exclude)
        found = self._narrowed.get(key)
        if found is not None:
            return found
        base = self._asks.get(ask)
        if base is None:
            base = self._judge(self._columns[partition], job, constraint)
            if len(self._asks) < MAX_ASKS:
                self._asks[ask] = base
        found = _without(base, blocked, job)
        if len(self._narrowed) < MAX_ASKS:
            self._narrowed[key] = found
        return found

    def _judge(self, cols: _Columns, job: JobRestrictions, constraint: Constraint | None) -> Candidates:
        model = job.gpu_model
        kind_ok = np.array([(constraint is None or constraint.matches(features))
                            and (model is None or gpu_types == {model}) for features, gpu_types in self._kinds]
                           + [False], dtype=bool)  # one more: indexing needs a non-empty array
        cpus, memory = _bounded(job.cpus_per_node), _bounded(job.memory_per_node_mb)
        eligible = kind_ok[cols.kind] & (cols.cpus >= cpus) & (cols.memory >= memory)
        fits = eligible & (cols.free_cpus >= cpus) & (cols.free_memory >= memory)
        if job.exclusive:
            fits &= cols.free_cpus >= cols.cpus
        out = cols.subset(eligible, bool(eligible.all()))
        same = bool(np.array_equal(fits, eligible))
        return Candidates(out, out if same else cols.subset(fits, False))


def _without(base: Candidates, blocked: frozenset[str], job: JobRestrictions) -> Candidates:
    """`base` less the `blocked` nodes and the job's --exclude (the same sets when nothing goes)."""
    eligible = base.eligible
    if blocked and not blocked.isdisjoint(eligible):
        eligible = eligible - blocked
    if job.exclude:  # user text, matched as written (never listed)
        kept = frozenset(n for n in eligible if n not in job.exclude)
        eligible = eligible if len(kept) == len(eligible) else kept
    if eligible is base.eligible:
        return base
    return Candidates(eligible, base.fits_now & eligible)
