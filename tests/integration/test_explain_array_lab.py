"""`palctl explain A_T` on a real Slurm: an array task is found through squeue, first inside
the array's record of pending tasks, then (once Slurm splits it off) under its own job id,
and never as the number A·T glued together."""

from __future__ import annotations

import subprocess

from click.testing import CliRunner

from pal_slurm.cli.main import cli


def test_explain_finds_an_array_task_pending_then_split_off(slurm_lab, tmp_path):
    lab = slurm_lab
    cfg = tmp_path / "pal.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/pal.db"\n[slurm]\nconf = "{lab.slurm_conf}"\n')
    p = subprocess.run(["sbatch", "--parsable", "--hold", "--array=1-3", "--gres=gpu:1", "--output=/dev/null",
                        "--wrap", "sleep 1"], env=lab.client_env(), capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    array_id = int(p.stdout.strip().split(";")[0])
    try:
        r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", f"{array_id}_2"])
        assert r.exit_code == 1, r.output  # found in squeue, but pald recorded nothing (no pald here)
        assert f"array task {array_id}_2 has not started: it is part of array job {array_id}'s pending record" \
            in r.output
        assert f"no pald decision recorded for job {array_id}_2 (looked up {array_id})" in r.output
        # updating one element splits it off under a job id of its own
        lab.runner.run(["scontrol", "update", f"jobid={array_id}_2", "comment=split"])
        element = next(j for j in lab.reader.jobs() if j.ref == f"{array_id}_2")
        assert element.job_id != array_id
        r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", f"{array_id}_2"])
        assert f"array task {array_id}_2 is job {element.job_id}" in r.output, r.output
        assert f"looked up {element.job_id}" in r.output and f"{array_id}2" not in r.output
        r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", f"{array_id}_9"])
        assert r.exit_code == 1 and f"array task {array_id}_9: not in squeue" in r.output
    finally:
        subprocess.run(["scancel", str(array_id)], env=lab.client_env(), capture_output=True, timeout=30)
