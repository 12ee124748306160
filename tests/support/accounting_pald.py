"""The accounting lab (slurmdbd, MariaDB) with the real job_submit.lua pointed at a pald
socket, and pald started on it when a test is ready: what the lab tests of Slurm's own
policies (priority, limits) share."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pal_lab.accounting_lab import AccountingLab, missing_binaries as missing_accounting, start_accounting_lab
from pal_lab.lab import LabCluster, missing_binaries
from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry


@dataclass
class HookedAccountingLab:
    acct: AccountingLab
    root: Path
    db: str
    pald: PaldProcess | None = None
    stops: list[PaldProcess] = field(default_factory=list)

    @property
    def lab(self) -> LabCluster:
        return self.acct.lab

    def start_pald(self, policy: str = "", placement: str = "pal") -> PaldProcess:
        """pald on SQLite with every GPU equally fast for every class, the one this rig runs
        (a running one is stopped first); `policy`: lines added to pal.toml's [policy] table;
        `placement`: its placement (write_config's default, or the site default `pal-fit`)."""
        if self.pald is not None:
            self.pald.stop()
            self.pald = None
        store = open_store(self.db)
        store.write_ranking("optimal", [RankingEntry(n, s, c, 1.0, 1.0, 0) for n in self.lab.nodes
                                        for s in range(4) for c in "ABCD"])
        store.close()
        cfg = write_config(self.root / "pal.toml", socket=self.root / "pald.sock", db_url=self.db,
                           slurm_conf=self.lab.slurm_conf, heartbeat=self.root / "hb", placement=placement)
        if policy:
            cfg.write_text(cfg.read_text().replace("[policy]\n", f"[policy]\n{policy}\n"))
        self.pald = PaldProcess(cfg, self.root / "pald.sock", self.root / "pald.log").start()
        return self.pald


@contextmanager
def hooked_accounting_lab(prefix: str, nodes: int, gpus: int, extra_conf: str,
                          qos: tuple[str, ...] = ()) -> Iterator[HookedAccountingLab]:
    """The lab (skipped where its binaries are missing), stopped with its pald at the end."""
    if missing_binaries() or missing_accounting():
        pytest.skip("accounting lab unavailable, missing: " + ", ".join(missing_binaries() + missing_accounting()))
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    acct = start_accounting_lab(root / "acct", nodes=nodes, gpus=gpus, extra_conf=extra_conf, qos=qos,
                                hook=str(REPO / "job_submit_lua" / "job_submit.lua"),
                                env={"PAL_SOCKET": str(root / "pald.sock")})
    rig = HookedAccountingLab(acct, root, f"sqlite:///{root}/pal.db")
    try:
        yield rig
    finally:
        if rig.pald is not None:
            rig.pald.stop()
        acct.stop()
        shutil.rmtree(root, ignore_errors=True)
