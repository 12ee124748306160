"""The tags the hook and pald write into a job's admin_comment, and reading them back.

The hook appends one space-separated tag per decision, each ``name[;key=value...]``:
``pal:placed=gpu03;rank=v7;req=ab``, ``pal:defer;rank=v3;req=ab``, ``pal:pass=<reason>;...``;
pald appends ``pal:defer;requeued=<n>`` when it takes a requeued job back (daemon/requeue.py).
"""

from __future__ import annotations

import functools
import re

DEFER_TAG = "pal:defer"
_REQUEST_ID = re.compile(r"(?:^|[;\s])req=([^;\s]+)")
PLACED_PREFIX = "pal:placed="


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
