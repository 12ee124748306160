"""The two policy axes (as Flux's Fluxion separates them) and the context they get.

- A queue order decides *which job next*: a pure function of the pending/running jobs.
- A placement decides *which GPUs*: given the ordered jobs, the cluster (with its free GPUs
  *excluding* those held by running jobs), the ranking snapshot and an RNG, it returns a
  RoundPlan. It never mutates its inputs and performs no I/O.

Randomness comes only from the `rng` passed in (a `random.Random`): the same seed gives the
same plan, and the simulator can hand over the artifact's exact RNG stream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

from pal_slurm.model import ClusterView, JobRequest, RoundPlan
from pal_slurm.ranking import Ranking


@dataclass(frozen=True)
class PlacementContext:
    """Everything a placement may look at besides the jobs."""

    cluster: ClusterView  # free = GPUs not held by any running job
    ranking: Ranking
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    locality_penalty: float = 1.7  # PAL's across-node weight in the L x V order
    now: float = 0.0  # current time (delay scheduling); policies never read a clock
    # Network-aware placements (optional; None = unknown). `network` is duck-typed: it has
    # `factor(app, num_gpus, nodes, racks) -> float >= 1` (sim.network.NetworkModel is one);
    # `delay_timers` overrides a placement's delay timers {(sensitivity, level): seconds}
    # (the auto-tuner's current output).
    network: object | None = None
    delay_timers: Mapping | None = None
    # A dict the *caller* owns and passes to every round (the simulators do): non-sticky
    # placements keep the previous round's allocations there and recompute only from the first
    # job whose position changed. Explicit state, not hidden: the plan is the same with or
    # without it (tests check that); None disables it.
    memo: dict | None = None


class PlacementPolicy(Protocol):
    name: str

    def plan(self, order: Sequence[JobRequest], ctx: PlacementContext) -> RoundPlan: ...


QueueOrder = Callable[[Sequence[JobRequest]], list[JobRequest]]
