"""Where jobs may run on one Slurm read, and whether a choice can be written into Slurm's
job: pald's site facts as the engine's decisions on a Slurm site read them (engine/site.py, engine/held.py).
No I/O.

`Where` memoises the node groups a job may use (policy/eligibility: partitions, features,
exclusions, reservations, CPUs/memory) per Slurm read: most jobs share their restrictions;
and it keeps the read's SiteIndex (policy/site_index), so a job with new restrictions (another
user, another limit) is judged on candidates indexed once per read, not node by node.
`release_on` checks a held job the engine placed before it is released: the CPUs/memory
promised so far, Slurm's node facts (engine/choice_check), the slots Slurm will take.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Iterable, Mapping, NamedTuple, Sequence

from pal_slurm.engine.choice_check import Binding, vet
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model import ClusterView, JobRequest
from pal_slurm.model.shape import JobShape
from pal_slurm.model.site import SiteView
from pal_slurm.policy.eligibility import Eligibility, NodeGroup, eligible_nodes, short_after_promises, without
from pal_slurm.policy.site_index import SiteIndex
from pal_slurm.policy.shapes import ShapeChoice, choice_of, shape_of, slurm_picks, slurm_picks_slots
from pal_slurm.slurm.gres import gres_update_spec

MAX_ELIGIBILITY_MEMO = 1024  # distinct restrictions memoised per Slurm read (they hold user text)
MAX_ALLOWED_MEMO = 64  # node groups whose allowed node indices are kept (while the layout stands)
_UNKNOWN = object()

Promised = Mapping[str, tuple[int, int]]  # node -> (CPUs, memory MB) promised, not started yet


@dataclass
class Where:
    """Where jobs may run on one Slurm read (policy/eligibility), memoised: most jobs share
    their restrictions. The owner clears it when a read changes the view (`view_changed`) or
    the site (`site_changed`)."""

    _eligibility: dict[JobRestrictions, Eligibility] = field(default_factory=dict)  # per site read
    _any: dict[None, Eligibility] = field(default_factory=dict)  # no site: every node, per view
    # per layout: a group's allowed nodes depend only on its names and the nodes' order, and
    # a read mostly makes groups equal to the last read's; kept, the first request after
    # each read finds them (a scan of every node: 2.8 ms at 8,192 nodes), and the same set
    # object, which the shape index keeps its narrowed free sets by (policy.shapes)
    _allowed: dict[NodeGroup, frozenset[int] | None] = field(default_factory=dict)
    _index: SiteIndex | None = None  # the site read's candidates (policy/site_index), kept with it

    def view_changed(self, layout_changed: bool = True) -> None:
        """A new view; `layout_changed`: its nodes or their order differ from the last one's
        (node indices may change meaning)."""
        if layout_changed:
            self._allowed.clear()
        self._any.clear()

    def site_changed(self, index: SiteIndex | None = None) -> None:
        """A new site read; `index`: its SiteIndex when the reader built it (off pald's lock),
        else one is built on the first question about the new site."""
        self._eligibility.clear()
        self._index = index

    def index_for(self, site: SiteView) -> SiteIndex:
        """The SiteIndex of `site`: the one kept when it is this site's, else a new one (kept)."""
        if self._index is None or self._index.site is not site:
            self._index = SiteIndex(site)
        return self._index

    def eligibility(self, job: JobRestrictions, view: ClusterView | None, site: SiteView | None, now: float,
                    promised: Promised) -> Eligibility:
        """The nodes `job` may use, less those short of its CPUs/memory after `promised`."""
        if site is None:  # every GPU node (one group, made once per Slurm read)
            if None not in self._any:
                names = frozenset(n.name for n in view.nodes) if view else frozenset()
                self._any[None] = Eligibility((NodeGroup(None, names, names),))
            return self._any[None]
        found = self._eligibility.get(job)
        if found is None:
            found = eligible_nodes(job, site, now, self.index_for(site))
            if len(self._eligibility) < MAX_ELIGIBILITY_MEMO:  # a burst of distinct jobs is not kept
                self._eligibility[job] = found
        return without(found, short_after_promises(job, site, promised))

    def allowed_nodes(self, view: ClusterView, group: NodeGroup, free: Collection[int],
                      exclusive: bool = False) -> frozenset[int] | None:
        """Node indices of `group` that fit now (None: every node); exclusive jobs only get
        nodes whose GPUs are all in `free`."""
        nodes = view.nodes
        if exclusive:
            return frozenset(n.index for n in nodes if n.name in group.fits_now and n.gpu_ids
                             and all(g in free for g in n.gpu_ids))
        # popped and put back: the memo then holds this very group object, so the next
        # request's lookup with it (a read's groups are shared) compares by identity, not a
        # kept equal group from an earlier read name by name
        kept = self._allowed.pop(group, _UNKNOWN)
        if isinstance(kept, frozenset) or kept is None:
            found: frozenset[int] | None = kept
        else:
            if len(self._allowed) >= MAX_ALLOWED_MEMO:
                self._allowed.clear()
            everywhere = len(group.fits_now) >= len(nodes) and all(n.name in group.fits_now for n in nodes)
            found = None if everywhere else frozenset(n.index for n in nodes if n.name in group.fits_now)
        self._allowed[group] = found
        return found


def held_group(where: Where, view: ClusterView, site: SiteView | None, restrictions: JobRestrictions, now: float,
               promised: Promised) -> NodeGroup | None | str:
    """Where a held job may run, for the cycle: its one node group when that is every node
    and the job shares nodes, so it joins the shared engine cycle; None when it is placed
    after it, on its own nodes; or the reason it goes to Slurm untouched."""
    eligibility = where.eligibility(restrictions, view, site, now, promised)
    if eligibility.passed:  # pald cannot judge where it may run: Slurm places it
        return eligibility.passed
    group = eligibility.groups[0] if len(eligibility.groups) == 1 else None
    if group is None or restrictions.exclusive or where.allowed_nodes(view, group, frozenset(), False) is not None:
        group = None
    return group


def fits_after_promises(site: SiteView | None, nodes: Iterable[str], job: JobRestrictions, promised: Promised) -> bool:
    """Whether every node of a choice still has the job's CPUs and memory, counting what
    earlier decisions promised (the cycle places several jobs before any starts)."""
    if site is None:
        return True
    return not (set(nodes) & short_after_promises(job, site, promised))


def vetted(site: SiteView | None, choice: ShapeChoice) -> tuple[Binding | None, str]:
    """How `choice` can be written into a job (choice_check.Binding), or (None, why) when
    Slurm might not have what it names (checked against the last Slurm read's node facts):
    the caller passes then. Without a site view (tests, the simulator) the view is trusted."""
    return (Binding.SLOTS, "") if site is None else vet(choice.nodes, site.nodes)


def as_slurm_takes(view: ClusterView, free: Collection[int], job: JobRequest, gpus: Sequence[int],
                   choice: ShapeChoice, bound: Binding) -> tuple[tuple[int, ...], ShapeChoice]:
    """On nodes that do not type their slots pald pins only the nodes, and Slurm takes the
    lowest free slots there (of `free`): those are the job's (the engine already did so where
    the slots differ between nodes; policy.shapes.slurm_picks_slots)."""
    if bound is Binding.SLOTS or not slurm_picks_slots(job, gpus, view, binds_slots=False):
        return tuple(gpus), choice
    picked = slurm_picks(gpus, view, free)
    return picked, choice_of(picked, view)


def gres_for_release(shape: JobShape, choice: ShapeChoice, binds_slots: bool = True) -> str | None:
    """scontrol Gres= for a released job: the exact slots when they are the same on every node
    (and the site types every GPU by slot), else the per-node count; None for a total request
    or nodes without slot types (the job keeps its own request, pinned to nodes)."""
    if not shape.is_per_node or not binds_slots:
        return None
    if choice.same_slots_everywhere():
        return gres_update_spec(next(iter(choice.nodes.values())))
    return f"gpu:{shape.per_node}"


class Released(NamedTuple):
    """A held job's release as the cycle writes it: the GPUs Slurm will take, the choice, the
    scontrol Gres= value (None: the job keeps its own) and whether Slurm picks the slots on
    the nodes (the reservation then follows what each read shows free)."""

    gpus: tuple[int, ...]
    choice: ShapeChoice
    gres_spec: str | None
    slurm_picks: bool


def release_on(view: ClusterView, site: SiteView | None, free: Collection[int], job: JobRequest,
               gpus: Sequence[int], restrictions: JobRestrictions, promised: Promised) -> Released | str | None:
    """The release of a held job the engine placed on `gpus`: None when its nodes no longer
    have its CPUs/memory after this cycle's earlier releases (the engine places on GPUs
    alone: it waits for the next cycle); a `doubt:` reason when Slurm may not have what the
    view says (it is released as submitted)."""
    choice = choice_of(gpus, view)
    if not fits_after_promises(site, choice.nodes, restrictions, promised):
        return None
    bound, why = vetted(site, choice)
    if bound is None:
        return f"doubt:{why}"
    picked, choice = as_slurm_takes(view, free, job, gpus, choice, bound)
    shape = shape_of(job)
    exact = bound is Binding.SLOTS and choice.same_slots_everywhere()  # else Slurm takes the lowest free
    return Released(picked, choice, gres_for_release(shape, choice, bound is Binding.SLOTS),
                    shape.is_per_node and not exact)
