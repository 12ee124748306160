"""A small mixed workload of two accounts on the accounting lab (2 nodes x 4 GPUs), run as
PAL jobs under pald or as ordinary jobs under stock Slurm: when each job started and on which
GPUs, and pald's log of the order it released them in. What the lab test of the site's order
(tests/integration/test_slurm_priority_lab.py) and its benchmark (benchmarks/site_order_waits.py)
share.

Every job is submitted while an exclusive job of the heavy account holds the whole cluster, so
all of them wait (a PAL job is held by the hook) and, once it is cancelled (`t0`), Slurm's
priority (or pald's copy of it) decides who goes first. The blocker also charges the heavy
account's fair share, so the accounts keep their order run after run.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pal_lab.lab import LabCluster

# (account, shape, time limit in minutes, seconds it sleeps): sizes 1..8 GPUs, one node or two,
# limits of one and two minutes; light's and heavy's jobs interleaved in submit order
WORKLOAD: tuple[tuple[str, tuple[str, ...], int, int], ...] = (
    ("heavy", ("--gres=gpu:4",), 2, 8),
    ("light", ("-N", "2", "--gres=gpu:4"), 2, 8),
    ("heavy", ("-N", "2", "--gres=gpu:2"), 1, 10),
    ("light", ("--gres=gpu:2",), 1, 12),
    ("heavy", ("--gres=gpu:1",), 1, 6),
    ("light", ("--gres=gpu:1",), 1, 6),
    ("heavy", ("--gres=gpu:2",), 1, 12),
    ("light", ("--gres=gpu:3",), 2, 10),
)
PAL_COMMENT = "--comment=pal:class=resnet"
PALD_SEES_S = 2.0  # time for pald's next Slurm read (a cycle every 0.3 s) to show a new job running


@dataclass(frozen=True)
class Ran:
    """One job as Slurm ran it."""

    job_id: int
    account: str
    limit_s: float
    start: int  # epoch seconds (Slurm's StartTime)
    gpus: frozenset[tuple[str, int]]  # (node, GPU index) it held


@dataclass
class WorkloadRun:
    t0: float  # when the blocker was cancelled: every job's wait counts from here
    jobs: dict[int, Ran] = field(default_factory=dict)

    def waits(self, account: str) -> list[float]:
        return [max(0.0, r.start - self.t0) for r in self.jobs.values() if r.account == account]

    def mean_wait(self, account: str) -> float:
        return statistics.mean(self.waits(account))

    def wait_ratio(self) -> float:
        """The heavy account's mean wait over the light account's."""
        return self.mean_wait("heavy") / self.mean_wait("light")


def run_workload(lab: LabCluster, pal: bool, sleep_scale: float = 1.0, timeout: float = 150.0) -> WorkloadRun:
    """Submit WORKLOAD behind an exclusive heavy job (`pal`: as PAL jobs, which the hook defers
    to pald; else ordinary jobs, which neither the hook nor pald touch), cancel it once every
    job waits, and follow each job until it ends. `sleep_scale`: each job sleeps this many
    times as long (its time limit unchanged)."""
    env = lab.client_env()
    blocker = lab.sbatch("--account=heavy", "--exclusive", "-N", "2", "--gres=gpu:4", wrap="sleep 600")
    lab.wait_job(blocker, timeout=30, states={"RUNNING"})
    if pal:
        time.sleep(PALD_SEES_S)  # else the hook asks pald on a view without the blocker
    ids: dict[int, tuple[str, float]] = {}
    for account, shape, limit_min, sleep_s in WORKLOAD:
        extra = (PAL_COMMENT,) if pal else ()
        job = lab.sbatch(f"--account={account}", *shape, "-t", str(limit_min), *extra, wrap=f"sleep {sleep_s * sleep_scale:g}")
        ids[job] = (account, limit_min * 60.0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen = {j.job_id: j for j in lab.reader.jobs()}
        if all(j in seen and seen[j].pending and (seen[j].held or not pal) for j in ids):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"not every job waits behind the blocker: {seen}")
    time.sleep(1.5)  # pald's cycle has read them all (and Slurm has scored them)
    subprocess.run(["scancel", str(blocker)], env=env, check=True)
    out = WorkloadRun(time.time())
    deadline = time.monotonic() + timeout * sleep_scale
    while len(out.jobs) < len(ids) and time.monotonic() < deadline:
        for j in lab.reader.jobs():
            if j.job_id in ids and j.job_id not in out.jobs and j.state == "RUNNING" and j.gpu_slots:
                account, limit_s = ids[j.job_id]
                gpus = frozenset((node, slot) for node, slots in j.gpu_slots.items() for slot in slots)
                out.jobs[j.job_id] = Ran(j.job_id, account, limit_s, j.start_time, gpus)
        time.sleep(0.25)
    missing = set(ids) - set(out.jobs)
    assert not missing, f"jobs never seen running: {missing}"
    for job in ids:
        lab.wait_job(job, timeout=timeout * sleep_scale)
    return out


@dataclass(frozen=True)
class Ranked:
    """One held job in a line of pald's site order (daemon.cycle.site_order_line)."""

    job_id: int
    priority: int
    released: bool
    planned_in_s: float | None = None  # its reservation's planned start, seconds after the cycle
    reserved: frozenset[tuple[str, int]] | None = None  # the GPUs it holds then; None: anywhere


_WORD = re.compile(r"^(\d+)=(-?\d+)(\+|@(-?\d+)\[([^\]]*)\])?$")


def site_order_lines(log: Path, offset: int = 0) -> list[list[Ranked]]:
    """pald's `site order:` lines in `log` from byte `offset` on, each parsed."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    out = []
    for line in text.splitlines():
        if "site order: " not in line:
            continue
        row = []
        for word in line.split("site order: ", 1)[1].split():
            m = _WORD.match(word)
            if m is None:
                continue  # "(+N more)"
            job, prio, mark, at, where = m.groups()
            reserved = None
            if at is not None and where != "any":
                reserved = frozenset((node, int(slot)) for part in where.split(";")
                                     for node, slots in [part.split(":")] for slot in slots.split("."))
            row.append(Ranked(int(job), int(prio), mark == "+", float(at) if at is not None else None, reserved))
        out.append(row)
    return out
