"""Batch jobs palctl submits for itself: a job array and a job that waits for it.

`sbatch_argv` builds the command line (pure, so its every option is unit-tested); `BatchSubmitter`
runs it through the package's one `Runner` and reads the job id `--parsable` prints, and reads an
array's elements back from squeue (through `SlurmReader`). The site's own choices (partition,
account, time limit, how many elements may run at once) pass through unchanged: sbatch and the
site's limits judge them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pal_slurm.intake.durations import format_duration
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.readers import SlurmReader, array_task_ids
from pal_slurm.slurm.runner import Runner

SUBMIT_TIMEOUT_S = 60.0  # sbatch waits for slurmctld, which may be busy


@dataclass(frozen=True)
class SiteOptions:
    """What the site asks every job of the sweep to carry (None: Slurm's default)."""

    partition: str | None = None
    account: str | None = None
    time_s: float | None = None  # the time limit of each job, seconds

    def argv(self) -> list[str]:
        out = []
        if self.partition:
            out.append(f"--partition={self.partition}")
        if self.account:
            out.append(f"--account={self.account}")
        if self.time_s is not None:
            out.append(f"--time={format_duration(max(60.0, self.time_s))}")  # Slurm counts whole minutes
        return out


def sbatch_argv(script: str, *, job_name: str, output: str, chdir: str, site: SiteOptions,
                array_size: int | None = None, throttle: int | None = None,
                after_ok: int | None = None) -> list[str]:
    """sbatch's command line: an array of `array_size` elements (0..size-1, at most `throttle`
    running at once), or one job that starts once job `after_ok` ended with every element
    successful (and is cancelled if one failed: it would wait forever otherwise)."""
    argv = ["sbatch", "--parsable", f"--job-name={job_name}", f"--output={output}", f"--chdir={chdir}", *site.argv()]
    if array_size is not None:
        if array_size < 1:
            raise ValueError("an array needs at least one element")
        argv.append(f"--array=0-{array_size - 1}" + (f"%{throttle}" if throttle else ""))
    if after_ok is not None:
        argv += [f"--dependency=afterok:{after_ok}", "--kill-on-invalid-dep=yes"]
    return [*argv, script]


def parse_job_id_line(out: str) -> int:
    """`sbatch --parsable` prints `ID` or `ID;CLUSTER`."""
    head = out.strip().split(";")[0]
    if not head.isdigit():
        raise SlurmParseError(f"sbatch printed {out.strip()[:80]!r}, not a job id")
    return int(head)


class BatchSubmitter:
    """Submits palctl's own batch jobs and reads their elements' states."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.reader = SlurmReader(runner)

    def submit(self, argv: Sequence[str]) -> int:
        """Runs an `sbatch_argv` command line; the job id."""
        return parse_job_id_line(self.runner.run(list(argv), timeout=SUBMIT_TIMEOUT_S))

    def states(self, array_job_id: int, job_id: int | None = None) -> tuple[dict[int, str], str | None]:
        """(element -> squeue state of each element of array `array_job_id` that squeue still
        lists, the squeue state of job `job_id` or None when it is not listed), from one squeue."""
        elements: dict[int, str] = {}
        state = None
        for job in self.reader.jobs():
            if job.array_job_id == array_job_id:
                if job.array_task_id is not None:
                    elements[job.array_task_id] = job.state
                elif job.array_tasks:  # one record of several pending elements
                    elements.update((i, job.state) for i in array_task_ids(job.array_tasks))
            elif job_id is not None and job.job_id == job_id:
                state = job.state
        return elements, state

    def cancel(self, job_id: int) -> None:
        """scancel a job palctl submitted (a sweep whose merge job could not be submitted)."""
        self.runner.run(["scancel", str(job_id)])
