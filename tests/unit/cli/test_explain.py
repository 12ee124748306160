from datetime import datetime, timedelta, timezone

from pal_slurm.model.decision import DecisionKind
from pal_slurm.store import open_store
from pal_slurm.store.records import DecisionRecord, RankingEntry

from .profiling_env import palctl  # noqa: F401 - fixture


def seed_store(url):
    store = open_store(url)
    entries = [RankingEntry(n, s, "A", 2.0 if (n, s) == ("gpu01", 0) else 1.0,
                            2.0 if (n, s) == ("gpu01", 0) else 1.0, 1 if (n, s) == ("gpu01", 0) else 0)
               for n in ("gpu01", "gpu02") for s in range(2)]
    snap = store.write_ranking("optimal", entries)
    t0 = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)
    store.record_decision(DecisionRecord("77", DecisionKind.DEFER, "no free GPUs", {}, snap.version, "A", t0))
    store.record_decision(DecisionRecord("77", DecisionKind.PLACE, "pal", {"gpu01": (0,), "gpu02": (1,)},
                                         snap.version, "A", t0 + timedelta(seconds=30)))
    store.record_decision(DecisionRecord("78", DecisionKind.PLACE, "pal", {"gpu02": (0, 1)}, snap.version, "A",
                                         t0 + timedelta(seconds=40)))
    store.close()


def test_explain_placed_job(palctl, monkeypatch):
    import os

    seed_store(os.environ["PAL_DB_URL"])
    r = palctl("explain", "77")
    assert r.exit_code == 0, r.output
    out = r.output
    assert "job 77: place" in out and "class: A" in out and "ranking: v1" in out
    assert "placed on: gpu01:0 gpu02:1" in out
    assert "2 GPU(s) on 2 node(s) (cross-node" in out
    assert "bin 0: 3 GPU(s) sf 1.000, bin 1: 1 GPU(s) sf 2.000" in out
    assert "gpu01:0  score 2.000  bin 1  sf 2.000" in out
    assert "slowest GPU: sf 2.000 (gpu01:0)" in out
    assert "3 GPU(s) rank in faster bins" in out
    assert "earlier decisions for this job (1)" in out and "defer" in out
    r = palctl("explain", "78")
    assert "one node: no locality penalty" in r.output and "no GPU of this class ranks in a faster bin" in r.output


def test_explain_unknown_and_bad_job(palctl):
    r = palctl("explain", "12345")
    assert r.exit_code == 1 and "no decision recorded for job 12345" in r.output
    r = palctl("explain", "12;rm")
    assert r.exit_code == 2 and "not a job id" in r.output
