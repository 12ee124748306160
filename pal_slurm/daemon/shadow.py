"""Where Slurm ran the jobs pald only shadowed, and for how long: the other half of a shadow
record (daemon/requests.py records what pald would have done when the job was submitted).

A job in a `shadow` partition carries the hook's ``pal:pass=shadow;...;req=<id>`` tag. Each
Slurm read, a shadow job seen running for the first time gets a ``shadow_started:`` record (its
GPUs by node, as Slurm allocated them), and one seen ended after that a ``shadow_ended:``
record (its run time). `palctl trial report` joins the three by the request id. Runs on the
cycle's worker thread; its memory is its own (bounded: a job whose end pald never sees is
forgotten with the oldest)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from pal_slurm.daemon.state import DaemonState
from pal_slurm.daemon.tags import request_id
from pal_slurm.model import DecisionKind
from pal_slurm.model.modes import SHADOW_ENDED, SHADOW_STARTED
from pal_slurm.slurm.readers import JobInfo

SHADOW_TAG = "pal:pass=shadow"
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE"})
MAX_TRACKED = 100_000


def is_shadow_job(job: JobInfo) -> bool:
    return any(word.startswith(SHADOW_TAG) for word in (job.admin_comment or "").split())


class ShadowWatch:
    def __init__(self, state: DaemonState) -> None:
        self.state = state
        # job id -> (request id, start time), jobs seen running and not yet seen ended
        self.running: OrderedDict[int, tuple[str, int]] = OrderedDict()

    def observe(self, jobs: Iterable[JobInfo], now: float) -> None:
        """One Slurm read (`now`: when it was made). A tracked job the read no longer lists
        (Slurm dropped its record) ended by then: its run time is counted to `now`."""
        seen: set[int] = set()
        for job in jobs:
            seen.add(job.job_id)
            if job.job_id in self.running:
                if job.state in ENDED:
                    rid, _ = self.running.pop(job.job_id)
                    if job.end_time and job.start_time and job.end_time >= job.start_time:
                        self._ended(job.job_id, rid, job.end_time - job.start_time)
                continue
            if job.state == "RUNNING" and job.gpu_slots and is_shadow_job(job):
                request = request_id(job.admin_comment)
                if request is None:
                    continue
                self.running[job.job_id] = (request, job.start_time)
                if len(self.running) > MAX_TRACKED:
                    self.running.popitem(last=False)
                nodes = {node: tuple(sorted(slots)) for node, slots in job.gpu_slots.items()}
                self.state.record(str(job.job_id), DecisionKind.PASS,
                                  f"{SHADOW_STARTED}req={request};partition={job.partition}", nodes, None)
        for job_id in [j for j in self.running if j not in seen]:
            rid, start = self.running.pop(job_id)
            if start and now >= start:
                self._ended(job_id, rid, now - start)

    def _ended(self, job_id: int, rid: str, run_s: float) -> None:
        self.state.record(str(job_id), DecisionKind.PASS, f"{SHADOW_ENDED}req={rid};run_s={run_s:.0f}", None, None)
