"""The simulator core both clocks share (sim.core): job state, the in-memory actuator, outcomes."""

from dataclasses import dataclass

import pytest

from pal_slurm.engine import Launch, ManualClock
from pal_slurm.model import ClusterView, RoundPlan
from pal_slurm.policy.shapes import choice_of
from pal_slurm.sim.compat import CompatJob
from pal_slurm.sim.core import SimActuator, SimJob, SimState
from pal_slurm.sim.event import EventJob
from pal_slurm.sim.trace import TraceJob

SCORES = {"A": [1.0, 1.2, 0.9, 1.5, 1.0, 1.0, 1.1, 0.95]}


@dataclass(eq=False)
class _Job(SimJob):
    left: float = 100.0

    def remaining_time(self) -> float:
        return self.left


def state():
    return SimState(ClusterView.uniform(2, 4), SCORES)


def job(key, gpus=2):
    return _Job(key, TraceJob(key, gpus, 0.0, 100.0, "resnet50", iter_s=1.0), "A", submit=0.0)


def test_a_plan_stops_then_starts_and_a_stopped_and_relaunched_job_is_moved_not_preempted():
    s = state()
    clock = ManualClock(5.0)
    act = SimActuator(s, clock, s.start)
    a, b = job(0), job(1)
    s.arrive(a), s.arrive(b)
    act.carry_out(RoundPlan(frozenset(), {0: (0, 1), 1: (2, 3)}))
    assert (a.gpus, a.pm, a.first_start, s.busy) == ((0, 1), 1.2, 5.0, 4)
    clock.set(9.0)
    act.carry_out(RoundPlan(frozenset({0, 1}), {0: (4, 5)}))
    assert (a.gpus, a.preemptions, a.first_start, a.started_at) == ((4, 5), 0, 5.0, 9.0)  # moved
    assert (b.gpus, b.preemptions, b.waiting_since) == ((), 1, 9.0)  # preempted
    assert s.free == {0, 1, 2, 3, 6, 7}
    assert b.request().running_on == () and b.request().waiting_since == 9.0
    assert a.request().running_on == (4, 5) and a.request().waiting_since == 9.0


def test_the_engines_launch_starts_the_job_on_its_gpus_in_the_placements_order_at_the_clocks_time():
    s = state()
    clock = ManualClock(7.0)
    a = job(0)
    s.arrive(a)
    SimActuator(s, clock, s.start).start(Launch(a.request(), choice_of((5, 4), s.cluster, keep_order=True)))
    assert (a.gpus, a.started_at, s.free) == ((5, 4), 7.0, {0, 1, 2, 3, 6, 7})


def test_a_launch_on_busy_gpus_or_of_a_running_job_is_refused_when_checked():
    s = state()
    a, b = job(0), job(1)
    s.arrive(a), s.arrive(b)
    s.start(a, (0, 1), 0.0, checked=True)
    with pytest.raises(RuntimeError, match="bad allocation"):
        s.start(b, (1, 2), 0.0, checked=True)
    with pytest.raises(RuntimeError, match="still running"):
        s.start(a, (4, 5), 0.0, checked=True)


def test_finish_frees_the_gpus_and_records_the_outcome_with_its_lower_bound():
    s = state()
    a, b = job(0, gpus=2), job(1, gpus=1)
    s.arrive(a), s.arrive(b)
    s.start(a, (2, 3), 10.0)
    s.start(b, (0,), 10.0)
    out = s.finish(a, 130.0, best_factor=1.5, job_id=7)
    assert out is not None and (out.job_id, out.first_start, out.finish, out.jct) == (7, 10.0, 130.0, 130.0)
    assert out.lower_bound_s == pytest.approx(100.0 * 0.95 * 1.5)  # the 2nd best GPU of class A
    assert s.finish(b, 140.0, best_factor=None, job_id=1) is None  # not measured
    assert s.free == set(range(8)) and not s.active and s.outcomes == [out]


def test_each_clock_says_how_much_work_is_left():
    src = TraceJob(0, 1, 0.0, 50.0, "resnet50", iter_s=2.0)
    c = CompatJob(0, src, "A", 0.0, done=20.0)
    assert c.request().remaining_time == 60.0  # (50 - 20) iterations x 2 s
    e = EventJob(0, src, "A", 0.0, work_left=100.0, gpus=(0,), rate=0.5)
    e.advance(40.0)
    assert e.request().remaining_time == 80.0 and e.attained == 40.0


def test_requests_kept_as_jobs_change_equal_requests_built_afresh():
    """SimState keeps each active job's request as the job changes (arrive, start, stop, a
    told change of progress, finish) instead of asking every job at every decision: after any
    sequence of those, `requests()` is what building every request again gives, in arrival
    order."""
    import random

    rng = random.Random(7)
    s = state()
    jobs: dict[int, _Job] = {}
    for step in range(400):
        op = rng.random()
        waiting = [j for j in jobs.values() if not j.gpus]
        running = [j for j in jobs.values() if j.gpus]
        if op < 0.3 or not jobs:
            j = job(step, gpus=rng.choice((1, 2)))
            j.submit = float(step)
            jobs[step] = j
            s.arrive(j)
        elif op < 0.55 and waiting:
            j = rng.choice(waiting)
            if len(s.free) >= j.src.num_gpus:
                s.start(j, tuple(sorted(s.free))[: j.src.num_gpus], float(step), checked=True)
        elif op < 0.7 and running:
            s.stop(rng.choice(running), float(step), moved=rng.random() < 0.5)
        elif op < 0.85 and running:
            j = rng.choice(running)
            j.left -= 1.0
            j.attained += 1.0
            s.touch(j)
        elif running:
            j = rng.choice(running)
            s.finish(j, float(step), best_factor=None, job_id=j.key)
            del jobs[j.key]
        kept = s.requests()
        for j in jobs.values():
            j.touch()
        assert kept == [j.request() for j in jobs.values()], step
        assert [r.job_id for r in kept] == sorted(jobs)  # arrival order
        assert set(s.running) == {j.key for j in jobs.values() if j.gpus}
