"""Slurm hostlist expressions: ``gpu[01-04,07]`` <-> ``["gpu01", ..., "gpu07"]``. Pure.

Slurm writes node sets compactly everywhere (squeue, sinfo, scontrol); pald needs the node
names one by one, and writes them back compactly to `scontrol update NodeList=`. Users write
them too (--exclude, --nodelist), and those reach pald's submit path as they were typed.

Expansion follows Slurm's rules: a range ``[lo-hi]`` pads numbers to the width of ``lo``
(``[08-10]`` -> 08, 09, 10; ``[8-10]`` -> 8, 9, 10), several bracket groups in one name form a
cartesian product (``a[1-2]b[3-4]``), and top-level commas separate names. Compression groups
names by prefix and digit width and is exact: ``expand(compress(x)) == sorted unique x``.

Why two readers: `expand` lists names (Slurm's own node lists, a few thousand names), and
`HostSet` answers "is this node in it?" without listing anything, for what users write: ten
copies of ``n[0-99999]`` are 109 bytes and a million names. Both come from one linear parse
(`_parse`) with named caps, so no expression costs more than its length to read, and a
HostSet's membership test costs the same for ``n[0-9]`` as for ``n[0-999999999]``. The Lua
hook (job_submit_lua/pal.lua `hostlist_has`) matches names by the same rules.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import groupby, product
from typing import Iterable, Iterator

from pal_slurm.slurm.errors import HostlistError, HostlistTooLarge

MAX_HOSTLIST_CHARS = 65_536  # the most text a user can put in --exclude / --nodelist
MAX_HOSTLIST_ITEMS = 32_768  # top-level names: every one of a 64 KiB list of one-letter names
MAX_GROUPS_PER_NAME = 4  # bracket groups in one name (Slurm writes one; users a few)
MAX_PRODUCT_ITEMS = 64  # names of two or more groups (tested one by one in HostSet)
MAX_NUMBER_DIGITS = 18  # digits of one range bound: no node name numbers further
MAX_EXPANDED_HOSTS = 131_072  # names `expand` lists: twice a 65,536-node site

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")
_ITEM = re.compile(r"([^\[\],]*)((?:\[[^\[\]]*\][^\[\],]*)*)")
_GROUP = re.compile(r"\[([^\[\]]*)\]([^\[\],]*)")
_SPACE = re.compile(r"\s")
_BRACKET = re.compile(r"[\[\]]")
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _clip(expr: str) -> str:
    """An expression as error messages quote it: never more than a line."""
    return expr if len(expr) <= 60 else f"{expr[:60]}... ({len(expr)} chars)"


@dataclass(frozen=True)
class _Group:
    """One bracket group: its ranges as written ((lo, hi, width)), and per width the merged
    sorted intervals (starts, ends) that membership bisects."""

    ranges: tuple[tuple[int, int, int], ...]
    by_width: dict[int, tuple[list[int], list[int]]] = field(compare=False)

    @classmethod
    def of(cls, ranges: Iterable[tuple[int, int, int]]) -> "_Group":
        ranges = tuple(ranges)
        by_width: dict[int, tuple[list[int], list[int]]] = {}
        for width, runs in groupby(sorted(ranges, key=lambda r: (r[2], r[0])), key=lambda r: r[2]):
            starts: list[int] = []
            ends: list[int] = []
            for lo, hi, _ in runs:
                if ends and lo <= ends[-1] + 1:
                    ends[-1] = max(ends[-1], hi)
                else:
                    starts.append(lo)
                    ends.append(hi)
            by_width[width] = (starts, ends)
        return cls(ranges, by_width)

    def has(self, digits: str) -> bool:
        """Whether the digit string is one this group lists: ``5`` is in ``[1-10]``, ``05``
        only in a range whose lower bound is written with two digits (Slurm's padding)."""
        length, value = len(digits), int(digits)
        padded = digits[0] == "0" and length > 1
        for width, (starts, ends) in self.by_width.items():
            if width == length or (width < length and not padded):
                i = bisect_right(starts, value) - 1
                if i >= 0 and ends[i] >= value:
                    return True
        return False


_Ranges = tuple[tuple[int, int, int], ...]  # one bracket group as written: (lo, hi, width)


def _size(ranges: _Ranges) -> int:
    return sum(hi - lo + 1 for lo, hi, _ in ranges)


def _values(ranges: _Ranges) -> list[str]:
    return [f"{n:0{width}d}" for lo, hi, width in ranges for n in range(lo, hi + 1)]


@dataclass(frozen=True)
class _Item:
    """One top-level name: literals[0] groups[0] literals[1] ... groups[-1] literals[-1]."""

    literals: tuple[str, ...]
    groups: tuple[_Ranges, ...]

    @property
    def size(self) -> int:
        """Names it lists, duplicates counted."""
        size = 1
        for g in self.groups:
            size *= _size(g)
        return size

    def names(self) -> Iterator[str]:
        if not self.groups:
            yield self.literals[0]
            return
        for values in product(*(_values(g) for g in self.groups)):
            parts = [self.literals[0]]
            for value, literal in zip(values, self.literals[1:]):
                parts += (value, literal)
            yield "".join(parts)


@dataclass(frozen=True)
class _Product:
    """A name of several bracket groups, compiled: matched by the positions a match can have
    reached, group by group (no listing)."""

    literals: tuple[str, ...]
    groups: tuple[_Group, ...]

    def matches(self, name: str) -> bool:
        first = self.literals[0]
        if not name.startswith(first):
            return False
        at = {len(first)}
        for group, literal in zip(self.groups, self.literals[1:]):
            nxt = set()
            for pos in at:
                end = pos
                while end < len(name) and name[end] in "0123456789" and end - pos < MAX_NUMBER_DIGITS:
                    end += 1
                    if group.has(name[pos:end]) and name.startswith(literal, end):
                        nxt.add(end + len(literal))
            if not nxt:
                return False
            at = nxt
        return len(name) in at


def _parse_ranges(body: str, expr: str) -> list[tuple[int, int, int]]:
    """``01-03,7`` -> [(1, 3, 2), (7, 7, 1)]."""
    out = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item)
        if m is None:
            raise HostlistError(f"bad range {item[:40]!r} in hostlist {_clip(expr)!r}")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        if len(lo_text) > MAX_NUMBER_DIGITS or len(hi_text) > MAX_NUMBER_DIGITS:
            raise HostlistTooLarge(f"number over {MAX_NUMBER_DIGITS} digits in hostlist {_clip(expr)!r}")
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise HostlistError(f"descending range {item!r} in hostlist {_clip(expr)!r}")
        out.append((lo, hi, len(lo_text)))
    return out


