"""A small mixed workload of two accounts on the accounting lab (2 nodes x 4 GPUs), run as
PAL jobs under pald or as ordinary jobs under stock Slurm: when each job started and on which
GPUs, and pald's log of the order it released them in. What the lab test of the site's order
(tests/integration/test_slurm_priority_lab.py) and its benchmark (benchmarks/site_order_waits.py)
share.

Every job is submitted while an exclusive job of the heavy account holds the whole cluster, so
all of them wait (a PAL job is held by the hook) and, once it is cancelled (`t0`), Slurm's
priority (or pald's copy of it) decides who goes first. The blocker also charges the heavy
account's fair share, so the accounts keep their order run after run. The workload may also
run mixed (MIXED_PAL: some jobs PAL, the others ordinary); while it runs, Slurm's plan for
every waiting job is read (`squeue --start`'s priority, planned start and nodes), from which
`ordinary_passes` finds each job that started ahead of an ordinary job of higher priority and
whether Slurm's backfill allows that.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from pal_lab.lab import LabCluster
from pal_slurm.intake.hostlist import expand

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
# the workload's jobs that are PAL jobs when it runs mixed: light's 8- and 2-GPU jobs, heavy's 1-
# and 2-GPU jobs. The ordinary ones (heavy's whole-node and 2-node jobs, light's 1- and 3-GPU
# jobs) take the cluster first, heavy's 2-node job waits with a reservation, and heavy's small
# PAL jobs, of lower priority, are released into the gaps before it: what Slurm's backfill
# must allow
MIXED_PAL = frozenset({1, 3, 4, 6})
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
    index: int = 0  # its place in WORKLOAD
    pal: bool = False  # submitted as a PAL job

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for node, _ in self.gpus)


@dataclass(frozen=True)
class Plan:
    """Slurm's plan for one waiting (not held) job at one read of `squeue --start`."""

    seen: float  # epoch seconds of the read
    priority: int
    start: int | None  # when Slurm's backfill plans to start it; None: not planned (N/A)
    nodes: frozenset[str] | None  # the nodes planned for it (SchedNodes); None: not named


