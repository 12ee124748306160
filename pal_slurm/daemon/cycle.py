"""pald's cycle for deferred jobs, the acting half: which Slurm jobs are PAL's held ones, and
carrying out the releases the engine planned (`PlacementService.plan_cycle`).

`apply_releases` is the one function that acts on Slurm, so a dry run prints exactly what
would be done. It runs without pald's lock: the releases' GPUs were reserved when they were
planned, so a submission answered meanwhile cannot be promised the same GPUs.
"""

from __future__ import annotations

import logging
from typing import Callable, Mapping

from pal_slurm.daemon.service import CycleResult, Release
from pal_slurm.daemon.tags import RELEASED_TAG, held_by_pald, with_tag
from pal_slurm.engine import Launch

log = logging.getLogger("pald.cycle")


def until_next_tick(now_s: float, cycle_s: float) -> float:
    """Seconds from `now_s` (epoch seconds) to pald's next cycle: the cycles run at the multiples
    of `cycle_s` on the epoch clock, not `cycle_s` after the last one ended, so pald's cycle has
    one phase for its whole life (a loop that waits out the rest of each cycle drifts by each
    wait's overshoot: tenths of a second within minutes in the replays). What a cycle sees of a
    job that ended tenths of a second before it turns on that phase; known, a replay's
    prediction runs the cycles pald ran (replay.harness.pald_clock). A cycle that overran waits
    for the next multiple; within a millisecond of a multiple counts as at it (a wake-up a hair
    early does not run the same tick twice). Always > 0 for `cycle_s` > 0."""
    if cycle_s <= 0:
        return 0.0
    left = cycle_s - (now_s % cycle_s)
    return left if left > 1e-3 else left + cycle_s


def is_pal_held(job) -> bool:
    """A job the hook or pald held for pald (and not, say, held by its user for other reasons):
    held, and its last hold mark is pald's defer tag, not ``pal:released`` (tags.held_by_pald:
    a job its user held after pald released it is the user's, whatever pald did before).

    The defer tag must match exactly: a substring test would let a pass reason that merely
    contains the text (``pal:pass=pal:defer``) claim the job for pald."""
    return job.held and held_by_pald(job.admin_comment)


def held_by_other(job) -> bool:
    """Held, but not by pald: its user's hold (Reason=JobHeldUser) or an operator's
    (JobHeldAdmin) made after pald released it. pald neither releases nor re-pins it."""
    return job.held and not held_by_pald(job.admin_comment)


def mark_released(actuator, job_ref, admin_comment: str | None, tag: str = RELEASED_TAG) -> None:
    """Write ``pal:released`` after pald's release (tags.py: a later hold is then someone
    else's). Only the known comment is extended (None: nothing written, never a wiped comment).
    After the release, never before: a pald dying in between leaves a released job that runs,
    not a held one marked released that nobody would release."""
    if admin_comment is None:
        return
    try:
        actuator.set_admin_comment(job_ref, with_tag(admin_comment, tag))
    except Exception as exc:  # noqa: BLE001 - the release stands; only the mark is missing
        log.warning("job %s: released, but its %s tag was not written: %s", job_ref, tag, exc)


class SlurmLauncher:
    """The engine's Actuator over pald's Slurm actuator: pin a held job to its nodes (and GPU
    slots, when its shape allows) and release it."""

    def __init__(self, actuator):
        self.actuator = actuator

    def start(self, launch: Launch) -> None:
        job_id, nodes = launch.job.job_id, list(launch.choice.nodes)
        where = {"partition": launch.partition} if launch.partition else {}
        if launch.gres_spec:
            self.actuator.place_held_job(job_id, nodes, launch.gres_spec, release=True, **where)
        else:
            self.actuator.place_nodes(job_id, nodes, release=True, **where)


def apply_releases(result: CycleResult, actuator, done: Callable[[Release], None] | None = None,
                   failed: Callable[[Release, Exception], None] | None = None,
                   comments: Mapping[int | str, str] | None = None) -> list[tuple[int | str, str]]:
    """Act on the plan: pin and release each job, then mark it released (`comments`: each held
    job's admin_comment by its scontrol name; see mark_released). Returns [(job id, error)] for
    failures; a failed job stays held and is retried next cycle (pal-failsafe releases it if
    pald dies); `failed` is where its reservation is dropped."""
    errors = []
    launcher = SlurmLauncher(actuator)
    for rel in result.releases:
        try:
            if rel.choice is None or rel.request is None:
                actuator.release(rel.job_id)
            else:
                launcher.start(Launch(rel.request, rel.choice, rel.gres_spec, rel.partition))
        except Exception as exc:  # noqa: BLE001 - one bad job must not stop the others
            errors.append((rel.job_id, str(exc)))
            log.warning("release of job %s failed: %s", rel.job_id, exc)
            if failed:
                failed(rel, exc)
            continue
        mark_released(actuator, rel.job_id, (comments or {}).get(rel.job_id))
        if done:
            done(rel)
    return errors
