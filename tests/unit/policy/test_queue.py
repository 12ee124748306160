import pytest

from pal_slurm.policy import queue_order

from .builders import job


def test_fifo_by_priority_then_submit_time_stable():
    jobs = [job(1, 1, submit=5), job(2, 1, submit=3), job(3, 1, submit=3), job(4, 1, submit=9, priority=1)]
    assert [j.job_id for j in queue_order("fifo")(jobs)] == [4, 2, 3, 1]


def test_slurm_order_highest_priority_first_then_submit_time_then_job_id():
    jobs = [job(1, 1, submit=5, site_priority=100.0), job(2, 1, submit=3, site_priority=100.0),
            job("10_1", 1, submit=3, site_priority=100.0), job("9_2", 1, submit=3, site_priority=100.0),
            job(5, 1, submit=1), job(6, 1, submit=9, site_priority=250.0)]
    assert [j.job_id for j in queue_order("slurm")(jobs)] == [6, 2, "9_2", "10_1", 1, 5]


def test_las_and_srtf():
    jobs = [job(1, 1, attained_service=50, remaining_time=10), job(2, 1, attained_service=0, remaining_time=30),
            job(3, 1, attained_service=50, remaining_time=5)]
    assert [j.job_id for j in queue_order("las")(jobs)] == [2, 1, 3]
    assert [j.job_id for j in queue_order("srtf")(jobs)] == [3, 1, 2]


def test_srtf_aged_orders_by_submit_plus_weighted_remaining():
    # keys (submit + remaining): 1 -> 0+100, 2 -> 50+10, 3 -> 20+30
    jobs = [job(1, 1, submit=0, remaining_time=100), job(2, 1, submit=50, remaining_time=10),
            job(3, 1, submit=20, remaining_time=30)]
    assert [j.job_id for j in queue_order("srtf-aged")(jobs)] == [3, 2, 1]
    assert [j.job_id for j in queue_order("srtf")(jobs)] == [2, 3, 1]


def test_srtf_aged_bounds_overtaking_no_starvation():
    """A long job is passed only by jobs submitted before submit + weight * remaining; plain SRTF
    lets every later short job pass it forever."""
    from pal_slurm.policy.queue import aged_srtf

    long_job = job(0, 1, submit=0, remaining_time=1000)
    stream = [job(i, 1, submit=i * 100, remaining_time=10) for i in range(1, 30)]
    order = [j.job_id for j in aged_srtf(1.0)([long_job, *stream])]
    passed = order[:order.index(0)]
    assert passed and all(j.submit_time + 10 < 1000 for j in stream if j.job_id in passed)
    assert all(j.job_id in passed for j in stream if j.submit_time + 10 < 1000)
    assert len(passed) == 9  # submits 100..900
    assert [j.job_id for j in queue_order("srtf")([long_job, *stream])][-1] == 0
    # weight 0 is FIFO by submit time
    assert [j.job_id for j in aged_srtf(0.0)([long_job, *stream])][0] == 0
    with pytest.raises(ValueError):
        aged_srtf(-1.0)


def test_srtf_aged_lead_cap_bounds_a_very_long_jobs_wait():
    """A job's size holds it back at most max_lead_s: later arrivals pass it only within that window."""
    from pal_slurm.policy.queue import aged_srtf

    huge = job(0, 1, submit=0, remaining_time=1e9)
    stream = [job(i, 1, submit=i * 100, remaining_time=10) for i in range(1, 30)]
    order = [j.job_id for j in aged_srtf(1.0, max_lead_s=500)([huge, *stream])]
    assert order[:order.index(0)] == [1, 2, 3, 4]  # submitted at 100..400 (+10 < 500)
    # the registered order caps the lead at 12 h
    before, after = job(1, 1, submit=12 * 3600 - 100, remaining_time=10), job(2, 1, submit=12 * 3600 + 100, remaining_time=10)
    assert [j.job_id for j in queue_order("srtf-aged")([huge, after, before])] == [1, 0, 2]


def test_only_the_declared_queue_orders_read_progress():
    """PROGRESS_READING_QUEUES is what the event clock trusts to skip renewing running jobs:
    every other order must not change when attained service and remaining time do, and every
    declared one must."""
    from pal_slurm.policy.registry import PROGRESS_READING_QUEUES, QUEUE_ORDERS

    jobs = [job(i, 1, submit=i * 10, attained_service=100 - i, remaining_time=1000 - 100 * i) for i in range(5)]
    progressed = [job(i, 1, submit=i * 10, attained_service=i * 7, remaining_time=1) for i in range(5)]
    for name, order in QUEUE_ORDERS.items():
        same = [j.job_id for j in order(jobs)] == [j.job_id for j in order(progressed)]
        assert same == (name not in PROGRESS_READING_QUEUES), name


def test_only_the_declared_queue_orders_keep_jobs_in_submit_order_as_they_are():
    """SUBMIT_ORDER_QUEUES is what lets a caller that hands jobs sorted by submit time, one
    priority, skip the sort (Engine.order_jobs): every declared order must keep such a list as
    it is whatever else the jobs carry, and every other order must not."""
    from pal_slurm.policy.registry import QUEUE_ORDERS, SUBMIT_ORDER_QUEUES

    jobs = [job(i, 1, submit=i * 10, attained_service=100 - i, remaining_time=1000 - 100 * i, site_priority=i)
            for i in range(5)]
    for name, order in QUEUE_ORDERS.items():
        kept = [j.job_id for j in order(jobs)] == [j.job_id for j in jobs]
        assert kept == (name in SUBMIT_ORDER_QUEUES), name
