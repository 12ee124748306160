"""The job-count limits of Slurm's associations and QOS, and which held job they would keep
waiting if pald released it now. Pure: the limits come from slurm.job_limits (sacctmgr), the
jobs from the same Slurm read as the cycle's.

Why pald needs them before a release: Slurm evaluates no limit for a held job (its reason
stays JobHeldAdmin), so a job whose user or account is already at a limit looks as
releasable as any other. Released onto a pin, it waits there with a limit reason
(`AssocMaxJobsLimit`, ...) and its promised GPUs stay idle for the jobs behind it until the
next read unpins it (daemon/held_jobs.unpin_limited). Counted here first, it is not released
and the jobs behind it are placed in its stead.

What counts, as slurmctld's accounting policy counts it (acct_policy.c):
- a job holds one job slot of its association, of every account above it, of its QOS, and of
  its user and its account within that QOS, from its start until it ends (RUNNING,
  SUSPENDED, CONFIGURING; COMPLETING no longer counts), and here also while it waits on a
  pin pald or the hook made for it (it starts as soon as Slurm's next pass reaches it);
- limits, checked in Slurm's order, the first reached is the reason:
  QOS GrpJobs (`QOSGrpJobsLimit`), QOS MaxJobsPerAccount (`QOSMaxJobsPerAccountLimit`),
  QOS MaxJobsPerUser (`QOSMaxJobsPerUserLimit`), then the association and each account above
  it: GrpJobs (`AssocGrpJobsLimit`), and on the job's own association MaxJobs
  (`AssocMaxJobsLimit`);
- a QOS limit of a kind replaces the association's of that kind: a QOS with GrpJobs set
  leaves every association's GrpJobs unchecked, one with MaxJobsPerUser the MaxJobs;
- MaxJobs unset on an association is its parent account's (slurmdbd propagates it down;
  taken from the parent here where a read shows it unset).

Not counted (Slurm still shows them after a release, and unpin_limited acts on them):
resource limits (GrpTRES, MaxTRESPerUser, ...), time limits, the partition's QOS, and limits
of a job whose association or QOS the read does not show (fail open).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from pal_slurm.intake.refusals import held_by_limit
from pal_slurm.slurm.readers import JobInfo

# job states that hold a job slot of their association and QOS (module docstring)
HOLDS_A_JOB_SLOT = frozenset({"RUNNING", "SUSPENDED", "CONFIGURING"})

QOS_GRP_JOBS = "QOSGrpJobsLimit"
QOS_MAX_JOBS_PER_ACCOUNT = "QOSMaxJobsPerAccountLimit"
QOS_MAX_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
ASSOC_GRP_JOBS = "AssocGrpJobsLimit"
ASSOC_MAX_JOBS = "AssocMaxJobsLimit"

AssocKey = tuple[str, str, str]  # (account, user, partition); an account's own row has user ""


@dataclass(frozen=True)
class AssocLimit:
    """One association's job-count limits as sacctmgr shows them (None: unset)."""

    account: str
    user: str = ""  # "" for an account's own association
    partition: str = ""
    parent: str = ""  # an account association's parent account ("" at the root)
    max_jobs: int | None = None
    grp_jobs: int | None = None

    @property
    def key(self) -> AssocKey:
        return (self.account, self.user, self.partition)


@dataclass(frozen=True)
class QosLimit:
    """One QOS's job-count limits (None: unset)."""

    name: str
    max_jobs_per_user: int | None = None
    max_jobs_per_account: int | None = None
    grp_jobs: int | None = None


@dataclass(frozen=True)
class JobLimits:
    """The site's job-count limits: every association and QOS of the cluster by its key."""

    assocs: Mapping[AssocKey, AssocLimit] = field(default_factory=dict)
    qos: Mapping[str, QosLimit] = field(default_factory=dict)

    @classmethod
    def of(cls, assocs: Iterable[AssocLimit], qos: Iterable[QosLimit]) -> JobLimits:
        return cls({a.key: a for a in assocs}, {q.name: q for q in qos})

    def chain(self, owner: Owner) -> tuple[AssocLimit, ...]:
        """The job's association, then each account above it to the root; () when the read
        has no association for it. A partition's own association wins over the user's
        partition-less one (a job asking for several partitions: the partition-less one)."""
        first = self.assocs.get((owner.account, owner.user, owner.partition)) if owner.partition else None
        first = first or self.assocs.get((owner.account, owner.user, ""))
        if first is None:
            return ()
        out = [first]
        account, seen = first.account, {first.key}
        while account:
            row = self.assocs.get((account, "", ""))
            if row is None or row.key in seen:
                break
            out.append(row)
            seen.add(row.key)
            account = row.parent
        return tuple(out)


