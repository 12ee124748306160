"""GRES strings as Slurm prints them for nodes and jobs, and the one place that knows the
``gres:`` / ``gres/`` spelling of a job's TRES items. Pure.

A job's TRES items come in both releases' spellings: ``gres:gpu:s2:1`` (22.05, and what
job_submit.lua writes) and ``gres/gpu:s2:1`` (23.02+, in the hook's job_desc and in squeue),
so every reader strips the prefix with `unprefixed` and the two read the same. The GPU slot
types (``s0``..``sN-1``) that let pal-slurm bind exact GPUs are named here too: writing them
is pal_slurm/slurm/gres.py's job, reading them this module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from pal_slurm.slurm.errors import GresTooLarge, SlurmError, SlurmParseError

GPU = "gpu"
GRES_NAME = GPU  # the GRES name of GPUs in gres.conf and slurm.conf
SLOT_PREFIX = "s"  # GPU slot K has the GRES type sK
_PREFIXES = ("gres:", "gres/")  # 22.05 (and the hook) / 23.02+ spelling of a TRES item


def unprefixed(item: str) -> str:
    """A TRES item without its ``gres:`` or ``gres/`` prefix (``gres/gpu:2`` -> ``gpu:2``);
    an item without one as it is."""
    for prefix in _PREFIXES:
        if item.startswith(prefix):
            return item[len(prefix):]
    return item


def gres_name(tres_name: str) -> str | None:
    """The GRES an accounting TRES name counts (``gres/gpu:a100`` -> ``gpu:a100``); None for a
    TRES that is not a GRES (cpu, mem, node, billing)."""
    return tres_name[len(_PREFIXES[1]):] if tres_name.startswith(_PREFIXES[1]) else None


def slash_spelled(text: str) -> bool:
    """Whether a TRES string holds an item in 23.02+'s ``gres/`` spelling."""
    return any(item.startswith(_PREFIXES[1]) for item in text.split(","))


def parse_slot_type(type_name: str | None) -> int | None:
    """``"s3"`` -> 3; anything that is not one of pal-slurm's slot types -> None."""
    if not type_name or not type_name.startswith(SLOT_PREFIX):
        return None
    digits = type_name[len(SLOT_PREFIX) :]
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True)
class GresItem:
    """One record of a GRES string: ``gpu:s2:1(IDX:2)`` -> name gpu, type s2, count 1, {2}."""

    name: str
    type: str | None
    count: int
    indices: frozenset[int] | None = None  # None when Slurm printed no IDX (or IDX:N/A)


def _split_outside_parens(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (s.strip() for s in parts) if p]


MAX_GRES_CHARS = 16_384  # a GRES/TRES string: a node's every slot type, with its indices
MAX_GPU_INDEX = 1023  # the largest GPU index: indices are GPU slots of one node, a few hundred at most
MAX_INDEX_LIST_CHARS = 4096  # every index of such a node, written one by one


def parse_index_list(text: str) -> frozenset[int]:
    """``0-1,3`` -> {0, 1, 3}; ``""`` -> empty. SlurmParseError for anything else, and for an
    index over MAX_GPU_INDEX or a text over MAX_INDEX_LIST_CHARS (checked before a range is
    built: ``IDX:0-2999999`` is 19 bytes)."""
    if len(text) > MAX_INDEX_LIST_CHARS:
        raise GresTooLarge(f"GPU index list of {len(text)} chars (at most {MAX_INDEX_LIST_CHARS})")
    out: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        m = _INDEX_RANGE.fullmatch(item)
        if m is None:
            raise SlurmParseError(f"bad GPU index list {text[:60]!r}")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        if len(hi_text) > len(str(MAX_GPU_INDEX)) or int(hi_text) > MAX_GPU_INDEX:
            raise GresTooLarge(f"GPU index {hi_text[:20]} over {MAX_GPU_INDEX} in {text[:60]!r}")
        if len(lo_text.lstrip("0")) > len(hi_text):
            continue  # descending: no index, as a range(lo, hi + 1) with lo > hi always gave
        lo, hi = int(lo_text), int(hi_text)
        out.update(range(lo, hi + 1))
    return frozenset(out)


