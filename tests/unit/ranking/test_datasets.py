import statistics

import pytest

from pal_slurm.ranking.datasets import (
    DatasetError,
    artifact_class_runs,
    bundled_path,
    detect_format,
    load_perfvar_table,
    load_runs,
)


def test_bundled_runs_are_median_normalised():
    runs = artifact_class_runs()
    for rs in runs.values():
        assert statistics.median(rs.perf_norm) == pytest.approx(1.0)
    # the ResNet-50 file holds the Longhorn outlier runs (up to ~3.57x the median)
    assert max(runs["A"].perf_norm) == pytest.approx(3.5687, abs=1e-3)
    assert len(runs["A"].per_gpu_median()) == 336


def test_perfvar_table_reads_32_gpus():
    rows = load_perfvar_table(bundled_path("32gpu-variability.csv"))
    assert len(rows) == 32
    assert set(rows[0].perfvar) == {"A", "B", "C", "D"}
    assert all(0.9 < r.perfvar["A"] < 1.2 for r in rows)


def test_detect_format():
    assert detect_format(bundled_path("resnet-longhorn-agg.csv")) == "runs"
    assert detect_format(bundled_path("32gpu-variability.csv")) == "table"


def test_malformed_rows_name_the_line(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("uuid,perf\ng1,1.0\ng2,abc\n")
    with pytest.raises(DatasetError, match=r"bad.csv:3:2: perf: not a number"):
        load_runs(p)


def test_missing_columns_and_missing_file(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(DatasetError, match=r"needs 'perf' and 'uuid' \(or 'node' and 'device'\)"):
        load_runs(p)
    with pytest.raises(DatasetError, match="unknown variability format"):
        detect_format(p)
    with pytest.raises(DatasetError):
        load_runs(tmp_path / "nope.csv")


def test_negative_perf_is_rejected(tmp_path):
    p = tmp_path / "neg.csv"
    p.write_text("uuid,perf\ng1,-1\n")
    with pytest.raises(DatasetError, match=r"neg.csv:2:2: perf: must be > 0"):
        load_runs(p)
