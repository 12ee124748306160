"""The palctl convention (docs/cli.md): `--json` prints one JSON document on stdout and nothing
else, `--output FILE` writes the same document, old spellings fail with a message naming the
new one, config errors exit 2 (as JSON under --json), job ids are Slurm's."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from pal_slurm.cli.commands.explain import find_job
from pal_slurm.cli.main import cli
from pal_slurm.model import DecisionKind
from pal_slurm.slurm.jobids import parse_job_id
from pal_slurm.slurm.readers import parse_job
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import DecisionRecord


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_simulate_json_is_one_document_on_stdout_and_output_writes_the_same(tmp_path):
    out = tmp_path / "r.json"
    r = invoke("simulate", "--trace", "workload-1", "--policies", "pal", "--baselines", "packed-sticky,pal",
               "--json", "--output", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # the table went to stderr: stdout parses whole
    assert doc == json.loads(out.read_text())
    assert doc["meta"]["baseline"] == "packed-sticky" and doc["meta"]["baselines"] == ["packed-sticky", "pal"]
    assert "workload-1" in r.stderr


@pytest.mark.parametrize("args, said", [
    (["simulate", "--trace", "workload-1", "--json", "r.json"], "--json is a flag (it prints the JSON on stdout); "
                                                                "to write a file use --output r.json"),
    (["simulate", "--trace", "workload-1", "--json=r.json"], "use --output r.json"),
    (["replay", "--trace", "workload-1", "--json", "r.json"], "use --output r.json"),
    (["whatif", "--accounting", "a.json", "--json", "w.json"], "use --output w.json"),
    (["whatif", "--accounting", "a.json", "--plot", "w.png"], "--plot FILE is now --plots DIR"),
    (["simulate", "--trace", "workload-1", "--baseline", "pal"], "--baseline is now --baselines"),
    (["simulate", "--trace", "workload-1", "--days", "3"], "--days N is now --window DURATION"),
    (["replay", "--trace", "workload-1", "--nodes", "4"], "--nodes N is now --node-count N"),
    (["rank", "--window", "soon"], "not a duration: 'soon'"),
    (["status", "--stale-after", "05:00"], "at least 360 s"),
    (["status", "--stale-after", "48"], "e.g. 48s, 48m or 48h (a bare number is minutes in Slurm; this option took "
                                        "hours before)"),
    (["profile-nodes", "--idle", "--wait", "1800"], "this option took seconds before"),
    (["simulate", "--trace", "workload-1", "--round", "360"], "this option took seconds before"),
    (["explain", "1234_[1-3]"], "one array task, not a range"),
])
def test_old_spellings_and_bad_values_exit_2_naming_the_fix(args, said):
    r = invoke(*args)
    assert r.exit_code == 2 and said in r.output, r.output


def test_a_usage_error_under_json_is_a_json_object_on_stdout():
    r = invoke("simulate", "--trace", "workload-1", "--policies", "bogus", "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 2 and doc["ok"] is False and doc["exit_code"] == 2 and "bogus" in doc["error"]


def test_config_error_exits_2_and_is_json_under_json(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[profiling]\ntimeout_s = -1\n")
    r = invoke("--config", str(bad), "status")
    assert r.exit_code == 2 and "timeout_s" in r.output
    r = invoke("--config", str(bad), "rankings", "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 2 and doc["exit_code"] == 2 and "timeout_s" in doc["error"]


@pytest.mark.parametrize("entry", ["palctl", "pald", "pal-failsafe"])
def test_every_entry_point_has_version(entry, capsys):
    from pal_slurm import __version__
    from pal_slurm.daemon import failsafe
    from pal_slurm.daemon import main as daemon_main

    if entry == "palctl":
        r = invoke("--version")
        assert r.exit_code == 0 and __version__ in r.output
        return
    with pytest.raises(SystemExit) as stop:
        (daemon_main if entry == "pald" else failsafe).main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"{entry} {__version__}"


def _job(job_id, **raw):
    return parse_job({"job_id": job_id, "job_state": "RUNNING", **raw})


def test_find_job_resolves_an_array_task_never_the_glued_number():
    jobs = [_job(12345), _job(1240, array_job_id=1234, array_task_id=5),
            _job(1234, array_job_id=1234, array_task_id=4294967294, array_task_string="6-9,12%2")]
    assert find_job(jobs, parse_job_id("1234_5")).job_id == 1240
    assert find_job(jobs, parse_job_id("1234_7")).job_id == 1234  # not started: the array's pending record
    assert find_job(jobs, parse_job_id("1234_12")).job_id == 1234
    assert find_job(jobs, parse_job_id("1234_10")) is None
    assert find_job(jobs, parse_job_id("12345")).job_id == 12345


def test_explain_an_array_task_slurm_cannot_resolve_is_not_found_not_job_12345(tmp_path):
    db = f"sqlite:///{tmp_path}/pal.db"
    repo = open_store(db)
    repo.record_decision(DecisionRecord("12345", DecisionKind.PLACE, "released:pal", {"gpu01": (0,)}, None, "A",
                                        datetime.now(timezone.utc)))
    repo.close()
    cfg = tmp_path / "pal.toml"
    cfg.write_text(f'[store]\nurl = "{db}"\n[slurm]\nbin_dir = "{tmp_path}/no-slurm"\n')
    r = invoke("--config", str(cfg), "explain", "1234_5")
    assert r.exit_code == 1 and "array task 1234_5" in r.output and "sacct -X -j 1234_5" in r.output
    assert "12345" not in r.output and "gpu01" not in r.output
    r = invoke("--config", str(cfg), "explain", "1234+1")
    assert r.exit_code == 1 and "heterogeneous job 1234" in r.output
    r = invoke("--config", str(cfg), "explain", "12345")
    assert r.exit_code == 0 and "gpu01:0" in r.output


@pytest.mark.parametrize("script", ["pal-prolog", "pal-epilog"])
def test_the_prolog_and_epilog_scripts_have_version(script):
    """Slurm runs them with no arguments; `--version` answers and runs no measurement."""
    import subprocess
    import sys
    from pathlib import Path

    from pal_slurm import __version__

    repo = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, str(repo / "sbin" / script), "--version"], capture_output=True,
                       text=True, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"{script} {__version__}" and r.stderr == ""
