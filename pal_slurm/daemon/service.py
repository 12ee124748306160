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
from dataclasses import dataclass, field

from pal_slurm.daemon.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import JobFields, PlaceReply, PlaceRequest
from pal_slurm.daemon.ranking_map import ranking_for
from pal_slurm.model import ClusterView, DecisionKind
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.shape import JobShape, ShapeError, gpu_count, job_shape
from pal_slurm.policy import PlacementContext, placement as placement_by_name
from pal_slurm.policy.slurm_shape import FreeIndex, ShapeChoice, per_node_choice, stock_slurm_choice, total_choice
from pal_slurm.ranking import Ranking
from pal_slurm.slurm.gres import tres_per_node

MODES = ("auto", "now", "defer")


@dataclass(frozen=True)
class ServiceSettings:
    placement: str = "pal"  # registered placement used for --gpus=N (total) requests
    locality_penalty: float = 1.7
    default_class: str = "A"  # unknown applications: the most variability-sensitive class
    default_mode: str = "auto"  # auto: place if it fits now, else defer
    reservation_ttl_s: float = 30.0


def submit_shape(job: JobFields, spec: CommentSpec | None) -> JobShape:
    """The shape of a job at submit time (the hook's fields, `gpus=` from the comment)."""
    return job_shape(
        gpus_per_node=job.gpus_per_node or gpu_count(job.tres_per_node),
        gpus_per_job=job.gpus_per_job or gpu_count(job.tres_per_job),
        nodes=job.min_nodes,
        comment_gpus=spec.gpus if spec else None,
    )


def held_shape(job, spec: CommentSpec | None) -> JobShape:
    """The shape of a job squeue shows (a slurm JobInfo): the same parser as at submit time."""
    return job_shape(
        gpus_per_node=gpu_count(job.tres_per_node),
        gpus_per_job=gpu_count(job.tres_per_job),
        nodes=job.node_count,
        comment_gpus=spec.gpus if spec else None,
    )


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
    view_time: float = float("-inf")
    snapshot: object = None  # store RankingSnapshot or None
    ranking: Ranking | None = None
    held_jobs: int = 0  # PAL-held jobs in Slurm (last sync) plus deferrals since
    reservations: dict[str, Reservation] = field(default_factory=dict)
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
        if layout_changed or self.ranking is None:
            self.ranking = ranking_for(view, self.snapshot)
        for key, r in list(self.reservations.items()):
            confirmed = key in started or (r.made_at < now and not (r.gpu_ids & view.free))
            if confirmed or now - r.made_at > self.settings.reservation_ttl_s:
                del self.reservations[key]
        if held_jobs is not None:
            self.held_jobs = held_jobs
        self._indexes.clear()

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

    def choose(self, shape: JobShape, perf_class: str, ctx: PlacementContext | None = None,
               index: FreeIndex | None = None, one_rack: bool = False) -> ShapeChoice | None:
        """GPUs for a shape: against the service's state, or against `ctx` (+ its `index`)."""
        if shape.is_per_node:
            if ctx is None:
                ctx = PlacementContext(cluster=self.view, ranking=self.ranking)
                index = self.index(perf_class)
            return per_node_choice(shape.nodes or 1, shape.per_node, perf_class, ctx, index=index, one_rack=one_rack)
        return total_choice(shape.total, perf_class, ctx or self.context(), placement_by_name(self.settings.placement))

    def stock_choice(self, shape: JobShape, perf_class: str) -> ShapeChoice | None:
        """What stock Slurm would pick (reports and `palctl explain`)."""
        if not shape.is_per_node:
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
        try:
            shape = submit_shape(req.job, req.pal)
        except ShapeError as exc:
            return PlaceReply(DecisionKind.PASS, reason=str(exc), **base)
        if shape.per_node and shape.per_node > max((len(n.gpu_ids) for n in self.view.nodes), default=0):
            return PlaceReply(DecisionKind.PASS, reason="too_many_gpus_per_node", **base)
        if shape.total > self.view.size:
            return PlaceReply(DecisionKind.PASS, reason="bigger_than_cluster", **base)
        mode = req.pal.mode or self.settings.default_mode
        if mode == "defer" or (mode == "auto" and self.held_jobs > 0):
            self.held_jobs += 1
            return PlaceReply(DecisionKind.DEFER, reason="queued" if mode == "auto" else "asked", **base)
        choice = self.choose(shape, perf_class)
        if choice is None:
            if mode == "now":
                return PlaceReply(DecisionKind.PASS, reason="no_room", **base)
            self.held_jobs += 1
            return PlaceReply(DecisionKind.DEFER, reason="no_room", **base)
        self.reserve(key, choice, now)
        gres = None
        if shape.is_per_node and choice.same_slots_everywhere():
            gres = tres_per_node(next(iter(choice.nodes.values())))
        return PlaceReply(DecisionKind.PLACE, reason=self.settings.placement, nodes=choice.nodes, gres=gres, **base)
