"""A job's GPU request as its TRES strings say it: the one reader of GPU counts, per-GPU
amounts and GPU models in `tres_per_node` / `tres_per_job` / `--cpus-per-gpu`-style fields.
Pure.

pald reads these strings from the hook at submit and from squeue for held jobs, the simulator
from sacct: all through here, so a job asks for the same GPUs wherever it is read. The Lua
hook keeps its own `gpu_count` (it runs inside slurmctld); both are tested against the same
golden table (tests/golden/gpu_count.json).
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

from pal_slurm.intake.gres import GPU, parse_gres, parse_slot_type, unprefixed
from pal_slurm.intake.refusals import TOO_LARGE, RefusedInput
from pal_slurm.slurm.errors import GresTooLarge, SlurmError


def gpu_count(tres: str | None) -> int | None:
    """GPUs in a TRES string ("gres:gpu:2", "gres:gpu:s2:1,gres:gpu:s3:1", "gres/gpu:4").

    None when it names no GPU or holds a GPU count that cannot be read (as the Lua hook's)."""
    if not isinstance(tres, str) or not tres:
        return None
    total, seen = 0, False
    for item in tres.split(","):
        parts = unprefixed(item).split(":")
        if parts[0] != GPU:
            continue
        seen = True
        last = parts[-1]
        if len(parts) == 1:
            total += 1  # "gpu": one GPU
        elif last.isdigit() and len(parts) <= 3:
            total += int(last)  # "gpu:N" or "gpu:type:N"
        elif len(parts) == 2:
            total += 1  # "gpu:type": one GPU
        else:
            return None
    return total if seen else None


_PER_GPU = re.compile(r"gpu:(\d+)")


def per_gpu(tres: str | None) -> int:
    """`gres:gpu:2` (--cpus-per-gpu / --mem-per-gpu) -> 2; anything else -> 0."""
    for item in (tres or "").split(","):
        m = _PER_GPU.fullmatch(unprefixed(item))
        if m:
            return int(m.group(1))
    return 0


def canonical_tres(text: str) -> str:
    """A job's TRES string in one spelling: ``gres/gpu:s2:1`` (Slurm 23.02+) -> ``gres:gpu:s2:1``
    (22.05, and what job_submit.lua writes); ``""`` stays ``""``."""
    return ",".join(
        "gres:" + unprefixed(item) if item.startswith("gres/") else item for item in text.split(",")
    ) if text else ""


def gpu_model(*tres: str | None) -> str | None:
    """The GPU model type a request names (`gres:gpu:a100:2` -> a100); slot types (s2) and
    untyped requests -> None. RefusedInput for a string over the GRES caps (its model is not
    known, so PAL must not place it on any model)."""
    for text in tres:
        model = _model_of(text)
        if model is not None:
            return model
    return None


_MEMO_CHARS = 256  # longer TRES strings (user text) are parsed every time, never kept


def _model_of(text: str | None) -> str | None:
    """One TRES string's GPU model (memoised: the same few strings come every cycle)."""
    return _memo_model(text) if text is None or len(text) <= _MEMO_CHARS else _gpu_model(text)


def _gpu_model(text: str | None) -> str | None:
    try:
        items = parse_gres(text)
    except GresTooLarge as exc:
        raise RefusedInput(f"{TOO_LARGE}:gres", str(exc)) from None
    except SlurmError:
        return None
    for item in items:
        if item.name == GPU and item.type is not None and parse_slot_type(item.type) is None:
            return item.type
    return None


_memo_model = functools.lru_cache(maxsize=1024)(_gpu_model)


def is_gpu(name: str) -> bool:
    """Whether a GRES name (``gpu``, ``gpu:a100``) counts GPUs."""
    return name == GPU or name.startswith(GPU + ":")


def accounting_gpus(counts: Iterable[tuple[str, int]]) -> int:
    """GPUs a job held, from accounting's GRES counts (name, count): the plain ``gpu`` total,
    else the typed ``gpu:<type>`` ones summed (with AccountingStorageTRES naming models,
    accounting lists the same GPUs under both)."""
    plain, typed = 0, 0
    for name, count in counts:
        if name == GPU:
            plain += count
        elif is_gpu(name):
            typed += count
    return plain or typed


def requested_model(names: Iterable[str]) -> str | None:
    """The GPU model of the first typed GPU request among GRES names (``gpu:a100``), not one
    of pal-slurm's slot types."""
    for name in names:
        if name.startswith(GPU + ":"):
            model = name[len(GPU) + 1:]
            if model and parse_slot_type(model) is None:
                return model
    return None


def asks_for_gpus(tres: str | None) -> bool:
    """Whether a TRES string asks for GPUs at all."""
    try:
        return any(item.name == GPU for item in parse_gres(tres))
    except SlurmError:
        return bool(tres and "gpu" in tres)
