"""pald's Slurm sync: read Slurm, refresh the placement service's view. Nothing else.

It runs on the cycle's worker thread. Each turn of pald's loop reads the nodes, and the jobs,
partitions and reservations only when read_plan.py calls for them (`read_when_due`); `read`
reads all of them at once (tools, tests). What the plan looks at (when each read was made, the
node read that went with the last job read, the promises and answers seen) is this object's,
on the worker thread alone. The reads (squeue, sinfo, the site) happen outside the
lock; the view, the site, the promises a read confirms or shows never came, the pins and the
running jobs are handed to the service in one locked step, so a `place` answered meanwhile
sees either the last read or this one, never half of each. A failed read is logged once per
kind of error (state.py) and leaves the last view in place: the next cycle tries again.

With the `slurm` queue order the inputs of Slurm's multifactor priority (weights, fair share,
QOS and partition factors: slurm.priority) are read too, at most every
`PRIORITY_READ_EVERY_S`: slurmctld itself recomputes priorities every PriorityCalcPeriod
(5 minutes by default), and sshare/sacctmgr ask slurmdbd. A failed read keeps the last inputs.

The job-count limits of the site's associations and QOS (slurm.job_limits) are read at most
every `LIMITS_READ_EVERY_S` too (they change when an administrator runs sacctmgr); each read of
squeue is counted against them (intake.job_limits.count_read) for the cycle that follows. A
failed read of the limits is noted and counts as no limit known until the next (fail open:
Slurm still enforces them after a release, and held_jobs.unpin_limited acts on what it shows).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Callable, Protocol

from pal_slurm.daemon import pins
from pal_slurm.daemon.cycle import is_pal_held
from pal_slurm.daemon.read_plan import (
    JobReadMarks,
    ReadPeriods,
    job_read_due,
    next_expected_end,
    node_read_due,
    nodes_differ,
    read_straddles,
    site_read_due,
)
from pal_slurm.daemon.state import DaemonState
from pal_slurm.intake.held import not_yet_eligible
from pal_slurm.intake.job_limits import JobLimits, count_read
from pal_slurm.intake.tags import request_id
from pal_slurm.model.site import SiteView
from pal_slurm.policy.site_index import SiteIndex
from pal_slurm.policy.registry import SLURM_PRIORITY_QUEUE
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.priority import SitePriorityRead
from pal_slurm.slurm.readers import JobInfo, NodeInfo, cluster_view, unheld_slots
from pal_slurm.slurm.topology import read_racks


PriorityRead = Callable[[Sequence[NodeInfo]], SitePriorityRead | None]  # slurm.priority.read_site_priority
PRIORITY_READ_EVERY_S = 60.0  # module docstring
LimitsRead = Callable[[], JobLimits | None]  # slurm.job_limits.read_job_limits (None: not enforced)
LIMITS_READ_EVERY_S = 60.0  # module docstring
# the counts (state.COUNTS) of answers and actions that call for a job read (read_plan "answered")
ACTED_ON_JOBS = ("place", "defer", "released", "reheld", "released_outside", "unstuck", "requeued")
SETTLE_READS = 3  # job reads in a row at the floor while squeue and sinfo disagree (read_plan.read_straddles)


class SlurmRead(Protocol):
    """What pald reads from Slurm (slurm.readers.SlurmReader, or a fake in tests)."""

    @property
    def release(self) -> str | None: ...

    def jobs(self) -> Sequence[JobInfo]: ...

    def nodes(self) -> Sequence[NodeInfo]: ...

    def site(self, nodes: Sequence[NodeInfo], earlier: SiteView | None = None) -> SiteView | None: ...


@dataclass(frozen=True)
class SyncRead:
    """One Slurm read, as the view took it."""

    jobs: tuple[JobInfo, ...]
    held: tuple[JobInfo, ...]  # the PAL-held ones among them (cycle.is_pal_held)
    at: float  # the clock after the read


@dataclass(frozen=True)
class NoJobRead:
    """A turn that read no jobs, after reads that worked: the nodes were not due, or showed
    nothing new (then the view stands as Slurm shows it at `at`). Nothing to plan anew."""

    at: float


def queue_keys(jobs: Iterable[JobInfo]) -> set[str]:
    """Reservation keys of every job a read shows, in any state: `job:<id>` and `job:<A_I>`
    (each element of an array's record), `req:<id>` from the hook's tag."""
    out = set()
    for j in jobs:
        out.add(f"job:{j.job_id}")
        out.add(f"job:{j.ref}")
        try:
            out.update(f"job:{ref}" for ref in j.element_refs())
        except SlurmError:
            pass
        rid = request_id(j.admin_comment)
        if rid:
            out.add(f"req:{rid}")
    return out


def started_keys(jobs: Iterable[JobInfo]) -> set[str]:
    """Reservation keys of jobs Slurm no longer holds back: `job:<id>` for jobs pald released,
    `req:<id>` for jobs placed at submit (the hook writes req=<id> into admin_comment)."""
    out = set()
    for j in jobs:
        if j.state == "PENDING":
            continue
        out.add(f"job:{j.job_id}")
        out.add(f"job:{j.ref}")  # an array element pald released as A_I
        rid = request_id(j.admin_comment)
        if rid:
            out.add(f"req:{rid}")
    return out


class SlurmSync:
    """Reads Slurm into the shared state's placement service (`topology_conf`: node -> leaf
    switch or block, re-read when the file changes; without it, a site on topology/block has
    its blocks as racks, from the site read; `priority`: reads the multifactor priority's
    inputs, read only while the queue order is `slurm`; `limits`: reads the site's job-count
    limits)."""

    def __init__(self, state: DaemonState, reader: SlurmRead, topology_conf: str | None,
                 priority: PriorityRead | None = None, limits: LimitsRead | None = None,
                 periods: ReadPeriods | None = None) -> None:
        self.state = state
        self.reader = reader
        self.topology_conf = topology_conf
        self.priority = priority
        self.periods = periods or ReadPeriods()
        self._priority_at = float("-inf")  # when the priority's inputs were last read
        self.limits = limits
        self._limits_at = float("-inf")  # when the job-count limits were last read
        self._limits: JobLimits | None = None  # their last read (None: none known)
        self._racks: tuple[float, dict[str, str]] | None = None  # (mtime, racks): the worker thread's
        # what the read plan looks at (read_plan.py), the worker thread's
        self._jobs_tried_at: float | None = None  # when the last job read started
        self._failed = False  # whether the last read failed
        self._nodes: tuple[NodeInfo, ...] | None = None  # the node read of the last job read
        self._nodes_at: float | None = None  # when the nodes were last read (with the jobs or not)
        self._nodes_changed = False  # a node read since the last job read differed from its
        self._answers_seen = 0  # answers and actions (ACTED_ON_JOBS) counted when the last job read started
        self._held_waiting = False
        self._next_end: float | None = None
        self._straddled = False  # the last job read and its node read disagreed (read_plan.read_straddles)
        self._straddled_reads = 0  # job reads in a row that did
        self._site: SiteView | None = None  # the site of the last job read
        self._partitions_at: float | None = None  # when partitions were read (None: never, or that read failed)
        self._partitions_with: frozenset[str] = frozenset()  # the node names they were read with
        self.job_reads: Counter[str] = Counter()  # job reads by why (read_plan.job_read_due; "asked": `read`)

    def read_priority(self, nodes: Sequence[NodeInfo], now: float) -> tuple[bool, SitePriorityRead | None]:
        """(whether read now, the inputs): read at most every PRIORITY_READ_EVERY_S; a failure
        is logged once per kind and leaves the last inputs in place."""
        if self.state.service.settings.queue != SLURM_PRIORITY_QUEUE:
            self._priority_at = float("-inf")  # read at once when the order becomes `slurm`
            return False, None
        if self.priority is None or now - self._priority_at < PRIORITY_READ_EVERY_S:
            return False, None
        try:
            read = self.priority(nodes)
        except Exception as exc:  # noqa: BLE001 - keep the last inputs; the next read retries
            self.state.note_error("priority", exc)
            return False, None
        self._priority_at = now
        self.state.errors.clear("priority")
        for source, why in (read.missing.items() if read is not None else ()):
            # its factors count 0 (slurm.priority): said once per kind, as any read error
            self.state.note_error(f"priority:{source}", SlurmError(why))
        return True, read

    def read_limits(self, now: float) -> JobLimits | None:
        """The site's job-count limits, read at most every LIMITS_READ_EVERY_S; a failed read
        is noted (once per kind) and knows no limit until the next (module docstring)."""
        if self.limits is None or now - self._limits_at < LIMITS_READ_EVERY_S:
            return self._limits
        self._limits_at = now
        try:
            self._limits = self.limits()
        except Exception as exc:  # noqa: BLE001 - fail open: no limit known until the next read
            self._limits = None
            self.state.note_error("limits", exc)
            return None
        self.state.errors.clear("limits")
        return self._limits

    def racks(self) -> dict[str, str] | None:
        """node -> leaf switch from [slurm] topology_conf (re-read when the file changes)."""
        path = self.topology_conf
        if not path:
            return None
        try:
            mtime = os.stat(path).st_mtime
            if self._racks is None or self._racks[0] != mtime:
                self._racks = (mtime, read_racks(path))
                self.state.errors.clear("topology")
        except Exception as exc:  # noqa: BLE001 - a bad topology file: keep the last good one
            self.state.note_error("topology", exc)
        return self._racks[1] if self._racks else None

    def _answers(self) -> int:
        """Answers given and actions taken on Slurm's jobs (a release, a hold again, a requeued
        job taken back): each calls for a job read to see what came of it (pald's own `scontrol
        hold` changes nothing a node read shows)."""
        with self.state.lock:
            return sum(self.state.counts[kind] for kind in ACTED_ON_JOBS)

    def _promises(self) -> bool:
        with self.state.lock:
            return bool(self.state.service.reservations)

    def _failure(self, exc: Exception) -> None:
        state = self.state
        self._failed = True
        state.slurm_ok = False
        state.slurm_problem = exc
        state.note_error("slurm", exc)

    def read_when_due(self) -> SyncRead | NoJobRead | None:
        """One turn of pald's loop: read the jobs (and nodes, and the site when due) when the
        read plan calls for them (read_plan.py), else the nodes when due, and the jobs after
        them when they changed. A SyncRead when the jobs were read; NoJobRead when no jobs were
        read and the reads worked; None when a read failed or nodes changed within the floor
        (the view then ages until the next job read)."""
        state = self.state
        now = state.clock()
        why = self._job_read_due(now)
        if why is not None:
            return self._read(why)
        if not node_read_due(self.periods, now, self._nodes_at):
            return None if self._failed else NoJobRead(now)
        try:
            nodes = tuple(self.reader.nodes())
        except Exception as exc:  # noqa: BLE001
            self._failure(exc)
            return None
        self._nodes_at = now
        if self._site is not None and not self._failed:
            try:
                site = self._site_for(nodes, now, always=False)
            except Exception as exc:  # noqa: BLE001
                self._failure(exc)
                return None
            if site is not None and (site.reservations != self._site.reservations
                                     or site.partitions != self._site.partitions):
                self._nodes_changed = True  # a reservation made, ended or edited: read anew
        if self._nodes_changed or nodes_differ(self._nodes, nodes):
            self._nodes_changed = True
            why = self._job_read_due(now)
            return self._read(why) if why is not None else None
        if self._failed:
            return None
        with state.lock:
            state.service.confirm_view(now)
            state.last_sync = now
        return NoJobRead(now)

    def _job_read_due(self, now: float) -> str | None:
        return job_read_due(self.periods, JobReadMarks(
            now=now, tried_at=self._jobs_tried_at, failed=self._failed, nodes_changed=self._nodes_changed,
            answered=self._answers() != self._answers_seen, promises=self._promises(),
            held_waiting=self._held_waiting, next_end=self._next_end, straddled=self._straddled))

    def read(self) -> SyncRead | None:
        """Read jobs, nodes and the site now and refresh the view; None when the read failed."""
        return self._read("asked")

    def _site_for(self, nodes: Sequence[NodeInfo], now: float, always: bool) -> SiteView | None:
        """The site for these nodes: reservations read each time (no change notice shows them),
        partitions when due (read_plan.site_read_due), else the last read's."""
        last = self._site
        if always or last is None or site_read_due(self.periods, now, self._partitions_at,
                                                   self._partitions_with, nodes):
            self._partitions_at = None  # a failed read is retried with the next one
            site = self.reader.site(nodes)
            self._partitions_at, self._partitions_with = now, frozenset(n.name for n in nodes)
            return site
        return self.reader.site(nodes, last)

    def _read(self, why: str) -> SyncRead | None:
        """Read jobs, then nodes and the site, and refresh the view; None when the read failed."""
        state = self.state
        answers = self._answers()
        self.job_reads[why] += 1
        try:
            # squeue before sinfo: a job that ends between the two reads is then still a
            # running job with an end (its limit), never GPUs allocated to no job; taken
            # before squeue starts: a promise older than this whose job it misses never came
            read_at = state.clock()
            self._jobs_tried_at = read_at
            jobs = tuple(self.reader.jobs())
            nodes = self.reader.nodes()
            site = self._site_for(nodes, read_at, always=why == "asked")
        except Exception as exc:  # noqa: BLE001
            self._failure(exc)
            return None
        self._failed = False
        self._nodes, self._nodes_at, self._nodes_changed = tuple(nodes), read_at, False
        self._site = site
        self._answers_seen = answers
        now = state.clock()
        priority_read, priority = self.read_priority(nodes, now)
        limits = self.read_limits(now)
        counted = None if limits is None else count_read(limits, jobs, lambda j: pins.pin_key(j) is not None)
        held = tuple(j for j in jobs if is_pal_held(j))
        racks = self.racks()
        if racks is None and site is not None and site.blocks:  # topology/block: a block is the rack
            racks = dict(site.blocks.block_of)
        view = cluster_view(nodes, jobs, racks)
        index = SiteIndex(site) if site is not None else None  # the read's candidates, built off the lock
        waiting = sum(1 for j in held if not not_yet_eligible(j, now))  # ahead of new jobs
        # what the read alone decides, made off the lock too: each is a pass over every job
        # (150,000 jobs: about 0.5 s together), which a `place` arriving would otherwise wait for
        started, in_queue, unheld = started_keys(jobs), queue_keys(jobs), unheld_slots(nodes, jobs)
        with state.lock:
            service = state.service
            state.last_jobs, state.held_ids = jobs, frozenset(j.job_id for j in held)
            state.node_names = {n.name: (n.address, n.hostname) for n in nodes}  # sample_intake.py
            if site is not None:
                service.observe_site(site, index)
            if priority_read:
                service.observe_priority(priority)
            service.observe_limits(counted)
            service.observe_cluster(view, now, held_jobs=waiting, started=started,
                                    in_queue=in_queue, queue_read_at=read_at)
            for key, pin in pins.unreserved_pins(jobs, view, service.reservations):
                service.reserve(key, pin.gpu_ids, now, slurm_picks=pin.slurm_picks)
            service.observe_running(jobs, now, unheld=unheld)
            state.last_sync = now
        if state.slurm_ok is not True:
            state.errors.clear("slurm")
        state.slurm_ok = True
        state.slurm_problem = None
        self._held_waiting = bool(held)
        self._next_end = next_expected_end(jobs, now)
        # a disagreement that outlasts a few reads is not a job starting or ending between two
        # reads (a job the read cannot see): it no longer calls for reads at the floor
        self._straddled_reads = self._straddled_reads + 1 if read_straddles(nodes, jobs) else 0
        self._straddled = 0 < self._straddled_reads <= SETTLE_READS
        return SyncRead(jobs, held, now)
