from datetime import datetime, timezone

from click.testing import CliRunner

from pal_slurm.cli.main import cli
from pal_slurm.model import DecisionKind
from pal_slurm.store.bootstrap import open_store
from pal_slurm.store.records import DecisionRecord, RankingEntry


def setup(tmp_path):
    db = f"sqlite:///{tmp_path}/pal.db"
    repo = open_store(db)
    snap = repo.write_ranking("optimal", [RankingEntry("gpu01", s, "A", 2.0 if s == 0 else 1.0, 2.0 if s == 0 else 1.0,
                                                       1 if s == 0 else 0) for s in range(4)])
    repo.record_decision(DecisionRecord("4242", DecisionKind.PLACE, "released:pal", {"gpu01": (2, 3)}, snap.version, "A",
                                        datetime.now(timezone.utc)))
    repo.close()
    cfg = tmp_path / "pal.toml"
    # a Slurm that cannot be read: explain still answers from the store
    cfg.write_text(f'[store]\nurl = "{db}"\n[slurm]\nbin_dir = "{tmp_path}/no-slurm"\n')
    return cfg


def test_explain_from_the_store(tmp_path):
    cfg = setup(tmp_path)
    r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", "4242"])
    assert r.exit_code == 0, r.output
    assert "Slurm not readable" in r.output
    assert "gpu01:2  score 1.000  bin 0" in r.output
    assert "expected slowdown 1.000" in r.output and "gpu01:0" in r.output  # the slow one it avoided
    assert "one node" in r.output


def test_explain_unknown_job(tmp_path):
    cfg = setup(tmp_path)
    r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", "7"])
    assert r.exit_code == 1 and "no pald decision recorded for job 7" in r.output
    r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", "notanumber"])
    assert r.exit_code == 2


def test_explain_says_which_limit_a_held_job_waits_for(tmp_path):
    cfg = setup(tmp_path)
    repo = open_store(f"sqlite:///{tmp_path}/pal.db")
    repo.record_decision(DecisionRecord("77", DecisionKind.DEFER, "limit:AssocMaxJobsLimit", {}, None, None,
                                        datetime.now(timezone.utc)))
    repo.close()
    r = CliRunner().invoke(cli, ["--config", str(cfg), "explain", "77"])
    assert r.exit_code == 0, r.output
    assert "reason=limit:AssocMaxJobsLimit" in r.output
    assert "held while its user, account or QOS is at a Slurm limit (AssocMaxJobsLimit)" in r.output
