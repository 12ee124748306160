
from pal_slurm.model import ClusterView
from pal_slurm.sim.variability import MeasuredGpus, merge

DATA = MeasuredGpus("test", {
    "A": {("gpu2", 0): 1.0, ("gpu2", 1): 1.5, ("gpu10", 0): 0.9, ("gpu10", 1): 1.1},
    "D": {("gpu2", 0): 1.0, ("gpu10", 1): 1.2},
})


def test_layout_follows_the_data_in_natural_node_order():
    assert DATA.layout() == [("gpu2", 2), ("gpu10", 2)]


def test_the_measured_cluster_gets_its_own_scores():
    cluster = ClusterView.from_layout(DATA.layout())
    s = DATA.scores_for(cluster, seed=0)
    assert s["A"] == (1.0, 1.5, 0.9, 1.1)
    assert s["D"] == (1.0, 1.0, 1.0, 1.2)  # GPUs without a class's data sit at its median
    assert DATA.gaps(cluster) == []


def test_another_cluster_draws_measured_gpus_with_one_identity_per_gpu():
    cluster = ClusterView.uniform(8, 4)
    a = DATA.scores_for(cluster, seed=3)
    assert a == DATA.scores_for(cluster, seed=3) and a != DATA.scores_for(cluster, seed=4)
    assert set(a["A"]) <= {1.0, 1.5, 0.9, 1.1} and len(a["A"]) == 32
    inverse = {v: k for k, v in DATA.scores["A"].items()}
    for i, v in enumerate(a["A"]):  # the same real GPU in every class
        assert a["D"][i] == DATA.scores["D"].get(inverse[v], 1.0)


def test_gaps_name_nodes_without_data():
    cluster = ClusterView.from_layout([("gpu2", 2), ("gpu99", 2)])
    assert DATA.gaps(cluster) == ["no data for node(s) gpu99", "data for node(s) not in the cluster: gpu10"]


def test_merge_later_sources_win_per_class():
    other = MeasuredGpus("f.csv", {"A": {("n", 0): 2.0}})
    m = merge([DATA, other])
    assert m.scores["A"] == {("n", 0): 2.0} and m.scores["D"] is DATA.scores["D"]
    assert m.source == "A from f.csv; D from test"
    assert merge([]) is None
