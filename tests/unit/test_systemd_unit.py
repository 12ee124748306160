"""etc/systemd/pald.service runs pald unprivileged and confined, and its writable paths are
the ones pald's defaults write (a default moved elsewhere would make pald fail read-only)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pal_slurm.config import DaemonConfig, StoreConfig
from pal_slurm.store.engine import parse_url, sqlite_path

UNIT = Path(__file__).resolve().parents[2] / "etc" / "systemd" / "pald.service"


def settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_pald_runs_unprivileged_with_no_capabilities():
    s = settings()
    assert s["User"] not in (["root"], ["0"])
    assert s["NoNewPrivileges"] == ["yes"]
    assert s["CapabilityBoundingSet"] == [""] and s["AmbientCapabilities"] == [""]
    assert s["ProtectSystem"] == ["strict"] and s["ProtectHome"] == ["yes"] and s["PrivateTmp"] == ["yes"]
    assert set(s["RestrictAddressFamilies"][0].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert "PrivateUsers" not in s  # it would hide slurmctld's uid from the socket's peer check


def test_the_writable_paths_hold_what_pald_writes_by_default():
    writable = settings()["ReadWritePaths"][0].split()
    d = DaemonConfig()
    store = sqlite_path(parse_url(StoreConfig().url))
    assert store is not None
    for path in (d.socket, d.heartbeat_file, store):
        assert any(os.path.commonpath([path, w]) == w for w in writable), path
    s = settings()
    assert f"/run/{s['RuntimeDirectory'][0]}" == os.path.dirname(d.socket)
    assert s["RuntimeDirectoryMode"] == ["0755"]  # slurmctld's user must reach the socket


def test_systemd_accepts_the_unit(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    unit = tmp_path / "pald.service"
    text = UNIT.read_text().replace("ExecStart=/opt/pal-slurm/bin/pald", "ExecStart=/bin/true")
    unit.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Unknown" not in done.stderr and "Failed" not in done.stderr, done.stderr
