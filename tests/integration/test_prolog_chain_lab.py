"""A site keeps its own Prolog=/Epilog= scripts beside pal-slurm's: slurm.conf's `Prolog=` and
`Epilog=` take a glob (`/etc/slurm/prolog.d/*`) and slurmd runs every script it matches. On the
lab's Slurm (22.05 on Debian 12, 24.11 on Debian 13) both scripts of each directory run for a job
(docs/install.md, "Beside the site's own prolog and epilog")."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from pal_lab.lab import missing_binaries, start_lab

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]


def script(path: Path, mark: Path) -> None:
    path.write_text(f'#!/bin/sh\necho "$SLURM_JOB_ID" >> {mark}\nexit 0\n')
    path.chmod(0o755)


def test_prolog_and_epilog_globs_run_the_sites_scripts_and_pals(tmp_path):
    if missing_binaries():
        pytest.skip("Slurm lab cluster unavailable, missing: " + ", ".join(missing_binaries()))
    root = Path(tempfile.mkdtemp(prefix="pal-chain-"))
    root.chmod(0o755)
    marks = root / "marks"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    for kind in ("prolog", "epilog"):
        d = root / f"{kind}.d"
        d.mkdir()
        script(d / "50-site", marks / f"site-{kind}")
        script(d / "10-pal", marks / f"pal-{kind}")
    lab = start_lab(root / "lab", nodes=1, extra_conf=f"Prolog={root}/prolog.d/*\nEpilog={root}/epilog.d/*\n")
    try:
        job = lab.sbatch("--gres=gpu:1", wrap="true")
        assert lab.wait_job(job, timeout=60) == "COMPLETED"
        for kind in ("prolog", "epilog"):
            for who in ("site", "pal"):
                path = marks / f"{who}-{kind}"
                deadline = time.monotonic() + 30
                while not path.exists() and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert path.exists() and str(job) in path.read_text().split(), (who, kind)
        assert not [n for n in lab.reader.nodes() if {"DRAIN", "FAIL"} & set(n.state_flags)]
    finally:
        lab.stop()
        shutil.rmtree(root, ignore_errors=True)
