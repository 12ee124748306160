"""`palctl simulate/whatif --array` without Slurm: the submission's sbatch lines and scripts,
every element run in-process from the line element.sh gives Slurm, the merge, `--status`.
The merged report must be the serial run's, number for number."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pal_slurm.cli.commands import _sweep
from pal_slurm.cli.main import cli
from pal_slurm.ranking.datasets import bundled_path
from pal_slurm.slurm.batch import BatchSubmitter
from pal_slurm.slurm.errors import SlurmCommandMissing

from .test_whatif import write_accounting

SWEEP = ["--synthetic", "20", "--cluster", "4x4", "--policies", "pal,packed-sticky", "--seeds", "2"]


class RecordingRunner:
    """Answers sbatch with the next job id and records each command; any other Slurm command
    is missing (a host that reaches no slurmctld)."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def run(self, argv, *, timeout=None):
        self.calls.append(list(argv))
        if argv[0] == "sbatch":
            return f"{700 + len(self.calls)};lab\n"
        raise SlurmCommandMissing(argv[0])


@pytest.fixture()
def slurm(monkeypatch):
    runner = RecordingRunner()
    monkeypatch.setattr(_sweep, "_submitter", lambda ctx: BatchSubmitter(runner))
    return runner


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def run_script(script: Path, task: int | None = None):
    """What Slurm runs: the script's palctl line, here in-process (the same arguments)."""
    line = next(ln for ln in script.read_text().splitlines() if ln.startswith("exec "))
    argv = shlex.split(line[len("exec "):])
    assert argv[:3] == [sys.executable, "-m", "pal_slurm.cli"]
    argv = [str(task) if a == "$SLURM_ARRAY_TASK_ID" else a for a in argv[3:]]
    return invoke(*argv)


def without_elapsed(doc):
    doc["meta"].pop("elapsed_s")
    return doc