def _clean(expr: str | None) -> str:
    """The expression to parse, "" for Slurm's spellings of no nodes. Raises over the cap."""
    expr = (expr or "").strip()
    if expr in ("(null)", "None"):
        return ""
    if len(expr) > MAX_HOSTLIST_CHARS:
        raise HostlistTooLarge(f"hostlist of {len(expr)} chars (at most {MAX_HOSTLIST_CHARS})")
    return expr


def _parse(expr: str) -> list[_Item]:
    """One pass over the (clean) expression: its items in the order written. Raises
    HostlistError on malformed input, HostlistTooLarge over a cap."""
    if not expr:
        return []
    if _SPACE.search(expr):
        raise HostlistError(f"whitespace in hostlist {_clip(expr)!r}")
    if "[" not in expr and "]" not in expr:  # names only (the usual list): one split
        names = expr.split(",")
        if "" in names:
            raise HostlistError(f"empty element in hostlist {_clip(expr)!r}")
        if len(names) > MAX_HOSTLIST_ITEMS:
            raise HostlistTooLarge(f"more than {MAX_HOSTLIST_ITEMS} names in hostlist {_clip(expr)!r}")
        return [_Item((name,), ()) for name in names]
    items: list[_Item] = []
    products = 0
    pos = 0
    while True:
        m = _ITEM.match(expr, pos)
        assert m is not None  # every part of the pattern may be empty
        end = m.end()
        if end < len(expr) and expr[end] != ",":
            if expr[end] == "]":
                raise HostlistError(f"unbalanced ']' in hostlist {_clip(expr)!r}")
            after = _BRACKET.search(expr, end + 1)
            if after is None:
                raise HostlistError(f"unclosed '[' in hostlist {_clip(expr)!r}")
            raise HostlistError(f"nested '[' in hostlist {_clip(expr)!r}")
        if end == pos:
            raise HostlistError(f"empty element in hostlist {_clip(expr)!r}")
        literals = [m.group(1)]
        groups = []
        for g in _GROUP.finditer(m.group(2)):
            groups.append(tuple(_parse_ranges(g.group(1), expr)))
            literals.append(g.group(2))
            if len(groups) > MAX_GROUPS_PER_NAME:
                raise HostlistTooLarge(f"more than {MAX_GROUPS_PER_NAME} bracket groups in one name "
                                       f"of hostlist {_clip(expr)!r}")
        if len(groups) > 1:
            products += 1
            if products > MAX_PRODUCT_ITEMS:
                raise HostlistTooLarge(f"more than {MAX_PRODUCT_ITEMS} names of several bracket groups "
                                       f"in hostlist {_clip(expr)!r}")
        items.append(_Item(tuple(literals), tuple(groups)))
        if len(items) > MAX_HOSTLIST_ITEMS:
            raise HostlistTooLarge(f"more than {MAX_HOSTLIST_ITEMS} names in hostlist {_clip(expr)!r}")
        if end == len(expr):
            return items
        pos = end + 1
        if pos == len(expr):
            raise HostlistError(f"empty element in hostlist {_clip(expr)!r}")


