import pytest

from pal_lab.replay.harness import LabShape, ReplayError, launch_cost
from pal_lab.replay.jobcomp import CompRecord


def test_launch_cost_is_the_median_from_slurms_start_to_the_payload_plus_teardown():
    names = [f"replay-{i}" for i in range(4)]
    # Slurm started job i at 100 + i (its log, ms); the payloads ran 0.05 .. 0.2 s later; job 3
    # queued long before: its wait is not launch cost, only its 0.2 s from start to payload
    started = {i: (100.0 + i, "backfill") for i in range(4)}
    lag = [0.1, 0.05, 0.2, 0.15]
    payloads = {n: {"start": 100.0 + i + lag[i], "end": 100.0 + i + lag[i] + 1.0} for i, n in enumerate(names)}
    comp = [CompRecord(i, n, "COMPLETED", 90, 100 + i, int(payloads[n]["end"]), "gpu01", 1)
            for i, n in enumerate(names)]
    tails = sum(int(p["end"]) + 0.5 - p["end"] for p in payloads.values()) / 4
    assert abs(launch_cost(payloads, comp, started) - (0.15 + max(0.0, tails))) < 1e-9  # upper median
    with pytest.raises(ReplayError):
        launch_cost(payloads, comp, {})


def test_launch_cost_takes_the_teardown_from_slurmctlds_completions_when_it_has_them():
    """jobcomp's whole seconds would say anything from 0 to 1 s of teardown; the log says 0.03."""
    names = [f"replay-{i}" for i in range(3)]
    started = {i: (100.0 + i, "backfill") for i in range(3)}
    payloads = {n: {"start": 100.0 + i + 0.1, "end": 100.0 + i + 1.9} for i, n in enumerate(names)}
    comp = [CompRecord(i, n, "COMPLETED", 90, 100 + i, int(payloads[n]["end"]) + 1, "gpu01", 1)
            for i, n in enumerate(names)]
    ended = {i: payloads[n]["end"] + (0.03, 0.02, 0.5)[i] for i, n in enumerate(names)}  # one slow: the median
    assert launch_cost(payloads, comp, started, ended) == pytest.approx(0.1 + 0.03)
    assert launch_cost(payloads, comp, started) == pytest.approx(0.1 + 0.6)  # rounded: +0.5 - 0.9 + 1


def test_lab_shape_topology_has_one_leaf_per_four_nodes_under_a_spine():
    text = LabShape(8, 4, 4).topology_conf()
    assert "SwitchName=leaf1 Nodes=gpu01,gpu02,gpu03,gpu04" in text
    assert "SwitchName=leaf2 Nodes=gpu05,gpu06,gpu07,gpu08" in text
    assert "SwitchName=spine Switches=leaf1,leaf2" in text


def test_release_latency_is_the_median_wait_from_free_gpus_to_palds_release():
    from pal_lab.replay.harness import release_latency

    payloads = {
        "a": {"placement": {"gpu01": [0, 1]}, "start": 0.0, "end": 10.0},
        "b": {"placement": {"gpu01": [2]}, "start": 0.0, "end": 12.0},
        "c": {"placement": {"gpu02": [0]}, "start": 0.0, "end": 20.0},
    }
    releases = [
        (12.5, {"gpu01": [1, 2]}),  # freed at 12 (b, the later of a and b): 0.5 s
        (21.0, {"gpu02": [0]}),  # freed at 20: 1 s
        (23.0, {"gpu01": [0], "gpu02": [0]}),  # freed at 20: 3 s
        (5.0, {"gpu03": [0]}),  # never used before: left out
        (11.0, {"gpu02": [0]}),  # c still ran then (ends later): left out
    ]
    assert release_latency(releases, payloads) == 1.0
    assert release_latency([], payloads) is None