def test_simulate_array_submits_one_array_and_a_merge_that_equals_the_serial_run(slurm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    serial = invoke("simulate", *SWEEP, "--json")
    assert serial.exit_code == 0, serial.output
    sweep = tmp_path / "sweep"
    r = invoke("simulate", *SWEEP, "--output", "merged.json", "--plots", "plots", "--array", "--array-dir", str(sweep),
               "--partition", "gpu", "--account", "lab", "--time", "30:00", "--array-throttle", "2", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"array_dir": str(sweep), "elements": 4, "array_job": 701, "merge_job": 702}
    array, merge = slurm.calls
    site = ["--partition=gpu", "--account=lab", "--time=00:30:00"]
    assert array == ["sbatch", "--parsable", "--job-name=palctl-simulate", f"--output={sweep}/logs/element-%a.out",
                     f"--chdir={tmp_path}", *site, "--array=0-3%2", f"{sweep}/element.sh"]
    assert merge == ["sbatch", "--parsable", "--job-name=palctl-simulate-merge", f"--output={sweep}/logs/merge.out",
                     f"--chdir={tmp_path}", *site, "--dependency=afterok:701", "--kill-on-invalid-dep=yes",
                     f"{sweep}/merge.sh"]
    assert not (tmp_path / "merged.json").exists()  # the merge job writes it
    for task in range(4):
        e = run_script(sweep / "element.sh", task)
        assert e.exit_code == 0, e.output
        assert not (tmp_path / "merged.json").exists() and not (tmp_path / "plots").exists()
    m = run_script(sweep / "merge.sh")
    assert m.exit_code == 0, m.output
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert without_elapsed(merged) == without_elapsed(json.loads(serial.stdout))
    assert json.loads((sweep / "report.json").read_text())["results"] == merged["results"]
    assert (sweep / "report.txt").read_text() == invoke("simulate", *SWEEP).stdout  # the table, as printed
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["avg-jct-normalised.png",
                                                                      "synthetic-20-s0-jct-util.png"]


def test_whatif_array_merges_its_samples_into_the_serial_page(slurm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    acct = write_accounting(tmp_path / "acct.json", jobs=24)
    args = ["--accounting", str(acct), "--window", "3650d", "--samples", "2", "--cluster", "4x4", "--variability",
            str(bundled_path("32gpu-variability.csv")), "--plots", "", "--draws", "1", "--scheduler-parameters", ""]
    serial = invoke("whatif", *args, "--output", "serial.json")
    assert serial.exit_code == 0, serial.output
    r = invoke("whatif", *args, "--array", "--array-dir", "sw", "--output", "merged.json")
    assert r.exit_code == 0, r.output
    assert slurm.calls[0][-2:] == ["--array=0-9", f"{tmp_path}/sw/element.sh"]  # 2 samples x 5 policies
    for task in range(10):
        assert run_script(tmp_path / "sw" / "element.sh", task).exit_code == 0
    assert run_script(tmp_path / "sw" / "merge.sh").exit_code == 0
    assert json.loads((tmp_path / "merged.json").read_text()) == json.loads((tmp_path / "serial.json").read_text())
    page = (tmp_path / "sw" / "report.txt").read_text().splitlines()
    printed = serial.stdout.splitlines()
    assert page[:3] == printed[:3] and page[4:] == printed[4:]  # line 3 says how long it took
    assert "\npal: " in serial.stdout and len(page) > 10
    assert "At this site's timing" in serial.stdout and json.loads((tmp_path / "serial.json").read_text())["site_timing"]


def test_status_counts_done_failed_pending_and_says_a_failed_elements_error(slurm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "t.csv"
    rows = "job_id,num_gpus,submit_time,duration,model\n0,1,0,3600,resnet18\n1,2,60,7200,resnet50\n"
    trace.write_text(rows)
    r = invoke("simulate", "--trace", str(trace), "--policies", "pal,packed-sticky", "--array", "--array-dir", "sw")
    assert r.exit_code == 0, r.output
    assert "progress: palctl simulate --status" in r.output
    assert run_script(tmp_path / "sw" / "element.sh", 0).exit_code == 0
    trace.unlink()  # element 1 finds no trace where the submitting host had one
    failed = run_script(tmp_path / "sw" / "element.sh", 1)
    assert failed.exit_code == 1 and "cannot open trace" in failed.output
    s = invoke("simulate", "--status", "sw", "--json")
    assert s.exit_code == 1, s.output
    doc = json.loads(s.stdout)
    assert (doc["elements"], doc["done"], doc["running"], doc["pending"]) == (2, 1, 0, 0)
    assert [f["element"] for f in doc["failed"]] == [1] and "cannot open trace" in doc["failed"][0]["error"]
    assert doc["failed"][0]["run"] == "trace 0 (t), seed 0, packed-sticky"
    assert doc["merge"].startswith("ended without a report") and doc["report"] is None
    text = invoke("simulate", "--status", "sw")
    assert "done 1, failed 1, running 0, pending 0" in text.output
    assert "element 1 (trace 0 (t), seed 0, packed-sticky) failed: " in text.output
    assert "Slurm not asked" in text.output
    trace.write_text(rows)
    m = run_script(tmp_path / "sw" / "merge.sh")
    assert m.exit_code == 1 and "1 of 2 element(s) have no result: 1" in m.output
    assert run_script(tmp_path / "sw" / "element.sh", 1).exit_code == 0  # rerun by hand, as the docs say
    assert run_script(tmp_path / "sw" / "merge.sh").exit_code == 0
    done = invoke("simulate", "--status", "sw", "--json")
    doc = json.loads(done.stdout)
    assert done.exit_code == 0 and (doc["done"], doc["failed"], doc["merge"]) == (2, [], "merged")
    assert doc["report"] == str(tmp_path / "sw" / "report.json")


@pytest.mark.parametrize("args, said", [
    (["--array"], "--array needs --array-dir DIR"),
    (["--partition", "gpu"], "--partition only with --array"),
    (["--array-dir", "d"], "--array-dir only with --array"),
    (["--array", "--array-dir", "d", "--merge"], "--array and --merge do not go together"),
    (["--array", "--array-dir", "d", "--time", "30s"], "at least 60 s"),
])
def test_sweep_options_that_do_not_fit_exit_2(args, said):
    r = invoke("simulate", "--trace", "workload-1", *args)
    assert r.exit_code == 2 and said in r.output, r.output


def test_a_folder_holding_a_sweep_is_not_reused_and_an_element_of_other_runs_is_refused(slurm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("simulate", *SWEEP, "--array", "--array-dir", "sw").exit_code == 0
    again = invoke("simulate", *SWEEP, "--array", "--array-dir", "sw")
    assert again.exit_code == 1 and "holds a sweep already" in again.output
    other = invoke("simulate", *SWEEP[:-1], "3", "--array-dir", "sw", "--element", "0")
    assert other.exit_code == 1 and "this command's runs are not the sweep's there (6 here, 4 in sweep.json)" \
        in other.output
    assert "not the sweep's" in (tmp_path / "sw" / "elements" / "0.error").read_text()


def test_element_argv_drops_only_the_sweeps_own_options():
    args = ["--trace", "w", "--array", "--array-dir", "d", "--partition=gpu", "--time", "1:00:00", "--account", "a",
            "--array-throttle", "3", "--policies", "pal", "--json"]
    assert _sweep.element_argv(args) == ["--trace", "w", "--policies", "pal", "--json"]


def test_an_element_refuses_inputs_that_changed_since_the_submission(slurm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,3600,resnet18\n")
    assert invoke("simulate", "--trace", "t.csv", "--policies", "pal", "--array", "--array-dir", "sw").exit_code == 0
    trace.write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,7200,resnet18\n")
    r = run_script(tmp_path / "sw" / "element.sh", 0)
    assert r.exit_code == 1 and "the inputs differ from the submission's" in r.output
    assert not (tmp_path / "sw" / "elements" / "0.json").exists()
    assert "inputs differ" in (tmp_path / "sw" / "elements" / "0.error").read_text()


def test_the_inputs_digest_is_fed_a_job_at_a_time_and_equals_the_whole_reprs():
    """A sweep submitted before the digest was streamed still matches its elements' digests."""
    import hashlib

    from pal_slurm.sim.trace import TraceJob

    job = TraceJob(job_id=1, num_gpus=2, submit_time=0.0, iterations=5.0, model="BERT")
    for parts in (([(job, job), (job,)], None), ((job,), "store:x"), ([], ()), ([[1, (2,)], "a"], 3.5)):
        assert _sweep.inputs_digest(*parts) == hashlib.sha256(repr(parts).encode()).hexdigest(), parts
    assert _sweep.inputs_digest([(job,)], None) != _sweep.inputs_digest([(job, job)], None)
