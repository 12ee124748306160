"""Slurm hostlist expressions: ``gpu[01-04,07]`` <-> ``["gpu01", ..., "gpu07"]``. Pure.

Slurm writes node sets compactly everywhere (squeue, sinfo, scontrol); pald needs the node
names one by one, and writes them back compactly to `scontrol update NodeList=`.

Expansion follows Slurm's rules: a range ``[lo-hi]`` pads numbers to the width of ``lo``
(``[08-10]`` -> 08, 09, 10; ``[8-10]`` -> 8, 9, 10), several bracket groups in one name form a
cartesian product (``a[1-2]b[3-4]``), and top-level commas separate names. Compression groups
names by prefix and digit width and is exact: ``expand(compress(x)) == sorted unique x``.
"""

from __future__ import annotations

import re
from itertools import groupby, product
from typing import Iterable

from pal_slurm.slurm.errors import HostlistError

_MAX_HOSTS = 1_000_000  # guard against "n[0-999999999]" typos eating memory
_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")


def _split_top_level(expr: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in hostlist {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    if depth != 0:
        raise HostlistError(f"unclosed '[' in hostlist {expr!r}")
    parts.append(expr[start:])
    return parts


def _expand_ranges(body: str, expr: str) -> list[str]:
    """``01-03,07`` -> ["01", "02", "03", "07"]."""
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise HostlistError(f"bad range {item!r} in hostlist {expr!r}")
        if not sep:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if b < a:
            raise HostlistError(f"descending range {item!r} in hostlist {expr!r}")
        if b - a + 1 > _MAX_HOSTS:
            raise HostlistError(f"range {item!r} in hostlist {expr!r} is too large")
        width = len(lo)
        out.extend(f"{n:0{width}d}" for n in range(a, b + 1))
    return out


def _expand_one(name: str, expr: str) -> list[str]:
    """One comma-free element, possibly with several bracket groups."""
    pieces: list[list[str]] = []
    rest = name
    while rest:
        open_at = rest.find("[")
        if open_at < 0:
            if "]" in rest:
                raise HostlistError(f"unbalanced ']' in hostlist {expr!r}")
            pieces.append([rest])
            break
        close_at = rest.find("]", open_at)
        if open_at:
            pieces.append([rest[:open_at]])
        pieces.append(_expand_ranges(rest[open_at + 1 : close_at], expr))
        rest = rest[close_at + 1 :]
    return ["".join(p) for p in product(*pieces)]


def expand(expr: str) -> list[str]:
    """All host names of a hostlist expression, in the order written (duplicates kept once).

    Raises HostlistError on malformed input (unbalanced brackets, bad or descending ranges,
    empty elements). An empty or blank expression is an empty list (Slurm's "no nodes").
    """
    expr = expr.strip()
    if not expr or expr in ("(null)", "None"):
        return []
    if any(c.isspace() for c in expr):
        raise HostlistError(f"whitespace in hostlist {expr!r}")
    names: list[str] = []
    seen: set[str] = set()
    for part in _split_top_level(expr):
        if not part:
            raise HostlistError(f"empty element in hostlist {expr!r}")
        for host in _expand_one(part, expr):
            if host not in seen:
                seen.add(host)
                names.append(host)
            if len(names) > _MAX_HOSTS:
                raise HostlistError(f"hostlist {expr!r} is too large")
    return names


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def compress(names: Iterable[str]) -> str:
    """The shortest-form Slurm hostlist of `names` (sorted, duplicates dropped).

    Names are grouped by (prefix, width of the trailing number); each group becomes
    ``prefix[a-b,c]`` (or plain ``prefixNN`` for a single name). Names without a trailing
    number are kept verbatim.
    """
    keyed: list[tuple[str, int, int, str]] = []
    for name in set(names):
        if not name or any(c in name for c in "[],") or any(c.isspace() for c in name):
            raise HostlistError(f"cannot compress host name {name!r}")
        m = _TRAILING_DIGITS.match(name)
        if m:
            keyed.append((m.group(1), len(m.group(2)), int(m.group(2)), name))
        else:
            keyed.append((name, -1, -1, name))
    keyed.sort()
    out: list[str] = []
    for (prefix, width), group in groupby(keyed, key=lambda k: (k[0], k[1])):
        members = list(group)
        if width < 0:
            out.append(prefix)
            continue
        if len(members) == 1:
            out.append(members[0][3])
            continue
        parts = [
            f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}"
            for a, b in _ranges([m[2] for m in members])
        ]
        out.append(f"{prefix}[{','.join(parts)}]")
    return ",".join(out)
