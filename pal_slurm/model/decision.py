"""Outputs of decisions: one round's plan (engine, simulators, pald's cycle) and the kind of
answer pald gives the submit hook."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

JobId = int | str  # the simulator's arrival counter, a Slurm job id, or a submit request's key


@dataclass(frozen=True)
class PlannedStart:
    """When and where a plan expects a job it leaves waiting to start: a backfilling
    placement's reservation for it (`at`, in the plan's clock; `gpus`, the GPU group held for
    it then, None: anywhere in the cluster). Jobs behind it may pass only where they do not
    delay it. Reported so that an admin sees why a held job waits and what it waits for."""

    at: float
    gpus: frozenset[int] | None


@dataclass(frozen=True)
class RoundPlan:
    """What a placement policy wants done this round.

    `suspend`: running jobs to stop (preempted, or moved by a non-sticky policy).
    `launch`: job id -> GPU ids for jobs to (re)start. A job may be in both (moved).
    `planned`: job id -> the planned start of a job left waiting with a reservation.
    """

    suspend: frozenset[JobId] = field(default_factory=frozenset)
    launch: Mapping[JobId, tuple[int, ...]] = field(default_factory=dict)
    planned: Mapping[JobId, PlannedStart] = field(default_factory=dict)


class DecisionKind(str, Enum):
    """The answer pald gives the submit hook."""

    PLACE = "place"  # run now on these GPUs
    DEFER = "defer"  # hold the job; pald releases it later
    PASS = "pass"  # leave the job to Slurm untouched
