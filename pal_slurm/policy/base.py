"""The two policy axes (as Flux's Fluxion separates them), the context they get, and the one
interface every placement implements.

- A queue order decides *which job next*: a pure function of the pending/running jobs.
- A placement decides *which GPUs*: given the ordered jobs, the cluster (with its free GPUs
  *excluding* those held by running jobs), the ranking snapshot and an RNG, it returns a
  RoundPlan. It never mutates its inputs and performs no I/O.

Randomness comes only from the `rng` passed in (a `random.Random`): the same seed gives the
same plan, and the simulator can hand over the artifact's exact RNG stream. Callers never probe
a placement by name or attribute: what they may rely on is in its `Traits`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.model.network import DelayTimers
from pal_slurm.model.shape import JobShape
from pal_slurm.policy.cache import RunCache
from pal_slurm.ranking import Ranking


class NetworkFactor(Protocol):
    """The network as a placement sees it (sim.network.NetworkModel is one)."""

    def factor(self, app: str, num_gpus: int, nodes: int, racks: int) -> float:
        """Time multiplier (>= 1) of `num_gpus` GPUs over that many nodes and racks."""
        ...


class FreeShapes(Protocol):
    """The free GPUs indexed for per-node requests, as a placement reads them
    (policy.shapes.ShapeIndex is the one implementation; declared here so the context, which
    every placement module imports, depends on no placement module)."""

    @property
    def free(self) -> set[int]:
        """The free GPUs: the truth where the index is given."""
        ...

    def pick(self, shape: JobShape, sf: Sequence[float], one_rack: bool = False) -> tuple[int, ...] | None:
        """The per-node choice for `shape` under the bins `sf` (None: it does not fit)."""
        ...


@dataclass(frozen=True)
class PlacementContext:
    """Everything a placement may look at besides the jobs."""

    cluster: ClusterView  # free = GPUs not held by any running job
    ranking: Ranking
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    locality_penalty: float = 1.7  # PAL's across-node weight in the L x V order
    now: float = 0.0  # current time (delay scheduling); policies never read a clock
    # Network-aware placements (optional; None = unknown). `network` has
    # `factor(app, num_gpus, nodes, racks) -> float >= 1` (sim.network.NetworkModel is one);
    # `delay_timers` overrides a placement's delay timers {(sensitivity, level): seconds}
    # (the auto-tuner's current output).
    network: NetworkFactor | None = None
    delay_timers: DelayTimers | None = None
    # Overrides a backfilling placement's `reserve_after_s` (how long a blocked job waits before
    # it holds a reservation; None: the placement's own): a site's setting, in the caller's
    # clock (pald's `[policy] reserve_after_s`; a time-compressed replay scales it)
    reserve_after_s: float | None = None
    # Overrides a placement's starvation bound (policy.netaware.stages.bound: no wait it adds
    # may plan a job's start later than this long after it began waiting; None: the
    # placement's own), in the caller's clock like `reserve_after_s`
    starvation_bound_s: float | None = None
    # The queue is the site's priority order (Slurm's multifactor, the `slurm` queue order): a
    # later job may start ahead of a waiting one only as Slurm's backfill lets it (it ends, by
    # its time limit, before the waiting job's reservation, or uses none of its GPUs). A
    # backfilling placement then has every job that cannot start hold a reservation at once,
    # however many wait (no `reserve_after_s` grace, no cap): Slurm's backfill plans every
    # job it tests, not the first few (docs/policies.md, "The site's order")
    keep_order: bool = False
    # A dict the *caller* owns and passes to every round (the simulators do): non-sticky
    # placements keep the previous round's allocations there and recompute only from the first
    # job whose position changed. Explicit state, not hidden: the plan is the same with or
    # without it (tests check that); None disables it.
    memo: dict[str, Any] | None = None
    # policy.shapes.ShapeIndex: the free GPUs for `place_one`, indexed and kept in step by the
    # caller that owns the free set (pald's service: a burst of requests, microseconds each).
    # When given it is the truth and `cluster.free` may lag behind it (the caller need not
    # rebuild the view after every reservation); see `free_gpus`. None: `cluster.free`.
    shape_index: FreeShapes | None = None
    # Values derived from the run's inputs (policy.cache): the run's owner passes its own, so
    # they are made once per run; by default a context has its own (they last one plan).
    cache: RunCache = field(default_factory=RunCache)

    def free_gpus(self) -> frozenset[int] | set[int]:
        """The free GPUs `place_one` may use (the shape index's when there is one)."""
        return self.shape_index.free if self.shape_index is not None else self.cluster.free


@dataclass(frozen=True)
class Traits:
    """What callers may rely on about a placement (instead of probing its name or type)."""

    sticky: bool = False  # running jobs keep their GPUs: with nobody waiting a plan changes nothing
    randomised: bool = False  # draws from ctx.rng: the same inputs may give another plan
    tuned: bool = False  # wants ctx.delay_timers from the delay-timer auto-tuner
    backfills: bool = False  # lets later jobs pass one that does not fit (callers add no backfill)
    variability: bool = True  # reads the ranking (False: every GPU is the same to it)
    # reads running jobs' progress (remaining time, attained service: to reserve, preempt or
    # re-place); False lets the event clock skip renewing their requests at every decision
    reads_progress: bool = True
    # plans around running jobs it never moves: their GPUs stay theirs, their ends time its
    # choices (finish-aware placement, backfill reservations), so the engine hands it running
    # jobs even where they cannot move (pald under Slurm); False: they are left out there
    plans_around_running: bool = False


class PlacementPolicy(Protocol):
    """A placement: `plan` a round; `place_one` a new job (== plan([job]) when nothing runs:
    tested for every registered placement); `next_wakeup` when a waiting job's options widen
    with time alone (delay scheduling; None: never)."""

    # read-only (placements are frozen dataclasses)
    @property
    def name(self) -> str: ...

    @property
    def traits(self) -> Traits: ...

    @property
    def delay_timers(self) -> DelayTimers:  # its own {(sensitivity, level): s}; {} without delay
        ...

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan: ...

    def place_one(self, job: JobRequest, ctx: PlacementContext) -> tuple[int, ...] | None: ...

    def next_wakeup(self, order: Sequence[JobRequest], ctx: PlacementContext) -> float | None: ...


QueueOrder = Callable[[Sequence[JobRequest]], list[JobRequest]]
