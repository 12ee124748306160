"""How pald logs its errors: each kind once until it clears, so a dead Slurm or database does
not flood the log every second (every loop catches its own errors and tries again)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

log = logging.getLogger("pald")

MAX_ERROR_TEXT = 200  # of an error's message in its kind (a message may quote user text)
MAX_ERROR_KINDS = 256  # kinds remembered; past that, new kinds of one `what` share one

_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")


def error_kind(what: str, exc: BaseException) -> str:
    """What makes two errors "the same" for logging: where, the exception type, and the
    message with its numbers masked (a byte offset, a job id or a pid that changes every
    cycle must not make a repeating error look new)."""
    return f"{what}:{type(exc).__name__}:{_NUMBERS.sub('#', str(exc)[:MAX_ERROR_TEXT])}"


@dataclass
class OnceLogger:
    """Logs each kind of error once (until it clears); `repeats` counts what was not logged again."""

    seen: dict[str, int] = field(default_factory=dict)

    def error(self, what: str, exc: BaseException) -> None:
        kind = error_kind(what, exc)
        if kind not in self.seen and len(self.seen) >= MAX_ERROR_KINDS:
            kind = f"{what}:many"  # never a set that grows with what users write
        if kind in self.seen:
            self.seen[kind] += 1
            return
        self.seen[kind] = 0
        log.error("%s: %s", what, str(exc)[:MAX_ERROR_TEXT])

    def clear(self, what: str) -> None:
        cleared = [k for k in self.seen if k.startswith(what + ":")]
        if cleared:
            log.info("%s: recovered (%d repeat(s) not logged)", what, sum(self.seen[k] for k in cleared))
        for k in cleared:
            del self.seen[k]
