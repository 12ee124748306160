"""Slurm's numbers as its JSON prints them: the one place that knows Slurm's "unset" and
"unlimited" values and the number objects of data_parser releases. Pure.

Slurm keeps "not set" and "no limit" inside its integer fields (NO_VAL, INFINITE for 32-bit
fields); 22.05 prints them as they are, some releases print INT32_MAX and up for unset, and
23.02+ (data_parser) wraps numbers in ``{"set": .., "infinite": .., "number": ..}`` objects.
Every reader of Slurm's output (squeue, sinfo, sacct) unwraps and tests them here.
"""

from __future__ import annotations

from typing import Any, Mapping

NO_VAL = 0xFFFFFFFE  # Slurm's "not set" for 32-bit fields
INFINITE = 0xFFFFFFFF  # Slurm's "no limit" for 32-bit fields
UNSET_FROM = 2**31 - 1  # JSON readers of some releases print INT32_MAX and up for unset


def number(value: Any) -> Any:
    """data_parser's ``{"set": true, "infinite": false, "number": 5}`` -> 5; unset or infinite
    -> None; anything else unchanged (22.05 and plain fields print bare numbers)."""
    if isinstance(value, Mapping) and "number" in value and ("set" in value or "infinite" in value):
        if value.get("infinite") or not value.get("set", True):
            return None
        return value["number"]
    return value


def is_unset(value: int) -> bool:
    """Whether a 32-bit field holds one of Slurm's markers rather than a value: NO_VAL,
    INFINITE, or INT32_MAX and up as some JSON readers print them."""
    return value >= UNSET_FROM


def count(value: object, default: int = 0) -> int:
    """An integer field of Slurm's JSON; None, negative, NO_VAL and up and junk -> default."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < NO_VAL else default
