"""Job ids as Slurm writes them: `1234`, `1234_5` (task 5 of array job 1234), `1234+1`
(component 1 of heterogeneous job 1234). One parser, so that no command reads `1234_5` as a
number (Python's int() accepts underscores and would give 12345)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pal_slurm.intake.slurm_numbers import NO_VAL

MAX_TEXT = 32
_JOB_ID = re.compile(r"([1-9][0-9]{0,9})(?:_([0-9]{1,10})|\+([0-9]{1,5}))?")
_MAX_ID = NO_VAL - 1  # Slurm's job ids are 32-bit, below its unset marker


class JobIdError(ValueError):
    """Text that is not one Slurm job id."""


@dataclass(frozen=True)
class JobRef:
    """One job: a plain id, an array task (array_job_id, array_task) or a het component."""

    job_id: int
    array_task: int | None = None
    het_offset: int | None = None

    def __str__(self) -> str:
        if self.array_task is not None:
            return f"{self.job_id}_{self.array_task}"
        if self.het_offset is not None:
            return f"{self.job_id}+{self.het_offset}"
        return str(self.job_id)


def parse_job_id(text: str) -> JobRef:
    """`1234` / `1234_5` / `1234+1` -> JobRef; JobIdError for anything else (ranges included)."""
    t = text.strip() if isinstance(text, str) else ""
    m = _JOB_ID.fullmatch(t) if len(t) <= MAX_TEXT else None
    if m is None:
        hint = " (one array task, not a range)" if "[" in t or "-" in t or "," in t else ""
        raise JobIdError(f"not a Slurm job id: {str(text)[:MAX_TEXT]!r}{hint}; use 1234, 1234_5 for task 5 of "
                         "array job 1234, or 1234+1 for component 1 of heterogeneous job 1234")
    job, task, het = m.groups()
    values = [int(v) for v in (job, task, het) if v is not None]
    if any(v > _MAX_ID for v in values):
        raise JobIdError(f"not a Slurm job id: {text!r} (a number over Slurm's 32-bit job ids)")
    return JobRef(int(job), None if task is None else int(task), None if het is None else int(het))