def expand(expr: str, limit: int = MAX_EXPANDED_HOSTS) -> list[str]:
    """All host names of a hostlist expression, in the order written (duplicates kept once).

    Raises HostlistError on malformed input (unbalanced brackets, bad or descending ranges,
    empty elements), HostlistTooLarge when it would list more than `limit` names (counted
    before any is listed). An empty or blank expression is an empty list (Slurm's "no nodes").
    """
    items = _parse(_clean(expr))
    total = sum(item.size for item in items)
    if total > limit:
        raise HostlistTooLarge(f"hostlist {_clip(expr)!r} is too large ({total} names, at most {limit})")
    names: list[str] = []
    seen: set[str] = set()
    for item in items:
        for host in item.names():
            if host not in seen:
                seen.add(host)
                names.append(host)
    return names


@dataclass(frozen=True, eq=False)
class HostSet:
    """A hostlist expression compiled for membership: ``"gpu07" in HostSet.from_expr("gpu[01-09]")``
    without listing the names. Immutable; equal when the expressions are.

    Names are indexed by their literal prefix: plain names in a set, one-group names by
    (prefix, suffix) with their ranges merged per width, so a test costs a few lookups per
    digit position of the name whatever the number of items or the size of their ranges; the
    few names of several groups (at most MAX_PRODUCT_ITEMS) are tried one by one."""

    text: str = ""
    _plain: frozenset[str] = frozenset()
    _single: dict[tuple[str, str], _Group] = field(default_factory=dict)
    _prefixes: frozenset[str] = frozenset()
    _products: tuple[_Product, ...] = ()
    size_bound: int = 0  # names it lists, duplicates counted (exact for Slurm's own lists)

    @classmethod
    def from_expr(cls, expr: str | None) -> "HostSet":
        """Raises HostlistError on malformed input, HostlistTooLarge over a cap."""
        text = _clean(expr)
        items = _parse(text)
        plain: set[str] = set()
        single: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
        products: list[_Product] = []
        for item in items:
            if not item.groups:
                plain.add(item.literals[0])
            elif len(item.groups) == 1:
                single.setdefault((item.literals[0], item.literals[1]), []).extend(item.groups[0])
            else:
                products.append(_Product(item.literals, tuple(_Group.of(g) for g in item.groups)))
        groups = {key: _Group.of(ranges) for key, ranges in single.items()}
        bound = len(plain) + sum(item.size for item in items if item.groups)
        return cls(text, frozenset(plain), groups, frozenset(p for p, _ in groups), tuple(products), bound)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name:
            return False
        if name in self._plain:
            return True
        if self._single:
            for i, ch in enumerate(name):
                if ch not in "0123456789" or name[:i] not in self._prefixes:
                    continue
                end = i
                while end < len(name) and name[end] in "0123456789" and end - i < MAX_NUMBER_DIGITS:
                    end += 1
                    group = self._single.get((name[:i], name[end:]))
                    if group is not None and group.has(name[i:end]):
                        return True
        return any(item.matches(name) for item in self._products)

    def __bool__(self) -> bool:
        return bool(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HostSet) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"HostSet({_clip(self.text)!r})"

    def hosts(self, limit: int = MAX_EXPANDED_HOSTS) -> list[str]:
        """Its names, listed (`expand`): HostlistTooLarge when there would be over `limit`."""
        return expand(self.text, limit)


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