class Owner(NamedTuple):
    """Whose limits a job counts against: its user, account, partition (one, or "" for a job
    that may run in several) and QOS. A named tuple: one is built per job of every read."""

    user: str
    account: str
    partition: str
    qos: str


def owner_of(job: JobInfo) -> Owner:
    partition = job.partition if "," not in job.partition else ""
    return Owner(user=job.user_name, account=job.account, partition=partition, qos=job.qos)


def holds_a_job_slot(job: JobInfo, on_pal_pin: bool) -> bool:
    """Whether `job` counts against its limits (module docstring); `on_pal_pin`: it waits on
    a pin pald or the hook made (daemon/pins.pin_key), to start as soon as Slurm reaches it.
    A pinned job Slurm keeps waiting for a limit is not counted: it starts only when the
    limit clears, and pald unpins it."""
    if job.state in HOLDS_A_JOB_SLOT:
        return True
    return on_pal_pin and job.state == "PENDING" and not job.held and not held_by_limit(job.reason)


class LimitCount:
    """Jobs counted against each limit, and which owner a further job would put over one.
    `add` counts a release the cycle makes, so a second release of the same user in one cycle
    sees the first. Each cycle works on its own `copy`."""

    def __init__(self, limits: JobLimits, counts: Counter[tuple[str, ...]] | None = None) -> None:
        self.limits = limits
        self.counts: Counter[tuple[str, ...]] = Counter(counts or {})
        self._chains: dict[Owner, tuple[AssocLimit, ...]] = {}

    @classmethod
    def of(cls, limits: JobLimits, owners: Iterable[Owner]) -> LimitCount:
        out = cls(limits)
        for owner, jobs in Counter(owners).items():  # each owner's keys built once (a read has many jobs)
            out.add(owner, jobs)
        return out

    def copy(self) -> LimitCount:
        return LimitCount(self.limits, self.counts)

    def _chain(self, owner: Owner) -> tuple[AssocLimit, ...]:
        if owner not in self._chains:
            self._chains[owner] = self.limits.chain(owner)
        return self._chains[owner]

    def _keys(self, owner: Owner) -> list[tuple[str, ...]]:
        keys: list[tuple[str, ...]] = [("assoc", *a.key) for a in self._chain(owner)]
        if owner.qos:
            keys += [("qos", owner.qos), ("qos-user", owner.qos, owner.user), ("qos-account", owner.qos, owner.account)]
        return keys

    def add(self, owner: Owner, jobs: int = 1) -> None:
        """`jobs` more jobs of `owner` hold a job slot."""
        for key in self._keys(owner):
            self.counts[key] += jobs

    def reason(self, owner: Owner) -> str | None:
        """The reason Slurm would show for one more job of `owner` started now (module
        docstring), or None when no limit the read shows stops it."""
        qos = self.limits.qos.get(owner.qos)
        checks: list[tuple[int | None, tuple[str, ...], str]] = []
        if qos is not None:
            checks += [(qos.grp_jobs, ("qos", owner.qos), QOS_GRP_JOBS),
                       (qos.max_jobs_per_account, ("qos-account", owner.qos, owner.account), QOS_MAX_JOBS_PER_ACCOUNT),
                       (qos.max_jobs_per_user, ("qos-user", owner.qos, owner.user), QOS_MAX_JOBS_PER_USER)]
        chain = self._chain(owner)
        qos_grp = qos is not None and qos.grp_jobs is not None
        qos_per_user = qos is not None and qos.max_jobs_per_user is not None
        for level, assoc in enumerate(chain):
            key: tuple[str, ...] = ("assoc", *assoc.key)
            if not qos_grp:
                checks.append((assoc.grp_jobs, key, ASSOC_GRP_JOBS))
            if level == 0 and not qos_per_user:
                max_jobs = next((a.max_jobs for a in chain if a.max_jobs is not None), None)
                checks.append((max_jobs, key, ASSOC_MAX_JOBS))
        for limit, key, why in checks:
            if limit is not None and self.counts[key] >= limit:
                return why
        return None


def count_read(limits: JobLimits, jobs: Iterable[JobInfo], on_pal_pin: Callable[[JobInfo], bool]) -> LimitCount:
    """The jobs of one Slurm read counted against `limits` (`on_pal_pin`: whether a pending
    job waits on a PAL pin)."""
    return LimitCount.of(limits, (owner_of(j) for j in jobs
                                  if holds_a_job_slot(j, j.state == "PENDING" and on_pal_pin(j))))
