from datetime import datetime

import pytest

from pal_lab.replay.ctldlog import PassClock, pass_clock, pass_offsets, slurm_ends, slurm_starts

LOG = """\
[2026-11-24T05:47:10.028] SchedulerParameters=default_queue_depth=1000,max_rpc_cnt=0
[2026-11-24T05:47:11.022] sched/backfill: _start_job: Started JobId=1 in gpu on gpu01
[2026-11-24T05:47:11.500] _job_complete: JobId=1 done
[2026-11-24T05:50:52.004] sched: Allocate JobId=8 NodeList=gpu[13-16] #CPUs=4 Partition=gpu
[2026-11-24T05:50:59.004] sched: Allocate JobId=8 NodeList=gpu[01-04] #CPUs=4 Partition=gpu
[2026-11-24T05:51:00.250] sched/backfill: _start_job: HETJOB: Started JobId=9 in gpu on gpu02
garbage line
"""


def test_starts_come_from_both_schedulers_with_milliseconds_and_the_first_one_counts():
    starts = slurm_starts(LOG)
    assert set(starts) == {1, 8, 9}
    assert starts[9] == (datetime.fromisoformat("2026-11-24T05:51:00.250").timestamp(), "backfill")  # Slurm 26.05
    assert starts[1] == (datetime.fromisoformat("2026-11-24T05:47:11.022").timestamp(), "backfill")
    assert starts[8] == (datetime.fromisoformat("2026-11-24T05:50:52.004").timestamp(), "main")
    assert slurm_starts("") == {}


def test_ends_are_slurmctlds_completions_with_milliseconds():
    assert slurm_ends(LOG) == {1: datetime.fromisoformat("2026-11-24T05:47:11.500").timestamp()}
    assert slurm_ends("[2026-11-24T05:47:11.500] _job_complete: JobId=1 WEXITSTATUS 0\n") == {}


def _backfill_starts(times):
    return {i: (t, "backfill") for i, t in enumerate(times)}


def test_the_pass_clock_is_fitted_to_the_passes_that_started_jobs():
    # passes every 1.004 s, the first 0.88 s after the first submission; a pass starts several
    # jobs within milliseconds, and some passes start none (they still count)
    t0 = 1000.0
    passes = [t0 + 0.88 + 1.004 * k for k in (0, 1, 2, 5, 9, 30, 31, 80)]
    starts = _backfill_starts([p + d for p in passes for d in (0.0, 0.001, 0.002)])
    starts[999] = (t0 + 0.3, "main")  # the main scheduler's start is not a pass
    clock = pass_clock(starts, t0, 1.0)
    assert clock is not None
    assert clock.period_s == pytest.approx(1.004, abs=2e-4)
    assert clock.phase_s == pytest.approx(0.88, abs=1e-3)


def test_the_phase_is_taken_within_one_period_and_two_passes_are_needed():
    starts = _backfill_starts([10.0 + 2.5, 10.0 + 3.5])  # first pass 2.5 s after t0
    clock = pass_clock(starts, 10.0, 1.0)
    assert clock is not None
    assert (clock.phase_s, clock.period_s) == (pytest.approx(0.5), pytest.approx(1.0))
    assert pass_clock(_backfill_starts([11.0, 11.01]), 10.0, 1.0) is None  # one pass
    assert pass_clock({1: (11.0, "main"), 2: (12.0, "main")}, 10.0, 1.0) is None


def test_the_clock_keeps_how_far_each_pass_fell_from_it():
    """`jitter_s`: each pass's offset from the fitted clock, sorted; its quantiles are the
    phases the lab had (a pass 0.03 s late, one 0.02 s early, the rest on the clock)."""
    t0 = 100.0
    offsets = {0: 0.0, 1: 0.03, 2: 0.0, 3: -0.02, 4: 0.0, 5: 0.0, 6: 0.01, 7: 0.0}
    starts = _backfill_starts([t0 + 0.5 + k + d for k, d in offsets.items()])
    clock = pass_clock(starts, t0, 1.0)
    assert clock is not None
    assert len(clock.jitter_s) == 8
    assert list(clock.jitter_s) == sorted(clock.jitter_s)
    assert clock.jitter_s[-1] - clock.jitter_s[0] == pytest.approx(0.05, abs=2e-3)  # 0.03 late to 0.02 early (the fit moves a little)
    assert clock.jitter_quantile(0.0) == clock.jitter_s[0]
    assert clock.jitter_quantile(1.0) == clock.jitter_s[-1]
    assert clock.jitter_quantile(0.5) == pytest.approx(0.0, abs=0.01)
    assert PassClock(phase_s=0.5, period_s=1.0).jitter_quantile(0.9) == 0.0  # none observed


def test_each_pass_keeps_when_it_fell_and_how_far_from_the_clock():
    """`pass_offsets`: the offsets in time order (the early passes late, the later ones on the
    clock), the same values the clock's sorted jitter holds."""
    t0 = 100.0
    late = {k: 0.025 for k in range(1, 5)}
    starts = _backfill_starts([t0 + 0.5 + k + late.get(k, 0.0) for k in range(12)])
    clock = pass_clock(starts, t0, 1.0)
    assert clock is not None
    got = pass_offsets(starts, t0, clock)
    assert [int(t) for t, _ in got] == list(range(12))  # 0.5 s after t0, then every second
    assert [t for t, _ in got] == sorted(t for t, _ in got)
    early, rest = [o for _, o in got[1:5]], [o for _, o in got[5:]]
    assert min(early) - max(rest) > 0.015  # the late stretch stands out, in its place
    assert sorted(o for _, o in got) == list(clock.jitter_s)


def test_a_pass_whose_starts_spread_on_a_loaded_host_is_not_a_tick_of_its_own():
    """A pass that starts its jobs over a third of a second (a loaded host) reads as several
    groups of starts; they fall on one tick, and the period stays the passes' own."""
    t0 = 100.0
    ticks = [t0 + 0.4 + 1.05 * k for k in range(20)]
    spread = [t + d for t in ticks for d in ((0.0, 0.12, 0.3) if int(t) % 3 == 0 else (0.0,))]
    clock = pass_clock(_backfill_starts(spread), t0, 1.0)
    assert clock is not None
    assert clock.period_s == pytest.approx(1.05, abs=0.01)
    assert pass_clock(_backfill_starts([t0 + 1.0, t0 + 1.1, t0 + 1.2]), t0, 1.0) is None  # one pass, spread