def read_plans(env: dict[str, str]) -> dict[int, Plan]:
    """job -> Slurm's plan, for every pending job that is not held (priority 0)."""
    out = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i|%Q|%S|%Y"], env=env, capture_output=True,
                         text=True, check=True).stdout
    seen = time.time()
    plans = {}
    for line in out.splitlines():
        job, prio, start, nodes = line.split("|")
        if not job.isdigit() or int(prio) == 0:
            continue
        # squeue prints local time, as time.mktime reads it
        at = int(time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S"))) if start[:1].isdigit() else None
        named = frozenset(expand(nodes)) if nodes and nodes not in ("(null)", "N/A") else None
        plans[int(job)] = Plan(seen, int(prio), at, named)
    return plans


@dataclass
class WorkloadRun:
    t0: float  # when the blocker was cancelled: every job's wait counts from here
    jobs: dict[int, Ran] = field(default_factory=dict)
    plans: dict[int, list[Plan]] = field(default_factory=dict)  # job -> Slurm's plans, in read order
    # job -> its priority while the blocker ran (ordinary jobs; the plans from then, and the
    # same plans read again until Slurm re-plans the job, count the blocker: they are not kept)
    waited_with: dict[int, int] = field(default_factory=dict)

    def wait(self, job: int) -> float:
        return max(0.0, self.jobs[job].start - self.t0)

    def by_index(self) -> dict[int, Ran]:
        """WORKLOAD index -> the job that ran it."""
        return {r.index: r for r in self.jobs.values()}

    def last_priority(self, job: int) -> int | None:
        """`job`'s priority in Slurm's last plan for it (read while it waited unheld; None: never
        read so, a PAL job Slurm started at its release)."""
        plans = self.plans.get(job)
        return plans[-1].priority if plans else self.waited_with.get(job)

    def plan_at(self, job: int, t: float) -> Plan | None:
        """Slurm's last plan for `job` read by `t` (None: none read by then)."""
        return next((p for p in reversed(self.plans.get(job, [])) if p.seen <= t), None)

    def waits(self, account: str) -> list[float]:
        return [max(0.0, r.start - self.t0) for r in self.jobs.values() if r.account == account]

    def mean_wait(self, account: str) -> float:
        return statistics.mean(self.waits(account))

    def wait_ratio(self) -> float:
        """The heavy account's mean wait over the light account's."""
        return self.mean_wait("heavy") / self.mean_wait("light")


def run_workload(lab: LabCluster, pal: bool | frozenset[int], sleep_scale: float = 1.0,
                 timeout: float = 150.0) -> WorkloadRun:
    """Submit WORKLOAD behind an exclusive heavy job (`pal`: True, as PAL jobs, which the hook
    defers to pald; False, as ordinary jobs, which neither the hook nor pald touch; a set of
    WORKLOAD indices, those as PAL jobs and the others ordinary), cancel it once every job
    waits, and follow each job until it ends. `sleep_scale`: each job sleeps this many times as
    long (its time limit unchanged)."""
    env = lab.client_env()
    as_pal = [pal if isinstance(pal, bool) else i in pal for i in range(len(WORKLOAD))]
    blocker = lab.sbatch("--account=heavy", "--exclusive", "-N", "2", "--gres=gpu:4", wrap="sleep 600")
    lab.wait_job(blocker, timeout=30, states={"RUNNING"})
    if any(as_pal):
        time.sleep(PALD_SEES_S)  # else the hook asks pald on a view without the blocker
    ids: dict[int, tuple[str, float, int]] = {}
    for i, (account, shape, limit_min, sleep_s) in enumerate(WORKLOAD):
        extra = (PAL_COMMENT,) if as_pal[i] else ()
        job = lab.sbatch(f"--account={account}", *shape, "-t", str(limit_min), *extra, wrap=f"sleep {sleep_s * sleep_scale:g}")
        ids[job] = (account, limit_min * 60.0, i)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen = {j.job_id: j for j in lab.reader.jobs()}
        if all(j in seen and seen[j].pending and seen[j].held == as_pal[ids[j][2]] for j in ids):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"not every job waits behind the blocker: {seen}")
    time.sleep(1.5)  # pald's cycle has read them all (and Slurm has scored them)
    before = read_plans(env)  # every waiting ordinary job's priority before the first starts
    subprocess.run(["scancel", str(blocker)], env=env, check=True)
    out = WorkloadRun(time.time(), waited_with={job: plan.priority for job, plan in before.items() if job in ids})
    deadline = time.monotonic() + timeout * sleep_scale
    while len(out.jobs) < len(ids) and time.monotonic() < deadline:
        for job, plan in read_plans(env).items():
            # until Slurm re-plans a job after the blocker, its plan still counts the blocker
            stale = job in before and (plan.start, plan.nodes) == (before[job].start, before[job].nodes)
            if job in ids and not stale:
                out.plans.setdefault(job, []).append(plan)
        for j in lab.reader.jobs():
            if j.job_id in ids and j.job_id not in out.jobs and j.state == "RUNNING" and j.gpu_slots:
                account, limit_s, i = ids[j.job_id]
                gpus = frozenset((node, slot) for node, slots in j.gpu_slots.items() for slot in slots)
                out.jobs[j.job_id] = Ran(j.job_id, account, limit_s, j.start_time, gpus, i, as_pal[i])
        time.sleep(0.25)
    missing = set(ids) - set(out.jobs)
    assert not missing, f"jobs never seen running: {missing}"
    for job in ids:
        lab.wait_job(job, timeout=timeout * sleep_scale)
    return out


NOT_BACKFILL = "NOT BACKFILL"


@dataclass(frozen=True)
class Pass:
    """A job that started before an ordinary job of higher priority, and why Slurm let it."""

    ahead: int
    behind: int  # the ordinary job
    why: str  # "ends by its planned start", "off its planned nodes" or NOT_BACKFILL


def ordinary_passes(run: WorkloadRun, priority: Mapping[int, int], slack_s: float) -> list[Pass]:
    """Every job X of `run` that started before an ordinary job O waiting with a higher
    priority, judged by Slurm's plan for O as last read before X started (a later read may
    already count X in): the pass is one Slurm's backfill allows if X, held to its time limit,
    ends by O's planned start (within `slack_s`), or it runs on none of the nodes planned for
    O. `priority`: each job's priority when it started (for a PAL job Slurm shows none while it
    is held: the one pald computed). A pass before any plan of O was read after the blocker
    ended (in its first second or so: Slurm's start times are whole seconds) is not judged."""
    out = []
    for o in run.jobs.values():
        if o.pal:
            continue
        for x in run.jobs.values():
            if x.start >= o.start:
                continue
            plan = run.plan_at(o.job_id, x.start)
            if plan is None or priority[x.job_id] >= plan.priority:
                continue
            if plan.start is not None and x.start + x.limit_s <= plan.start + slack_s:
                why = "ends by its planned start"
            elif plan.nodes is not None and not (x.nodes & plan.nodes):
                why = "off its planned nodes"
            else:
                why = NOT_BACKFILL
            out.append(Pass(x.job_id, o.job_id, why))
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
