"""palctl whatif end to end: the store's ranking, an accounting file, the page, the plot, the JSON."""

import json
from pathlib import Path

from pal_slurm.ranking.datasets import bundled_path
from pal_slurm.sim.trace import synthetic_trace

from .profiling_env import palctl  # noqa: F401 - fixture


def write_accounting(path: Path, jobs: int = 60, limit_min: int = 0) -> Path:
    """sacct --json shaped accounting of a light synthetic workload (4 in 5 jobs carry a class);
    `limit_min`: every job's time limit past its run time, in minutes (0: none recorded)."""
    t = synthetic_trace(jobs, seed=3, jobs_per_hour=1.5, max_gpus=8)
    out = []
    for j in t.jobs:
        sub = 1_700_000_000 + int(j.submit_time)
        out.append({"job_id": 500 + j.job_id, "name": j.model, "account": "lab", "partition": "gpu",
                    "comment": {"job": None if j.job_id % 5 == 0 else f"pal:class={j.model}"},
                    "allocation_nodes": 1, "state": {"current": "COMPLETED"},
                    "time": {"submission": sub, "start": sub + 5, "end": sub + 5 + int(j.ideal_runtime),
                             "limit": int(j.ideal_runtime // 60) + limit_min if limit_min else 0},
                    "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": j.num_gpus}]}})
    path.write_text(json.dumps({"jobs": out}))
    return path


