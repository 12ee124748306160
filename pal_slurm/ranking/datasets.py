"""Loaders for the variability measurement formats (PAL artifact, hal-uw/blox-pal, MIT).

Two formats:
- per-run files (`*-longhorn-agg.csv`): one row per benchmark run, a GPU id column (`uuid`)
  and a `perf` column that is a *time* (larger = slower);
- per-GPU tables (`32gpu-variability.csv`): one row per GPU with `PerfVar_classA..D`.

Each also says, where it can, which node and slot a GPU sits in (`RunSet.located`,
`PerfVarRow.node`); placing GPUs on a cluster is pal_slurm.bench.importer's job.

Everything returns plain tuples of floats; normalisation (divide by the median) happens here
because every consumer wants it and the artifact defines it per file.
"""

from __future__ import annotations

import csv
import functools
import io
import re
import statistics
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

from pal_slurm.input_files import CsvRow, InputError, read_csv, read_text

# Which bundled per-run file stands for which class (the artifact's profiles.json; class C
# reuses the BERT file with independent draws).
ARTIFACT_CLASS_FILES: Mapping[str, str] = {
    "A": "resnet-longhorn-agg.csv",
    "B": "bert-longhorn-agg.csv",
    "C": "bert-longhorn-agg.csv",
    "D": "pagerank-longhorn-agg.csv",
}


class DatasetError(InputError):
    """A variability file that cannot be read; the message names the file, the line and the column."""


# Columns that name a GPU's slot on its node in a per-run file (with a `node` column).
DEVICE_COLUMNS = ("device", "slot", "gpu", "local_gpu_id", "dev_id")

Location = tuple[str, int]  # (node name, GPU slot)

# A GPU more than this many times slower (or faster) than the median is a unit mistake.
MAX_RATIO = 1e6


@dataclass(frozen=True)
class RunSet:
    """Normalised runs of one per-run file: perf / median(perf), in file order."""

    source: str
    gpu_ids: tuple[str, ...]  # GPU identifier of each run (uuid column)
    perf_norm: tuple[float, ...]
    # GPU identifier -> (node, slot) where the file says, for every GPU or for none: a file that
    # places only some of its GPUs (or two at one slot) places none
    located: Mapping[str, Location] = field(default_factory=dict)

    def per_gpu_median(self) -> dict[str, float]:
        """GPU identifier -> median of its normalised runs (a GPU's measured profile)."""
        return {gid: statistics.median(vs) for gid, vs in self.runs_of().items()}

    def runs_of(self) -> dict[str, tuple[float, ...]]:
        """GPU identifier -> its normalised runs, in file order."""
        runs: dict[str, list[float]] = {}
        for gid, v in zip(self.gpu_ids, self.perf_norm):
            runs.setdefault(gid, []).append(v)
        return {k: tuple(v) for k, v in runs.items()}


@dataclass(frozen=True)
class PerfVarRow:
    """One GPU of a per-GPU table."""

    gpu_id: int
    uuid: str
    node: str | None  # Node_ID; None when the table has no Node_ID column
    slot: int
    perfvar: Mapping[str, float]  # class letter -> PerfVar (>1 slower)


def bundled_path(name: str) -> Path:
    """Path of a bundled variability file."""
    return Path(str(resources.files("pal_slurm") / "data" / "variability" / name))


def load_runs(path: str | Path) -> RunSet:
    """Read a per-run file and normalise `perf` by the median over all rows."""
    table = read_csv(path, what="variability file", error=DatasetError)
    device = next((c for c in DEVICE_COLUMNS if c in table.header), None)
    # node/device columns place GPUs only where there is no uuid (Longhorn's node column is a
    # number inside a cabinet; its uuid `cab-node-dev` is the full location)
    located = "uuid" not in table.header and "node" in table.header and device is not None
    if "perf" not in table.header or not ("uuid" in table.header or located):
        raise DatasetError(f"a per-run file needs 'perf' and 'uuid' (or 'node' and 'device') columns, "
                           f"found {list(table.header)}", path, 1)
    ids, perf = [], []
    where: dict[str, set[Location]] = {}
    for row in table.rows:
        perf.append(row.number("perf", above=0.0))
        loc = _row_location(row, device, "cabinet" in table.header)
        if located and loc is None:  # with no uuid, the location is the GPU's only name
            row.text("node")
            row.integer(str(device), minimum=0)
            raise row.fail(f"{row.get('node')!r} names no node; a file without uuids needs one on every row", "node")
        gid = f"{loc[0]}-{loc[1]}" if located and loc else row.text("uuid")
        ids.append(gid)
        where.setdefault(gid, set())
        if loc:
            where[gid].add(loc)
    if not perf:
        raise DatasetError("no rows (only a header)", path)
    med = statistics.median(perf)
    norm = tuple(p / med for p in perf)
    _check_spread(path, table.rows, norm, "perf")
    return RunSet(str(path), tuple(ids), norm, _one_place_each(where, device is not None))


