"""The tags the hook and pald write into a job's admin_comment, and reading them back.

The hook appends one space-separated tag per decision, each ``name[;key=value...]``:
``pal:placed=gpu03;rank=v7;req=ab``, ``pal:defer;rank=v3;req=ab``, ``pal:pass=<reason>;...``;
pald appends ``pal:defer;requeued=<n>`` when it takes a requeued job back (daemon/requeue.py).
"""

from __future__ import annotations

import functools

DEFER_TAG = "pal:defer"
PLACED_PREFIX = "pal:placed="


def pal_tags(admin_comment: str | None) -> tuple[str, ...]:
    """The tag names in an admin_comment: ``"x pal:defer;rank=v3;req=ab"`` -> ("x", "pal:defer")."""
    return _tag_names(admin_comment or "")


@functools.lru_cache(maxsize=4096)
def _tag_names(admin_comment: str) -> tuple[str, ...]:
    """Memoised on the text: pald's sync reads the tags of every job each second."""
    return tuple(word.split(";", 1)[0] for word in admin_comment.split())
