"""palctl simulate --variability: the site's measured GPUs instead of the bundled Longhorn data."""

import re


from pal_slurm.ranking.datasets import bundled_path

from .profiling_env import palctl  # noqa: F401 - fixture

TABLE = str(bundled_path("32gpu-variability.csv"))


def gain(output: str, policy: str = "pal") -> float:
    return float(re.search(rf"geomean avg JCT vs packed-sticky: .*?{policy} ([0-9.]+)", output).group(1))


def write_runs(path, slow: float) -> str:
    """A per-run file with node/device columns: 4 nodes x 4 GPUs, GPU 0 of node c1 `slow`."""
    lines = ["node,device,perf"]
    for n in range(4):
        for d in range(4):
            for _ in range(3):
                lines.append(f"c{n},{d},{slow if (n, d) == (1, 0) else 1.0}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_file_source_sets_the_cluster_shape(palctl):
    r = palctl("simulate", "--trace", "workload-1", "--variability", TABLE, "--policies", "pal,packed-sticky")
    assert r.exit_code == 0, r.output
    assert "variability: A,B,C,D from" in r.output and "(compat mode, 8x4 GPUs)" in r.output


def test_gain_follows_the_data(palctl, tmp_path):
    flat = write_runs(tmp_path / "flat.csv", 1.0)
    slow = write_runs(tmp_path / "slow.csv", 3.0)
    out = {}
    for name, f in (("flat", flat), ("slow", slow)):
        r = palctl("simulate", "--synthetic", "150", "--synthetic-rate", "30", "--mode", "event",
                   "--variability", f"A={f}", "--variability", f"B={f}", "--variability", f"C={f}",
                   "--variability", f"D={f}", "--policies", "pal,packed-sticky")
        assert r.exit_code == 0, r.output
        assert "(event mode, 4x4 GPUs)" in r.output
        out[name] = gain(r.output)
    # one GPU 3x slower: PAL keeps it away from jobs it would slow; with identical GPUs it cannot gain
    assert out["slow"] < out["flat"] - 0.02, out


def test_store_source_current_and_versioned(palctl):
    r = palctl("simulate", "--trace", "workload-1", "--variability", "store")
    assert r.exit_code == 1 and "the store has no ranking" in r.output
    assert palctl("import-variability", TABLE, "--map-to-nodes", "gpu[01-08]", "--rank").exit_code == 0
    r = palctl("simulate", "--trace", "workload-1", "--variability", "store", "--policies", "pal,packed-sticky")
    assert r.exit_code == 0, r.output
    assert "A,B,C,D from store v1" in r.output and "8x4 GPUs" in r.output
    r = palctl("simulate", "--trace", "workload-1", "--variability", "store:v7")
    assert r.exit_code == 1 and "no ranking v7" in r.output
    # --cluster says otherwise: every simulated GPU is drawn from the measured ones
    r = palctl("simulate", "--trace", "workload-1", "--variability", "store:v1", "--cluster", "16x4",
               "--policies", "pal,packed-sticky")
    assert r.exit_code == 0 and "drawn from the 32 measured ones" in r.output and "16x4 GPUs" in r.output


def test_topology_that_names_other_nodes_is_an_error(palctl, tmp_path):
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s1 Nodes=node[0-3]\nSwitchName=s2 Nodes=other[1-4]\n")
    r = palctl("simulate", "--synthetic", "5", "--mode", "event", "--variability", TABLE, "--topology", str(topo))
    assert r.exit_code == 1 and "--topology and --variability disagree: no data for node(s) other1" in r.output


def test_bad_variability_files(palctl, tmp_path):
    bad = tmp_path / "v.csv"
    bad.write_text("uuid,perf\nc1-0,1\nc1-1,inf\n")
    r = palctl("simulate", "--trace", "workload-1", "--variability", f"A={bad}")
    assert r.exit_code == 1 and f"{bad}:3:2: perf: must be a finite number" in r.output
    r = palctl("simulate", "--trace", "workload-1", "--variability", str(bad))
    assert r.exit_code == 1 and "say which with --variability CLASS=FILE" in r.output


def test_import_with_node_device_columns_and_rank_keeps_every_class(palctl, tmp_path):
    assert palctl("import-variability", TABLE, "--map-to-nodes", "c[0-7]", "--rank").exit_code == 0
    f = write_runs(tmp_path / "runs.csv", 2.0)
    r = palctl("import-variability", f, "--class", "A", "--rank")
    assert r.exit_code == 0, r.output
    assert "imported 48 sample(s) for 16 GPU(s), classes A" in r.output
    assert "ranking saved as v2 (classes A,B,C,D)" in r.output
    snap = palctl.repo().latest_ranking()
    assert {e.perf_class for e in snap.entries} == {"A", "B", "C", "D"}


def test_topology_of_the_measured_nodes_sets_the_racks(palctl, tmp_path):
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s1 Nodes=node[0-3]\nSwitchName=s2 Nodes=node[4-7]\nSwitchName=top Switches=s[1-2]\n")
    r = palctl("simulate", "--synthetic", "20", "--mode", "event", "--variability", TABLE, "--topology", str(topo),
               "--policies", "pal-net,firstfit")
    assert r.exit_code == 0, r.output
    assert "(event mode, 8x4 GPUs)" in r.output and "warning" not in r.output
