"""palctl simulate --trace sacct:FILE: the site's own accounting through the simulators."""

from pathlib import Path

from .profiling_env import palctl  # noqa: F401 - fixture

DATA = Path(__file__).parents[1] / "sim" / "data"


def test_sacct_json_through_both_modes(palctl, tmp_path):
    for mode in ("compat", "event"):
        r = palctl("simulate", "--trace", f"sacct:{DATA / 'sacct-22.05.json'}", "--mode", mode, "--cluster", "2x4",
                   "--policies", "pal,packed-sticky")
        assert r.exit_code == 0, r.output
        assert "4 job(s) kept; classes from comments 2, rules 0, unclassed 2" in r.output
        assert "sacct-22.05  pal" in r.output


def test_class_rules_from_the_configuration_and_bad_rules(palctl, tmp_path, monkeypatch):
    conf = tmp_path / "rules.toml"
    conf.write_text('[simulate]\nclass_rules = "name:bert*=B; account:misc=D"\n')
    monkeypatch.setenv("PAL_CONFIG", str(conf))
    r = palctl("simulate", "--trace", f"sacct:{DATA / 'sacct-p.txt'}", "--mode", "event", "--cluster", "2x4",
               "--policies", "pal")
    assert r.exit_code == 0, r.output
    assert "2 job(s) kept; classes from comments 1, rules 1, unclassed 0" in r.output
    conf.write_text('[simulate]\nclass_rules = "user:bob=A"\n')
    r = palctl("simulate", "--trace", f"sacct:{DATA / 'sacct-p.txt'}", "--cluster", "2x4")
    assert r.exit_code == 2 and f"{conf}: [simulate] class_rules: bad rule 'user:bob=A'" in r.output


def test_days_window(palctl):
    r = palctl("simulate", "--trace", f"sacct:{DATA / 'sacct-22.05.json'}", "--window", "14:24", "--cluster", "2x4",
               "--policies", "pal")
    assert r.exit_code == 0, r.output
    assert "older than the window" in r.output and "1 job(s) kept" in r.output
