"""Which held job one more running job would put over a job-count limit
(pal_slurm.intake.job_limits), on the limits of the accounting lab
(tests/unit/slurm/test_job_limits.py has the sacctmgr text they come from)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pal_slurm.intake.job_limits import (
    AssocLimit,
    JobLimits,
    LimitCount,
    Owner,
    QosLimit,
    count_read,
    holds_a_job_slot,
    owner_of,
)
from pal_slurm.slurm.readers import JobInfo, JobPlacementRequest

# the lab's: root MaxJobs=1 in team and in root; team GrpJobs=5 under root; sub (MaxJobs=3) under
# team; daemon MaxJobs=2 in team on partition gpu only; QOS gold 2 per user, 4 per account, 6 in
# all. Added here: eve in sub with no MaxJobs of her own (sub's applies), QOS wide GrpJobs=10.
LIMITS = JobLimits.of([
    AssocLimit("root"),
    AssocLimit("root", "root", max_jobs=1),
    AssocLimit("team", parent="root", grp_jobs=5),
    AssocLimit("team", "daemon", "gpu", max_jobs=2),
    AssocLimit("team", "nobody"),
    AssocLimit("team", "root", max_jobs=1),
    AssocLimit("sub", parent="team", max_jobs=3),
    AssocLimit("sub", "nobody", max_jobs=3),
    AssocLimit("sub", "eve"),
], [QosLimit("normal"), QosLimit("gold", max_jobs_per_user=2, max_jobs_per_account=4, grp_jobs=6),
    QosLimit("wide", grp_jobs=10)])


def o(user: str, account: str = "team", qos: str = "normal", partition: str = "") -> Owner:
    return Owner(user=user, account=account, partition=partition, qos=qos)


# (what asks, the jobs already holding a job slot, the reason Slurm would show, or None)
GOLDEN = [
    (o("root"), [], None),
    (o("root"), [o("root")], "AssocMaxJobsLimit"),
    (o("root"), [o("root", "root")], None),  # root's other association counts apart
    (o("nobody"), [o("root"), o("nobody"), o("nobody"), o("nobody")], None),
    (o("nobody"), [o("root")] + [o("nobody")] * 4, "AssocGrpJobsLimit"),  # team's 5
    (o("nobody"), [o("nobody", "sub")] * 3 + [o("eve", "sub")] * 2, "AssocGrpJobsLimit"),  # sub's count in team's
    (o("nobody", "sub"), [o("nobody", "sub")] * 3, "AssocMaxJobsLimit"),
    (o("eve", "sub"), [o("eve", "sub")] * 3, "AssocMaxJobsLimit"),  # sub's MaxJobs, inherited
    (o("eve", "sub"), [o("nobody", "sub")] * 3, None),  # MaxJobs is per association
    (o("root", qos="gold"), [o("root", qos="gold")], None),  # gold's 2 per user replace root's MaxJobs=1
    (o("root", qos="gold"), [o("root", qos="gold")] * 2, "QOSMaxJobsPerUserLimit"),
    (o("nobody", qos="gold"), [o("root", qos="gold"), o("daemon", qos="gold", partition="gpu"),
                                o("nobody", qos="gold"), o("eve", qos="gold")], "QOSMaxJobsPerAccountLimit"),
    (o("eve", "sub", "gold"), [o("root", qos="gold"), o("nobody", qos="gold")] * 2 + [o("nobody", "sub", "gold")] * 2,
     "QOSGrpJobsLimit"),
    (o("nobody", qos="wide"), [o("nobody")] * 5, None),  # wide's GrpJobs replaces every association's
    (o("nobody"), [o("nobody", qos="wide")] * 5, "AssocGrpJobsLimit"),  # which still counts wide's jobs
    (o("daemon", partition="gpu"), [o("daemon", partition="gpu")] * 2, "AssocMaxJobsLimit"),
    (o("daemon"), [o("daemon", partition="gpu")] * 2, None),  # no partition-less association for daemon
    (o("mallory"), [o("mallory")] * 50, None),  # no association in the read: fail open
    (o("root", qos="unknown"), [], None),
]


@pytest.mark.parametrize("asks, running, reason", GOLDEN)
def test_the_reason_slurm_would_show(asks, running, reason):
    assert LimitCount.of(LIMITS, running).reason(asks) == reason


def test_a_release_counts_for_the_next_and_a_copy_keeps_the_read_apart():
    read = LimitCount.of(LIMITS, [])
    cycle = read.copy()
    assert cycle.reason(o("root")) is None
    cycle.add(o("root"))
    assert cycle.reason(o("root")) == "AssocMaxJobsLimit"
    assert read.reason(o("root")) is None


def test_an_account_chain_that_loops_ends():
    looped = JobLimits.of([AssocLimit("a", parent="b"), AssocLimit("b", parent="a", grp_jobs=1), AssocLimit("a", "u")],
                          [])
    assert [x.account for x in looped.chain(o("u", "a"))] == ["a", "a", "b"]
    assert LimitCount.of(looped, [o("u", "a")]).reason(o("u", "a")) == "AssocGrpJobsLimit"


def job(state: str = "RUNNING", reason: str = "None", priority: int = 1, partition: str = "gpu") -> JobInfo:
    return JobInfo(job_id=1, name="j", state=state, reason=reason, user_id=0, comment="", admin_comment="", nodes=(),
                   required_nodes=(), node_count=1, tres_per_node="", gpu_slots={}, priority=priority, submit_time=0,
                   start_time=0, partition=partition, user_name="root",
                   placement_request=JobPlacementRequest(account="team", qos="normal"))


@pytest.mark.parametrize("state, reason, priority, pinned, counts", [
    ("RUNNING", "None", 1, False, True),
    ("SUSPENDED", "None", 1, False, True),
    ("CONFIGURING", "None", 1, False, True),
    ("COMPLETING", "None", 1, False, False),  # Slurm frees its job slot as it ends
    ("PENDING", "Resources", 1, False, False),
    ("PENDING", "None", 1, True, True),  # on a PAL pin: starts at Slurm's next pass
    ("PENDING", "AssocMaxJobsLimit", 1, True, False),  # waits for the limit itself
    ("PENDING", "JobHeldAdmin", 0, True, False),
])
def test_which_jobs_hold_a_job_slot(state, reason, priority, pinned, counts):
    assert holds_a_job_slot(job(state, reason, priority), pinned) is counts


def test_a_read_is_counted_by_owner():
    assert owner_of(job()) == Owner("root", "team", "gpu", "normal")
    assert owner_of(job(partition="gpu,cpu")).partition == ""  # may run in either: the partition-less association
    jobs = [job(), replace(job(), job_id=2, state="PENDING", reason="None", required_nodes=("n1",))]
    counted = count_read(LIMITS, jobs, lambda j: j.job_id == 2)
    assert counted.counts[("assoc", "team", "root", "")] == 2 and counted.counts[("assoc", "root", "", "")] == 2
    assert count_read(LIMITS, jobs, lambda j: False).counts[("assoc", "team", "root", "")] == 1
