import json

from click.testing import CliRunner

from pal_slurm.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, ["simulate", *args], catch_exceptions=False)


def test_simulate_prints_table_and_writes_json_and_plots(tmp_path):
    out = tmp_path / "r.json"
    plots = tmp_path / "plots"
    r = run("--trace", "workload-1", "--policies", "pal,packed-sticky", "--output", str(out), "--plots", str(plots))
    assert r.exit_code == 0, r.output
    assert "workload-1" in r.output and "pal" in r.output
    doc = json.loads(out.read_text())
    rows = {row["policy"]: row for row in doc["results"]}
    assert set(rows) == {"pal", "packed-sticky"}
    for row in rows.values():
        for key, typ in (("trace", str), ("policy", str), ("seed", int), ("avg_jct_s", float),
                         ("p99_jct_s", float), ("makespan_s", float), ("utilization", float)):
            assert isinstance(row[key], typ), key
    assert rows["pal"]["avg_jct_s"] < rows["packed-sticky"]["avg_jct_s"]
    pngs = sorted(p.name for p in plots.iterdir())
    assert "avg-jct-normalised.png" in pngs and "workload-1-jct-util.png" in pngs
    assert all((plots / p).stat().st_size > 1000 for p in pngs)


def test_multi_seed_reports_intervals(tmp_path):
    out = tmp_path / "r.json"
    r = run("--trace", "workload-4", "--policies", "pal", "--seeds", "3", "--output", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert sorted(row["seed"] for row in doc["results"]) == [42, 43, 44]
    agg = doc["aggregate"][0]
    assert agg["seeds"] == 3 and agg["avg_jct_s_ci95"] >= 0
    assert "±" in r.output


def test_missing_trace_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(tmp_path / "none.csv")])
    assert r.exit_code != 0
    assert "cannot open trace" in r.output


def test_malformed_csv_row_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,10,vgg19\n1,x,1,10,vgg19\n")
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(p)])
    assert r.exit_code != 0
    assert "bad.csv:3" in r.output


def test_unknown_policy_and_bad_cluster(tmp_path):
    r = CliRunner().invoke(cli, ["simulate", "--trace", "workload-1", "--policies", "pal,bogus"])
    assert r.exit_code == 2 and "unknown placement 'bogus'" in r.output
    r = CliRunner().invoke(cli, ["simulate", "--trace", "workload-1", "--cluster", "16by4"])
    assert r.exit_code == 2 and "NODESxGPUS" in r.output


def test_job_bigger_than_cluster(tmp_path):
    r = CliRunner().invoke(cli, ["simulate", "--trace", "workload-2", "--cluster", "2x4"])
    assert r.exit_code == 1 and "needs 32 GPUs but the cluster has 8" in r.output


def test_synthetic_trace_runs():
    r = run("--synthetic", "40", "--policies", "pal,firstfit", "--cluster", "4x4")
    assert r.exit_code == 0, r.output
    assert "synthetic-40-s0" in r.output


def test_event_mode_with_a_topology_file(tmp_path):
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=l1 Nodes=n[1-4]\nSwitchName=l2 Nodes=n[5-8]\nSwitchName=sp Switches=l[1-2]\n")
    out = tmp_path / "r.json"
    r = run("--synthetic", "30", "--mode", "event", "--topology", str(topo), "--cluster", "8x4",
            "--policies", "pal-net,pal", "--output", str(out))
    assert r.exit_code == 0, r.output
    assert "8x4" in __import__("json").loads(out.read_text())["meta"]["cluster"]
    bad = tmp_path / "bad.conf"
    bad.write_text("SwitchName=l1 Nodes=n[1-\n")
    r = CliRunner().invoke(cli, ["simulate", "--synthetic", "5", "--mode", "event", "--topology", str(bad)])
    assert r.exit_code == 1 and "bad.conf:1" in r.output
    r = CliRunner().invoke(cli, ["simulate", "--synthetic", "5", "--topology", str(topo)])
    assert r.exit_code == 2 and "needs --mode event" in r.output


def test_gpu_models_run_in_event_mode_and_bad_specs_are_clear(tmp_path):
    trace = tmp_path / "mixed.csv"
    trace.write_text("job_id,num_gpus,submit_time,duration,model,gpu_model\n"
                     + "".join(f"{i},{1 + i % 4},{60 * i},20000,resnet50,{['', 'a100', 'v100'][i % 3]}\n"
                               for i in range(30)))
    out = tmp_path / "r.json"
    r = run("--trace", str(trace), "--mode", "event", "--gpu-models", "a100=4:0.5,v100=12",
            "--policies", "pal,packed-sticky", "--output", str(out))
    assert r.exit_code == 0, r.output
    assert "mixed" in r.output and json.loads(out.read_text())["meta"]["gpu_models"] == "a100=4:0.5,v100=12"
    for args, said in [(["--gpu-models", "a100=4,v100=12"], "needs --mode event"),
                       (["--mode", "event", "--gpu-models", "a100=4,v100=8"], "names 12 nodes; the cluster has 16"),
                       (["--mode", "event", "--gpu-models", "a100=4,h100=12"], "needs GPU model 'v100'")]:
        r = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), *args])
        assert r.exit_code != 0 and said in r.output and "Traceback" not in r.output, (args, r.output)
    r = CliRunner().invoke(cli, ["simulate", "--trace", str(trace), "--mode", "event"])
    assert r.exit_code == 0 and "20 job(s) ask for a GPU model (a100, v100); the simulated cluster names none" in r.output


def test_slurm_is_the_stock_model_with_backfill(tmp_path):
    """`slurm` is the registered model of stock Slurm (EASY backfill), not first fit: on
    workload-1 in event mode it backfills, so its runs differ from firstfit's."""
    out = tmp_path / "r.json"
    r = run("--trace", "workload-1", "--mode", "event", "--policies", "slurm,pal-fit,firstfit", "--output", str(out))
    assert r.exit_code == 0, r.output
    rows = {row["policy"]: row for row in json.loads(out.read_text())["results"]}
    assert set(rows) == {"slurm", "pal-fit", "firstfit"}
    assert rows["slurm"]["avg_jct_s"] != rows["firstfit"]["avg_jct_s"]
    assert rows["pal-fit"]["avg_jct_s"] < rows["slurm"]["avg_jct_s"]


def test_starvation_bound_applies_to_pal_fit_only(tmp_path):
    """--starvation-bound gives pal-fit a site's bound (a loaded synthetic trace has jobs that
    wait longer than 4 h, so its runs change); the slurm model has no bound to apply."""
    def rows(*extra):
        out = tmp_path / "r.json"
        r = run("--synthetic", "200", "--synthetic-load", "1.1", "--mode", "event", "--policies", "slurm,pal-fit",
                "--output", str(out), *extra)
        assert r.exit_code == 0, r.output
        return {row["policy"]: row["avg_jct_s"] for row in json.loads(out.read_text())["results"]}

    free, bounded = rows(), rows("--starvation-bound", "4:00:00")
    assert bounded["slurm"] == free["slurm"]
    assert bounded["pal-fit"] != free["pal-fit"]
