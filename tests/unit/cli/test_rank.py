import json
import time


from .profiling_env import palctl  # noqa: F401 - fixture


def profile(palctl, seed="0", classes="A,B"):
    r = palctl("profile-nodes", "--local", "--backend", "replay", "--nodes", "gpu[01-04]", "--classes", classes,
               "--seed", seed)
    assert r.exit_code == 0, r.output


def test_rank_versions_and_reports_moves(palctl):
    profile(palctl)
    r = palctl("rank")
    assert r.exit_code == 0, r.output
    assert "saved as v1: 16 GPU(s), classes A,B" in r.output and "first ranking" in r.output
    r = palctl("rank")
    assert "saved as v2" in r.output and "no GPU changed bin since v1" in r.output
    # other planted profiles: some GPUs must move between bins
    profile(palctl, seed="9")
    r = palctl("rank", "--window", "1h")
    assert "saved as v3" in r.output and "change(s) since v2" in r.output
    assert "bin" in r.output and "->" in r.output
    assert palctl.repo().latest_ranking().version == 3


def test_dry_run_saves_nothing(palctl):
    profile(palctl)
    r = palctl("rank", "--dry-run")
    assert r.exit_code == 0 and "would be v1" in r.output
    assert palctl.repo().latest_ranking() is None


def test_rank_without_samples_and_bad_window(palctl):
    r = palctl("rank")
    assert r.exit_code == 1 and "no usable benchmark samples" in r.output
    r = palctl("rank", "--window", "soon")
    assert r.exit_code == 2 and "not a duration" in r.output


def test_rankings_table_json_and_errors(palctl):
    r = palctl("rankings")
    assert r.exit_code == 1 and "no ranking yet" in r.output
    profile(palctl)
    palctl("rank")
    r = palctl("rankings", "--class", "A")
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines()[2:]]
    assert len(rows) == 16 and {row[2] for row in rows} == {"A"}
    assert all(row[6] in ("-", "noisy", "slow-outlier", "noisy,slow-outlier") for row in rows)
    doc = json.loads(palctl("rankings", "--json", "--class", "B").output)
    assert doc["version"] == 1 and len(doc["entries"]) == 16
    r = palctl("rankings", "--class", "Z")
    assert r.exit_code == 1 and "has no class 'Z'" in r.output


def test_bad_config_and_unreachable_store_are_clear_errors(palctl, tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text("[profiling]\ntimeout_s = -1\n")
    r = palctl("--config", str(bad), "rank")
    assert r.exit_code == 2 and "configuration" in r.output and "timeout_s" in r.output
    monkeypatch.setenv("PAL_DB_URL", "postgresql://pal@127.0.0.1:1/pal")
    r = palctl("rankings")
    assert r.exit_code == 1 and "Traceback" not in r.output and r.output.startswith("Error:")


def test_a_slowed_gpu_is_flagged_as_drift_by_rank_and_rankings_changed(palctl, monkeypatch):
    r = palctl("profile-nodes", "--local", "--backend", "replay", "--nodes", "gpu[01-04]", "--classes", "A",
               "--rounds", "1")
    assert r.exit_code == 0, r.output
    assert palctl("rank").exit_code == 0
    r = palctl("rankings", "--changed")
    assert r.exit_code == 1 and "no ranking v0" in r.output
    monkeypatch.setenv("PAL_PROFILING_REPLAY_SLOWDOWN", "gpu02:1=1.6")
    r = palctl("profile-nodes", "--local", "--backend", "replay", "--nodes", "gpu[01-04]", "--classes", "A",
               "--rounds", "8")
    assert r.exit_code == 0, r.output
    r = palctl("rank", "--dry-run")
    assert "GPU(s) drifted" in r.output and "gpu02:1 class A" in r.output
    r = palctl("rank")
    assert r.exit_code == 0 and "saved as v2" in r.output
    r = palctl("rankings", "--changed")
    assert r.exit_code == 3, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("ranking v1 -> v2:") and lines[1].strip().startswith("gpu02:1 class A")
    doc = json.loads(palctl("rankings", "--changed", "--json").output)
    worst = doc["drifted"][0]
    assert (worst["node"], worst["slot"], doc["from_version"], doc["to_version"]) == ("gpu02", 1, 1, 2)
    assert worst["change"] > 0.3
    r = palctl("rankings", "--changed", "--action", "drain", "--dry-run")
    assert r.exit_code == 3
    assert "would run: scontrol update NodeName=gpu02 State=DRAIN \"Reason=pal drift: GPU 1 class A" in r.output
    r = palctl("rankings", "--changed", "--since", "2")
    assert r.exit_code == 1 and "not older" in r.output


def test_rank_counts_the_flagged_samples_by_why(palctl):
    """An NVML-only site ranks on idle samples: rank says so, and what would fix it."""
    from pal_slurm.bench.busy import IDLE_GPU_REASON
    from pal_slurm.model.sample import Sample

    profile(palctl, classes="A")
    now = time.time()

    def flagged(slot, reason):
        return Sample(node="gpu01", slot=slot, perf_class="A", backend="nvml", value=1.0, higher_is_better=False,
                      taken_at=now, busy=True, busy_reason=reason)

    repo = palctl.repo()
    repo.add_samples([flagged(0, IDLE_GPU_REASON), flagged(1, IDLE_GPU_REASON),
                      flagged(2, "other gpu processes: 4242"), flagged(3, "cpu load 8.00 on 2 cpus")])
    repo.close()
    r = palctl("rank")
    assert r.exit_code == 0, r.output
    assert "4 of 132 sample(s) flagged (busy host 1, other GPU processes 1, idle GPU 2)" in r.output  # 16 x 8 + 4
    assert "idle GPU: the nvml backend polled GPUs that ran nothing" in r.output


def test_rank_says_nothing_of_flags_when_there_are_none(palctl):
    profile(palctl, classes="A")
    assert "flagged (" not in palctl("rank").output
