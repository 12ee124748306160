"""The tags the hook and pald write into a job's admin_comment, and reading them back.

The hook appends one space-separated tag per decision, each ``name[;key=value...]``:
``pal:placed=gpu03;rank=v7;req=ab``, ``pal:defer;rank=v3;req=ab``, ``pal:pass=<reason>;...``;
pald appends ``pal:defer;requeued=<n>`` when it takes a requeued job back (daemon/requeue.py),
``pal:defer;unstuck=<n>`` when it holds a stuck release again (app.Pald._unstick), and
``pal:released`` after it (or pal-failsafe) released a held job.

Whose hold a held job is under: the last of its ``pal:defer`` / ``pal:released`` tags says. A
``pal:defer`` last: the hold is the hook's or pald's (pald may release it). A ``pal:released``
last, or no ``pal:defer`` at all: the job was held by someone else after pald let it go (its
user's ``scontrol hold``, Reason=JobHeldUser, or an operator's, JobHeldAdmin), and pald and
pal-failsafe leave it held. The reason alone cannot tell: the hook's own hold shows as
JobHeldUser too (Lua sets priority 0), so the tag decides and the reason only names the kind.
The tag is written right after the release (daemon/launcher.mark_released): should pald die in
between, the job is released and runs; only a user hold in that instant, before a new pald
runs, would look like pald's.
"""

from __future__ import annotations

import functools
import re

DEFER_TAG = "pal:defer"
_REQUEST_ID = re.compile(r"(?:^|[;\s])req=([^;\s]+)")
PLACED_PREFIX = "pal:placed="
RELEASED_TAG = "pal:released"


def pal_tags(admin_comment: str | None) -> tuple[str, ...]:
    """The tag names in an admin_comment: ``"x pal:defer;rank=v3;req=ab"`` -> ("x", "pal:defer")."""
    return _tag_names(admin_comment or "")


@functools.lru_cache(maxsize=4096)
def _tag_names(admin_comment: str) -> tuple[str, ...]:
    """Memoised on the text: pald's sync reads the tags of every job each second."""
    return tuple(word.split(";", 1)[0] for word in admin_comment.split())


def request_id(admin_comment: str | None) -> str | None:
    """The hook's request id in an admin_comment (``req=<id>``: it joins a job to the answer
    pald gave its submission, and to pald's logs), or None."""
    m = _REQUEST_ID.search(admin_comment or "")
    return m.group(1) if m else None


FAILSAFE_RELEASE = f"{RELEASED_TAG};by=failsafe"  # pal-failsafe's mark: released untouched, no pin


def last_mark(admin_comment: str | None) -> str | None:
    """The job's last placement mark, whole (``pal:defer;...``, ``pal:released[;by=failsafe]``,
    ``pal:placed=...``), or None: where pald or the hook last left the job."""
    for word in reversed((admin_comment or "").split()):
        name = word.split(";", 1)[0]
        if name in (DEFER_TAG, RELEASED_TAG) or name.startswith(PLACED_PREFIX):
            return word
    return None


def held_by_pald(admin_comment: str | None) -> bool:
    """Whether a held job's hold is the hook's or pald's: its last mark is ``pal:defer`` (not
    ``pal:released``: pald let it go, and whoever held it since owns the hold; nor
    ``pal:placed=``: the hook never held it)."""
    mark = last_mark(admin_comment)
    return mark is not None and mark.split(";", 1)[0] == DEFER_TAG


def with_tag(admin_comment: str | None, tag: str) -> str:
    """The admin_comment with `tag` appended (what was there kept as it was)."""
    return " ".join(t for t in ((admin_comment or "").strip(), tag) if t)
