"""Real Slurm accounting (MariaDB + slurmdbd + the lab's slurmctld) through `palctl simulate
--trace sacct:` and `palctl whatif`: what a site's own `sacct` gives is what the simulator reads."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.ranking.datasets import bundled_path
from pal_slurm.sim.sacct import load_accounting_trace
from pal_slurm.sim.trace import UNCLASSED
from pal_slurm.slurm.priority import config_values
from pal_slurm.slurm.scheduler_config import parse_scheduler_parameters
from pal_lab.accounting_lab import SACCT_FORMAT, missing_binaries, start_accounting_lab
from pal_lab.lab import missing_binaries as lab_missing

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def accounting(tmp_path_factory):
    missing = lab_missing() + missing_binaries()
    if missing:
        pytest.skip("accounting lab unavailable, missing: " + ", ".join(missing) + " (run scripts/install-deps.sh)")
    acct = start_accounting_lab(tmp_path_factory.mktemp("acct-lab"), nodes=2, gpus=4)
    try:
        lab = acct.lab
        jobs = {
            "resnet": lab.sbatch("--gres=gpu:2", "--comment=pal:class=A", "-J", "resnet-train", "-t", "5",
                                 wrap="sleep 2"),
            "bert": lab.sbatch("-N", "2", "--gres=gpu:4", "-J", "bert-large", "--comment=pal:class=bert,gpus=8",
                               wrap="sleep 1"),
            "notebook": lab.sbatch("--gres=gpu:1", "-J", "notebook", "-A", "root", wrap="sleep 1"),
            "cpu": lab.sbatch("-J", "cpu-only", wrap="true"),
        }
        for j in jobs.values():
            assert lab.wait_job(j) == "COMPLETED"
        acct.wait_recorded(jobs.values())
        yield acct, jobs
    finally:
        acct.stop()


def test_sacct_json_and_pipe_give_the_same_trace(accounting, tmp_path):
    acct, jobs = accounting
    js, pipe = tmp_path / "acct.json", tmp_path / "acct.txt"
    js.write_text(acct.sacct("--json"))
    pipe.write_text(acct.sacct("-P", f"--format={SACCT_FORMAT}"))
    a, b = load_accounting_trace(js), load_accounting_trace(pipe)
    assert [(j.num_gpus, j.perf_class, j.model) for j in a.jobs] == [(j.num_gpus, j.perf_class, j.model) for j in b.jobs]
    by_name = {j.model: j for j in a.jobs}
    assert set(by_name) == {"resnet-train", "bert-large", "notebook"}  # the CPU-only job is skipped, counted
    assert by_name["resnet-train"].num_gpus == 2 and by_name["resnet-train"].perf_class == "A"
    assert by_name["bert-large"].num_gpus == 8 and by_name["bert-large"].perf_class == "bert"
    assert by_name["notebook"].perf_class == UNCLASSED
    assert all(j.ideal_runtime >= 1 for j in a.jobs)
    assert any("skipped 1 job(s): no GPUs" in w for w in a.warnings)


def test_whatif_on_the_lab_accounting(accounting, tmp_path, monkeypatch):
    acct, _jobs = accounting
    js = tmp_path / "acct.json"
    js.write_text(acct.sacct("--json"))
    monkeypatch.setenv("PAL_CONFIG", str(tmp_path / "pal.toml"))
    (tmp_path / "pal.toml").write_text('[simulate]\nclass_rules = "account:root=D"\n')
    monkeypatch.setenv("PAL_DB_URL", f"sqlite:///{tmp_path / 'pal.db'}")
    run = CliRunner()
    r = run.invoke(cli, ["import-variability", str(bundled_path("32gpu-variability.csv")), "--map-to-nodes",
                         ",".join(acct.lab.nodes), "--rank"])
    assert r.exit_code == 0, r.output
    r = run.invoke(cli, ["simulate", "--trace", f"sacct:{js}", "--variability", "store", "--mode", "event",
                         "--policies", "pal,firstfit"])
    assert r.exit_code == 0, r.output
    assert "classes from comments 2, rules 1, unclassed 0" in r.output and "(event mode, 2x4 GPUs)" in r.output
    out = tmp_path / "w.json"
    # palctl on the site: the lab's slurmctld is the one `scontrol show config` asks
    monkeypatch.setenv("SLURM_CONF", acct.lab.slurm_conf)
    lab_config = config_values(acct.lab.runner.run(["scontrol", "show", "config"]))
    r = run.invoke(cli, ["whatif", "--accounting", str(js), "--samples", "2", "--draws", "3", "--plots", str(tmp_path),
                         "--output", str(out)])
    assert r.exit_code == 0, r.output
    assert "GPUs: 8 on 2 node(s)" in r.output and "3 GPU job(s)" in r.output
    assert (f"Slurm scheduler assumed, from scontrol show config: {lab_config['SchedulerType']}, "
            f"SchedulerParameters={lab_config['SchedulerParameters']}") in r.output
    lab_timing = parse_scheduler_parameters(lab_config["SchedulerParameters"], "lab")
    assert f"bf_interval={lab_timing.bf_interval_s} s" in r.output
    doc = json.loads(out.read_text())
    assert {row["policy"] for row in doc["rows"]} == {"firstfit", "packed-sticky", "pal", "pal-net", "pal-fit"}
    site = doc["site_timing"]
    assert site["scheduler"]["source"] == "scontrol show config"
    assert site["scheduler"]["scheduler_parameters"] == lab_config["SchedulerParameters"]
    assert site["draws"] == 3 and {row["policy"] for row in site["rows"]} == {"slurm", "pal", "pal-net", "pal-fit"}
    for row in site["rows"]:
        assert site["bound"]["avg_jct_s"] <= row["avg_jct_s"]["min"] <= row["avg_jct_s"]["max"]
    assert (tmp_path / "whatif.png").stat().st_size > 10_000


@pytest.fixture(scope="module")
def model_accounting(tmp_path_factory):
    """A lab whose nodes carry GPU model types (gpu01 a100, gpu02 v100) and whose accounting
    names the models (AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:v100)."""
    missing = lab_missing() + missing_binaries()
    if missing:
        pytest.skip("accounting lab unavailable, missing: " + ", ".join(missing) + " (run scripts/install-deps.sh)")
    acct = start_accounting_lab(tmp_path_factory.mktemp("acct-models"), nodes=2, gpus=4,
                                tres="gres/gpu,gres/gpu:a100,gres/gpu:v100", gres="model",
                                gpu_models={"gpu01": "a100", "gpu02": "v100"})
    try:
        lab = acct.lab
        jobs = {"a100": lab.sbatch("--gres=gpu:a100:2", "-J", "on-a100", wrap="sleep 1"),
                "any": lab.sbatch("--gres=gpu:1", "-J", "anywhere", wrap="sleep 1"),
                "v100": lab.sbatch("--gpus=v100:1", "-J", "on-v100", wrap="sleep 1")}
        for j in jobs.values():
            assert lab.wait_job(j) == "COMPLETED"
        acct.wait_recorded(jobs.values())
        yield acct
    finally:
        acct.stop()


def test_gpu_model_requests_reach_the_simulator_from_accounting(model_accounting, tmp_path):
    js, pipe = tmp_path / "acct.json", tmp_path / "acct.txt"
    js.write_text(model_accounting.sacct("--json"))
    pipe.write_text(model_accounting.sacct("-P", f"--format={SACCT_FORMAT}"))
    for path in (js, pipe):
        trace = load_accounting_trace(path)
        assert {j.model: j.gpu_model for j in trace.jobs} == {"on-a100": "a100", "anywhere": None, "on-v100": "v100"}
    r = CliRunner().invoke(cli, ["simulate", "--trace", f"sacct:{js}", "--mode", "event", "--cluster", "2x4",
                                 "--gpu-models", "a100=1:0.5,v100=1", "--policies", "pal,firstfit"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    r = CliRunner().invoke(cli, ["simulate", "--trace", f"sacct:{js}", "--mode", "event", "--cluster", "2x4"])
    assert r.exit_code == 0 and "2 job(s) ask for a GPU model (a100, v100)" in r.output, r.output
