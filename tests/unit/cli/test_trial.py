"""palctl mode and palctl trial report on a SQLite store, fed by a pald in shadow (in process,
fake Slurm): the report's words, table and JSON agree with what pald recorded."""

from __future__ import annotations

import json
from dataclasses import replace

from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry

from .test_status import write_cfg


def test_mode_lists_and_sets_partitions(tmp_path):
    db = f"sqlite:///{tmp_path}/pal.db"
    cfg = write_cfg(tmp_path, db)
    cfg.write_text(cfg.read_text().replace("[daemon]\n", '[daemon]\nmode = "shadow"\npartition_modes = "debug=off"\n'))
    r = CliRunner().invoke(cli, ["--config", str(cfg), "mode"])
    assert r.exit_code == 0, r.output
    assert "debug" in r.output and "off" in r.output and "(every other)" in r.output and "shadow" in r.output
    r = CliRunner().invoke(cli, ["--config", str(cfg), "mode", "gpu", "on"])
    assert r.exit_code == 0 and "gpu: on" in r.output and "pald is not answering" in r.output
    r = CliRunner().invoke(cli, ["--config", str(cfg), "mode"])
    assert any(line.split()[:2] == ["gpu", "on"] and "palctl mode" in line for line in r.output.splitlines())
    assert CliRunner().invoke(cli, ["--config", str(cfg), "mode", "gpu", "half"]).exit_code == 2
    assert CliRunner().invoke(cli, ["--config", str(cfg), "mode", "gpu"]).exit_code == 2
    status = CliRunner().invoke(cli, ["--config", str(cfg), "status"])
    assert "debug off, gpu on, every other partition shadow" in status.output


def test_trial_report_from_a_shadow_pald(tmp_path):
    from pal_slurm.config import load_config
    from pal_slurm.daemon.app import Pald
    from tests.unit.daemon.builders import FakeActuator, FakeReader, held_job, node_info, request

    db = f"sqlite:///{tmp_path}/pal.db"
    repo = open_store(db)  # gpu02 is slow for class A: Slurm puts the job there, PAL would not
    repo.write_ranking("optimal", [RankingEntry(n, s, "A", 1.5 if n == "gpu02" else 1.0,
                                                1.5 if n == "gpu02" else 1.0, 0)
                                   for n in ("gpu01", "gpu02") for s in range(4)])
    repo.close()
    cfg_path = write_cfg(tmp_path, db)
    cfg_path.write_text(cfg_path.read_text().replace("[daemon]\n", '[daemon]\nmode = "shadow"\n'))
    reader = FakeReader([node_info("gpu01"), node_info("gpu02")])
    pald = Pald(load_config(cfg_path, env={}), open_store(db), reader, FakeActuator())
    pald.refresh_store()
    pald.sync_and_cycle()
    reply = pald.handle(request("resnet", gpn=2, nodes=1, rid="t1"))
    assert reply.reason == "shadow"
    job = replace(held_job(77, gpn=2, tag="pal:pass=shadow;rank=v1;req=t1"), state="RUNNING", reason="None",
                  priority=1, gpu_slots={"gpu02": frozenset({0, 1})}, start_time=1000, partition="gpu")
    reader._jobs = [job]
    pald.sync_and_cycle()
    reader._jobs = [replace(job, state="COMPLETED", end_time=1000 + 3 * 3600)]
    pald.sync_and_cycle()
    pald.flush_decisions()
    pald.link.store.close()

    r = CliRunner().invoke(cli, ["--config", str(cfg_path), "trial", "report", "--plots", str(tmp_path / "plots")])
    assert r.exit_code == 0, r.output
    assert "over 1 GPU jobs submitted in shadow" in r.output and "placed 1" in r.output
    assert "33.3% faster" in r.output  # 1.0 / 1.5
    assert (tmp_path / "plots" / "trial-ratio.png").stat().st_size > 0
    doc = json.loads(CliRunner().invoke(cli, ["--config", str(cfg_path), "trial", "report", "--json"]).output)
    (only,) = doc["jobs"]
    assert only["job_id"] == "77" and only["slurm_slowdown"] == 1.5 and only["pal_slowdown"] == 1.0
    assert only["run_s"] == 3 * 3600 and abs(doc["overall"]["saved_gpu_h"] - 2 * 3 * (1 - 1 / 1.5)) < 1e-9
    (ran,) = doc["ran_jobs"]["shadow"]  # every job that ran, each with the slowdown of Slurm's GPUs
    assert (ran["job_id"], ran["partition"], ran["gpus"], ran["slowdown"]) == ("77", "gpu", 2, 1.5)
    other = CliRunner().invoke(cli, ["--config", str(cfg_path), "trial", "report", "--partition", "debug"])
    assert "no job was submitted in a shadow partition" in other.output