def test_whatif_page_plot_and_json(palctl, tmp_path):
    acct = write_accounting(tmp_path / "acct.json")
    r = palctl("whatif", "--accounting", str(acct))
    assert r.exit_code == 1 and "the store has no ranking" in r.output
    assert palctl("import-variability", str(bundled_path("32gpu-variability.csv")), "--map-to-nodes", "gpu[01-08]",
                  "--rank").exit_code == 0
    plots, out = tmp_path / "plots", tmp_path / "page.json"
    r = palctl("whatif", "--accounting", str(acct), "--window", "3650d", "--samples", "3", "--plots", str(plots),
               "--output", str(out), "--draws", "0")
    assert r.exit_code == 0, r.output
    assert "GPUs: 32 on 8 node(s)" in r.output and "variability: A,B,C,D from store v1" in r.output
    assert "60 job(s) kept; classes from comments 48, rules 0, unclassed 12" in r.output
    for policy in ("firstfit", "packed-sticky", "pal", "pal-net"):
        assert f"\n{policy} " in r.output
    assert "\npal: " in r.output and "\npal-net: " in r.output
    assert (plots / "whatif.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(out.read_text())
    rows = {row["policy"]: row for row in doc["rows"]}
    assert doc["samples"] == 3 and doc["gpus"] == 32 and doc["jobs"] == 60 and doc["site_timing"] is None
    assert "At this site's timing" not in r.output
    assert rows["firstfit"]["ratio"] == [1.0, 0.0]
    assert 0 < rows["pal"]["ratio"][0] < 2


def test_whatif_against_the_slurm_model(palctl, tmp_path):
    """`--baselines slurm`: gains relative to the model of stock Slurm (EASY backfill)."""
    acct = write_accounting(tmp_path / "acct.json")
    out = tmp_path / "page.json"
    r = palctl("whatif", "--accounting", str(acct), "--window", "3650d", "--baselines", "slurm", "--policies", "pal-fit",
               "--variability", str(bundled_path("32gpu-variability.csv")), "--output", str(out), "--plots", "",
               "--draws", "0")
    assert r.exit_code == 0, r.output
    rows = {row["policy"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"slurm", "pal-fit"}
    assert rows["slurm"]["ratio"] == [1.0, 0.0]
    assert 0 < rows["pal-fit"]["ratio"][0] < 2


def test_whatif_errors(palctl, tmp_path):
    bad = tmp_path / "acct.json"
    bad.write_text('{"jobs": [{"job_id": 1, "time": {"submission": "x"}}]}')
    r = palctl("whatif", "--accounting", str(bad), "--variability", str(bundled_path("32gpu-variability.csv")))
    assert r.exit_code == 1 and "time.submission is not a number" in r.output
    r = palctl("whatif", "--accounting", str(bad), "--policies", "nope")
    assert r.exit_code == 2 and "nope" in r.output


def test_whatif_on_two_gpu_models(palctl, tmp_path):
    """Half the nodes a model that runs jobs in half the time: the runs change (PAL, which puts
    jobs on the fastest GPUs, gains from it), and the page says which models it simulated."""
    acct = write_accounting(tmp_path / "acct.json")
    variability = str(bundled_path("32gpu-variability.csv"))
    jct = {}
    for models in (None, "a100=4:0.5,v100=4"):
        out = tmp_path / f"{models is None}.json"
        args = ["whatif", "--accounting", str(acct), "--window", "3650-0", "--samples", "1", "--plots", "",
                "--variability", f"{variability}", "--cluster", "8x4", "--output", str(out), "--draws", "0"]
        r = palctl(*args, *(["--gpu-models", models] if models else []))
        assert r.exit_code == 0, r.output
        assert ("GPU models: a100=4:0.5,v100=4" in r.output) == (models is not None)
        jct[models] = {row["policy"]: row["avg_jct_s"][0] for row in json.loads(out.read_text())["rows"]}
    mixed, one = jct["a100=4:0.5,v100=4"], jct[None]
    assert all(mixed[p] != one[p] for p in one) and mixed["pal"] < one["pal"], jct
    r = palctl("whatif", "--accounting", str(acct), "--variability", variability, "--cluster", "8x4",
               "--gpu-models", "a100=4")
    assert r.exit_code == 1 and "names 4 nodes; the cluster has 8" in r.output


SCONTROL_CONFIG = """Configuration data as of 2026-01-05T10:00:00
PriorityType            = priority/basic
SchedulerParameters     = bf_interval=120,bf_max_job_test=50,bf_continue
SchedulerType           = sched/backfill
"""


def fake_scontrol(bin_dir: Path, calls: Path) -> Path:
    """A `scontrol` that prints SCONTROL_CONFIG and notes each call in `calls`."""
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\ncat <<'EOF'\n{SCONTROL_CONFIG}EOF\n")
    script.chmod(0o755)
    return bin_dir


def test_whatif_at_the_site_s_timing_with_its_scheduler_the_bound_and_the_spread(palctl, tmp_path, monkeypatch):
    acct = write_accounting(tmp_path / "acct.json", jobs=16, limit_min=30)
    calls = tmp_path / "calls"
    monkeypatch.setenv("PAL_SLURM_BIN_DIR", str(fake_scontrol(tmp_path / "bin", calls)))
    out = tmp_path / "page.json"
    args = ("whatif", "--accounting", str(acct), "--window", "3650d", "--cluster", "2x4", "--policies", "pal-fit",
            "--baselines", "firstfit", "--samples", "2", "--draws", "3", "--plots", "", "--variability",
            str(bundled_path("32gpu-variability.csv")))
    r = palctl(*args, "--output", str(out))
    assert r.exit_code == 0, r.output
    assert calls.read_text() == "show config\n"
    assert "Slurm scheduler assumed, from scontrol show config: sched/backfill, " \
           "SchedulerParameters=bf_interval=120,bf_max_job_test=50,bf_continue" in r.output
    assert "modelled: a pass every bf_interval=120 s, testing the first bf_max_job_test=50 waiting jobs" in r.output
    assert "sched_interval=60 s (default)" in r.output and "bf_continue=yes" in r.output
    assert "3 timing draw(s): the passes' phase against the first submission at 20, 60, 100 s" in r.output
    assert "\nbound " in r.output and "\nslurm " in r.output and "\npal-fit: " in r.output
    site = json.loads(out.read_text())["site_timing"]
    assert site["scheduler"]["bf_interval_s"] == 120 and site["scheduler"]["bf_max_job_test"] == 50
    assert site["scheduler"]["source"] == "scontrol show config"
    assert site["draws"] == 3 and site["pass_phases_s"] == [20.0, 60.0, 100.0]
    rows = {row["policy"]: row for row in site["rows"]}
    assert set(rows) == {"slurm", "pal-fit"} and rows["slurm"]["ratio"] == {"mean": 1.0, "min": 1.0, "max": 1.0}
    for row in rows.values():
        assert row["avg_jct_s"]["min"] <= row["avg_jct_s"]["mean"] <= row["avg_jct_s"]["max"]
        assert site["bound"]["avg_jct_s"] <= row["avg_jct_s"]["min"]
        assert site["bound"]["makespan_s"] <= row["makespan_s"]["min"]
        assert row["avg_wait_s"]["min"] >= 0
    # given on the command line, scontrol is not asked
    r = palctl(*args, "--draws", "1", "--scheduler-parameters", "bf_interval=45", "--json")
    assert r.exit_code == 0, r.output
    assert calls.read_text() == "show config\n"
    site = json.loads(r.stdout)["site_timing"]
    assert site["scheduler"]["source"] == "--scheduler-parameters" and site["scheduler"]["bf_interval_s"] == 45
    assert site["scheduler"]["bf_max_job_test"] == 500 and site["pass_phases_s"] == [22.5]


def test_whatif_without_a_reachable_slurm_states_slurm_s_defaults(palctl, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PAL_SLURM_BIN_DIR", str(tmp_path / "empty"))
    acct = write_accounting(tmp_path / "acct.json", jobs=8)
    r = palctl("whatif", "--accounting", str(acct), "--window", "3650d", "--cluster", "2x4", "--policies", "pal-fit",
               "--baselines", "firstfit", "--samples", "1", "--draws", "1", "--plots", "", "--variability",
               str(bundled_path("32gpu-variability.csv")))
    assert r.exit_code == 0, r.output
    assert "from Slurm's defaults (scontrol show config: " in r.output
    assert "bf_interval=30 s (default)" in r.output and "bf_max_job_test=500 (default)" in r.output
    r = palctl("whatif", "--accounting", str(acct), "--scheduler-parameters", "bf_interval=never")
    assert r.exit_code == 2 and "--scheduler-parameters" in r.output
