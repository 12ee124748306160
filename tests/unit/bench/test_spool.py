import json
import os

import pytest

from pal_slurm.bench import spool
from pal_slurm.bench.base import MemorySink, Sample


def s(i):
    return Sample(f"n{i}", i % 4, "A", "replay", 1.0 + i / 100, False, {"k": i}, taken_at=float(i))


def test_append_then_drain_delivers_each_sample_once(tmp_path):
    spool.append(tmp_path, [s(1), s(2)])
    spool.append(tmp_path, [s(3)])
    assert spool.pending(tmp_path) == 3
    sink = MemorySink()
    report = spool.drain(sink, tmp_path)
    assert report.delivered == 3 and report.corrupt == []
    assert sink.samples == [s(1), s(2), s(3)]
    again = spool.drain(sink, tmp_path)
    assert again.delivered == 0 and len(sink.samples) == 3
    assert spool.pending(tmp_path) == 0


def test_corrupt_line_is_reported_skipped_and_kept_for_humans(tmp_path):
    spool.append(tmp_path, [s(1)])
    with (tmp_path / spool.SPOOL_FILE).open("a") as fh:
        fh.write('{"node": "n9", "truncated\n')
        fh.write(json.dumps({"node": "n9", "slot": 0}) + "\n")
    spool.append(tmp_path, [s(2)])
    sink = MemorySink()
    report = spool.drain(sink, tmp_path)
    assert [x.node for x in sink.samples] == ["n1", "n2"]
    assert len(report.corrupt) == 2
    assert "not JSON" in report.corrupt[0] and ":2:" in report.corrupt[0]
    assert "lacks field" in report.corrupt[1]
    assert (tmp_path / spool.REJECTED_FILE).read_text().count("\n") == 2
    assert spool.pending(tmp_path) == 0


def test_failed_delivery_keeps_everything_for_next_time(tmp_path):
    spool.append(tmp_path, [s(1), s(2)])

    class Down:
        def add_samples(self, samples):
            raise ConnectionError("db down")

    with pytest.raises(ConnectionError):
        spool.drain(Down(), tmp_path)
    spool.append(tmp_path, [s(3)])  # arrives while the renamed file waits
    sink = MemorySink()
    assert spool.drain(sink, tmp_path).delivered == 3
    assert sorted(x.node for x in sink.samples) == ["n1", "n2", "n3"]


def test_missing_or_readonly_dir_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        spool.append(tmp_path / "nope", [s(1)])
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a read-only dir is still writable")
        with pytest.raises(OSError):
            spool.append(ro, [s(1)])
    finally:
        os.chmod(ro, 0o700)


def test_drain_of_missing_dir_is_empty(tmp_path):
    assert spool.drain(MemorySink(), tmp_path / "none").delivered == 0


def test_spool_main_drains_into_the_configured_store(tmp_path, monkeypatch, capsys):
    from pal_slurm.bench.repository import StoreProfilingRepository
    from pal_slurm.store import open_store

    url = f"sqlite:///{tmp_path / 'pal.db'}"
    conf = tmp_path / "pal.toml"
    conf.write_text(f'[store]\nurl = "{url}"\n[profiling]\nspool_dir = "{tmp_path / "sp"}"\n')
    (tmp_path / "sp").mkdir()
    spool.append(tmp_path / "sp", [s(1), s(2)])
    assert spool.main([str(conf)]) == 0
    assert "delivered 2 sample(s)" in capsys.readouterr().out
    assert len(StoreProfilingRepository(open_store(url)).samples()) == 2
    conf.write_text("[profiling]\nbogus = 1\n")
    assert spool.main([str(conf)]) == 2
