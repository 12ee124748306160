"""Queue orders: which job next. Pure, stable sorts (ties keep the input order)."""

from __future__ import annotations

from operator import attrgetter
from typing import Sequence

from pal_slurm.model import JobRequest


def fifo(jobs: Sequence[JobRequest]) -> list[JobRequest]:
    """By (priority, submit time): the artifact's FIFO."""
    return sorted(jobs, key=_FIFO_KEY)


_FIFO_KEY = attrgetter("priority", "submit_time")  # (C-level: the simulator sorts every event)


def las(jobs: Sequence[JobRequest]) -> list[JobRequest]:
    """Least attained service first (wall-clock seconds run, as the artifact counts it)."""
    return sorted(jobs, key=lambda j: j.attained_service)


def srtf(jobs: Sequence[JobRequest]) -> list[JobRequest]:
    """Shortest remaining time first (estimated seconds left on ideal GPUs)."""
    return sorted(jobs, key=lambda j: j.remaining_time)
