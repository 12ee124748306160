"""Turn a variability dataset into samples on cluster GPUs: the one reader of per-GPU layouts
that `palctl import-variability` and `palctl simulate/whatif --variability` share (pure apart
from reading the file).

Formats (see pal_slurm.ranking.datasets): a per-GPU table (`PerfVar_classA..D`, one row per GPU)
gives one sample per GPU and class; a per-run file gives one sample per run for one class, named
by `CLASS=FILE` or the command's class option. Where each GPU goes, first that applies:
1. `--map-to-nodes`: dataset GPUs in id order fill the nodes' slots in order;
2. the file's own locations: a table's Node_ID/Local_GPU_ID; a per-run file's `node` and device
   columns (node `CABINET-NODE` with a `cabinet` column) or `NODE-SLOT` ids;
3. by position: dataset GPUs in id order fill `node0`, `node1`, ... `gpus_per_node` at a time
   (NVIDIA UUIDs with no location, or locations that are missing or shared).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

from pal_slurm.bench.base import Sample
from pal_slurm.ranking.datasets import (
    ARTIFACT_CLASS_FILES,
    DatasetError,
    Location,
    detect_format,
    load_perfvar_table,
    load_runs,
)

BACKEND = "import"


def slots_of(nodes: Sequence[str], gpus_per_node: int) -> list[tuple[str, int]]:
    return [(n, s) for n in nodes for s in range(gpus_per_node)]


def split_class(spec: str) -> tuple[str | None, str]:
    """`CLASS=FILE` -> (CLASS upper-cased, FILE); anything else -> (None, spec)."""
    m = re.fullmatch(r"([A-Za-z])=(.+)", spec.strip())
    return (m.group(1).upper(), m.group(2)) if m else (None, spec.strip())


def class_for_file(path: str | Path) -> str | None:
    """A bundled per-run file's class (resnet -> A, bert -> B, pagerank -> D), else None."""
    name = Path(path).name
    for cls, fname in ARTIFACT_CLASS_FILES.items():
        if fname == name:
            return cls  # first match: bert -> B (C reuses the same file)
    return None


def place(path: str | Path, ids: Sequence[str], located: Mapping[str, Location], nodes: Sequence[str] | None,
          gpus_per_node: int) -> dict[str, Location]:
    """Dataset GPU id -> (node, slot), `ids` in dataset order (rules in the module docstring)."""
    if nodes:
        slots = slots_of(nodes, gpus_per_node)
        if len(ids) < len(slots):
            raise DatasetError(f"{path}: {len(ids)} GPUs in the file, {len(slots)} slots to fill "
                               "(--map-to-nodes x --gpus-per-node)")
        return dict(zip(ids, slots))
    if ids and all(i in located for i in ids):
        return {i: located[i] for i in ids}
    return {gid: (f"node{i // gpus_per_node}", i % gpus_per_node) for i, gid in enumerate(ids)}


def import_samples(
    path: str | Path,
    *,
    nodes: Sequence[str] | None = None,
    gpus_per_node: int = 4,
    perf_class: str | None = None,
    now: float = 0.0,
    class_option: str = "--class",
) -> list[Sample]:
    """Samples for the dataset at `path`; DatasetError explains anything that does not fit.

    `class_option` is how the calling command names a per-run file's class, for the error that
    asks for it."""
    fmt = detect_format(path)
    if fmt == "table":
        rows = sorted(load_perfvar_table(path), key=lambda r: r.gpu_id)
        table_ids = [str(r.gpu_id) for r in rows]
        table_at = place(path, table_ids, {str(r.gpu_id): (f"node{r.node}", r.slot) for r in rows if r.node is not None},
                         nodes, gpus_per_node)
        out = []
        for key, row in zip(table_ids, rows):
            if key not in table_at:
                break  # more GPUs than --map-to-nodes slots
            node, slot = table_at[key]
            for cls, v in sorted(row.perfvar.items()):
                if perf_class and cls != perf_class:
                    continue
                out.append(Sample(node, slot, cls, BACKEND, v, False, {"perfvar": v, "dataset_gpu": row.uuid},
                                  uuid=row.uuid, taken_at=now))
        return out
    run_class = perf_class or class_for_file(path)
    if not run_class:
        raise DatasetError(f"{path}: a per-run file covers one class; say which with {class_option}")
    runs = load_runs(path)
    at = place(path, sorted(set(runs.gpu_ids)), runs.located, nodes, gpus_per_node)
    out = []
    for gid, v in zip(runs.gpu_ids, runs.perf_norm):
        if gid in at:
            node, slot = at[gid]
            out.append(Sample(node, slot, run_class, BACKEND, v, False, {"perf_norm": v, "dataset_gpu": gid}, taken_at=now))
    return out
