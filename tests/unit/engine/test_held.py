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
from pal_slurm.model import ClusterView
from pal_slurm.model.classes import AppClassMap
from pal_slurm.ranking import Ranking

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
