"""Reading the job-count limits of associations and QOS (scontrol and sacctmgr text)."""

from __future__ import annotations

from typing import Sequence

import pytest

from pal_slurm.intake.job_limits import AssocLimit, QosLimit
from pal_slurm.slurm.errors import SlurmCommandFailed, SlurmParseError
from pal_slurm.slurm.job_limits import enforced_cluster, parse_assoc_limits, parse_qos_limits, read_job_limits

# Captured on the accounting lab (Slurm 22.05, tests/support/accounting_pald.py) after
#   sacctmgr add account team; add account sub parent=team; add user root,nobody account=team;
#   add user nobody account=sub; modify user root set maxjobs=1; modify account team set grpjobs=5;
#   modify account sub set maxjobs=3 (slurmdbd copies it onto sub's users);
#   modify qos gold set maxjobsperuser=2 maxjobsperaccount=4 grpjobs=6;
#   add user daemon account=team partition=gpu; modify user daemon where partition=gpu set maxjobs=2
CONFIG = """Configuration data as of 2026-12-06T20:58:01
AccountingStorageEnforce = associations,limits
AccountingStorageHost   = localhost
ClusterName             = lab
"""
# sacctmgr -P -n show assoc where cluster=lab format=account,user,partition,parentname,maxjobs,grpjobs
ASSOC = """root|||||
root|root|||1|
team|||root||5
team|daemon|gpu||2|
team|nobody||||
team|root|||1|
sub|||team|3|
sub|nobody|||3|
"""
# sacctmgr -P -n show qos format=name,maxjobsperuser,maxjobsperaccount,grpjobs
QOS = """normal|||
gold|2|4|6
"""

# (account, user, partition, parent, MaxJobs, GrpJobs) of each row, in order
ASSOC_GOLDEN = [
    ("root", "", "", "", None, None),
    ("root", "root", "", "", 1, None),
    ("team", "", "", "root", None, 5),
    ("team", "daemon", "gpu", "", 2, None),
    ("team", "nobody", "", "", None, None),
    ("team", "root", "", "", 1, None),
    ("sub", "", "", "team", 3, None),
    ("sub", "nobody", "", "", 3, None),
]


def test_associations_read_as_sacctmgr_prints_them():
    rows = parse_assoc_limits(ASSOC)
    assert [(a.account, a.user, a.partition, a.parent, a.max_jobs, a.grp_jobs) for a in rows] == ASSOC_GOLDEN


def test_qos_read_as_sacctmgr_prints_them():
    assert parse_qos_limits(QOS) == [QosLimit("normal"), QosLimit("gold", max_jobs_per_user=2, max_jobs_per_account=4,
                                                                   grp_jobs=6)]


@pytest.mark.parametrize("enforce, cluster", [
    ("associations,limits", "lab"),
    ("associations,limits,safe", "lab"),
    ("associations,limits,qos", "lab"),
    ("associations", None),  # a valid account is required, its limits are not enforced
    ("associations,qos", None),
    ("none", None),
])
def test_limits_count_only_where_slurmctld_enforces_them(enforce, cluster):
    assert enforced_cluster(CONFIG.replace("associations,limits", enforce)) == cluster


@pytest.mark.parametrize("text, what", [
    ("team|root|||x|\n", "MaxJobs"),
    ("team|root|||1|2.5\n", "GrpJobs"),
    ("team|root|\n", "fields"),
])
def test_an_unreadable_association_row_raises(text, what):
    with pytest.raises(SlurmParseError, match=what):
        parse_assoc_limits(text)


def test_an_unreadable_qos_row_raises():
    with pytest.raises(SlurmParseError, match="MaxJobsPerUser"):
        parse_qos_limits("gold|two||\n")
    with pytest.raises(SlurmParseError, match="fields"):
        parse_qos_limits("gold|2\n")


class Runner:
    def __init__(self, answers: dict[str, str], fail: str | None = None) -> None:
        self.answers, self.fail = answers, fail
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], *, timeout: float | None = None) -> str:
        self.argvs.append(list(argv))
        if self.fail and self.fail in argv:
            raise SlurmCommandFailed(list(argv), 1, "Problem talking to the database")
        return next(text for key, text in self.answers.items() if key in argv)


def test_the_read_asks_for_this_cluster_and_keys_each_limit():
    runner = Runner({"config": CONFIG, "assoc": ASSOC, "qos": QOS})
    limits = read_job_limits(runner)
    assert runner.argvs[1] == ["sacctmgr", "-P", "-n", "show", "assoc", "where", "cluster=lab",
                               "format=account,user,partition,parentname,maxjobs,grpjobs"]
    assert runner.argvs[2] == ["sacctmgr", "-P", "-n", "show", "qos",
                               "format=name,maxjobsperuser,maxjobsperaccount,grpjobs"]
    assert limits is not None
    assert limits.assocs[("team", "daemon", "gpu")] == AssocLimit("team", "daemon", "gpu", max_jobs=2)
    assert limits.assocs[("team", "", "")].grp_jobs == 5 and limits.qos["gold"].grp_jobs == 6


def test_without_enforced_limits_sacctmgr_is_not_asked():
    runner = Runner({"config": CONFIG.replace("associations,limits", "associations")})
    assert read_job_limits(runner) is None
    assert len(runner.argvs) == 1


def test_a_failing_sacctmgr_raises_for_the_caller_to_note():
    with pytest.raises(SlurmCommandFailed):
        read_job_limits(Runner({"config": CONFIG, "assoc": ASSOC, "qos": QOS}, fail="assoc"))
