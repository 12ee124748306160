"""palctl pause / resume: the switch goes to the store, a running pald follows it at once, and
`palctl status` shows it."""

from __future__ import annotations

from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.model import DecisionKind
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.switches import SiteSwitches

from .test_status import live_pald, write_cfg


def switches(db):
    repo = open_store(db)
    try:
        return SiteSwitches.from_store(repo.switches())
    finally:
        repo.close()


def test_pause_without_pald_keeps_the_switch_and_says_pald_follows_it_at_start(tmp_path):
    db = f"sqlite:///{tmp_path}/pal.db"
    cfg = write_cfg(tmp_path, db)
    r = CliRunner().invoke(cli, ["--config", str(cfg), "pause"])
    assert r.exit_code == 0, r.output
    assert "paused by" in r.output and "pald is not answering" in r.output
    assert switches(db).paused
    status = CliRunner().invoke(cli, ["--config", str(cfg), "status"])
    assert "PAUSED by" in status.output and "palctl resume" in status.output
    r = CliRunner().invoke(cli, ["--config", str(cfg), "resume"])
    assert r.exit_code == 0 and "resumed by" in r.output
    assert not switches(db).paused
    again = CliRunner().invoke(cli, ["--config", str(cfg), "resume"])
    assert "already was resumed" in again.output


def test_a_running_pald_follows_pause_and_resume_at_once(tmp_path):
    from tests.unit.daemon.builders import ServerThread, request

    cfg_path, pald = live_pald(tmp_path)
    with ServerThread(pald.handle, pald.config.daemon.socket):
        r = CliRunner().invoke(cli, ["--config", str(cfg_path), "pause"])
        assert r.exit_code == 0, r.output
        assert "pald passes every job" in r.output
        assert pald.handle(request("resnet", gpn=1, nodes=1)).reason == "paused"
        status = CliRunner().invoke(cli, ["--config", str(cfg_path), "status", "--json"])
        assert '"paused": true' in status.output and "has not read it" not in status.output
        r = CliRunner().invoke(cli, ["--config", str(cfg_path), "resume"])
        assert r.exit_code == 0 and "places PAL jobs again" in r.output
        assert pald.handle(request("resnet", gpn=1, nodes=1)).decision is not DecisionKind.PASS
