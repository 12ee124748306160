"""Read the job-count limits of the site's associations and QOS, for
`pal_slurm.intake.job_limits` (which held job a release would put over one).

Sources, all text so that Slurm 22.05 and 24.11 read alike (as slurm.priority):
- whether slurmctld enforces limits, and the cluster's name: `scontrol show config`
  (AccountingStorageEnforce has ``limits`` or ``safe``; ClusterName);
- the associations of that cluster: `sacctmgr -P -n show assoc where cluster=<name>
  format=account,user,partition,parentname,maxjobs,grpjobs` (an account's own row has no
  user and names its parent; a user's row names no parent: its parent is its account);
- the QOS: `sacctmgr -P -n show qos format=name,maxjobsperuser,maxjobsperaccount,grpjobs`.

The parsers are pure; `read_job_limits` runs the commands. sacctmgr needs slurmdbd: a failed
command raises (the caller notes it and knows no limit until the next read: fail open).
"""

from __future__ import annotations

from pal_slurm.intake.job_limits import AssocLimit, JobLimits, QosLimit
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.slurm.priority import bar_rows, config_values
from pal_slurm.slurm.runner import Runner

ASSOC_FORMAT = "format=account,user,partition,parentname,maxjobs,grpjobs"
QOS_FORMAT = "format=name,maxjobsperuser,maxjobsperaccount,grpjobs"
_ENFORCING = frozenset({"limits", "safe"})  # AccountingStorageEnforce words that enforce limits


def _limit(text: str, what: str) -> int | None:
    """A limit's column: "" (unset) -> None, else its count."""
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise SlurmParseError(f"{what} is {text!r}, not a count") from None


def enforced_cluster(config_text: str) -> str | None:
    """`scontrol show config` -> the cluster's name when slurmctld enforces association and
    QOS limits, else None (without ``limits`` in AccountingStorageEnforce Slurm starts a job
    whatever its limits say: there is nothing to count)."""
    values = config_values(config_text)
    words = {w.strip().lower() for w in values.get("AccountingStorageEnforce", "").split(",")}
    if not words & _ENFORCING:
        return None
    return values.get("ClusterName", "")


def parse_assoc_limits(text: str) -> list[AssocLimit]:
    """`sacctmgr -P -n show assoc ... ` + ASSOC_FORMAT -> the associations' limits."""
    out = []
    for row in bar_rows(text):
        if len(row) < 6:
            raise SlurmParseError(f"sacctmgr assoc row {'|'.join(row)!r}: {len(row)} fields, not 6")
        account, user, partition, parent = (f.strip() for f in row[:4])
        if not account:
            continue
        where = f"association {account}/{user or '-'}"
        out.append(AssocLimit(account=account, user=user, partition=partition, parent=parent,
                              max_jobs=_limit(row[4], f"{where} MaxJobs"), grp_jobs=_limit(row[5], f"{where} GrpJobs")))
    return out


def parse_qos_limits(text: str) -> list[QosLimit]:
    """`sacctmgr -P -n show qos ` + QOS_FORMAT -> the QOS' limits."""
    out = []
    for row in bar_rows(text):
        if len(row) < 4:
            raise SlurmParseError(f"sacctmgr qos row {'|'.join(row)!r}: {len(row)} fields, not 4")
        name = row[0].strip()
        if name:
            out.append(QosLimit(name, max_jobs_per_user=_limit(row[1], f"QOS {name} MaxJobsPerUser"),
                                max_jobs_per_account=_limit(row[2], f"QOS {name} MaxJobsPerAccount"),
                                grp_jobs=_limit(row[3], f"QOS {name} GrpJobs")))
    return out


def read_job_limits(runner: Runner) -> JobLimits | None:
    """The site's job-count limits as slurmdbd shows them now; None when slurmctld does not
    enforce limits. Raises SlurmError when a command fails."""
    cluster = enforced_cluster(runner.run(["scontrol", "show", "config"]))
    if cluster is None:
        return None
    where = ["where", f"cluster={cluster}"] if cluster else []
    assocs = parse_assoc_limits(runner.run(["sacctmgr", "-P", "-n", "show", "assoc", *where, ASSOC_FORMAT]))
    qos = parse_qos_limits(runner.run(["sacctmgr", "-P", "-n", "show", "qos", QOS_FORMAT]))
    return JobLimits.of(assocs, qos)
