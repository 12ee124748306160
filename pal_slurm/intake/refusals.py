"""Input pald does not read: the pass reasons for a field over its cap or malformed. Pure.

A hostile or mistaken submission must cost pald no more than a normal one, so every parser of
user text has caps; a field over one (`input-too-large:<field>`) or malformed
(`bad-input:<field>`) makes the job pass to Slurm untouched, with that reason in its
admin_comment (`pal:pass=<reason>`).
"""

from __future__ import annotations

from pal_slurm.slurm.errors import SlurmError

TOO_LARGE = "input-too-large"
BAD_INPUT = "bad-input"


def refused_input(reason: str) -> bool:
    """Whether a pass reason says pald did not read one of the job's fields."""
    return reason.startswith((f"{TOO_LARGE}:", f"{BAD_INPUT}:"))


class RefusedInput(SlurmError):
    """A field of the job pald does not read: over a cap (`input-too-large:<field>`) or
    malformed (`bad-input:<field>`). `reason` is the pass token, `detail` one short line."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
