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
The cycle reads a held record that way (intake/held.py: placement_record, bound_slots).
"""

from __future__ import annotations

import functools

from pal_slurm.intake.tags import DEFER_TAG, PLACED_PREFIX, pal_tags
from pal_slurm.slurm.readers import JobInfo

REQUEUED_KEY = "requeued"
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
