from pal_slurm.policy import queue_order

from .builders import job


def test_fifo_by_priority_then_submit_time_stable():
    jobs = [job(1, 1, submit=5), job(2, 1, submit=3), job(3, 1, submit=3), job(4, 1, submit=9, priority=1)]
    assert [j.job_id for j in queue_order("fifo")(jobs)] == [4, 2, 3, 1]


def test_las_and_srtf():
    jobs = [job(1, 1, attained_service=50, remaining_time=10), job(2, 1, attained_service=0, remaining_time=30),
            job(3, 1, attained_service=50, remaining_time=5)]
    assert [j.job_id for j in queue_order("las")(jobs)] == [2, 1, 3]
    assert [j.job_id for j in queue_order("srtf")(jobs)] == [3, 1, 2]
