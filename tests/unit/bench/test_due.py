"""The prolog's budget: which GPUs are due, and a steady workload that still measures every GPU
within the policy's period."""

import random

import pytest

from pal_slurm.bench.due import Policy, due_gpus, slot_key, verdict

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
