"""Where a variability file's GPUs go: --map-to-nodes, else the file's own locations, else by position."""

import pytest

from pal_slurm.bench.importer import import_samples, place, split_class
from pal_slurm.ranking.datasets import DatasetError, load_runs


def test_place_prefers_named_nodes_then_the_files_locations_then_position():
    ids = ["u1", "u2", "u3"]
    located = {"u1": ("a", 0), "u2": ("a", 1), "u3": ("b", 0)}
    assert place("f", ids, located, ["n1"], 2) == {"u1": ("n1", 0), "u2": ("n1", 1)}
    assert place("f", ids, located, None, 2) == located
    # one GPU unlocated: every GPU by position (a half-placed cluster would mix two namings)
    partial = {"u1": ("a", 0), "u2": ("a", 1)}
    assert place("f", ids, partial, None, 2) == {"u1": ("node0", 0), "u2": ("node0", 1), "u3": ("node1", 0)}
    with pytest.raises(DatasetError, match="3 GPUs in the file, 4 slots to fill"):
        place("f", ids, located, ["n1", "n2"], 2)


def test_runs_locations_from_cabinet_node_device(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("uuid,cabinet,node,device,perf\nGPU-a,c1,004,3,1\nGPU-b,c1,004,2,1\nGPU-a,c1,004,3,2\n")
    assert load_runs(f).located == {"GPU-a": ("c1-004", 3), "GPU-b": ("c1-004", 2)}


@pytest.mark.parametrize("rows", [
    "GPU-a,-1,-1,0,1\nGPU-b,c1,2,0,1\n",  # Longhorn's -1: not recorded
    "GPU-a,c1,2,0,1\nGPU-b,c1,2,0,1\n",  # two GPUs at one slot
    "GPU-a,c1,2,0,1\nGPU-a,c1,3,0,1\n",  # one GPU at two slots
])
def test_runs_that_do_not_place_every_gpu_once_place_none(tmp_path, rows):
    f = tmp_path / "r.csv"
    f.write_text("uuid,cabinet,node,dev_id,perf\n" + rows)
    assert load_runs(f).located == {}
    nodes = {s.node for s in import_samples(f, perf_class="A")}
    assert nodes == {"node0"}


def test_node_slot_ids_place_without_location_columns(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("uuid,perf\nc9-3-1,1\nc9-3-0,2\nGPU-x,1\n")
    assert load_runs(f).located == {}  # an NVIDIA UUID among them: by position
    f.write_text("uuid,perf\nc9-3-1,1\nc9-3-0,2\n")
    assert load_runs(f).located == {"c9-3-1": ("c9-3", 1), "c9-3-0": ("c9-3", 0)}


def test_class_needed_names_the_callers_option(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("uuid,perf\nGPU-a,1\n")
    with pytest.raises(DatasetError, match="say which with --variability A=FILE"):
        import_samples(f, class_option="--variability A=FILE")


def test_split_class():
    assert split_class("a=x.csv") == ("A", "x.csv")
    assert split_class("x.csv") == (None, "x.csv")
    assert split_class("store") == (None, "store")


def test_rows_without_uuid_need_a_location_each(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("node,device,perf\nn1,0,1\n-1,0,1\n")
    with pytest.raises(DatasetError, match=r"r.csv:3:1: node: '-1' names no node"):
        load_runs(f)
    f.write_text("node,device,perf\nn1,0,1\nn1,x,1\n")
    with pytest.raises(DatasetError, match=r"r.csv:3:2: device: "):
        load_runs(f)
