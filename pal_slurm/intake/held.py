"""squeue's records of the held jobs, read for pald's cycle in one call (`read_held`): each
record's engine input or pass reason (intake.job.from_queue), the partitions it asked for, the
GPU slots it is already bound to, the scontrol names of an array's elements, and each job's
admin_comment by those names. Pure.

Why here: a held record carries what pald and the hook wrote into it (a pin, slot types, the
requeue tags: requeue.py in the daemon takes such jobs back); telling Slurm's record apart from
PAL's own marks is reading the job, so the cycle receives jobs already read and only plans.

What Slurm 22.05 shows of a requeued PAL job (lab-tested, tests/integration/test_site_compat.py):
PENDING, Reason=BeginTime until its requeue delay has passed (`eligible_time`), and still
carrying PAL's first placement: ReqNodeList = the old nodes, TresPerNode = the old GPU slots.
The old ReqNodeList is PAL's pin, not the user's, unless the user gave a `--nodelist` (the hook
then tags `nodelist=own`); the old slot types are kept (engine.held.on_bound_slots).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from pal_slurm.intake.gres import slots_named
from pal_slurm.intake.job import Read, from_queue
from pal_slurm.intake.restrictions import requested_partitions
from pal_slurm.intake.tags import DEFER_TAG, pal_tags
from pal_slurm.model.classes import AppClassMap
from pal_slurm.model.site_rules import NO_RULES, SiteRules
from pal_slurm.slurm.errors import SlurmError
from pal_slurm.slurm.readers import JobInfo, admin_comments

OWN_NODELIST = "nodelist=own"  # in the hook's tag: the job's ReqNodeList at submit was the user's


class HeldRead(NamedTuple):
    """One held record as the cycle plans it. A named tuple: one is built per held job each cycle."""

    job: JobInfo
    partitions: tuple[str, ...]  # its `--partition` list (empty: Slurm's default)
    read: Read | None  # its engine input or pass reason; None: Slurm would not start it yet
    slots: tuple[int, ...] | None  # the slot types it is bound to (bound_slots), None: untyped
    elements: tuple[int | str, ...] | None  # its scontrol names (an array's elements); None: unreadable


@dataclass(frozen=True)
class HeldReads:
    """A cycle's held jobs, read: `jobs` in Slurm's order, and `comments`: each job's
    admin_comment by every scontrol name that may act on it (what launcher.mark_released extends)."""

    jobs: list[HeldRead]
    comments: dict[int | str, str]


def read_held(held: Sequence[JobInfo], now: float, classes: AppClassMap, site: SiteRules = NO_RULES) -> HeldReads:
    """The held records of one Slurm read at `now`, each read once."""
    return HeldReads([_read_one(j, now, classes, site) for j in held], admin_comments(held))


class HeldReader:
    """`read_held`, each record's reading kept until the next read: a record equal to the one
    the last read showed (and still eligible) is not read again. Why: at a site's scale
    (50,000 held jobs) reading every record again was most of a cycle, while a held job's
    record seldom changes between two reads and comparing it costs a small part of reading
    it. One owner (pald's cycle thread); a change of the class map or the site's rules drops
    what is kept."""

    def __init__(self) -> None:
        self._kept: dict[int, HeldRead] = {}  # job id -> its last reading, where it was read (eligible)
        self._rules: tuple[AppClassMap, SiteRules] | None = None  # what they were read with

    def read(self, held: Sequence[JobInfo], now: float, classes: AppClassMap, site: SiteRules = NO_RULES) -> HeldReads:
        """What `read_held` answers, the same readings."""
        kept = self._kept if self._rules == (classes, site) else {}
        self._rules, self._kept = (classes, site), {}
        out = []
        for job in held:
            got = kept.get(job.job_id)
            if got is None or got.job != job or (not job.unreadable and not_yet_eligible(job, now)):
                got = _read_one(job, now, classes, site)
            elif got.job is not job:
                got = got._replace(job=job)
            if got.read is not None:
                self._kept[job.job_id] = got
            out.append(got)
        return HeldReads(out, admin_comments(held))


def _read_one(job: JobInfo, now: float, classes: AppClassMap, site: SiteRules) -> HeldRead:
    partitions = requested_partitions(job.partition)
    if not job.unreadable and not_yet_eligible(job, now):
        return HeldRead(job, partitions, None, None, None)
    try:
        elements: tuple[int | str, ...] | None = tuple(job.element_refs())
    except SlurmError:
        elements = None
    return HeldRead(job, partitions, from_queue(placement_record(job), classes, site), bound_slots(job), elements)


def not_yet_eligible(job: JobInfo, now: float) -> bool:
    """Slurm would not start it yet (a requeued job's delay, BeginTime): pald plans it later."""
    return job.eligible_time > now


def bound_slots(job: JobInfo) -> tuple[int, ...] | None:
    """The GPU slots a job's per-node request names by slot type (`gres:gpu:s0:1,gpu:s1:1`,
    PAL's binding from an earlier placement), or None when it asks for an untyped count.
    Slurm starts such a job only on those same slots (engine.held.on_bound_slots)."""
    return _slot_types(job.tres_per_node or "")


@functools.lru_cache(maxsize=1024)
def _slot_types(tres_per_node: str) -> tuple[int, ...] | None:
    """Memoised: thousands of held jobs share a few request strings, read every cycle."""
    if ":s" not in tres_per_node:
        return None  # no slot type at all: the common case, without parsing
    return slots_named(tres_per_node) or None


def placement_record(job: JobInfo) -> JobInfo:
    """The job as the cycle should judge where it may run: a deferred PAL job's ReqNodeList is PAL's
    pin (dropped: a requeued job's old placement, or the pin of a release a pald that died did
    not finish) unless the user gave the nodelist (kept). The hook writes no ReqNodeList for a
    job it defers, so only the ``nodelist=own`` tag makes one the user's; a pald that read its
    predecessor's pin as the user's ``--nodelist`` held the job for a full node while others
    were free."""
    if (not job.required_nodes or DEFER_TAG not in pal_tags(job.admin_comment)
            or OWN_NODELIST in (job.admin_comment or "").replace(" ", ";").split(";")):
        return job
    return replace(job, required_nodes=())
