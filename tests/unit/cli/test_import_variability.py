from pal_slurm.ranking.datasets import bundled_path, load_perfvar_table

from .profiling_env import palctl  # noqa: F401 - fixture


def test_table_mapped_to_nodes_then_ranked(palctl):
    path = bundled_path("32gpu-variability.csv")
    r = palctl("import-variability", str(path), "--map-to-nodes", "gpu[01-08]", "--gpus-per-node", "4", "--rank")
    assert r.exit_code == 0, r.output
    assert "imported 128 sample(s) for 32 GPU(s), classes A,B,C,D" in r.output
    snap = palctl.repo().latest_ranking()
    assert snap.version == 1
    rows = sorted(load_perfvar_table(path), key=lambda x: x.gpu_id)
    entry = {(e.node, e.slot, e.perf_class): e for e in snap.entries}
    # GPU_ID 5 -> gpu02 slot 1; its score is its PerfVar over the class median
    a_scores = sorted(x.perfvar["A"] for x in rows)
    med = (a_scores[15] + a_scores[16]) / 2
    assert abs(entry[("gpu02", 1, "A")].score - rows[5].perfvar["A"] / med) < 1e-9


def test_runs_file_with_class_from_its_name(palctl):
    r = palctl("import-variability", str(bundled_path("resnet-longhorn-agg.csv")), "--map-to-nodes", "n[1-2]")
    assert r.exit_code == 0, r.output
    samples = palctl.repo().samples()
    assert {s.perf_class for s in samples} == {"A"}
    assert {(s.node, s.slot) for s in samples} == {(n, i) for n in ("n1", "n2") for i in range(4)}


def test_runs_file_without_mapping_uses_longhorn_ids(palctl):
    r = palctl("import-variability", str(bundled_path("bert-longhorn-agg.csv")), "--class", "C")
    assert r.exit_code == 0, r.output
    nodes = {s.node for s in palctl.repo().samples()}
    assert "c009-3" in nodes


def test_bad_input(palctl, tmp_path):
    r = palctl("import-variability", str(tmp_path / "missing.csv"))
    assert r.exit_code == 1 and "missing.csv" in r.output
    junk = tmp_path / "junk.csv"
    junk.write_text("a,b\n1,2\n")
    r = palctl("import-variability", str(junk))
    assert r.exit_code == 1 and "unknown variability format" in r.output
    runs = tmp_path / "x-agg.csv"
    runs.write_text("uuid,perf\nc1-1-0,1.0\n")
    r = palctl("import-variability", str(runs))
    assert r.exit_code == 1 and "say which with --class" in r.output
    r = palctl("import-variability", str(bundled_path("32gpu-variability.csv")), "--map-to-nodes", "g[1-9]")
    assert r.exit_code == 1 and "32 GPUs in the file, 36 slots to fill" in r.output
    r = palctl("import-variability", str(bundled_path("32gpu-variability.csv")), "--map-to-nodes", "g[1-")
    assert r.exit_code == 2 and "bad node list" in r.output
    assert palctl.repo().samples() == []
