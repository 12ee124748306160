"""The prolog's budget: which GPUs are due, the per-node state file and its faults, and a steady
workload that still measures every GPU within the policy's period."""

import json
import logging
import os
import random
import threading

import pytest

from pal_slurm.bench import due
from pal_slurm.bench.due import Policy, due_gpus, read_state, record_measured, slot_key, verdict
from pal_slurm.bench.spool import SpoolUnsafe

H = 3600.0
DAY = 24 * H


def test_a_gpu_is_due_when_never_measured_or_its_sample_is_a_period_old():
    last = {slot_key("n1", 0): 1000.0, slot_key("n1", 1): 1000.0 - DAY, slot_key("n2", 2): 1000.0}
    assert due_gpus(last, "n1", [0, 1, 2], 1000.0 + H, DAY) == (1, 2)  # n2's GPU 2 is not n1's
    assert due_gpus(last, "n1", [0], 1000.0 + DAY - 1, DAY) == ()
    assert due_gpus(last, "n1", [0], 1000.0 + DAY, DAY) == (0,)


def test_a_period_of_zero_measures_every_job():
    last = {slot_key("n1", 0): 1000.0}
    assert due_gpus(last, "n1", [0], 1000.0, 0.0) == (0,)
    assert Policy.from_hours(0, False).every_s == 0.0 and Policy.from_hours(-1, False).every_s == 0.0


def test_a_sample_from_the_future_means_the_clock_went_back_and_the_gpu_is_due():
    last = {slot_key("n1", 0): 5000.0}
    assert due_gpus(last, "n1", [0], 4999.0, DAY) == (0,)


def test_verdict_measures_only_due_gpus_and_says_why():
    last = {slot_key("n1", 0): 1000.0}
    v = verdict(Policy(DAY), "", "n1", [1, 0], last, 1000.0 + H)
    assert v.measure and v.due == (1,) and "1 of 0,1 due" in v.why
    v = verdict(Policy(DAY), "", "n1", [0], last, 1000.0 + H)
    assert not v.measure and "within prolog_every_h" in v.why


@pytest.mark.parametrize("comment, measured", [
    ("pal:class=resnet", True), ("run 3 pal:class=B,gpus=2", True), ("pal:", True),  # malformed: still PAL's
    ("", False), (None, False), ("xpal:class=A", False), ("PAL:class=A", False),
])
def test_pal_only_measures_only_jobs_with_a_pal_spec(comment, measured):
    v = verdict(Policy(DAY, pal_only=True), comment, "n1", [0], {}, 1000.0)
    assert v.measure is measured
    assert verdict(Policy(DAY, pal_only=False), comment, "n1", [0], {}, 1000.0).measure


def test_record_then_read_merges_gpus_and_nodes(tmp_path):
    d = tmp_path / "spool"
    d.mkdir(mode=0o700)
    record_measured(d, "n1", [0, 1], 100.0)
    record_measured(d, "n2", [0], 200.0)
    record_measured(d, "n1", [1], 300.0)
    assert read_state(d) == {"n1:0": 100.0, "n1:1": 300.0, "n2:0": 200.0}
    assert sorted(p.name for p in d.iterdir()) == sorted([due.LOCK_FILE, due.STATE_FILE])  # no temporary left
    assert os.stat(d / due.STATE_FILE).st_mode & 0o777 == 0o600


def test_a_missing_state_file_means_every_gpu_is_due(tmp_path):
    assert read_state(tmp_path) == {} and read_state(tmp_path / "missing") == {}


@pytest.mark.parametrize("body", [
    b"{not json", b"\xff\xfe", b"[]", b'{"version": 99, "measured": {}}', b'{"version": 1}',
    b'{"version": 1, "measured": []}',
])
def test_a_corrupt_state_file_means_every_gpu_is_due_and_is_logged(tmp_path, caplog, body):
    (tmp_path / due.STATE_FILE).write_bytes(body)
    caplog.set_level(logging.WARNING, logger="pal.hook")
    assert read_state(tmp_path) == {}
    assert "every GPU is due" in caplog.text


def test_values_that_are_not_times_are_dropped_not_fatal(tmp_path):
    (tmp_path / due.STATE_FILE).write_text(json.dumps(
        {"version": 1, "measured": {"n1:0": 5.0, "n1:1": "soon", "n1:2": True, "n1:3": None}}))
    assert read_state(tmp_path) == {"n1:0": 5.0}


def test_an_oversized_or_symlinked_state_file_is_not_read(tmp_path):
    (tmp_path / "elsewhere.json").write_text(json.dumps({"version": 1, "measured": {"n1:0": 5.0}}))
    (tmp_path / due.STATE_FILE).symlink_to(tmp_path / "elsewhere.json")
    assert read_state(tmp_path) == {}
    (tmp_path / due.STATE_FILE).unlink()
    (tmp_path / due.STATE_FILE).write_bytes(b" " * (due.MAX_STATE_BYTES + 1))
    assert read_state(tmp_path) == {}


def test_a_fifo_or_directory_in_place_of_the_state_file_reads_as_nothing_at_once(tmp_path):
    os.mkfifo(tmp_path / due.STATE_FILE)  # no writer: a blocking open would wait forever
    assert read_state(tmp_path) == {}
    (tmp_path / due.STATE_FILE).unlink()
    (tmp_path / due.STATE_FILE).mkdir()
    assert read_state(tmp_path) == {}


def test_a_corrupt_state_file_is_replaced_by_the_next_record(tmp_path):
    (tmp_path / due.STATE_FILE).write_bytes(b"\x00garbage")
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
    assert not (open_dir / due.STATE_FILE).exists()


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


@pytest.mark.parametrize("seed", range(5))
def test_a_steady_workload_measures_every_gpu_within_the_period_plus_one_job(seed):
    """A node's 8 GPUs never idle: whenever GPUs free, a job of 1, 2, 4 or 8 GPUs (as many as
    are free at most), 6 min to 4 h long, starts on some of them, for ten periods. A job
    measures all its GPUs when any of them is due (what the prolog does). Every GPU is
    measured at most `every_s` plus one job length after its previous sample (or the start),
    and only a few jobs pay for a measurement."""
    rng = random.Random(seed)
    gpus, every_s, longest = 8, DAY, 4 * H
    policy = Policy(every_s)
    last: dict[str, float] = {}
    samples: dict[int, list[float]] = {g: [0.0] for g in range(gpus)}  # 0: the node's start
    free_at = [0.0] * gpus
    jobs = measured = 0
    now = 0.0
    while now < 10 * every_s:
        now = min(free_at)
        free = [g for g in range(gpus) if free_at[g] <= now]
        width = rng.choice([w for w in (1, 2, 4, 8) if w <= len(free)])
        held = rng.sample(free, width)
        jobs += 1
        if verdict(policy, "", "n1", held, last, now).measure:
            measured += 1
            for g in held:
                last[slot_key("n1", g)] = now
                samples[g].append(now)
        length = rng.uniform(0.1 * H, longest)
        for g in held:
            free_at[g] = now + length
    for g, times in samples.items():
        times.append(now)  # the end of the run: no GPU may be left unmeasured for too long
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert max(gaps) <= every_s + longest, f"GPU {g}: {max(gaps) / H:.1f} h without a sample"
    assert measured / jobs < 0.1, f"{measured} of {jobs} jobs measured"
