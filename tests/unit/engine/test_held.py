"""The cycle's decision in one call (pal_slurm.engine.held.plan_and_book): held jobs in,
releases out, each carrying the Launch the actuator starts and booked before the call returns."""

from __future__ import annotations

from dataclasses import replace

from pal_slurm.engine import Engine, EngineSettings
from pal_slurm.engine.held import plan_and_book
from pal_slurm.engine.reservations import Reservations
from pal_slurm.engine.site import Seen
from pal_slurm.engine.where import Where
from pal_slurm.intake.held import read_held
from pal_slurm.intake.job_limits import AssocLimit, JobLimits, LimitCount, Owner
from pal_slurm.model import ClusterView
from pal_slurm.model.classes import AppClassMap
from pal_slurm.ranking import Ranking
from pal_slurm.slurm.readers import JobPlacementRequest

from tests.unit.daemon.builders import held_job

VIEW = ClusterView.from_layout([("gpu01", 4), ("gpu02", 4)])


def plan(jobs, book: Reservations):
    reads = read_held(jobs, 1.0, AppClassMap({}, default="A")).jobs
    seen = Seen(VIEW, None, Ranking.uniform(VIEW.size, version=0), [])
    return plan_and_book(Engine(EngineSettings(running_jobs_move=False)), Where(), book, seen, reads, 1.0)


def test_each_release_carries_its_launch_and_is_booked_on_return():
    book = Reservations()
    out = plan([held_job(1, gpn=4, submit=0), held_job(2, gpn=4, submit=1), held_job(3, gpn=2, submit=2)], book)
    assert [r.job_id for r in out.releases] == [1, 2] and out.waiting == 1
    for rel in out.releases:
        assert rel.launch is not None and rel.launch.job.job_id == rel.job_id and rel.choice is rel.launch.choice
        assert book.by_key[rel.key].gpu_ids == frozenset(rel.launch.choice.gpu_ids)
    assert not book.available(VIEW).free  # the next decision sees them taken
    assert out.behind is not None and [j.job_id for j in out.behind] == [3]


def test_a_job_pald_cannot_read_is_released_untouched_and_books_nothing():
    book = Reservations()
    bad = replace(held_job(5), comment="pal:class=")
    (rel,) = plan([bad], book).releases
    assert rel.launch is None and rel.choice is None and rel.reason.startswith("bad_comment")
    assert not book.by_key


def ana_at_one(*running: Owner) -> LimitCount:
    """ana may run one job at a time; bob has no limit."""
    limits = JobLimits.of([AssocLimit("team"), AssocLimit("team", "ana", max_jobs=1), AssocLimit("team", "bob")], [])
    return LimitCount.of(limits, running)


def of(job, user: str):
    return replace(job, placement_request=JobPlacementRequest(account="team"), user_name=user)


def plan_limited(jobs, book: Reservations, counted: LimitCount):
    reads = read_held(jobs, 1.0, AppClassMap({}, default="A")).jobs
    seen = Seen(VIEW, None, Ranking.uniform(VIEW.size, version=0), [])
    return plan_and_book(Engine(EngineSettings(running_jobs_move=False)), Where(), book, seen, reads, 1.0,
                         counted=counted)


def test_a_held_job_over_a_limit_is_not_released_and_the_jobs_behind_it_are():
    book = Reservations()
    jobs = [of(held_job(1, gpn=4, submit=0), "ana"), of(held_job(2, gpn=4, submit=1), "bob"),
            of(held_job(3, gpn=4, submit=2), "bob")]
    counted = ana_at_one(Owner("ana", "team", "", ""))
    out = plan_limited(jobs, book, counted)
    assert [r.job_id for r in out.releases] == [2, 3] and out.limited == {1: "AssocMaxJobsLimit"}
    assert set(book.by_key) == {"job:2", "job:3"} and out.waiting == 1
    assert out.behind is not None and out.behind == []  # no newcomer waits behind job 1
    assert counted.reason(Owner("bob", "team", "", "")) is None and counted.counts[("assoc", "team", "bob", "")] == 0


def test_a_release_counts_against_the_limit_of_the_next_in_the_same_cycle():
    book = Reservations()
    jobs = [of(held_job(1, gpn=4, submit=0), "ana"), of(held_job(2, gpn=4, submit=1), "ana"),
            of(held_job(3, gpn=4, submit=2), "bob")]
    out = plan_limited(jobs, book, ana_at_one())
    # the plan's first pass starts 1 and 2; 2 would be ana's second: planned again without it, 3 goes
    assert [r.job_id for r in out.releases] == [1, 3] and out.limited == {2: "AssocMaxJobsLimit"}
    assert set(book.by_key) == {"job:1", "job:3"} and out.waiting == 1


def test_a_job_on_its_own_nodes_over_a_limit_does_not_hold_the_ones_behind_it():
    book = Reservations()
    whole = JobPlacementRequest(account="team", exclusive=True)  # --exclusive: placed after the shared cycle
    jobs = [replace(of(held_job(i, gpn=4, submit=i), user), placement_request=whole)
            for i, user in ((1, "ana"), (2, "ana"), (3, "bob"))]
    out = plan_limited(jobs, book, ana_at_one())
    assert [r.job_id for r in out.releases] == [1, 3] and out.limited == {2: "AssocMaxJobsLimit"}
    assert out.waiting == 1


def test_in_the_sites_order_a_restricted_job_goes_only_ahead_of_every_job_left_waiting():
    from pal_slurm.engine.held import restricted_in_turn
    from pal_slurm.model import JobRequest

    def req(jid, prio):
        return JobRequest(job_id=jid, num_gpus=1, submit_time=jid, site_priority=prio)

    restricted = [req(1, 50), req(2, 90), req(3, 10)]
    waiting = [req(4, 40)]  # the shared plan left it waiting
    slurm = Engine(EngineSettings(queue="slurm", running_jobs_move=False))
    assert [r.job_id for r in restricted_in_turn(slurm, restricted, waiting)] == [2, 1]
    assert [r.job_id for r in restricted_in_turn(slurm, restricted, [])] == [2, 1, 3]
    fifo = Engine(EngineSettings(queue="fifo", running_jobs_move=False))  # pald's own order: all, in it
    assert [r.job_id for r in restricted_in_turn(fifo, restricted, waiting)] == [1, 2, 3]
