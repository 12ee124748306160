import dataclasses
import statistics

import pytest

from pal_slurm.bench.base import GpuTarget
from pal_slurm.ranking.rank import rank_samples
from pal_slurm.bench.replay import ReplayBackend
from pal_slurm.ranking.datasets import artifact_class_runs

LAYOUT = [GpuTarget(f"gpu{n:02d}", s) for n in range(1, 5) for s in range(4)]


def spearman(a, b):
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for pos, i in enumerate(order):
            r[i] = pos
        return r

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def test_same_seed_same_profiles_and_draws():
    a = ReplayBackend(seed=7).sample(LAYOUT, "A")
    b = ReplayBackend(seed=7).sample(LAYOUT, "A")
    assert [s.value for s in a] == [s.value for s in b]
    assert [s.metrics["dataset_gpu"] for s in a] == [s.metrics["dataset_gpu"] for s in b]


def test_other_seed_plants_other_profiles():
    a = ReplayBackend(seed=1)
    b = ReplayBackend(seed=2)
    assert [a.dataset_gpu(g.node, g.slot, "A") for g in LAYOUT] != [b.dataset_gpu(g.node, g.slot, "A") for g in LAYOUT]


def test_draws_come_from_the_gpus_own_runs():
    b = ReplayBackend(seed=3)
    runs = artifact_class_runs()["A"].runs_of()
    for _ in range(5):
        for s in b.sample(LAYOUT, "A"):
            assert s.value in runs[s.metrics["dataset_gpu"]]
            assert not s.higher_is_better and s.backend == "replay"


def test_nonce_fixes_the_draw():
    a = ReplayBackend(seed=3, nonce="job42")
    first = [s.value for s in a.sample(LAYOUT, "B")]
    again = [s.value for s in a.sample(LAYOUT, "B")]
    assert first == again


def test_independent_of_which_gpus_are_asked():
    """The prolog on one node sees the same profile as palctl measuring the whole cluster."""
    b = ReplayBackend(seed=5)
    one = b.planted("gpu03", 2, "A")
    assert one == ReplayBackend(seed=5).planted("gpu03", 2, "A")
    assert statistics.median(
        ReplayBackend(seed=5, nonce=i).sample([GpuTarget("gpu03", 2)], "A")[0].value for i in range(1)
    ) in artifact_class_runs()["A"].runs_of()[b.dataset_gpu("gpu03", 2, "A")]


@pytest.mark.parametrize("seed", [0, 11, 16, 19])
def test_ranking_recovers_the_planted_order(seed):
    """8 rounds (two passes over a typical GPU's 4 runs) recover the planted order."""
    b = ReplayBackend(seed=seed)
    samples = []
    for _ in range(8):
        samples += b.sample(LAYOUT, "A")
    samples = [dataclasses.replace(s, taken_at=10.0) for s in samples]
    snap = rank_samples(samples, now=10.0, window_s=100.0)
    planted = [b.planted(g.node, g.slot, "A") for g in LAYOUT]
    by = {(e.node, e.slot): e.score for e in snap.entries}
    measured = [by[(g.node, g.slot)] for g in LAYOUT]
    assert spearman(planted, measured) >= 0.95


def test_successive_rounds_walk_the_runs_without_replacement():
    b = ReplayBackend(seed=4)
    g = GpuTarget("gpu01", 0)
    runs = artifact_class_runs()["A"].runs_of()[b.dataset_gpu("gpu01", 0, "A")]
    drawn = []
    for _ in range(len(runs)):
        drawn.append(b.sample([g], "A")[0].value)
        b.sample([g], "D")  # another class in between must not make class A skip runs
    assert sorted(drawn) == sorted(runs)


def test_unknown_class_is_a_clear_error():
    with pytest.raises(ValueError, match="no dataset for class 'Z'"):
        ReplayBackend().sample(LAYOUT[:1], "Z")


def test_replay_slowdown_emulates_a_degraded_gpu():
    from pal_slurm.bench.base import GpuTarget
    from pal_slurm.bench.replay import ReplayBackend

    gpus = [GpuTarget("gpu02", 0), GpuTarget("gpu02", 1)]
    plain = ReplayBackend(seed=3).sample(gpus, "A")
    slowed = ReplayBackend(seed=3, slowdown={("gpu02", 1): 1.5}).sample(gpus, "A")
    assert slowed[0].value == plain[0].value
    assert slowed[1].value == pytest.approx(1.5 * plain[1].value)


def test_replay_slowdown_config_is_checked():
    from pal_slurm.config import ConfigError, from_mapping, parse_slowdowns

    assert parse_slowdowns("gpu02:1=1.5, gpu[03]:0=2") == {("gpu02", 1): 1.5, ("gpu[03]", 0): 2.0}
    for bad in ("gpu02=1.5", "gpu02:x=2", "gpu02:1=-1", "gpu02:1=fast"):
        with pytest.raises(ConfigError):
            from_mapping({"profiling": {"replay_slowdown": bad}})


def test_cluster_mode_replays_the_event_simulators_draw():
    """With `cluster`, (node, slot) replays the dataset GPU the simulator picked for that GPU
    index, so the median of its runs is exactly the simulator's per-GPU slowdown."""
    from pal_slurm.ranking.profiles import gpu_profiles

    nodes = tuple(f"gpu{n:02d}" for n in range(1, 17))
    backend = ReplayBackend(seed=3, cluster=(nodes, 4))
    sim = gpu_profiles(64, 3)
    for c in "ABCD":
        planted = [backend.planted(n, s, c) for n in nodes for s in range(4)]
        assert planted == pytest.approx(list(sim[c]))
    with pytest.raises(ValueError, match="no GPU gpu17:0"):
        backend.dataset_gpu("gpu17", 0, "A")


def test_cluster_mode_ranking_from_samples_orders_gpus_like_the_simulator():
    from pal_slurm.ranking.profiles import gpu_profiles

    nodes = tuple(f"gpu{n:02d}" for n in range(1, 5))
    backend = ReplayBackend(seed=1, cluster=(nodes, 4))
    targets = [GpuTarget(n, s) for n in nodes for s in range(4)]
    rounds = [backend.sample(targets, "A") for _ in range(16)]
    medians = [statistics.median(r[i].value for r in rounds) for i in range(len(targets))]
    assert spearman(medians, list(gpu_profiles(16, 1)["A"])) > 0.9
