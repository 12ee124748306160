"""pald's hands on Slurm: the engine's Actuator (`SlurmLauncher.start`) over the Slurm
actuator, `apply_releases` (a cycle's plan carried out), and `JobControl`, the few other job commands pald's cycle uses (hold, release as
submitted, unpin, its tags). Both are slurm.actuator.SlurmActuator in pald, fakes in tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
import logging
from typing import Protocol

from pal_slurm.intake.tags import RELEASED_TAG, with_tag
from pal_slurm.engine import Actuator, Launch
from pal_slurm.engine.held import CycleResult, Release

log = logging.getLogger("pald.cycle")  # the release it marks is the cycle's (and pal-failsafe's)

JobRef = int | str  # a job id, or ``A_I``: one element of an array (slurm.actuator.JobRef)


class JobControl(Protocol):
    """The Slurm job commands pald runs (slurm.actuator.SlurmActuator's)."""

    def hold(self, job_id: JobRef) -> None: ...

    def hold_many(self, job_ids: Iterable[JobRef]) -> None: ...

    def release(self, job_id: JobRef) -> None: ...

    def unpin(self, job_id: JobRef) -> None: ...

    def set_admin_comment(self, job_id: JobRef, text: str) -> None: ...

    def place_held_job(self, job_id: JobRef, nodes: Sequence[str], gres_spec: str | None,
                       release: bool = ..., partition: str | None = ...) -> None: ...

    def place_nodes(self, job_id: JobRef, nodes: Sequence[str], release: bool = ...,
                    partition: str | None = ...) -> None: ...


class SlurmLauncher:
    """The engine's Actuator on Slurm: pin a held job to its nodes (and GPU slots, when its
    shape allows) and release it."""

    def __init__(self, actuator: JobControl) -> None:
        self.actuator = actuator

    def start(self, launch: Launch) -> None:
        job_id, nodes = launch.job.job_id, list(launch.choice.nodes)
        if launch.gres_spec:
            self.actuator.place_held_job(job_id, nodes, launch.gres_spec, release=True, partition=launch.partition)
        else:
            self.actuator.place_nodes(job_id, nodes, release=True, partition=launch.partition)


def mark_released(actuator: JobControl, job_ref: JobRef, admin_comment: str | None,
                  tag: str = RELEASED_TAG) -> None:
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


def apply_releases(result: CycleResult, actuator: JobControl, done: Callable[[Release], None] | None = None,
                   failed: Callable[[Release, Exception], None] | None = None,
                   comments: Mapping[JobRef, str] | None = None,
                   launcher: Actuator | None = None) -> list[tuple[JobRef, str]]:
    """Act on the plan: start each placed job through the engine's Actuator (`launcher`; by
    default pald's, over `actuator`) with the Launch the engine built, release one planned
    untouched as submitted, then mark it
    released (`comments`: each held job's admin_comment by its scontrol name; see
    mark_released). Returns [(job id, error)] for failures; a failed job stays held and is
    retried next cycle (pal-failsafe releases it if pald dies); `failed` is where its
    reservation is dropped."""
    errors = []
    launcher = launcher or SlurmLauncher(actuator)
    for rel in result.releases:
        try:
            if rel.launch is None:
                actuator.release(rel.job_id)
            else:
                launcher.start(rel.launch)
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
