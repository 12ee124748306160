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
    spool.append(tmp_path / "sp", [s(3)])
    os.chmod(tmp_path / "sp", 0o777)
    assert spool.main([str(conf)]) == 2  # a world-writable spool is not read
    assert "unsafe spool" in capsys.readouterr().err
    assert len(StoreProfilingRepository(open_store(url)).samples()) == 2
    conf.write_text("[profiling]\nbogus = 1\n")
    assert spool.main([str(conf)]) == 2


def test_a_full_spool_file_is_set_aside_and_a_drain_cut_short_keeps_what_it_delivered(tmp_path, monkeypatch):
    """Files of at most ~ROTATE_BYTES, one delivery each: a store that fails on the second
    delivery (the hook's deadline, a dropped connection) keeps the first file's samples
    stored and the rest queued; the next drain delivers the rest, each sample once."""
    monkeypatch.setattr(spool, "ROTATE_BYTES", 400)
    for i in range(12):
        spool.append(tmp_path, [s(i)])
    waiting = sorted(tmp_path.glob(f"{spool.DRAINING_PREFIX}*.jsonl"))
    assert len(waiting) >= 3 and spool.pending(tmp_path) == 12

    class FailsSecond(MemorySink):
        calls = 0

        def add_samples(self, samples):
            self.calls += 1
            if self.calls == 2:
                raise ConnectionError("store gone")
            super().add_samples(samples)

    sink = FailsSecond()
    with pytest.raises(ConnectionError):
        spool.drain(sink, tmp_path)
    first = len(sink.samples)
    assert 0 < first < 12 and spool.pending(tmp_path) == 12 - first
    assert spool.drain(sink, tmp_path).delivered == 12 - first
    assert sorted(x.taken_at for x in sink.samples) == [float(i) for i in range(12)]  # each once
    assert spool.pending(tmp_path) == 0


def test_a_second_drain_while_one_runs_delivers_nothing(tmp_path):
    """A prolog and an epilog on one node drain at the same time: the one that finds the
    drain lock taken leaves the files to the other (before, both delivered the same file)."""
    import fcntl

    spool.append(tmp_path, [s(1), s(2)])
    held = os.open(tmp_path / spool.DRAIN_LOCK, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # the other drain, mid-delivery
        sink = MemorySink()
        report = spool.drain(sink, tmp_path)
        assert report.busy and report.delivered == 0 and sink.samples == []
        assert spool.pending(tmp_path) == 2
    finally:
        os.close(held)
    report = spool.drain(sink, tmp_path)
    assert not report.busy and report.delivered == 2 and spool.pending(tmp_path) == 0


def _spool_dir(tmp_path):
    d = tmp_path / "spool"
    d.mkdir(mode=0o700)
    return d


def test_a_symlink_planted_as_the_live_file_is_never_followed(tmp_path):
    d = _spool_dir(tmp_path)
    target = tmp_path / "victim"
    target.write_text("precious\n")
    os.symlink(target, d / spool.SPOOL_FILE)
    with pytest.raises(OSError):
        spool.append(d, [s(1)])  # O_NOFOLLOW: ELOOP, nothing written through the link
    assert target.read_text() == "precious\n"
    sink = MemorySink()
    report = spool.drain(sink, d)  # the drain removes the link itself, not its target
    assert not (d / spool.SPOOL_FILE).is_symlink()
    assert target.read_text() == "precious\n"
    assert sink.samples == [] and report.delivered == 0
    spool.append(d, [s(2)])  # and the spool works again
    assert spool.drain(sink, d).delivered == 1


def test_a_symlink_planted_as_a_set_aside_file_is_removed_unread(tmp_path):
    d = _spool_dir(tmp_path)
    secret = tmp_path / "secret.jsonl"
    secret.write_text(s(9).to_json() + "\n")  # a valid line: following the link would deliver it
    os.symlink(secret, d / f"{spool.DRAINING_PREFIX}0-0.jsonl")
    os.symlink(secret, d / spool.REJECTED_FILE)
    spool.append(d, [s(1)])
    (d / spool.SPOOL_FILE).write_text(s(1).to_json() + "\nnot json\n")  # a corrupt line goes to rejected
    sink = MemorySink()
    report = spool.drain(sink, d)
    assert [x.node for x in sink.samples] == ["n1"]
    assert any("removed unread" in c for c in report.corrupt)
    assert not (d / f"{spool.DRAINING_PREFIX}0-0.jsonl").exists()
    assert secret.read_text() == s(9).to_json() + "\n"  # not appended to through rejected.jsonl
    assert not (d / spool.REJECTED_FILE).is_symlink()
    assert (d / spool.REJECTED_FILE).read_text() == "not json\n"  # a file of its own instead


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o720])
def test_a_group_or_world_writable_spool_is_refused(tmp_path, mode):
    d = _spool_dir(tmp_path)
    spool.append(d, [s(1)])
    os.chmod(d, mode)
    with pytest.raises(spool.SpoolUnsafe):
        spool.append(d, [s(2)])
    with pytest.raises(spool.SpoolUnsafe):
        spool.drain(MemorySink(), d)
    with pytest.raises(spool.SpoolUnsafe):
        spool.pending(d)
    os.chmod(d, 0o700)
    sink = MemorySink()
    assert spool.drain(sink, d).delivered == 1  # nothing was written while it was unsafe


def test_a_spool_dir_that_is_a_symlink_is_refused(tmp_path):
    real = _spool_dir(tmp_path)
    link = tmp_path / "link"
    os.symlink(real, link)
    with pytest.raises(spool.SpoolUnsafe):
        spool.append(link, [s(1)])
    assert list(real.iterdir()) == []


def test_a_spool_dir_owned_by_another_user_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    d = _spool_dir(tmp_path)
    os.chown(d, 65534, -1)
    with pytest.raises(spool.SpoolUnsafe):
        spool.append(d, [s(1)])


def test_an_oversized_file_is_dropped_unread_and_the_rest_delivered(tmp_path, caplog):
    d = _spool_dir(tmp_path)
    big = d / f"{spool.DRAINING_PREFIX}0-0.jsonl"
    line = (s(5).to_json() + "\n").encode()
    with open(big, "wb") as fh:
        fh.write(line * (spool.MAX_FILE_BYTES // len(line) + 2))
    spool.append(d, [s(1)])
    caplog.set_level("ERROR", logger="pal.spool")
    sink = MemorySink()
    report = spool.drain(sink, d)
    assert [x.node for x in sink.samples] == ["n1"]
    assert not big.exists()
    assert any("over the" in c for c in report.corrupt)
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1


def test_the_whole_spool_is_capped_dropping_the_oldest_files(tmp_path, caplog, monkeypatch):
    d = _spool_dir(tmp_path)
    monkeypatch.setattr(spool, "ROTATE_BYTES", 1)  # every append is set aside as its own file
    monkeypatch.setattr(spool, "MAX_SPOOL_BYTES", 3 * len(s(1).to_json()) + 3 + 10)
    caplog.set_level("ERROR", logger="pal.spool")
    for i in range(1, 8):
        spool.append(d, [s(i)])
    files = list(d.glob(f"{spool.DRAINING_PREFIX}*.jsonl"))
    assert len(files) == 3
    assert sum(f.stat().st_size for f in files) <= spool.MAX_SPOOL_BYTES
    sink = MemorySink()
    spool.drain(sink, d)
    assert sorted(x.node for x in sink.samples) == ["n5", "n6", "n7"]  # the newest kept
    assert len([r for r in caplog.records if "dropped its oldest file" in r.getMessage()]) == 4
