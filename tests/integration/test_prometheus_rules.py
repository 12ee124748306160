"""The shipped alert rules, checked and unit-tested by Debian's promtool (no lab needed)."""

import shutil
import subprocess

import pytest

from pal_slurm.daemon.process import REPO

RULES_DIR = REPO / "etc" / "prometheus"


@pytest.fixture
def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool missing (Debian package prometheus): run scripts/install-deps.sh")
    return path


def test_alert_rules_are_valid(promtool):
    p = subprocess.run([promtool, "check", "rules", str(RULES_DIR / "pal-alerts.yml")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 8 rules found" in p.stdout


def test_alert_rules_fire_when_they_should(promtool):
    p = subprocess.run([promtool, "test", "rules", "pal-alerts.test.yml"], cwd=RULES_DIR, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout + p.stderr


def test_scrape_config_is_valid(promtool, tmp_path):
    cfg = (RULES_DIR / "prometheus.yml").read_text().replace("/etc/prometheus/pal-alerts.yml",
                                                               str(RULES_DIR / "pal-alerts.yml"))
    (tmp_path / "prometheus.yml").write_text(cfg)
    p = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
