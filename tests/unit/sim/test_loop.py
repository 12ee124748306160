"""The simulator's one event loop (sim.loop): its order, its decisions, its clock, its guards."""

import math

import pytest

from pal_slurm.sim.errors import SimulationError
from pal_slurm.sim.loop import EventLoop


def test_events_at_one_instant_run_in_the_order_scheduled_then_one_decision_if_any_changed():
    loop = EventLoop("t/p", max_events=100)
    seen: list[tuple[str, float, object]] = []

    def a(t, payload):
        seen.append(("a", loop.now(), payload))
        if payload == "first":
            loop.push(5.0, 1, "late")  # pushed during t=2, at a later time
        return payload != "quiet"

    def b(t, payload):
        seen.append(("b", t, payload))
        return False

    loop.push(2.0, 0, "first")
    loop.push(2.0, 1, "second")
    loop.push(1.0, 0, "quiet")
    loop.run((a, b), decide=lambda t: seen.append(("decide", t, None)))
    assert seen == [("a", 1.0, "quiet"), ("a", 2.0, "first"), ("b", 2.0, "second"), ("decide", 2.0, None),
                    ("b", 5.0, "late")]
    assert loop.events == 4


def test_a_periodic_event_that_pushes_its_next_tick_runs_until_it_stops():
    loop = EventLoop("t/p", max_events=100)
    ticks: list[float] = []

    def tick(t, _):
        ticks.append(t)
        if len(ticks) < 4:
            loop.push(t + 0.1, 0, None)
        return False

    loop.push(0.0, 0, None)
    loop.run((tick,))
    assert ticks == [0.0, 0.1, 0.1 + 0.1, 0.1 + 0.1 + 0.1]  # repeated addition, as the rounds add


def test_dropped_events_count_as_handled_and_the_rest_keep_their_order():
    loop = EventLoop("t/p", max_events=100)
    for i in range(6):
        loop.push(float(i % 3), 0, i)
    loop.dropped(lambda e: e[3] % 2 == 0)
    got: list[object] = []
    loop.run((lambda t, p: got.append(p) or False,))
    assert got == [0, 4, 2] and loop.events == 6  # (by time: 0 at 0.0, 4 at 1.0, 2 at 2.0)


def test_a_non_finite_time_or_too_many_events_is_an_error_not_a_hang():
    loop = EventLoop("trace/policy", max_events=3)
    with pytest.raises(SimulationError, match="trace/policy: event at non-finite time"):
        loop.push(math.nan, 0, None)

    def again(t, _):
        loop.push(t + 1.0, 0, None)
        return False

    loop.push(0.0, 0, None)
    with pytest.raises(SimulationError, match="more than 3 events"):
        loop.run((again,))