def test_palds_clock_is_the_mean_phase_of_its_releases_and_else_the_epoch_multiples():
    """Releases 0.04 and 0.06 s after multiples of 0.3 and one 0.01 s before one: their phase
    is about 0.03 s after the multiples (the mean on the circle; of the numbers, 0.13),
    told against the first submission `t0`; pald's view is as old as the phase is past its
    read (`PALD_READ_S` after the multiple)."""
    from pal_lab.replay.harness import PALD_READ_S, PALD_VIEW_AGE_S, pald_clock

    t0 = 1_000_000.1
    base = 3_333_340 * 0.3  # a multiple of 0.3 s after t0
    releases = [base + 0.04, base + 3.0 + 0.06, base + 6.0 - 0.01]
    clock = pald_clock(releases, t0, 0.3)
    assert clock.period_s == 0.3
    assert clock.phase_s == pytest.approx((base + 0.03 - t0) % 0.3, abs=0.005)
    assert clock.view_age_s == pytest.approx(max(0.0, 0.03 - PALD_READ_S), abs=0.005)
    late = pald_clock([base + 0.15, base + 0.3 + 0.13], t0, 0.3)  # 0.14 s after the multiples
    assert late.view_age_s == pytest.approx(0.14 - PALD_READ_S, abs=0.005)
    bare = pald_clock([], t0, 0.3)  # no release: a decision at the typical age after the read
    decided = (t0 + bare.phase_s - PALD_READ_S - PALD_VIEW_AGE_S) % 0.3
    assert min(decided, 0.3 - decided) == pytest.approx(0.0, abs=1e-6)
    assert bare.view_age_s == PALD_VIEW_AGE_S


def test_every_arm_has_a_registered_placement_and_a_prediction():
    from pal_slurm.policy import placement
    from pal_lab.replay.harness import ARMS
    from pal_lab.replay.predict import SIM_POLICY

    assert set(SIM_POLICY) == set(ARMS)
    for arm, name in ARMS.items():
        if name is not None:
            assert placement(name).name == name, arm


def test_each_arms_pald_config_names_its_placement_and_queue_order(tmp_path):
    """pald in an arm runs the arm's queue order (pal-fit-aged: srtf-aged, pal-fit-slurm: slurm), and the config it
    gets is one pald accepts (the allowed values come from the registries)."""
    from types import SimpleNamespace

    from pal_slurm.config import PolicyConfig, load_config
    from pal_lab.replay.harness import ARMS, _pald_config, arm_queue

    lab = SimpleNamespace(slurm_conf=str(tmp_path / "slurm.conf"), lab_dir=tmp_path)
    seen = {}
    for arm, placement in ARMS.items():
        if placement is None:
            continue
        path = _pald_config(tmp_path / f"{arm}.toml", tmp_path, lab, placement, LabShape(), 0, arm_queue(arm))
        cfg = load_config(path)
        seen[arm] = (cfg.policy.placement, cfg.policy.queue)
    assert seen["pal-fit-aged"] == ("pal-fit", "srtf-aged")
    assert seen["pal-fit-slurm"] == ("pal-fit", "slurm")
    assert cfg.policy.reserve_after_s == PolicyConfig().reserve_after_s  # a site's, uncompressed (scale 1)
    assert seen["pal-fit"] == ("pal-fit", "fifo")
    assert seen["pal"] == ("pal", "fifo")


def test_palds_policy_durations_are_compressed_as_the_trace_is(tmp_path):
    """At 150 trace s per wall s pald's hour before a held job reserves is 24 wall s (a site's
    hour of trace time), its rack wait 4 s; the config pald reads says so, and the replay's
    model runs pald with the same (replay.predict)."""
    from types import SimpleNamespace

    from pal_slurm.config import PolicyConfig, load_config
    from pal_lab.replay.harness import _pald_config, pald_times

    site = PolicyConfig()
    times = pald_times(150.0)
    assert times.reserve_after_s * 150.0 == pytest.approx(site.reserve_after_s)
    assert times.rack_wait_s * 150.0 == pytest.approx(site.rack_wait_s)
    assert times.starvation_bound_s * 150.0 == pytest.approx(site.starvation_bound_s)
    lab = SimpleNamespace(slurm_conf=str(tmp_path / "slurm.conf"), lab_dir=tmp_path)
    cfg = load_config(_pald_config(tmp_path / "pal.toml", tmp_path, lab, "pal-fit", LabShape(), 0, "fifo", times))
    assert (cfg.policy.reserve_after_s, cfg.policy.rack_wait_s) == (times.reserve_after_s, times.rack_wait_s)
    assert cfg.policy.starvation_bound_s == times.starvation_bound_s
