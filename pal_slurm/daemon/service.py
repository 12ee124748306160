"""pald's decision core: the in-memory state and the `place` answer. No I/O, no clock of its own.

It holds the last cluster view read from Slurm, the ranking snapshot, the application -> class
map, and *tentative reservations*: GPUs promised to a job that Slurm does not show as busy yet
(the hook answers before the job exists). Two submissions in the same second therefore never
get the same GPUs. Reservations end when a later Slurm view shows their GPUs busy, or after a
TTL (a job that never started must not block GPUs for ever).

A new job is placed now when it fits and no older PAL job is held (so pald's queue order is
kept); otherwise it is deferred (the hook holds it and pald's cycle releases it later), or,
with `mode=now`, passed to Slurm untouched.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from pal_slurm.daemon.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import JobFields, PlaceReply, PlaceRequest
from pal_slurm.daemon.ranking_map import ranking_for
from pal_slurm.daemon.restrictions import restrictions_from_fields, traits_from_fields
from pal_slurm.model import ClusterView, DecisionKind
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.site import SiteView
from pal_slurm.policy import PlacementContext, placement as placement_by_name
from pal_slurm.policy.eligibility import Eligibility, JobRestrictions, NodeGroup, eligible_nodes
from pal_slurm.policy.passthrough import pass_reason
from pal_slurm.policy.slurm_shape import FreeIndex, ShapeChoice, per_node_choice, stock_slurm_choice, total_choice
from pal_slurm.ranking import Ranking
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.gres import parse_slot_type, tres_per_node

MODES = ("auto", "now", "defer")


@dataclass(frozen=True)
class ServiceSettings:
    placement: str = "pal"  # registered placement used for --gpus=N (total) requests
    locality_penalty: float = 1.7
    default_class: str = "A"  # unknown applications: the most variability-sensitive class
    default_mode: str = "auto"  # auto: place if it fits now, else defer
    reservation_ttl_s: float = 30.0


@dataclass(frozen=True)
class Shape:
    """What a job asks for in Slurm's terms."""

    nodes: int | None  # -N (None: any number, only with a total count)
    per_node: int | None  # GPUs per node (--gres=gpu:g)
    total: int  # GPUs in all

    @property
    def per_node_shape(self) -> bool:
        return self.per_node is not None


class ShapeError(ValueError):
    """The job's GPU request cannot be placed by PAL (the reason goes into pal:pass=...)."""


