from datetime import datetime

from pal_slurm.replay.ctldlog import slurm_starts

LOG = """\
[2026-11-24T05:47:10.028] SchedulerParameters=default_queue_depth=1000,max_rpc_cnt=0
[2026-11-24T05:47:11.022] sched/backfill: _start_job: Started JobId=1 in gpu on gpu01
[2026-11-24T05:47:11.500] _job_complete: JobId=1 done
[2026-11-24T05:50:52.004] sched: Allocate JobId=8 NodeList=gpu[13-16] #CPUs=4 Partition=gpu
[2026-11-24T05:50:59.004] sched: Allocate JobId=8 NodeList=gpu[01-04] #CPUs=4 Partition=gpu
garbage line
"""


def test_starts_come_from_both_schedulers_with_milliseconds_and_the_first_one_counts():
    starts = slurm_starts(LOG)
    assert set(starts) == {1, 8}
    assert starts[1] == (datetime.fromisoformat("2026-11-24T05:47:11.022").timestamp(), "backfill")
    assert starts[8] == (datetime.fromisoformat("2026-11-24T05:50:52.004").timestamp(), "main")
    assert slurm_starts("") == {}
