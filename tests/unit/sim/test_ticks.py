"""sim.ticks.Period: the clock of a scheduler that acts on a period, with the phase a replay
measured (replay.ctldlog.pass_clock)."""

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pal_slurm.sim.ticks import Period


def test_ticks_are_the_offset_plus_multiples_of_the_period():
    p = Period(600.0, offset=535.0)
    assert p.is_tick(535.0) and p.is_tick(1135.0) and p.is_tick(-65.0)
    assert not p.is_tick(0.0) and not p.is_tick(600.0)
    assert p.next_after(0.0) == pytest.approx(535.0)
    assert p.next_after(535.0) == pytest.approx(1135.0)
    assert Period(600.0).next_after(0.0) == pytest.approx(600.0)  # no offset: the trace's start is a tick


def test_a_zero_period_ticks_at_every_event_and_never_wakes_anyone():
    p = Period(0.0, offset=5.0)
    assert p.is_tick(1.234) and p.next_after(1.234) is None


@given(st.floats(1.0, 1e4), st.floats(0.0, 1.0), st.floats(0.0, 1e6))
def test_the_next_tick_is_a_tick_later_than_now_by_at_most_one_period(seconds, phase, now):
    p = Period(seconds, offset=phase * seconds)
    t = p.next_after(now)
    assert t is not None and now < t <= now + seconds * (1 + 1e-9) + 1e-6
    assert p.is_tick(t)


@given(st.floats(1.0, 1e4), st.floats(0.0, 1.0), st.floats(0.0, 1e6))
@example(1001.0, 1e-9, 0.0)  # CI stop 34: a tick 1e-6 s after now, within the float tolerance
def test_the_last_tick_is_a_tick_at_or_before_now_within_one_period(seconds, phase, now):
    p = Period(seconds, offset=phase * seconds)
    t = p.last_at_or_before(now)
    # a tick within 1e-9 of a period after `now` is float noise and counts as `now`'s own tick
    assert now - seconds * (1 + 1e-9) - 1e-6 <= t <= now + seconds * 1e-9 + 1e-6
    assert p.is_tick(t)
    assert Period(0.0).last_at_or_before(now) == now  # every event is a tick
