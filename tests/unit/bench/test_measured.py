"""The node's record of when each GPU was measured: merges, atomic writes, and every fault
(missing, corrupt, foreign, unwritable, a clock gone back) read as "due", never a crash."""

import json
import logging
import os
import threading

import pytest

from pal_slurm.bench import measured
from pal_slurm.bench.due import due_gpus
from pal_slurm.bench.measured import read_state, record_measured
from pal_slurm.bench.spool import SpoolUnsafe

DAY = 24 * 3600.0


def test_record_then_read_merges_gpus_and_nodes(tmp_path):
    d = tmp_path / "spool"
    d.mkdir(mode=0o700)
    record_measured(d, "n1", [0, 1], 100.0)
    record_measured(d, "n2", [0], 200.0)
    record_measured(d, "n1", [1], 300.0)
    assert read_state(d) == {"n1:0": 100.0, "n1:1": 300.0, "n2:0": 200.0}
    assert sorted(p.name for p in d.iterdir()) == sorted([measured.LOCK_FILE, measured.STATE_FILE])  # no temporary left
    assert os.stat(d / measured.STATE_FILE).st_mode & 0o777 == 0o600


def test_a_missing_state_file_means_every_gpu_is_due(tmp_path):
    assert read_state(tmp_path) == {} and read_state(tmp_path / "missing") == {}


@pytest.mark.parametrize("body", [
    b"{not json", b"\xff\xfe", b"[]", b'{"version": 99, "measured": {}}', b'{"version": 1}',
    b'{"version": 1, "measured": []}',
])
def test_a_corrupt_state_file_means_every_gpu_is_due_and_is_logged(tmp_path, caplog, body):
    (tmp_path / measured.STATE_FILE).write_bytes(body)
    caplog.set_level(logging.WARNING, logger="pal.hook")
    assert read_state(tmp_path) == {}
    assert "every GPU is due" in caplog.text


def test_values_that_are_not_times_are_dropped_not_fatal(tmp_path):
    (tmp_path / measured.STATE_FILE).write_text(json.dumps(
        {"version": 1, "measured": {"n1:0": 5.0, "n1:1": "soon", "n1:2": True, "n1:3": None}}))
    assert read_state(tmp_path) == {"n1:0": 5.0}


def test_an_oversized_or_symlinked_state_file_is_not_read(tmp_path):
    (tmp_path / "elsewhere.json").write_text(json.dumps({"version": 1, "measured": {"n1:0": 5.0}}))
    (tmp_path / measured.STATE_FILE).symlink_to(tmp_path / "elsewhere.json")
    assert read_state(tmp_path) == {}
    (tmp_path / measured.STATE_FILE).unlink()
    (tmp_path / measured.STATE_FILE).write_bytes(b" " * (measured.MAX_STATE_BYTES + 1))
    assert read_state(tmp_path) == {}


def test_a_fifo_or_directory_in_place_of_the_state_file_reads_as_nothing_at_once(tmp_path):
    os.mkfifo(tmp_path / measured.STATE_FILE)  # no writer: a blocking open would wait forever
    assert read_state(tmp_path) == {}
    (tmp_path / measured.STATE_FILE).unlink()
    (tmp_path / measured.STATE_FILE).mkdir()
    assert read_state(tmp_path) == {}


def test_a_corrupt_state_file_is_replaced_by_the_next_record(tmp_path):
    (tmp_path / measured.STATE_FILE).write_bytes(b"\x00garbage")
    os.chmod(tmp_path, 0o700)
    record_measured(tmp_path, "n1", [3], 42.0)
    assert read_state(tmp_path) == {"n1:3": 42.0}


def test_recording_into_an_unusable_directory_raises_oserror_for_the_caller(tmp_path):
    with pytest.raises(FileNotFoundError):
        record_measured(tmp_path / "missing", "n1", [0], 1.0)
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        record_measured(tmp_path / "file", "n1", [0], 1.0)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(SpoolUnsafe):
        record_measured(open_dir, "n1", [0], 1.0)
    assert not (open_dir / measured.STATE_FILE).exists()


def test_a_clock_that_went_back_overwrites_the_future_time(tmp_path):
    os.chmod(tmp_path, 0o700)
    record_measured(tmp_path, "n1", [0], 10_000.0)
    assert due_gpus(read_state(tmp_path), "n1", [0], 5_000.0, DAY) == (0,)
    record_measured(tmp_path, "n1", [0], 5_000.0)
    assert due_gpus(read_state(tmp_path), "n1", [0], 5_001.0, DAY) == ()


def test_prologs_recording_at_once_keep_each_others_gpus(tmp_path):
    os.chmod(tmp_path, 0o700)
    threads = [threading.Thread(target=record_measured, args=(tmp_path, "n1", [slot], float(slot)))
               for slot in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert read_state(tmp_path) == {f"n1:{slot}": float(slot) for slot in range(16)}