_INDEX_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _parse_attrs(text: str) -> dict[str, str]:
    """``S:0-1`` / ``IDX:0,2-3`` -> {"IDX": "0,2-3"}: a comma piece without ':' continues
    the previous attribute's list."""
    attrs: dict[str, list[str]] = {}
    key = None
    for piece in text.split(","):
        if ":" in piece:
            key, _, value = piece.partition(":")
            attrs[key] = [value]
        elif key is not None:
            attrs[key].append(piece)  # joined once below: += here is quadratic in the pieces
    return {k: ",".join(v) for k, v in attrs.items()}


def slots_named(text: str | None) -> tuple[int, ...]:
    """The GPU slots a GRES/TRES string names by pal-slurm's per-slot types (`gpu:s1:1,gpu:s3:1`
    -> (1, 3)); () when any GPU item is untyped or of another type (the slots are not all
    known), or the string does not parse."""
    try:
        items = [i for i in parse_gres(text) if i.name == "gpu"]
    except SlurmError:
        return ()
    slots = [parse_slot_type(i.type) for i in items]
    if any(s is None for s in slots):
        return ()
    return tuple(sorted({s for s in slots if s is not None}))


def parse_gres(text: str | None) -> tuple[GresItem, ...]:
    """Parse a GRES string (configured, used or per-node job detail). ``(null)``/N/A -> ().

    A job's TRES items come in both releases' spellings: ``gres:gpu:s2:1`` (22.05, and what
    job_submit.lua writes) and ``gres/gpu:s2:1`` (23.02+, in the hook's job_desc and in
    squeue; ``gres/gpu:a100=1`` with ``cpu=2`` beside it in tres_per_task), so the type and
    count of a GPU request read the same on either."""
    if text is None:
        return ()
    text = text.strip()
    if text in ("", "(null)", "N/A"):
        return ()
    if len(text) > MAX_GRES_CHARS:
        raise GresTooLarge(f"GRES string of {len(text)} chars (at most {MAX_GRES_CHARS})")
    items = []
    for record in _split_outside_parens(text):
        head, _, tail = record.partition("(")
        indices = None
        if tail:
            attrs = _parse_attrs(tail.rstrip(")"))
            if "IDX" in attrs and attrs["IDX"] != "N/A":
                indices = parse_index_list(attrs["IDX"])
        count_text = None
        if "=" in head:  # 23.02+ tres_per_task: "cpu=2,gres/gpu:a100=1"
            head, _, count_text = head.rpartition("=")
        fields = unprefixed(head).split(":") + ([count_text] if count_text is not None else [])
        name = fields[0] if fields else ""
        if not name:
            raise SlurmParseError(f"bad GRES record {record!r} in {text!r}")
        type_: str | None = None
        count = 1
        if len(fields) == 2:
            if fields[1].isdigit():
                count = int(fields[1])
            else:
                type_ = fields[1]
        elif len(fields) == 3:
            type_ = fields[1]
            if not fields[2].isdigit():
                raise SlurmParseError(f"bad GRES count in {record!r}")
            count = int(fields[2])
        elif len(fields) > 3:
            raise SlurmParseError(f"bad GRES record {record!r} in {text!r}")
        items.append(GresItem(name, type_, count, indices))
    return tuple(items)


def gpus_in(items: Iterable[GresItem]) -> int:
    """GPUs of parsed GRES records (a node's configured or used GPUs)."""
    return sum(i.count for i in items if i.name == GPU)


def gpu_indices(items: Iterable[GresItem]) -> frozenset[int] | None:
    """Union of the IDX of every gpu record with a count; None if some count has no IDX."""
    out: set[int] = set()
    for item in items:
        if item.name != GPU or item.count == 0:
            continue
        if item.indices is None:
            return None
        out |= item.indices
    return frozenset(out)
