"""Turn a variability dataset into samples on cluster GPUs (pure apart from reading the file).

Formats (see pal_slurm.ranking.datasets): a per-GPU table (`PerfVar_classA..D`, one row per GPU)
gives one sample per GPU and class; a per-run file gives one sample per run for one class.
GPUs are placed on the cluster either by `--map-to-nodes` (dataset GPUs in id order fill the
nodes' slots in order) or by the dataset's own node/slot columns (table) or `cab-node-dev` ids
(Longhorn runs).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from pal_slurm.bench.base import Sample
from pal_slurm.ranking.datasets import (
    ARTIFACT_CLASS_FILES,
    DatasetError,
    detect_format,
    load_perfvar_table,
    load_runs,
)

BACKEND = "import"


def slots_of(nodes: Sequence[str], gpus_per_node: int) -> list[tuple[str, int]]:
    return [(n, s) for n in nodes for s in range(gpus_per_node)]


def class_for_file(path: str | Path) -> str | None:
    """A bundled per-run file's class (resnet -> A, bert -> B, pagerank -> D), else None."""
    name = Path(path).name
    for cls, fname in ARTIFACT_CLASS_FILES.items():
        if fname == name:
            return cls  # first match: bert -> B (C reuses the same file)
    return None


def import_samples(
    path: str | Path,
    *,
    nodes: Sequence[str] | None = None,
    gpus_per_node: int = 4,
    perf_class: str | None = None,
    now: float = 0.0,
) -> list[Sample]:
    """Samples for the dataset at `path`; DatasetError explains anything that does not fit."""
    fmt = detect_format(path)
    slots = slots_of(nodes, gpus_per_node) if nodes else None
    if fmt == "table":
        rows = sorted(load_perfvar_table(path), key=lambda r: r.gpu_id)
        if slots is not None and len(rows) < len(slots):
            raise DatasetError(f"{path}: {len(rows)} GPUs in the file, {len(slots)} slots to fill")
        out = []
        for i, row in enumerate(rows):
            if slots is not None and i >= len(slots):
                break
            node, slot = slots[i] if slots is not None else (f"node{row.node}", row.slot)
            for cls, v in sorted(row.perfvar.items()):
                if perf_class and cls != perf_class:
                    continue
                out.append(Sample(node, slot, cls, BACKEND, v, False, {"perfvar": v, "dataset_gpu": row.uuid},
                                  uuid=row.uuid, taken_at=now))
        return out
    run_class = perf_class or class_for_file(path)
    if not run_class:
        raise DatasetError(f"{path}: a per-run file covers one class; say which with --class")
    runs = load_runs(path)
    ids = sorted(set(runs.gpu_ids))
    if slots is not None:
        if len(ids) < len(slots):
            raise DatasetError(f"{path}: {len(ids)} GPUs in the file, {len(slots)} slots to fill")
        place = dict(zip(ids, slots))
    else:
        place = {}
        for gid in ids:
            m = re.fullmatch(r"(.+)-(\d+)", gid)
            if not m or gid.startswith("GPU-"):
                raise DatasetError(f"{path}: GPU id {gid!r} names no node and slot; use --map-to-nodes")
            place[gid] = (m.group(1), int(m.group(2)))
    out = []
    for gid, v in zip(runs.gpu_ids, runs.perf_norm):
        if gid in place:
            node, slot = place[gid]
            out.append(Sample(node, slot, run_class, BACKEND, v, False, {"perf_norm": v, "dataset_gpu": gid}, taken_at=now))
    return out
