"""When pald reads what from Slurm: pure decisions, no I/O.

slurmctld answers a job read (`squeue`: REQUEST_JOB_INFO) by packing every job it holds,
whatever states or fields the client asks for (squeue filters on its side), so its cost grows
with the queue: about 5 ms of slurmctld time per read at 1,000 queued jobs on the lab
(benchmarks/slurmctld_load.py). A node read (`sinfo`: REQUEST_NODE_INFO + PARTITION_INFO) costs
what the node count makes it, whatever the queue. So pald reads the nodes every `nodes_every_s`
(each job read reads them too) and the jobs only when something calls for them:

- its first read, and a read after one that failed;
- a node whose allocation or state differs from the node read that went with the last job read
  (a job started or ended, a node drained or came back): what frees GPUs for held jobs;
- a `place` or `defer` answered since the last job read (the hook's job is to be seen: its
  promise confirmed, a deferred job taken into the cycle), or an action pald took on a job (a
  release, a hold again, a requeued job taken back: what came of it), or promises still waiting
  for their job (reservations, also the cycle's own);
- PAL-held jobs waiting (the cycle plans them against the time as well: rack waits, eligibility);
- a running job's expected end (its time limit) passed since the last job read;
- the last job read and the node read after it disagreeing on how many GPUs a node's jobs hold
  (a job started or ended between the two: `read_straddles`); the nodes the next turn reads may
  then already agree with each other, and no node change would call for the read;
- `jobs_every_s` since the last job read, whatever happened (what no notice above shows: a user's
  hold or release, a job's comment edited).

Job reads are at least `floor_s` apart however many events call for one. Reservations
(`scontrol show reservation`: RESERVATION_INFO, its cost grows with the reservations) are read
with every node read: nothing else tells pald of one made or ended, and a differing one calls
for a job read as a node change does. Partitions (`scontrol show partition`) are re-read every
`site_every_s`, and at once when the node list differs from the one they were read with (a node
added or removed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pal_slurm.slurm.readers import JOB_STATES_HOLDING_GPUS, JobInfo, NodeInfo, slots_held_by_jobs


@dataclass(frozen=True)
class ReadPeriods:
    """How often pald reads (pal.toml [slurm] read_floor_s, jobs_every_s, site_every_s,
    nodes_every_s)."""

    floor_s: float = 1.0
    jobs_every_s: float = 30.0
    site_every_s: float = 60.0
    nodes_every_s: float = 1.0
    # pald's turns come at multiples of cycle_s, and a read is stamped a little after its turn
    # began: a period this close to its end counts as over (pald passes half a cycle), so a
    # 1 s period on a 1 s cycle is every turn, not every other one
    slack_s: float = 0.0


@dataclass(frozen=True)
class JobReadMarks:
    """What a job read's decision looks at, as the sync last saw it."""

    now: float
    tried_at: float | None  # when the last job read started (None: never)
    failed: bool  # whether the last read failed
    nodes_changed: bool  # this turn's node read differs from the last job read's
    answered: bool  # a place or defer was answered since the last job read
    promises: bool  # reservations wait for their job
    held_waiting: bool  # PAL-held jobs in the last job read
    next_end: float | None  # the earliest expected end of a running job after the last job read
    straddled: bool = False  # the last job read and its node read disagreed (read_straddles)


def job_read_due(periods: ReadPeriods, marks: JobReadMarks) -> str | None:
    """Why the jobs are to be read this turn (a word for logs and tests), or None."""
    if marks.tried_at is None:
        return "first"
    since = marks.now - marks.tried_at + periods.slack_s
    if since >= periods.jobs_every_s:
        return "period"
    if since < periods.floor_s:
        return None
    if marks.failed:
        return "retry"
    if marks.nodes_changed:
        return "nodes"
    if marks.answered:
        return "answered"
    if marks.promises:
        return "promises"
    if marks.held_waiting:
        return "held"
    if marks.next_end is not None and marks.next_end <= marks.now:
        return "end"
    if marks.straddled:
        return "settle"
    return None


def node_read_due(periods: ReadPeriods, now: float, read_at: float | None) -> bool:
    """Whether the nodes are to be read this turn (on their own: a job read reads them too)."""
    return read_at is None or now - read_at + periods.slack_s >= periods.nodes_every_s


def site_read_due(periods: ReadPeriods, now: float, read_at: float | None,
                  read_with: frozenset[str], nodes: Iterable[NodeInfo]) -> str | None:
    """Why the partitions are to be read with these nodes, or None: never read yet (or the last
    read failed: `read_at` None), `site_every_s` old, or read with another node list
    (`read_with`) than this read's."""
    if read_at is None:
        return "first"
    if now - read_at + periods.slack_s >= periods.site_every_s:
        return "period"
    if frozenset(n.name for n in nodes) != read_with:
        return "nodes"
    return None


def next_expected_end(jobs: Iterable[JobInfo], after: float) -> float | None:
    """The earliest time limit's end, later than `after`, of the jobs that hold GPUs or CPUs
    (running, completing, ...); None when none has one."""
    ends = [j.end_time for j in jobs if j.state in JOB_STATES_HOLDING_GPUS and j.end_time > after]
    return float(min(ends)) if ends else None


def nodes_differ(a: Sequence[NodeInfo] | None, b: Sequence[NodeInfo]) -> bool:
    """Whether two node reads differ in anything pald's view takes from them (allocation,
    state, resources, partitions: every field a NodeInfo has); a missing read differs."""
    return a is None or tuple(a) != tuple(b)


def read_straddles(nodes: Sequence[NodeInfo], jobs: Iterable[JobInfo]) -> bool:
    """Whether a job read and the node read taken after it disagree on how many GPUs the jobs
    hold on a usable node (a job that ended or started between the two). Nodes where a job
    holding GPUs shows no slot detail are not judged (what it holds there is not known)."""
    jobs = list(jobs)
    held = slots_held_by_jobs(jobs)
    unknown: set[str] = set()
    for job in jobs:
        if job.state in JOB_STATES_HOLDING_GPUS:
            unknown |= set(job.nodes) - set(job.gpu_slots)
    return any(n.gpus_used != len(held.get(n.name, ())) for n in nodes
               if n.gpus > 0 and n.usable and n.name not in unknown)
