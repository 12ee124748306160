"""Where the jobs of the trial ran, and for how long: the other half of what pald recorded at
their submission (daemon/requests.py).

A job in a `shadow` partition carries the hook's ``pal:pass=shadow;...;req=<id>`` tag; one PAL
placed (at submission, or released from its hold onto its placement) ``pal:placed=...`` or
``pal:released``. Each Slurm read, such a job seen running for the first time gets a
``shadow_started:`` / ``pal_started:`` record (its GPUs by node, as Slurm allocated them), and
one seen ended after that a ``shadow_ended:`` / ``pal_ended:`` record (its run time).
`palctl trial report` joins them by the request id: what PAL would have done against what
Slurm did, and what PAL did. Runs on the cycle's worker thread; its memory is its own (bounded:
a job whose end pald never sees is forgotten with the oldest)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from pal_slurm.daemon.state import DaemonState
from pal_slurm.intake.tags import FAILSAFE_RELEASE, PLACED_PREFIX, RELEASED_TAG, last_mark, request_id
from pal_slurm.model import DecisionKind
from pal_slurm.model.modes import PAL_ENDED, PAL_STARTED, SHADOW_ENDED, SHADOW_STARTED
from pal_slurm.slurm.readers import JobInfo

SHADOW_TAG = "pal:pass=shadow"
ENDED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE"})
MAX_TRACKED = 100_000


def is_shadow_job(job: JobInfo) -> bool:
    return any(word.startswith(SHADOW_TAG) for word in (job.admin_comment or "").split())


def record_kind(job: JobInfo) -> tuple[str, str] | None:
    """(started prefix, ended prefix) of a job the trial follows, None for any other."""
    if is_shadow_job(job):
        return SHADOW_STARTED, SHADOW_ENDED
    mark = last_mark(job.admin_comment) or ""
    if mark.startswith(PLACED_PREFIX) or (mark.split(";", 1)[0] == RELEASED_TAG and mark != FAILSAFE_RELEASE):
        return PAL_STARTED, PAL_ENDED
    return None


class ShadowWatch:
    def __init__(self, state: DaemonState) -> None:
        self.state = state
        # job id -> (request id, start time, ended prefix), jobs seen running and not yet seen ended
        self.running: OrderedDict[int, tuple[str, int, str]] = OrderedDict()

    def observe(self, jobs: Iterable[JobInfo], now: float) -> None:
        """One Slurm read (`now`: when it was made). A tracked job the read no longer lists
        (Slurm dropped its record) ended by then: its run time is counted to `now`."""
        seen: set[int] = set()
        for job in jobs:
            seen.add(job.job_id)
            if job.job_id in self.running:
                if job.state in ENDED:
                    rid, _, ended = self.running.pop(job.job_id)
                    if job.end_time and job.start_time and job.end_time >= job.start_time:
                        self._ended(job.job_id, rid, job.end_time - job.start_time, ended)
                continue
            if job.state != "RUNNING" or not job.gpu_slots:
                continue
            kind = record_kind(job)
            request = request_id(job.admin_comment) if kind else None
            if kind is None or request is None:
                continue
            started, ended = kind
            self.running[job.job_id] = (request, job.start_time, ended)
            if len(self.running) > MAX_TRACKED:
                self.running.popitem(last=False)
            nodes = {node: tuple(sorted(slots)) for node, slots in job.gpu_slots.items()}
            wait_s = max(0, job.start_time - job.submit_time) if job.start_time and job.submit_time else ""
            self.state.record(str(job.job_id), DecisionKind.PASS,
                              f"{started}req={request};partition={job.partition};wait_s={wait_s}", nodes, None)
        for job_id in [j for j in self.running if j not in seen]:
            rid, start, ended = self.running.pop(job_id)
            if start and now >= start:
                self._ended(job_id, rid, now - start, ended)

    def _ended(self, job_id: int, rid: str, run_s: float, prefix: str) -> None:
        self.state.record(str(job_id), DecisionKind.PASS, f"{prefix}req={rid};run_s={run_s:.0f}", None, None)
