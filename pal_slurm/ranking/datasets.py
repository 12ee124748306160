"""Loaders for the variability measurement formats (PAL artifact, hal-uw/blox-pal, MIT).

Two formats:
- per-run files (`*-longhorn-agg.csv`): one row per benchmark run, a GPU id column (`uuid`)
  and a `perf` column that is a *time* (larger = slower);
- per-GPU tables (`32gpu-variability.csv`): one row per GPU with `PerfVar_classA..D`.

Everything returns plain tuples of floats; normalisation (divide by the median) happens here
because every consumer wants it and the artifact defines it per file.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Mapping

# Which bundled per-run file stands for which class (the artifact's profiles.json; class C
# reuses the BERT file with independent draws).
ARTIFACT_CLASS_FILES: Mapping[str, str] = {
    "A": "resnet-longhorn-agg.csv",
    "B": "bert-longhorn-agg.csv",
    "C": "bert-longhorn-agg.csv",
    "D": "pagerank-longhorn-agg.csv",
}


class DatasetError(ValueError):
    """A variability file that cannot be read; the message names the file and the row."""


@dataclass(frozen=True)
class RunSet:
    """Normalised runs of one per-run file: perf / median(perf), in file order."""

    source: str
    gpu_ids: tuple[str, ...]  # GPU identifier of each run (uuid column)
    perf_norm: tuple[float, ...]

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
    node: str
    slot: int
    perfvar: Mapping[str, float]  # class letter -> PerfVar (>1 slower)


def bundled_path(name: str) -> Path:
    """Path of a bundled variability file."""
    return Path(str(resources.files("pal_slurm") / "data" / "variability" / name))


def _float(value: str, where: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: not a number: {value!r}") from None
    if out != out or out <= 0:
        raise DatasetError(f"{where}: must be a positive number, got {value!r}")
    return out


def load_runs(path: str | Path) -> RunSet:
    """Read a per-run file and normalise `perf` by the median over all rows."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or []
            if "perf" not in fields or "uuid" not in fields:
                raise DatasetError(
                    f"{path}: a per-run file needs 'uuid' and 'perf' columns, found {fields}"
                )
            ids, perf = [], []
            for lineno, row in enumerate(reader, start=2):
                perf.append(_float(row["perf"], f"{path}:{lineno} perf"))
                ids.append(row["uuid"].strip())
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from None
    if not perf:
        raise DatasetError(f"{path}: no rows")
    med = statistics.median(perf)
    return RunSet(str(path), tuple(ids), tuple(p / med for p in perf))


def load_perfvar_table(path: str | Path) -> list[PerfVarRow]:
    """Read a per-GPU table with columns GPU_ID, GPU_UUID, Local_GPU_ID, Node_ID, PerfVar_classX."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            fields = reader.fieldnames or []
            classes = [f[len("PerfVar_class"):] for f in fields if f.startswith("PerfVar_class")]
            if not classes or "GPU_ID" not in fields:
                raise DatasetError(
                    f"{path}: a per-GPU table needs GPU_ID and PerfVar_class* columns, found {fields}"
                )
            rows = []
            for lineno, row in enumerate(reader, start=2):
                where = f"{path}:{lineno}"
                try:
                    gid = int(row["GPU_ID"])
                    slot = int(row.get("Local_GPU_ID") or 0)
                except ValueError:
                    raise DatasetError(f"{where}: GPU_ID/Local_GPU_ID must be integers") from None
                rows.append(
                    PerfVarRow(
                        gpu_id=gid,
                        uuid=(row.get("GPU_UUID") or f"gpu-{gid}").strip(),
                        node=str(row.get("Node_ID", "0")).strip(),
                        slot=slot,
                        perfvar={c: _float(row[f"PerfVar_class{c}"], f"{where} PerfVar_class{c}") for c in classes},
                    )
                )
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from None
    if not rows:
        raise DatasetError(f"{path}: no rows")
    return rows


def detect_format(path: str | Path) -> str:
    """'runs' or 'table' from the header; DatasetError otherwise."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            header = next(csv.reader(fh), [])
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from None
    if "perf" in header and "uuid" in header:
        return "runs"
    if any(h.startswith("PerfVar_class") for h in header):
        return "table"
    raise DatasetError(f"{path}: unknown variability format (header {header[:8]})")


def artifact_class_runs() -> dict[str, RunSet]:
    """The bundled per-run data for each artifact class A..D (files cached per name)."""
    cache: dict[str, RunSet] = {}
    out = {}
    for cls, name in ARTIFACT_CLASS_FILES.items():
        if name not in cache:
            cache[name] = load_runs(bundled_path(name))
        out[cls] = cache[name]
    return out
