"""palctl whatif end to end: the store's ranking, an accounting file, the page, the plot, the JSON."""

import json
from pathlib import Path

from pal_slurm.ranking.datasets import bundled_path
from pal_slurm.sim.trace import synthetic_trace

from .profiling_env import palctl  # noqa: F401 - fixture


def write_accounting(path: Path, jobs: int = 60) -> Path:
    """sacct --json shaped accounting of a light synthetic workload (4 in 5 jobs carry a class)."""
    t = synthetic_trace(jobs, seed=3, jobs_per_hour=1.5, max_gpus=8)
    out = []
    for j in t.jobs:
        sub = 1_700_000_000 + int(j.submit_time)
        out.append({"job_id": 500 + j.job_id, "name": j.model, "account": "lab", "partition": "gpu",
                    "comment": {"job": None if j.job_id % 5 == 0 else f"pal:class={j.model}"},
                    "allocation_nodes": 1, "state": {"current": "COMPLETED"},
                    "time": {"submission": sub, "start": sub + 5, "end": sub + 5 + int(j.ideal_runtime), "limit": 0},
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
               "--output", str(out))
    assert r.exit_code == 0, r.output
    assert "GPUs: 32 on 8 node(s)" in r.output and "variability: A,B,C,D from store v1" in r.output
    assert "60 job(s) kept; classes from comments 48, rules 0, unclassed 12" in r.output
    for policy in ("firstfit", "packed-sticky", "pal", "pal-net"):
        assert f"\n{policy} " in r.output
    assert "\npal: " in r.output and "\npal-net: " in r.output
    assert (plots / "whatif.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(out.read_text())
    rows = {row["policy"]: row for row in doc["rows"]}
    assert doc["samples"] == 3 and doc["gpus"] == 32 and doc["jobs"] == 60
    assert rows["firstfit"]["ratio"] == [1.0, 0.0]
    assert 0 < rows["pal"]["ratio"][0] < 2


def test_whatif_against_the_slurm_model(palctl, tmp_path):
    """`--baselines slurm`: gains relative to the model of stock Slurm (EASY backfill)."""
    acct = write_accounting(tmp_path / "acct.json")
    out = tmp_path / "page.json"
    r = palctl("whatif", "--accounting", str(acct), "--window", "3650d", "--baselines", "slurm", "--policies", "pal-fit",
               "--variability", str(bundled_path("32gpu-variability.csv")), "--output", str(out), "--plots", "")
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
                "--variability", f"{variability}", "--cluster", "8x4", "--output", str(out)]
        r = palctl(*args, *(["--gpu-models", models] if models else []))
        assert r.exit_code == 0, r.output
        assert ("GPU models: a100=4:0.5,v100=4" in r.output) == (models is not None)
        jct[models] = {row["policy"]: row["avg_jct_s"][0] for row in json.loads(out.read_text())["rows"]}
    mixed, one = jct["a100=4:0.5,v100=4"], jct[None]
    assert all(mixed[p] != one[p] for p in one) and mixed["pal"] < one["pal"], jct
    r = palctl("whatif", "--accounting", str(acct), "--variability", variability, "--cluster", "8x4",
               "--gpu-models", "a100=4")
    assert r.exit_code == 1 and "names 4 nodes; the cluster has 8" in r.output
