"""What a policy knows about a job."""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def is_running(self) -> bool:
        return bool(self.running_on)

    def progressed(self, attained_service: float, remaining_time: float) -> "JobRequest":
        """The same request after the job ran a while: only its service and time left change.

        Built without the dataclass __init__ (which sets 13 frozen fields one by one): the
        event simulator renews every running job's request at every decision."""
        out = object.__new__(JobRequest)
        object.__setattr__(out, "__dict__", {**self.__dict__, "attained_service": attained_service,
                                             "remaining_time": remaining_time})
        return out
