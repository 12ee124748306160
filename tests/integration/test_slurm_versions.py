"""The adapter on whatever Slurm this machine runs (22.05 on Debian 12; 24.11, 25.11 or 26.05 when
the suite runs in the Debian 13, Slurm-from-source or testing root, scripts/test-in-debian-root.sh): the release is detected from the
real daemons, every JSON shape they print gives the same view, and a Slurm that pal-slurm
cannot read is reported by pald and `palctl status` while PAL jobs pass to Slurm untouched."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pal_slurm.daemon.process import REPO, PaldProcess, write_config
from pal_slurm.slurm.dialects import TESTED_RELEASES, dialect_for, offered_parsers, parse_version
from pal_slurm.slurm.readers import SlurmReader

pytestmark = [pytest.mark.slurm, pytest.mark.each_release]


def slurm_version(lab):
    return parse_version(lab.runner.run(["sinfo", "--version"]))


def test_the_lab_release_is_detected_and_tested(slurm_lab) -> None:
    version = slurm_version(slurm_lab)
    reader = SlurmReader(slurm_lab.runner)
    view = reader.cluster_view()
    assert version.release in TESTED_RELEASES, f"Slurm {version}: add it to the tested releases"
    assert reader.dialect.version == version and reader.dialect.tested
    assert reader.release.startswith(f"Slurm {version} (")
    assert view.size == 16 and len(view.free) == 16


def test_every_json_shape_the_daemons_print_gives_the_same_view(lab_factory) -> None:
    lab = lab_factory()
    version = slurm_version(lab)
    offered = [] if version.release < (23, 2) else offered_parsers(lab.runner.run(["scontrol", "--json=list"]))
    shapes = [dialect_for(version, [p]) for p in offered] or [dialect_for(version)]
    jobs = [lab.sbatch("-w", "gpu02", "--gres=gpu:s1:1,gpu:s3:1", wrap="sleep 30"),
            lab.sbatch("-N2", "-w", "gpu[03-04]", "--gres=gpu:2", wrap="sleep 30"),
            lab.sbatch("--hold", "--gres=gpu:1", wrap="true")]
    try:
        for job in jobs[:2]:
            assert lab.wait_job(job, states=("RUNNING",), timeout=30) == "RUNNING"
        views = {d.describe(): SlurmReader(lab.runner, d).cluster_view().free for d in shapes}
        jobs_seen = {d.describe(): sorted((j.job_id, j.state, j.held, tuple(sorted(j.gpu_slots.items())))
                                          for j in SlurmReader(lab.runner, d).jobs() if j.job_id in jobs)
                     for d in shapes}
    finally:
        subprocess.run(["scancel", *map(str, jobs)], env=lab.client_env(), check=False)
    assert len(views) == len(shapes) >= (3 if version.release >= (24, 11) else 1)
    free = set(range(16)) - {5, 7, 8, 9, 12, 13}  # gpu02 slots 1,3; gpu03/04 slots 0,1
    assert all(v == free for v in views.values()), views
    first = next(iter(jobs_seen.values()))
    assert [s[1:3] for s in first] == [("RUNNING", False), ("RUNNING", False), ("PENDING", True)]
    assert all(j == first for j in jobs_seen.values()), jobs_seen


def _wrapper(path: Path, real: str, answers: dict[str, str]) -> None:
    """A Slurm command that answers some argument lists itself and runs the real one for the rest."""
    cases = "\n".join(f"  {args!r}) printf '%s\\n' {out!r}; exit 0 ;;" for args, out in answers.items())
    path.write_text(f'#!/bin/sh\ncase "$*" in\n{cases}\nesac\nexec {real} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_slurm_pald_cannot_read_is_reported_and_pal_jobs_pass(lab_factory, tmp_path) -> None:
    """Fault: the site upgraded Slurm past what pal-slurm reads. Its commands (real daemons
    behind them) claim a future release whose JSON has another shape. pald must keep serving,
    say why in its health and in `palctl status`, and the hook must let PAL jobs run."""
    sock = tmp_path / "pald.sock"
    lab = lab_factory(hook=str(REPO / "job_submit_lua" / "job_submit.lua"), env={"PAL_SOCKET": str(sock)})
    bin_dir = tmp_path / "future-slurm"
    bin_dir.mkdir()
    for cmd in ("sinfo", "squeue", "scontrol", "sbatch", "scancel", "srun"):
        real = shutil.which(cmd)
        assert real, cmd
        answers = {}
        if cmd == "sinfo":
            answers = {"--version": "slurm 27.05.1"}
        if cmd == "scontrol":
            answers = {"--json=list": "data_parser/v0.0.47", "show nodes --json": '{"cluster": {"node_list": []}}'}
        _wrapper(bin_dir / cmd, real, answers)
    cfg = write_config(tmp_path / "pal.toml", socket=sock, db_url=f"sqlite:///{tmp_path}/pal.db",
                       slurm_conf=lab.slurm_conf, heartbeat=tmp_path / "hb", slurm_bin_dir=str(bin_dir))
    pald = PaldProcess(cfg, sock, tmp_path / "pald.log").start(synced=False)
    try:
        for _ in range(50):
            details = pald.health().details
            if details["slurm"] != "unknown":
                break
            time.sleep(0.1)
        assert details["slurm"] == "unsupported", details
        assert "Slurm 27.05.1" in details["slurm_error"] and "pal-slurm reads Slurm 22.05 to" in details["slurm_error"]
        assert details["slurm_release"].startswith("Slurm 27.05.1 (data_parser default)")
        assert pald.proc.poll() is None  # still serving: no crash loop

        job = lab.sbatch("--gres=gpu:1", "--comment=pal:class=resnet", wrap="true")
        assert lab.wait_job(job, timeout=60) == "COMPLETED"
        show = lab.runner.run(["scontrol", "-o", "show", "job", str(job)])
        assert "AdminComment=pal:pass=" in show, show

        env = dict(os.environ, PYTHONPATH=str(REPO))
        status = subprocess.run([sys.executable, "-c", "import sys; from pal_slurm.cli.main import main; "
                                 "sys.exit(main(sys.argv[1:]))", "--config", str(cfg), "status"],
                                env=env, capture_output=True, text=True, timeout=60)
        assert status.returncode == 1, status.stdout + status.stderr
        assert "cannot read this Slurm" in status.stdout and "Slurm 27.05.1" in status.stdout, status.stdout
    finally:
        pald.stop()
