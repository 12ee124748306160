"""`palctl simulate --array` on a real Slurm: a 2 policies x 2 seeds sweep submitted as one job
array and an afterok merge job; the merged report has the serial run's numbers, and
`palctl simulate --status` reads the elements' standing through squeue."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.ranking.datasets import bundled_path
from tests.unit.cli.test_whatif import write_accounting

pytestmark = pytest.mark.slurm

TRACE = ("job_id,num_gpus,submit_time,duration,model\n"
         "0,1,0,3600,resnet18\n1,2,120,7200,resnet50\n2,4,600,5400,vgg19\n3,1,900,1800,lm\n"
         "4,8,1200,9000,recommendation\n5,2,1500,4000,resnet50\n")


def test_a_sweep_array_on_slurm_merges_into_the_serial_result(slurm_lab, tmp_path, monkeypatch):
    lab = slurm_lab
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "pal.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/pal.db"\n[slurm]\nconf = "{lab.slurm_conf}"\n')
    (tmp_path / "small.csv").write_text(TRACE)
    sweep = ["--trace", "small.csv", "--cluster", "4x4", "--policies", "pal,packed-sticky", "--seeds", "2"]
    serial = CliRunner().invoke(cli, ["--config", str(cfg), "simulate", *sweep, "--json"])
    assert serial.exit_code == 0, serial.output

    r = CliRunner().invoke(cli, ["--config", str(cfg), "simulate", *sweep, "--output", "merged.json", "--array",
                                 "--array-dir", "sweep", "--partition", "gpu", "--time", "10:00",
                                 "--array-throttle", "2", "--json"])
    assert r.exit_code == 0, r.output
    submitted = json.loads(r.stdout)
    assert submitted["elements"] == 4
    array_job, merge_job = submitted["array_job"], submitted["merge_job"]
    try:
        state = lab.wait_job(merge_job, timeout=180)
        logs = {p.name: p.read_text() for p in (tmp_path / "sweep" / "logs").iterdir()}
        assert state == "COMPLETED", (state, logs)
        merged = json.loads((tmp_path / "merged.json").read_text())
        expected = json.loads(serial.stdout)
        for doc in (merged, expected):
            doc["meta"].pop("elapsed_s")
        assert merged == expected
        assert [row["avg_jct_s"] for row in merged["aggregate"]] == [row["avg_jct_s"] for row in expected["aggregate"]]
        assert (tmp_path / "sweep" / "report.txt").read_text().splitlines()[0].startswith("trace")

        status = CliRunner().invoke(cli, ["--config", str(cfg), "simulate", "--status", "sweep", "--json"])
        assert status.exit_code == 0, status.output
        doc = json.loads(status.stdout)
        assert (doc["elements"], doc["done"], doc["failed"], doc["pending"], doc["running"]) == (4, 4, [], 0, 0)
        assert (doc["array_job"], doc["merge_job"], doc["merge"]) == (array_job, merge_job, "merged")
    finally:
        lab.runner.run(["scancel", str(array_job), str(merge_job)])


def test_a_failed_element_cancels_the_merge_and_status_says_why(slurm_lab, tmp_path, monkeypatch):
    lab = slurm_lab
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "pal.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/pal.db"\n[slurm]\nconf = "{lab.slurm_conf}"\n')
    trace = tmp_path / "gone.csv"
    trace.write_text(TRACE)
    r = CliRunner().invoke(cli, ["--config", str(cfg), "simulate", "--trace", str(trace), "--cluster", "4x4",
                                 "--policies", "pal", "--array", "--array-dir", "sweep", "--json"])
    assert r.exit_code == 0, r.output
    submitted = json.loads(r.stdout)
    trace.unlink()  # the element finds no trace where the submitting host had one
    try:
        assert lab.wait_job(submitted["array_job"], timeout=120) == "FAILED"
        lab.wait_job(submitted["merge_job"], timeout=60)  # --kill-on-invalid-dep: cancelled, never left pending
        status = CliRunner().invoke(cli, ["--config", str(cfg), "simulate", "--status", "sweep"])
        assert status.exit_code == 1, status.output
        assert "done 0, failed 1, running 0, pending 0" in status.output
        assert "element 0 (trace 0 (gone), seed 0, pal) failed: " in status.output
        assert "cannot open trace" in status.output and "merge: merge job" not in status.output
    finally:
        lab.runner.run(["scancel", str(submitted["array_job"]), str(submitted["merge_job"])])


def test_a_whatif_sweep_on_slurm_merges_into_the_serial_numbers(slurm_lab, tmp_path, monkeypatch):
    lab = slurm_lab
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "pal.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/pal.db"\n[slurm]\nconf = "{lab.slurm_conf}"\n')
    acct = write_accounting(tmp_path / "acct.json", jobs=20)
    args = ["--accounting", str(acct), "--window", "3650d", "--samples", "2", "--cluster", "4x4", "--policies", "pal",
            "--baselines", "firstfit", "--variability", str(bundled_path("32gpu-variability.csv")), "--plots", ""]
    serial = CliRunner().invoke(cli, ["--config", str(cfg), "whatif", *args, "--json"])
    assert serial.exit_code == 0, serial.output
    r = CliRunner().invoke(cli, ["--config", str(cfg), "whatif", *args, "--output", "merged.json", "--array",
                                 "--array-dir", "sweep", "--json"])
    assert r.exit_code == 0, r.output
    submitted = json.loads(r.stdout)
    assert submitted["elements"] == 4  # 2 samples x 2 policies
    try:
        assert lab.wait_job(submitted["merge_job"], timeout=180) == "COMPLETED"
        assert json.loads((tmp_path / "merged.json").read_text()) == json.loads(serial.stdout)
    finally:
        lab.runner.run(["scancel", str(submitted["array_job"]), str(submitted["merge_job"])])
