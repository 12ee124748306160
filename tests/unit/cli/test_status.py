from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import RankingEntry


def write_cfg(tmp_path, db):
    p = tmp_path / "pal.toml"
    p.write_text(f'[store]\nurl = "{db}"\n[daemon]\nsocket = "{tmp_path}/pald.sock"\n'
                 f'heartbeat_file = "{tmp_path}/hb"\n')
    return p


def test_status_with_everything_down_says_what_to_do(tmp_path):
    cfg = write_cfg(tmp_path, f"sqlite:///{tmp_path}/nope/dir/pal.db")
    r = CliRunner().invoke(cli, ["--config", str(cfg), "status"])
    assert r.exit_code == 1
    assert "DOWN" in r.output and "start it" in r.output
    assert "store" in r.output and "unreachable" in r.output


def live_pald(tmp_path):
    """(pal.toml's path, a pald in process on a ranked SQLite store: one node of 4 GPUs)."""
    from pal_slurm.config import load_config
    from pal_slurm.daemon.app import Pald
    from tests.unit.daemon.builders import FakeActuator, FakeReader, node_info

    db = f"sqlite:///{tmp_path}/pal.db"
    repo = open_store(db)
    repo.write_ranking("optimal", [RankingEntry("gpu01", s, "A", 1.0, 1.0, 0) for s in range(4)])
    repo.close()
    cfg_path = write_cfg(tmp_path, db)
    pald = Pald(load_config(cfg_path), open_store(db), FakeReader([node_info("gpu01")]), FakeActuator())
    pald.refresh_store()
    pald.sync_and_cycle()
    pald.heartbeat()
    return cfg_path, pald


def test_status_all_good_with_a_live_pald(tmp_path):
    from tests.unit.daemon.builders import ServerThread

    cfg_path, pald = live_pald(tmp_path)
    with ServerThread(pald.handle, pald.config.daemon.socket):
        r = CliRunner().invoke(cli, ["--config", str(cfg_path), "status"])
    assert r.exit_code == 0, r.output
    assert "up (pid" in r.output and "ranking v1" in r.output
    assert "fresh" in r.output and "all good" in r.output


def test_status_never_creates_an_empty_store(tmp_path):
    """After `rm pal.db`, `palctl status` used to recreate an empty file."""
    db = tmp_path / "pal.db"
    cfg = write_cfg(tmp_path, f"sqlite:///{db}")
    r = CliRunner().invoke(cli, ["--config", str(cfg), "status"])
    assert r.exit_code == 1
    assert f"no store database at {db}" in r.output and "palctl db upgrade" in r.output
    assert not db.exists()


def test_status_json_is_the_same_report_with_the_same_exit_code(tmp_path):
    import json

    cfg = write_cfg(tmp_path, f"sqlite:///{tmp_path}/nope/dir/pal.db")
    r = CliRunner().invoke(cli, ["--config", str(cfg), "status", "--json"])
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["ok"] is False and doc["pald"]["up"] is False and doc["store"]["ok"] is False
    assert any("pald is not answering" in p for p in doc["problems"])
    assert doc["ranking"] is None and doc["heartbeat"]["age_s"] is None


def test_status_names_a_held_job_s_reservation(tmp_path):
    """A held job that waits with a backfill reservation: `palctl status` says on which nodes
    and when pald plans to start it (what an admin asks first about a job that stays held)."""
    import time
    from dataclasses import replace

    from pal_slurm.config import load_config
    from pal_slurm.daemon.app import Pald
    from tests.unit.daemon.builders import FakeActuator, FakeReader, ServerThread, held_job, node_info

    db = f"sqlite:///{tmp_path}/pal.db"
    open_store(db).close()
    cfg_path = write_cfg(tmp_path, db)
    cfg_path.write_text(cfg_path.read_text() + '[policy]\nplacement = "pal-fit"\nreserve_after_s = 0\n')
    now = time.time()
    running = replace(held_job(1, gpn=4), state="RUNNING", reason="None", priority=1, nodes=("gpu01",),
                      gpu_slots={"gpu01": frozenset(range(4))}, start_time=now - 600, time_limit_s=3 * 3600)
    wide = held_job(2, gpn=4, nodes=2, submit=now - 60, time_limit_s=3600)
    nodes = [node_info("gpu01", used=range(4)), node_info("gpu02")]
    pald = Pald(load_config(cfg_path), open_store(db), FakeReader(nodes, [running, wide]), FakeActuator())
    pald.sync_and_cycle()
    with ServerThread(pald.handle, str(tmp_path / "pald.sock")):
        r = CliRunner().invoke(cli, ["--config", str(cfg_path), "status"])
    line = next((ln for ln in r.output.splitlines() if ln.startswith("reserved")), "")
    assert "job 2 on gpu[01-02] in 2.8 h" in line, r.output
