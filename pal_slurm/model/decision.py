"""Outputs of policies: one round's plan (simulator / pald cycle) and one submit-time decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping


@dataclass(frozen=True)
class Placement:
    """Where one job goes: GPU ids of a ClusterView."""

    job_id: int | str
    gpu_ids: tuple[int, ...]


@dataclass(frozen=True)
class RoundPlan:
    """What a placement policy wants done this round.

    `suspend`: running jobs to stop (preempted, or moved by a non-sticky policy).
    `launch`: job id -> GPU ids for jobs to (re)start. A job may be in both (moved).
    """

    suspend: frozenset = field(default_factory=frozenset)
    launch: Mapping = field(default_factory=dict)


class DecisionKind(str, Enum):
    """The answer pald gives the submit hook."""

    PLACE = "place"  # run now on these GPUs
    DEFER = "defer"  # hold the job; pald releases it later
    PASS = "pass"  # leave the job to Slurm untouched


@dataclass(frozen=True)
class Decision:
    """A submit-time answer. `nodes`/`slots` only for PLACE: {node name: [slots]}."""

    kind: DecisionKind
    reason: str = ""
    nodes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    ranking_version: int | None = None
    perf_class: str | None = None
