import json

from pal_slurm.config import Config, DaemonConfig
from pal_slurm.daemon.failsafe import heartbeat_age, run

from .builders import FakeActuator, FakeReader, held_job


def cfg(tmp_path):
    return Config(daemon=DaemonConfig(heartbeat_file=str(tmp_path / "hb"), heartbeat_stale_s=30))


def test_fresh_heartbeat_releases_nothing(tmp_path):
    (tmp_path / "hb").write_text(json.dumps({"at": 1000.0}))
    act = FakeActuator()
    why, released = run(cfg(tmp_path), FakeReader([], [held_job(1)]), act, now=1010.0)
    assert released == [] and "alive" in why and act.calls == []


def test_stale_or_missing_heartbeat_releases_only_pal_held_jobs(tmp_path):
    (tmp_path / "hb").write_text(json.dumps({"at": 1000.0}))
    jobs = [held_job(1), held_job(2, tag="pal:placed=gpu01"), held_job(3)]
    act = FakeActuator(fail_for={3})
    why, released = run(cfg(tmp_path), FakeReader([], jobs), act, now=1100.0)
    assert released == [1] and "100 s old" in why
    (tmp_path / "hb").unlink()
    why, released = run(cfg(tmp_path), FakeReader([], [held_job(4)]), FakeActuator(), now=1100.0)
    assert released == [4] and why == "no heartbeat"


def test_corrupt_heartbeat_falls_back_to_mtime(tmp_path):
    p = tmp_path / "hb"
    p.write_text("garbage")
    age = heartbeat_age(str(p))
    assert age is not None and age < 60


def test_heartbeat_of_a_pald_whose_sync_fails_counts_as_stale(tmp_path):
    """pald's loop still beats (`at` fresh) but its last complete cycle is old: release."""
    (tmp_path / "hb").write_text(json.dumps({"at": 1095.0, "synced_at": 1000.0}))
    assert heartbeat_age(str(tmp_path / "hb"), now=1100.0) == 100.0
    why, released = run(cfg(tmp_path), FakeReader([], [held_job(1)]), FakeActuator(), now=1100.0)
    assert released == [1] and "100 s old" in why
    (tmp_path / "hb").write_text(json.dumps({"at": 1095.0, "synced_at": 1094.0}))
    assert run(cfg(tmp_path), FakeReader([], [held_job(1)]), FakeActuator(), now=1100.0)[1] == []
