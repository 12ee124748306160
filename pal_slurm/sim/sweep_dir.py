"""The folder of a sweep run as a Slurm job array (`palctl simulate --array --array-dir DIR`).

    DIR/sweep.json            what was asked: the command, its arguments, the cells, the job ids
    DIR/element.sh, merge.sh  the batch scripts sbatch was given
    DIR/elements/I.json       element I's result (sim.sweep.element_document), written atomically
    DIR/elements/I.error      element I's error, when it failed
    DIR/logs/                 Slurm's output of each element and of the merge job
    DIR/report.json, .txt     the merged report (what the serial run prints), written by the merge

The compute nodes write here, so DIR must be on a file system they share with the submitting
host. Files are written through a temporary name and renamed, so a reader (`--status`, the
merge) never sees half a document.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from pal_slurm.atomic_file import write_atomic

MANIFEST_FORMAT = 1


class SweepDirError(ValueError):
    """A folder that is not a sweep's, or one that already holds another sweep."""


class SweepDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).absolute()

    @property
    def manifest_path(self) -> Path:
        return self.path / "sweep.json"

    @property
    def elements_dir(self) -> Path:
        return self.path / "elements"

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    def element_path(self, index: int) -> Path:
        return self.elements_dir / f"{index}.json"

    def error_path(self, index: int) -> Path:
        return self.elements_dir / f"{index}.error"

    def element_log(self, index: int) -> Path:
        return self.logs_dir / f"element-{index}.out"

    @property
    def merge_log(self) -> Path:
        return self.logs_dir / "merge.out"

    @property
    def report_json(self) -> Path:
        return self.path / "report.json"

    @property
    def report_text(self) -> Path:
        return self.path / "report.txt"

    def script_path(self, name: str) -> Path:
        return self.path / f"{name}.sh"

    # ---- the manifest -----------------------------------------------------------------------
    def create(self, manifest: Mapping[str, Any]) -> None:
        """Make the folder and write the manifest; refuses a folder that holds a sweep already
        (its element results would mix with this one's)."""
        if self.manifest_path.exists():
            raise SweepDirError(f"{self.path} holds a sweep already ({self.manifest_path.name}); "
                                "give a new --array-dir")
        try:
            self.elements_dir.mkdir(parents=True, exist_ok=True)
            self.logs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SweepDirError(f"cannot create {self.path}: {exc.strerror or exc}") from None
        self.write_manifest(manifest)

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        write_atomic(self.manifest_path, json.dumps({**manifest, "format": MANIFEST_FORMAT}, indent=1) + "\n")

    def manifest(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise SweepDirError(f"{self.path}: no sweep here (no {self.manifest_path.name}; "
                                "palctl simulate --array --array-dir DIR writes one)") from None
        except (OSError, ValueError) as exc:
            raise SweepDirError(f"{self.manifest_path}: unreadable ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
            raise SweepDirError(f"{self.manifest_path}: not a sweep manifest of format {MANIFEST_FORMAT}")
        return doc

    # ---- elements ---------------------------------------------------------------------------
    def write_element(self, index: int, doc: Mapping[str, Any]) -> None:
        write_atomic(self.element_path(index), json.dumps(doc) + "\n")
        self.error_path(index).unlink(missing_ok=True)  # a rerun that succeeded

    def write_error(self, index: int, text: str) -> None:
        write_atomic(self.error_path(index), text.rstrip() + "\n")

    def element_documents(self) -> dict[int, dict[str, Any]]:
        """Element index -> its result document, for every result written."""
        out: dict[int, dict[str, Any]] = {}
        for i in self._indices(".json"):
            try:
                out[i] = json.loads(self.element_path(i).read_text())
            except (OSError, ValueError) as exc:
                raise SweepDirError(f"{self.element_path(i)}: unreadable ({exc})") from None
        return out

    def done(self) -> set[int]:
        return set(self._indices(".json"))

    def errors(self) -> dict[int, str]:
        """Element index -> the error it wrote."""
        out = {}
        for i in self._indices(".error"):
            try:
                out[i] = self.error_path(i).read_text(errors="replace").strip()
            except OSError:
                continue
        return out

    def log_tail(self, index: int, lines: int = 5) -> str:
        """The last lines of an element's Slurm output ('' when it has none)."""
        try:
            text = self.element_log(index).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def _indices(self, suffix: str) -> list[int]:
        try:
            names = os.listdir(self.elements_dir)
        except OSError:
            return []
        return sorted(int(n[: -len(suffix)]) for n in names if n.endswith(suffix) and n[: -len(suffix)].isdigit())