def job_shape(job: JobFields, spec: CommentSpec | None) -> Shape:
    """Derive the request shape from Slurm's fields (and `gpus=` in the comment)."""
    k = job.min_nodes if job.min_nodes else None
    if job.gpus_per_node:
        return Shape(k or 1, job.gpus_per_node, job.gpus_per_node * (k or 1))
    total = job.gpus_per_job or (spec.gpus if spec and spec.gpus else None)
    if not total:
        raise ShapeError("no_gpus")
    if k and total % k == 0:
        return Shape(k, total // k, total)
    return Shape(None, None, total)


@dataclass
class Reservation:
    key: str
    gpu_ids: frozenset[int]
    made_at: float


@dataclass
class PlacementService:
    settings: ServiceSettings = field(default_factory=ServiceSettings)
    class_map: AppClassMap = field(default_factory=AppClassMap)
    view: ClusterView | None = None
    site: SiteView | None = None  # partitions, features, CPUs/memory; None: every GPU node is eligible
    view_time: float = float("-inf")
    snapshot: object = None  # store RankingSnapshot or None
    ranking: Ranking | None = None
    held_jobs: int = 0  # PAL-held jobs in Slurm (last sync) plus deferrals since
    reservations: dict[str, Reservation] = field(default_factory=dict)
    _eligibility: dict[JobRestrictions, Eligibility] = field(default_factory=dict)  # per Slurm read
    _allowed: dict[NodeGroup, frozenset[int] | None] = field(default_factory=dict)  # per Slurm read
    _slot_typed: frozenset[str] | None = None  # nodes whose GPUs all have slot types (per Slurm read)
    _indexes: dict[str, FreeIndex] = field(default_factory=dict)  # per class, for view - reservations
    _rng: random.Random = field(default_factory=lambda: random.Random(0))

    # ---- inputs ------------------------------------------------------------------------
    def observe_cluster(self, view: ClusterView, now: float, held_jobs: int | None = None,
                        started: set[str] = frozenset()) -> None:
        """A fresh Slurm view (taken at `now`): drop reservations it confirms or that expired.

        `started`: reservation keys whose job Slurm shows started or finished (a short job can
        start and end between two views, so "its GPUs look busy" alone is not enough)."""
        layout_changed = self.view is None or [(g.node, g.slot) for g in self.view.gpus] != [
            (g.node, g.slot) for g in view.gpus
        ]
        if layout_changed and self.view is not None:
            self.reservations.clear()  # gpu ids changed meaning
        self.view = view
        self.view_time = now
        self._allowed.clear()  # node indices may change meaning
        if layout_changed or self.ranking is None:
            self.ranking = ranking_for(view, self.snapshot)
        for key, r in list(self.reservations.items()):
            confirmed = key in started or (r.made_at < now and not (r.gpu_ids & view.free))
            if confirmed or now - r.made_at > self.settings.reservation_ttl_s:
                del self.reservations[key]
        if held_jobs is not None:
            self.held_jobs = held_jobs
        self._indexes.clear()

    def observe_site(self, site: SiteView) -> None:
        """Partitions, features, reservations and free CPUs/memory from the same Slurm read."""
        self.site = site
        self._eligibility.clear()
        self._allowed.clear()
        self._slot_typed = None

    def set_snapshot(self, snapshot) -> None:
        self.snapshot = snapshot
        if self.view is not None:
            self.ranking = ranking_for(self.view, snapshot)
        self._indexes.clear()

    def set_class_map(self, mapping: dict[str, str]) -> None:
        self.class_map = AppClassMap(dict(mapping), default=self.settings.default_class)

    @property
    def rank_version(self) -> int:
        return self.ranking.version if self.ranking else 0

    # ---- queries -----------------------------------------------------------------------
    def free_now(self) -> frozenset[int]:
        taken = set().union(*[r.gpu_ids for r in self.reservations.values()]) if self.reservations else set()
        return frozenset(self.view.free - taken) if self.view else frozenset()

    def context(self) -> PlacementContext:
        return PlacementContext(
            cluster=self.view.with_free(self.free_now()),
            ranking=self.ranking,
            rng=self._rng,
            locality_penalty=self.settings.locality_penalty,
        )

    def resolve_class(self, app: str) -> tuple[str, str | None]:
        """(class, warning for the user or None)."""
        cls, known = self.class_map.lookup(app)
        if known:
            return cls, None
        return cls, (f"pal: unknown class '{app}', placed as class {cls} (most variability-sensitive); "
                     f"ask your admin to add it (palctl classes add)")

    def index(self, perf_class: str) -> FreeIndex:
        """The per-node index of the GPUs free now (view minus reservations) for a class."""
        if perf_class not in self._indexes:
            self._indexes[perf_class] = FreeIndex(self.view, self.free_now(), self.ranking.sf(perf_class))
        return self._indexes[perf_class]

    def choose(self, shape: Shape, perf_class: str, ctx: PlacementContext | None = None,
               index: FreeIndex | None = None, one_rack: bool = False, allowed=None) -> ShapeChoice | None:
        """GPUs for a shape: against the service's state, or against `ctx` (+ its `index`).
        `allowed`: node indices the job may use (None: all)."""
        if shape.per_node_shape:
            if ctx is None:
                ctx = PlacementContext(cluster=self.view, ranking=self.ranking)
                index = self.index(perf_class)
            return per_node_choice(shape.nodes or 1, shape.per_node, perf_class, ctx, index=index,
                                   one_rack=one_rack, allowed=allowed)
        ctx = ctx or self.context()
        if allowed is not None:
            node_of = ctx.cluster.node_of
            ctx = replace(ctx, cluster=ctx.cluster.with_free(g for g in ctx.cluster.free if node_of[g] in allowed))
        return total_choice(shape.total, perf_class, ctx, placement_by_name(self.settings.placement))

    def eligibility(self, job: JobRestrictions, now: float) -> Eligibility:
        """The nodes `job` may use (the one place placements learn it; see policy/eligibility).
        Memoised per Slurm read: most jobs share their restrictions."""
        if self.site is None:
            names = frozenset(n.name for n in self.view.nodes) if self.view else frozenset()
            return Eligibility((NodeGroup(None, names, names),))
        if job not in self._eligibility:
            self._eligibility[job] = eligible_nodes(job, self.site, now)
        return self._eligibility[job]

    def allowed_nodes(self, group: NodeGroup, free, exclusive: bool = False) -> frozenset[int] | None:
        """Node indices of `group` that fit now (None: every node); exclusive jobs only get
        nodes whose GPUs are all in `free`."""
        nodes = self.view.nodes
        if exclusive:
            return frozenset(n.index for n in nodes if n.name in group.fits_now and n.gpu_ids
                             and all(g in free for g in n.gpu_ids))
        if group not in self._allowed:
            everywhere = len(group.fits_now) >= len(nodes) and all(n.name in group.fits_now for n in nodes)
            self._allowed[group] = None if everywhere else frozenset(
                n.index for n in nodes if n.name in group.fits_now)
        return self._allowed[group]

    def choose_eligible(self, shape: Shape, perf_class: str, eligibility: Eligibility, free,
                        ctx: PlacementContext, index: FreeIndex | None, exclusive: bool = False,
                        one_rack: bool = False) -> tuple[ShapeChoice, NodeGroup] | None:
        """The best choice over the eligible node groups (one per partition): GPUs in `free`
        (what `ctx` and `index` hold) on nodes of the group that fit now."""
        best = None
        for group in eligibility.groups:
            allowed = self.allowed_nodes(group, free, exclusive)
            if allowed is not None and not allowed:
                continue
            choice = self.choose(shape, perf_class, ctx, index=index, one_rack=one_rack, allowed=allowed)
            if choice is not None and (best is None or choice.worst_sf < best[0].worst_sf):
                best = (choice, group)
        return best

    def binds_slots(self, choice: ShapeChoice) -> bool:
        """Whether exact GPU slots can be bound on the chosen nodes: only where the site gave
        every GPU its own slot type (s0..). On nodes typed by GPU model (gpu:a100:4) or untyped
        ones, pald pins the nodes and Slurm picks the slots (the job keeps its own request)."""
        if self.site is None:
            return True
        if self._slot_typed is None:
            self._slot_typed = frozenset(name for name, facts in self.site.nodes.items() if facts.gpu_types
                                         and all(parse_slot_type(t) is not None for t in facts.gpu_types))
        return all(name in self._slot_typed for name in choice.nodes)

    def stock_choice(self, shape: Shape, perf_class: str) -> ShapeChoice | None:
        """What stock Slurm would pick (reports and `palctl explain`)."""
        if not shape.per_node_shape:
            return None
        return stock_slurm_choice(shape.nodes or 1, shape.per_node, perf_class, self.context())

    def reserve(self, key: str, choice: ShapeChoice, now: float) -> None:
        self.reservations[key] = Reservation(key, frozenset(choice.gpu_ids), now)
        for idx in self._indexes.values():
            idx.take(choice.gpu_ids)

    # ---- the submit-time answer ----------------------------------------------------------
    def place(self, req: PlaceRequest, now: float, key: str) -> PlaceReply:
        if self.view is None or self.ranking is None:
            return PlaceReply(DecisionKind.PASS, reason="no_cluster_view")
        perf_class, warning = self.resolve_class(req.pal.perf_class)
        base = dict(rank=self.rank_version, perf_class=perf_class, warning=warning)
        passing = pass_reason(traits_from_fields(req.job, now))
        if passing:
            return PlaceReply(DecisionKind.PASS, reason=passing, **base)
        try:
            shape = job_shape(req.job, req.pal)
        except ShapeError as exc:
            return PlaceReply(DecisionKind.PASS, reason=str(exc), **base)
        try:
            restrictions = restrictions_from_fields(req.job, shape.nodes, shape.per_node or 1)
        except SlurmError:
            return PlaceReply(DecisionKind.PASS, reason="bad_nodelist", **base)
        eligibility = self.eligibility(restrictions, now)
        if eligibility.passed:
            return PlaceReply(DecisionKind.PASS, reason=eligibility.passed, **base)
        if shape.per_node and shape.per_node > max((len(n.gpu_ids) for n in self.view.nodes), default=0):
            return PlaceReply(DecisionKind.PASS, reason="too_many_gpus_per_node", **base)
        if shape.total > self.view.size:
            return PlaceReply(DecisionKind.PASS, reason="bigger_than_cluster", **base)
        mode = req.pal.mode or self.settings.default_mode
        if mode == "defer" or (mode == "auto" and self.held_jobs > 0):
            self.held_jobs += 1
            return PlaceReply(DecisionKind.DEFER, reason="queued" if mode == "auto" else "asked", **base)
        ctx = self.context()
        found = self.choose_eligible(shape, perf_class, eligibility, ctx.cluster.free, ctx,
                                     self.index(perf_class) if shape.per_node_shape else None,
                                     exclusive=restrictions.exclusive)
        choice, group = found if found else (None, None)
        if choice is None:
            if mode == "now":
                return PlaceReply(DecisionKind.PASS, reason="no_room", **base)
            self.held_jobs += 1
            return PlaceReply(DecisionKind.DEFER, reason="no_room", **base)
        self.reserve(key, choice, now)
        gres = None
        if shape.per_node_shape and choice.same_slots_everywhere() and self.binds_slots(choice):
            gres = tres_per_node(next(iter(choice.nodes.values())))
        return PlaceReply(DecisionKind.PLACE, reason=self.settings.placement, nodes=choice.nodes, gres=gres,
                          partition=group.partition, site_checked=True, **base)
