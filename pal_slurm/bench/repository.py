"""Where profiling data lives: the store's repository when configured, else local files.

TODO(store): the store (pal_slurm/store, branch `store`) provides the shared database. Until it
lands in main, `open_repository` returns a `FileRepository`: samples as JSON lines and ranking
snapshots as JSON files under one directory (one host or a shared filesystem). It is a real,
persistent repository used by palctl and the prolog; it implements the same small interface
(`add_samples`, `samples`, `latest_ranking`, `save_ranking`) the store adapter will.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Protocol, Sequence

from pal_slurm.bench import spool
from pal_slurm.bench.base import Sample
from pal_slurm.bench.rank import RankingSnapshot


class StoreUnavailable(RuntimeError):
    """The store cannot be reached now (samples get spooled)."""


class ProfilingRepository(Protocol):
    def add_samples(self, samples: Sequence[Sample]) -> None: ...

    def samples(self, since: float | None = None) -> list[Sample]: ...

    def latest_ranking(self) -> RankingSnapshot | None: ...

    def save_ranking(self, snapshot: RankingSnapshot) -> None: ...


class FileRepository:
    """Samples in `<dir>/samples/samples.jsonl`, snapshots in `<dir>/rankings/v<N>.json`."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def _ensure(self) -> None:
        try:
            (self.dir / "samples").mkdir(parents=True, exist_ok=True)
            (self.dir / "rankings").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"{self.dir}: {exc.strerror or exc}") from None

    def add_samples(self, samples: Sequence[Sample]) -> None:
        if not samples:
            return
        self._ensure()
        try:
            spool.append(self.dir / "samples", samples)  # same locked append as the spool
        except OSError as exc:
            raise StoreUnavailable(f"{self.dir}: {exc.strerror or exc}") from None

    def samples(self, since: float | None = None) -> list[Sample]:
        path = self.dir / "samples" / spool.SPOOL_FILE
        if not path.exists():
            return []
        out = []
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    s = Sample.from_json(line)
                except ValueError:
                    continue  # written by us under a lock; a bad line is a disk fault, skip it
                if since is None or s.taken_at >= since:
                    out.append(s)
        return out

    def _versions(self) -> list[int]:
        d = self.dir / "rankings"
        if not d.is_dir():
            return []
        return sorted(int(m.group(1)) for p in d.iterdir() if (m := re.fullmatch(r"v(\d+)\.json", p.name)))

    def latest_ranking(self) -> RankingSnapshot | None:
        versions = self._versions()
        if not versions:
            return None
        data = json.loads((self.dir / "rankings" / f"v{versions[-1]}.json").read_text())
        return RankingSnapshot.from_dict(data)

    def save_ranking(self, snapshot: RankingSnapshot) -> None:
        self._ensure()
        final = self.dir / "rankings" / f"v{snapshot.version}.json"
        if final.exists():
            raise StoreUnavailable(f"ranking v{snapshot.version} already exists in {self.dir}")
        tmp = final.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(snapshot.to_dict(), indent=1, sort_keys=True))
        os.replace(tmp, final)


def open_repository(store_url: str, state_dir: str) -> ProfilingRepository:
    """The repository for these settings (see module docstring)."""
    if store_url:
        # TODO(store): adapt pal_slurm.store's repository here once it is in main.
        raise StoreUnavailable(f"store {store_url!r}: the database store is not available in this build")
    return FileRepository(state_dir)


def open_profiling(config_path: str | None):
    """(settings, repository) for palctl; SettingsError or StoreUnavailable when impossible."""
    from pal_slurm.bench.settings import load_settings

    settings = load_settings(config_path)
    return settings, open_repository(settings.store_url, settings.state_dir)
