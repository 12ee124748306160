import math

import pytest

from pal_slurm.model import ClusterView
from pal_slurm.sim.network import (
    DEFAULT_MODEL_MAP,
    Congestion,
    NetworkError,
    NetworkModel,
    SensitivityTable,
    cluster_from_racks,
    comm_overhead,
    default_table,
    parse_cluster_spec,
    placement_slowdown,
    tier_of,
)

TRACE_MODELS = ("resnet50", "vgg19", "BERT", "GPT2", "DCGAN", "PointNet")

TOPOLOGY = """
# two leaves under one spine
SwitchName=s0 Nodes=gpu[01-02]
SwitchName=s1 Nodes=gpu[03-04] LinkSpeed=100
SwitchName=spine Switches=s[0-1]
"""


# ---- topology ----------------------------------------------------------------------------


def test_cluster_from_racks_and_tiers():
    from pal_slurm.slurm.topology import parse_topology, racks_of_nodes  # read by the CLI, not sim

    c = cluster_from_racks(racks_of_nodes(parse_topology(TOPOLOGY)), 4)
    assert c.size == 16
    assert [n.rack for n in c.nodes] == ["s0", "s0", "s1", "s1"]
    assert tier_of([0, 4], c) == (1, 2, 1)  # gpu01 + gpu02: one rack
    assert tier_of([0, 8], c) == (2, 2, 2)  # across the spine
    assert tier_of([0, 1], c) == (0, 1, 1)
    with pytest.raises(NetworkError, match="no nodes"):
        cluster_from_racks({}, 4)


def test_parse_cluster_spec():
    c = parse_cluster_spec("16x4", nodes_per_rack=4)
    assert c.size == 64 and len({n.rack for n in c.nodes}) == 4
    assert len({n.rack for n in parse_cluster_spec("3X2").nodes}) == 1
    for bad in ("16", "0x4", "ax4", ""):
        with pytest.raises(NetworkError):
            parse_cluster_spec(bad)


# ---- the sensitivity table ------------------------------------------------------------


def test_table_flags_the_readme_artefact():
    flags = default_table().flags
    assert any(f.startswith("BERT 4 GPUs node") for f in flags)


def test_every_trace_model_maps_to_a_table_model():
    net = NetworkModel()
    for m in TRACE_MODELS:
        assert net.table_model(m) in default_table().curves
    assert net.table_model("no-such-model") == "BERT"  # unknown: assume a sensitive model
    assert DEFAULT_MODEL_MAP["pointnet"] == "ResNet50"


@pytest.mark.parametrize("model", TRACE_MODELS + ("MobileNetV3", "ResNet18", "AlexNet"))
@pytest.mark.parametrize("n", [2, 3, 4, 6, 8, 12, 16, 24, 32, 48])
def test_factors_are_monotone_in_tier(model, n):
    net = NetworkModel()
    node = net.factor(model, n, 1, 1)
    rack2 = net.factor(model, n, 2, 1)
    rack4 = net.factor(model, n, 4, 1)
    spine = net.factor(model, n, 2, 2)
    assert node == 1.0
    assert 1.0 <= rack2 <= rack4 + 1e-12
    assert rack2 <= spine + 1e-12
    assert rack4 <= net.factor(model, n, 4, 2) + 1e-12


def test_one_gpu_never_slows_down():
    assert NetworkModel().factor("BERT", 1, 1, 1) == 1.0


def test_table_values_are_reproduced_relative_to_intra_node():
    # BERT, 8 GPUs: machine s=0.9212, 2 racks s=0.1184 -> factor 0.9212 / 0.1184
    f = NetworkModel().factor("BERT", 8, 2, 2)
    assert f == pytest.approx(0.9212 / 0.1184, rel=1e-3)
    # ResNet50, 2 racks at 8 GPUs: 0.8902 / 0.6689
    assert NetworkModel().factor("resnet50", 8, 2, 2) == pytest.approx(0.8902 / 0.6689, rel=1e-3)


def test_interpolates_between_gpu_counts():
    net = NetworkModel()
    f4, f6, f8 = (net.factor("DCGAN", n, 2, 2) for n in (4, 6, 8))
    assert min(f4, f8) <= f6 <= max(f4, f8)


def test_sensitivity_classes_order_the_models():
    net = NetworkModel()
    assert net.sensitivity("BERT") == "high"
    assert net.sensitivity("GPT2") == "high"
    assert net.sensitivity("vgg19") == "low"
    assert net.sensitivity("resnet50") == "medium"


def test_congestion_scales_only_inter_node_terms():
    calm, busy = NetworkModel(), NetworkModel(congestion=Congestion(0.3, 0.6))
    assert busy.factor("BERT", 4, 1, 1) == calm.factor("BERT", 4, 1, 1) == 1.0
    assert busy.factor("BERT", 8, 2, 1) > calm.factor("BERT", 8, 2, 1)
    assert busy.factor("BERT", 8, 2, 2) > calm.factor("BERT", 8, 2, 2)
    spine_only = NetworkModel(congestion=Congestion(0.0, 0.6))
    assert spine_only.factor("BERT", 8, 2, 1) == pytest.approx(calm.factor("BERT", 8, 2, 1))
    assert spine_only.factor("BERT", 8, 2, 2) > calm.factor("BERT", 8, 2, 2)


def test_congestion_validation_and_parsing():
    assert Congestion.parse("0.5") == Congestion(0.5, 0.5)
    assert Congestion.parse("spine=0.4") == Congestion(0.0, 0.4)
    assert Congestion.parse(None) == Congestion()
    for bad in ("1.0", "-0.1", "leaf=x", "core=0.2"):
        with pytest.raises(NetworkError):
            Congestion.parse(bad)


def test_placement_slowdown_on_a_cluster():
    c = ClusterView.uniform(4, 4, nodes_per_rack=2)
    same_node = placement_slowdown("BERT", [0, 1, 2, 3], c)
    same_rack = placement_slowdown("BERT", [0, 1, 4, 5], c)
    across = placement_slowdown("BERT", [0, 1, 8, 9], c)
    assert same_node == 1.0 < same_rack < across
    assert placement_slowdown("BERT", [0, 1, 8, 9], c, Congestion(0, 0.5)) > across


def test_comm_overhead():
    assert comm_overhead(100.0, 1.0) == 0.0
    assert comm_overhead(100.0, 2.0) == pytest.approx(50.0)


def test_table_parse_errors():
    with pytest.raises(NetworkError, match="header"):
        SensitivityTable.parse("a,b,c\n")
    head = "model,num_gpus,placement,s\n"
    with pytest.raises(NetworkError, match="malformed"):
        SensitivityTable.parse(head + "X,two,slot,0.9\n")
    with pytest.raises(NetworkError, match=r"\(0, 1\]"):
        SensitivityTable.parse(head + "X,2,slot,1.5\n")
    with pytest.raises(NetworkError, match="no rows"):
        SensitivityTable.parse(head + "X,2,slot,0.9\n")
    with pytest.raises(NetworkError, match="cannot read"):
        SensitivityTable.load("/nonexistent/table.csv")


def test_smoothing_raises_a_coarser_level_that_is_faster():
    rows = (
        "model,num_gpus,placement,s\n"
        "X,2,slot,0.9\nX,2,rack(2mc),0.95\nX,2,rack(4mc x1),0.8\nX,2,xrack,0.5\n"
    )
    t = SensitivityTable.parse(rows)
    assert any("rack(2 machines)" in f for f in t.flags)
    curve = t.curves["X"]
    assert curve.e_rack(2, 2) >= curve.e_node(2)
    assert math.isfinite(curve.e_spine(2))
