"""slurmctld's log: when Slurm started each job, to the millisecond (pure parsing).

Slurm's job records (jobcomp) keep whole seconds, and a replay compresses time (one wall second
is `scale` trace seconds), so the instant a job was started comes from the log line of the
scheduler that started it, stamped in milliseconds (LogTimeFormat's default, iso8601_ms):

    [2026-11-24T05:47:11.022] sched/backfill: _start_job: Started JobId=1 in gpu on gpu01
    [2026-11-24T05:50:52.004] sched: Allocate JobId=8 NodeList=gpu[13-16] #CPUs=4 Partition=gpu

(the same on Slurm 22.05 and 24.11). Times are the host's local time, like jobcomp's.
"""

from __future__ import annotations

import re
from datetime import datetime

_START = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] "
                    r"(?:sched/backfill: _start_job: Started JobId=(\d+)|sched: Allocate JobId=(\d+))")


def slurm_starts(text: str) -> dict[int, tuple[float, str]]:
    """{job id: (epoch seconds, "backfill" | "main")}: when and by which scheduler Slurm
    started each job (its first start: a requeued job keeps its first)."""
    out: dict[int, tuple[float, str]] = {}
    for line in text.splitlines():
        m = _START.match(line)
        if not m:
            continue
        job_id = int(m.group(2) or m.group(3))
        out.setdefault(job_id, (datetime.fromisoformat(m.group(1)).timestamp(),
                                "backfill" if m.group(2) else "main"))
    return out
