"""Slurm durations: the one parser of `--time`-style text and of Slurm's JSON minutes fields
(unset and unlimited as slurm_numbers knows them), so that sacct files, squeue records and
palctl options agree on what `1-00:00:00`, `UNLIMITED` or 4294967294 mean.

Accepted text (Slurm's own forms, see sbatch(1) --time): `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`,
`D-HH:MM`, `D-HH:MM:SS`; and, for people typing options, a number with one unit `s`, `m`,
`h`, `d`, `w` (`90s`, `30m`, `12h`, `7d`, `2w`). A bare number is minutes, as in Slurm.
Unlimited words (`UNLIMITED`, `INFINITE`, `Partition_Limit`, ...) give None. The parser is one
regular expression without nested repetition on input capped at `MAX_TEXT` characters, so its
cost is linear and bounded whatever it is fed.
"""

from __future__ import annotations

import math
import re

from pal_slurm.intake.slurm_numbers import is_unset

MAX_TEXT = 32  # longer than any duration Slurm writes; longer input is refused unread

UNLIMITED_WORDS = frozenset({"unlimited", "infinite", "partition_limit", "none", "invalid", "n/a"})

_SLURM = re.compile(r"(?:(\d{1,6})-)?(\d{1,9})(?::(\d{1,9}))?(?::(\d{1,9}))?")
_UNIT = re.compile(r"(\d{1,9}(?:\.\d{1,6})?)([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class DurationError(ValueError):
    """Text that is not a Slurm duration; the message says which forms are accepted."""


FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or a number with s/m/h/d/w"


def parse_duration(text: str) -> float | None:
    """Seconds of a Slurm duration; None for an unlimited word; DurationError otherwise."""
    if not isinstance(text, str):
        raise DurationError(f"not a duration: {text!r}")
    if len(text) > MAX_TEXT:
        raise DurationError(f"not a duration: {len(text)} characters (at most {MAX_TEXT})")
    t = text.strip()
    if not t:
        raise DurationError(f"not a duration: empty (use {FORMS})")
    if t.lower() in UNLIMITED_WORDS:
        return None
    unit = _UNIT.fullmatch(t.lower())
    if unit:
        return float(unit.group(1)) * _UNIT_S[unit.group(2)]
    m = _SLURM.fullmatch(t)
    if not m:
        raise DurationError(f"not a duration: {text!r} (use {FORMS})")
    day, *rest = m.groups()
    parts = [int(p) for p in rest if p is not None]
    if day is not None:  # D-HH[:MM[:SS]]
        h, mi, s = (parts + [0, 0])[:3]
        seconds = ((int(day) * 24 + h) * 60 + mi) * 60 + s
    elif len(parts) == 3:
        seconds = (parts[0] * 60 + parts[1]) * 60 + parts[2]
    elif len(parts) == 2:
        seconds = parts[0] * 60 + parts[1]
    else:
        seconds = parts[0] * 60
    return float(seconds)


def parse_limit(text: str) -> float | None:
    """A time limit as sacct -P prints it: empty also means "no limit" (None)."""
    if isinstance(text, str) and not text.strip():
        return None
    return parse_duration(text)


def minutes_field(value: object) -> float | None:
    """Seconds of a Slurm JSON minutes field (time_limit); None when unset or unlimited:
    0, negative, NO_VAL/INFINITE and anything >= 2**31-1, or not an integer at all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, dict):  # 23.02+ prints {"set": .., "infinite": .., "number": ..}
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            return None
        value = int(value)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int) or value <= 0 or is_unset(value):
        return None
    return float(value * 60)


def format_duration(seconds: float) -> str:
    """Seconds as Slurm writes a duration: [D-]HH:MM:SS (rounded to the second)."""
    total = max(0, int(round(seconds)))
    days, rest = divmod(total, 86400)
    h, rest = divmod(rest, 3600)
    mi, s = divmod(rest, 60)
    return (f"{days}-" if days else "") + f"{h:02d}:{mi:02d}:{s:02d}"
