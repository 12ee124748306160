"""Slurm's own job records (`JobCompType=jobcomp/filetxt`): one line per finished job.

Pure parsing. A line is space-separated KEY=VALUE fields (JobId=3 ... JobState=COMPLETED
StartTime=2026-11-23T17:29:52 EndTime=... SubmitTime=... NodeList=gpu[01-02] Name=replay-7);
times are local, whole seconds (Slurm's resolution: one wall second is `scale` trace seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pal_slurm.slurm.site import key_value_records


class JobCompError(ValueError):
    """A jobcomp line that cannot be read (the message names the line)."""


@dataclass(frozen=True)
class CompRecord:
    job_id: int
    name: str
    state: str
    submit: float  # epoch seconds
    start: float
    end: float
    nodes: str  # Slurm hostlist
    time_limit_min: int | None


def _epoch(value: str, lineno: int, key: str) -> float:
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()
    except ValueError:
        raise JobCompError(f"jobcomp line {lineno}: {key}={value!r} is not a time") from None


def parse_jobcomp(text: str) -> list[CompRecord]:
    out = []
    lines = [line for line in text.splitlines() if line.strip()]
    for lineno, fields in enumerate(key_value_records("\n".join(lines)), start=1):
        try:
            limit = fields.get("TimeLimit", "")
            out.append(CompRecord(
                job_id=int(fields["JobId"]),
                name=fields.get("Name", ""),
                state=fields["JobState"],
                submit=_epoch(fields["SubmitTime"], lineno, "SubmitTime"),
                start=_epoch(fields["StartTime"], lineno, "StartTime"),
                end=_epoch(fields["EndTime"], lineno, "EndTime"),
                nodes=fields.get("NodeList", ""),
                time_limit_min=int(limit) if limit.isdigit() else None,
            ))
        except KeyError as exc:
            raise JobCompError(f"jobcomp line {lineno}: no {exc.args[0]} field") from None
        except ValueError as exc:
            if isinstance(exc, JobCompError):
                raise
            raise JobCompError(f"jobcomp line {lineno}: {exc}") from None
    return out
