"""What a policy knows about a job."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from pal_slurm.model.shape import JobShape


@dataclass(frozen=True)
class JobRequest:
    """A job as seen by queue orders and placements.

    `running_on` is the GPU set a job holds now (empty when it waits); sticky placements keep
    it, non-sticky ones may move the job. Times are seconds on whatever clock the caller uses.
    """

    job_id: int | str  # simulator: arrival counter; Slurm: job id
    num_gpus: int  # gang size: all or nothing
    perf_class: str = "A"  # variability class (A most sensitive .. D least)
    app: str = ""  # application / model name, for reports and the network model
    submit_time: float = 0.0
    running_on: tuple[int, ...] = ()  # GPUs held now; () = not running
    attained_service: float = 0.0  # wall-clock seconds run so far (LAS, as the artifact counts it)
    remaining_time: float = 0.0  # estimated seconds left on ideal GPUs (SRTF)
    net_sensitivity: str = "medium"  # network sensitivity class (network-aware policies)
    priority: int = 999  # artifact FIFO priority field (lower sorts first)
    waiting_since: float = 0.0  # when the job last started waiting (delay scheduling); running: when it started
    preemptions: int = 0  # times the job was stopped by preemption (bounded by preempting policies)
    shape: JobShape | None = None  # how its GPUs must be spread (Slurm shapes); None: num_gpus anywhere
    gpu_model: str | None = None  # only GPUs of this model (--gres=gpu:a100:2); None: any GPU
    site_priority: float = 0.0  # Slurm's multifactor priority as pald computes it (model.priority); higher first

    @property
    def is_running(self) -> bool:
        return bool(self.running_on)

    def started_on(self, gpus: Sequence[int], since: float) -> "JobRequest":
        """The job as if it had started on `gpus` at `since`: how a placement that plans around
        running jobs sees one that holds GPUs Slurm has not started it on yet (pald's promises,
        a launch planned earlier in the same cycle), so those GPUs free at its end, not never."""
        return replace(self, num_gpus=len(gpus), running_on=tuple(gpus), waiting_since=since)

    def evolved(self, *, running_on: tuple[int, ...], attained_service: float, remaining_time: float,
                waiting_since: float, preemptions: int) -> "JobRequest":
        """`dataclasses.replace(self, ...)` for the fields that change as a job runs (all of
        them, by keyword), built without the dataclass __init__ (which sets 13 frozen fields
        one by one, several microseconds) and without a dict of changes: the event simulator
        renews every running job's request at every decision, millions of times in a large run."""
        state = self.__dict__.copy()
        state["running_on"] = running_on
        state["attained_service"] = attained_service
        state["remaining_time"] = remaining_time
        state["waiting_since"] = waiting_since
        state["preemptions"] = preemptions
        out = object.__new__(JobRequest)
        object.__setattr__(out, "__dict__", state)
        return out
