"""A requeued PAL job is placed again: pure rules, no I/O (pald's app acts on them).

What Slurm 22.05 shows (lab-tested, tests/integration/test_site_compat.py): after
`scontrol requeue` (or a node failure of a `--requeue` job) the job is PENDING with
`restart_cnt` one higher, Reason=BeginTime until Slurm's requeue delay has passed
(`eligible_time`, about 2 minutes), and it still carries what PAL wrote at its first placement:
ReqNodeList = the old nodes, NumNodes pinned, TresPerNode = the old GPU slots. Left alone it
would wait for exactly those slots, which may now be busy or on a bad node.

So pald takes such a job back into its queue: it tags it `pal:defer;requeued=<restart_cnt>`
(first: a pald dying in between leaves a tagged job that Slurm runs as it was, never an untagged
held one that nobody releases) and holds it; the cycle then places it like any deferred job,
once its requeue delay is over (the cycle never reserves GPUs for a job that may not start yet).
The tag's count makes the take-over happen once per requeue, across pald restarts.

Where it may run: the old ReqNodeList is PAL's own pin, not the user's, unless the user gave a
`--nodelist` (the hook then tags `nodelist=own`; the same holds for any held PAL job, e.g. one a
pald pinned and died before releasing): only then are the old nodes kept as the
restriction (they lie within the user's list; a list shorter than the job passes at submit).
"""

from __future__ import annotations

import functools
from dataclasses import replace

from pal_slurm.daemon.tags import DEFER_TAG, PLACED_PREFIX, pal_tags
from pal_slurm.intake.gres import slots_named
from pal_slurm.slurm.readers import JobInfo

REQUEUED_KEY = "requeued"
OWN_NODELIST = "nodelist=own"  # in the hook's tag: the job's ReqNodeList at submit was the user's
_KEY = f"{REQUEUED_KEY}="


def requeue_tag(restart_count: int) -> str:
    return f"{DEFER_TAG};{REQUEUED_KEY}={int(restart_count)}"


def requeues_taken(admin_comment: str | None) -> int:
    """The highest requeue count pald already took the job back for (0: none): only pald's own
    ``pal:defer;...;requeued=<n>`` tags count."""
    return _requeues_taken(admin_comment or "")


@functools.lru_cache(maxsize=4096)
def _requeues_taken(admin_comment: str) -> int:
    """Memoised: every held job's comment is read every cycle, and most are alike."""
    if _KEY not in admin_comment:
        return 0
    counts = [0]
    for tag in admin_comment.split():
        name, *fields = tag.split(";")
        if name == DEFER_TAG:
            counts += [int(f[len(_KEY):]) for f in fields if f.startswith(_KEY) and f[len(_KEY):].isdigit()]
    return max(counts)


def was_pal_placed(admin_comment: str | None) -> bool:
    """Placed by PAL at submit (`pal:placed=...`) or deferred and released by pald's cycle."""
    tags = pal_tags(admin_comment)
    return DEFER_TAG in tags or any(t.startswith(PLACED_PREFIX) for t in tags)


def to_take_back(job: JobInfo) -> bool:
    """A PAL job Slurm requeued that pald has not taken back yet: pending, not held (a held one
    is someone's: `scontrol requeuehold`, a user's hold; it is taken back once released), and
    requeued more times than its tag says."""
    return (job.state == "PENDING" and not job.held and job.restart_count > 0
            and was_pal_placed(job.admin_comment) and requeues_taken(job.admin_comment) < job.restart_count)


def tagged_comment(job: JobInfo) -> str:
    """The job's admin_comment with the requeue tag appended (the rest kept as it was)."""
    return " ".join(t for t in ((job.admin_comment or "").strip(), requeue_tag(job.restart_count)) if t)


def is_requeued(job: JobInfo) -> bool:
    return requeues_taken(job.admin_comment) > 0


def not_yet_eligible(job: JobInfo, now: float) -> bool:
    """Slurm would not start it yet (a requeued job's delay, BeginTime): pald plans it later."""
    return job.eligible_time > now


def bound_slots(job: JobInfo) -> tuple[int, ...] | None:
    """The GPU slots a job's per-node request names by slot type (`gres:gpu:s0:1,gpu:s1:1`,
    PAL's binding from an earlier placement), or None when it asks for an untyped count.
    Slurm starts such a job only on those same slots (PlacementService._on_bound_slots)."""
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