def _row_location(row: CsvRow, device: str | None, cabinet: bool) -> Location | None:
    """(node, slot) from the row's `node` and device columns (node `CAB-NODE` with a `cabinet`
    column); None where they are missing or negative (Longhorn's -1 = not recorded)."""
    node = row.get("node").strip()
    if device is None or not node or node.startswith("-"):
        return None
    try:
        slot = int(row.get(device).strip())
    except ValueError:
        return None
    if slot < 0:
        return None
    cab = row.get("cabinet").strip() if cabinet else ""
    return (f"{cab}-{node}" if cab and not cab.startswith("-") else node, slot)


def _one_place_each(where: Mapping[str, set[Location]], columns: bool) -> dict[str, Location]:
    """Each GPU's one location, or {} unless every GPU has exactly one and no two share one.

    Without location columns a `NAME-N` id (Longhorn's `cab-node-dev`; not an NVIDIA `GPU-...`
    UUID) is node NAME, slot N."""
    out: dict[str, Location] = {}
    for gid, locs in where.items():
        if not columns and not locs:
            m = re.fullmatch(r"(.+)-(\d+)", gid)
            if m and not gid.startswith("GPU-"):
                locs = {(m.group(1), int(m.group(2)))}
        if len(locs) != 1:
            return {}
        out[gid] = next(iter(locs))
    return out if len(set(out.values())) == len(out) else {}


def _check_spread(path: str | Path, rows: Sequence[CsvRow], values: Sequence[float], column: str) -> None:
    for row, v in zip(rows, values):
        if not (1.0 / MAX_RATIO <= v <= MAX_RATIO):
            raise row.fail(f"{v:.3g} x the median; a unit mistake?", column)


def load_perfvar_table(path: str | Path) -> list[PerfVarRow]:
    """Read a per-GPU table with columns GPU_ID, GPU_UUID, Local_GPU_ID, Node_ID, PerfVar_classX."""
    table = read_csv(path, what="variability file", error=DatasetError)
    fields = table.header
    classes = [f[len("PerfVar_class"):] for f in fields if f.startswith("PerfVar_class")]
    if not classes or "GPU_ID" not in fields:
        raise DatasetError(f"a per-GPU table needs GPU_ID and PerfVar_class* columns, found {list(fields)}", path, 1)
    rows = []
    first: dict[object, int] = {}
    for row in table.rows:
        gid = row.integer("GPU_ID", minimum=0)
        slot = row.integer("Local_GPU_ID", minimum=0) if row.get("Local_GPU_ID") else 0
        node = (row.get("Node_ID", "0") or "0") if "Node_ID" in fields else None
        for key, column in ((gid, "GPU_ID"), (("slot", node, slot), "Local_GPU_ID")):
            if node is None and column == "Local_GPU_ID":
                continue
            if key in first:
                raise row.fail(f"GPU {'id' if column == 'GPU_ID' else 'slot'} appears twice (first on line {first[key]})", column)
            first[key] = row.line
        perfvar = {c: row.number(f"PerfVar_class{c}", above=1.0 / MAX_RATIO, maximum=MAX_RATIO) for c in classes}
        rows.append(PerfVarRow(gpu_id=gid, uuid=row.get("GPU_UUID") or f"gpu-{gid}", node=node, slot=slot,
                               perfvar=perfvar))
    if not rows:
        raise DatasetError("no rows (only a header)", path)
    return rows


def detect_format(path: str | Path) -> str:
    """'runs' or 'table' from the header; DatasetError otherwise."""
    text = read_text(path, what="variability file", error=DatasetError)
    header = [h.strip() for h in next(csv.reader(io.StringIO(text.split("\n", 1)[0])), [])]
    if "perf" in header and ("uuid" in header or ("node" in header and any(c in header for c in DEVICE_COLUMNS))):
        return "runs"
    if any(h.startswith("PerfVar_class") for h in header):
        return "table"
    if not text.strip():
        raise DatasetError("empty variability file", path)
    raise DatasetError(f"unknown variability format (header {header[:8]}); expected a per-run file "
                       "(uuid,perf) or a per-GPU table (GPU_ID,PerfVar_class*)", path, 1)


def artifact_class_runs() -> dict[str, RunSet]:
    """The bundled per-run data for each artifact class A..D."""
    return {cls: _bundled_runs(name) for cls, name in ARTIFACT_CLASS_FILES.items()}


@functools.lru_cache(maxsize=None)
def _bundled_runs(name: str) -> RunSet:
    """A bundled file, read once per process: it never changes, and every simulator run (36 in
    the artifact's grid) draws its GPUs from it. A RunSet is frozen, so sharing it is safe."""
    return load_runs(bundled_path(name))
