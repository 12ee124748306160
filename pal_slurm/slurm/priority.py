"""Read what Slurm's multifactor priority is computed from, for `pal_slurm.model.priority`.

Sources, all text so that Slurm 22.05 and 24.11 read alike (22.05 has no `scontrol --json`,
and `sshare --json` came in 23.02):
- weights, PriorityMaxAge, PriorityFlags, PriorityFavorSmall: `scontrol show config`
  (``Key = Value`` lines);
- fair-share factors: `sshare -P -a` (the FairShare column; account names are indented by
  their depth in the tree);
- QOS priorities: `sacctmgr -P -n show qos format=name,priority`;
- association priorities: `sacctmgr -P -n show assoc format=account,user,priority`;
- PriorityJobFactor, MaxTime and TRES per partition: `scontrol -o show partition`;
- the cluster's CPUs and nodes (the job size factor): the nodes of the same cycle's sinfo.

The job's TRES factor counts its CPUs and nodes only (its memory and GRES are not read).

The parsers are pure; `read_site_priority` runs the commands, and only those whose weight is
set. sshare and sacctmgr need slurmdbd: without it they fail, and their factors read as 0 (the
reason is kept in `SitePriorityRead.missing`), which is what Slurm uses when it has no
association data either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from pal_slurm.intake.durations import DurationError, parse_limit
from pal_slurm.model.priority import PriorityJob, PriorityWeights, SitePriority, priority
from pal_slurm.slurm.errors import SlurmError, SlurmParseError
from pal_slurm.slurm.nodes import NodeInfo
from pal_slurm.slurm.readers import JobInfo
from pal_slurm.slurm.runner import Runner
from pal_slurm.slurm.site import key_value_records

MULTIFACTOR = "priority/multifactor"
_WEIGHT_KEYS = {
    "PriorityWeightAge": "age",
    "PriorityWeightAssoc": "assoc",
    "PriorityWeightFairShare": "fairshare",
    "PriorityWeightJobSize": "job_size",
    "PriorityWeightPartition": "partition",
    "PriorityWeightQOS": "qos",
}


def config_values(text: str) -> dict[str, str]:
    """`scontrol show config` -> {Key: Value} (the ``Key = Value`` lines; others skipped).
    Keys as Slurm prints them (``PriorityWeightFairShare``, ``PriorityWeightQOS``)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SlurmParseError(f"{what} is {text!r}, not a number") from None


def _tres_weights(text: str) -> dict[str, float]:
    """``CPU=1000,Mem=2000,GRES/gpu=3000`` -> {"cpu": 1000, "mem": 2000, "gres/gpu": 3000}."""
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            out[name.strip().lower()] = _number(value.strip(), f"PriorityWeightTRES {name}")
    return out


def parse_priority_config(text: str) -> PriorityWeights | None:
    """`scontrol show config` -> the multifactor settings; None when the site does not run
    priority/multifactor (priority/basic orders by submit time: nothing to compute)."""
    values = config_values(text)
    if values.get("PriorityType", "") != MULTIFACTOR:
        return None
    weights = {field: _number(values.get(key) or "0", key) for key, field in _WEIGHT_KEYS.items()}
    max_age = values.get("PriorityMaxAge", "7-00:00:00")
    try:
        max_age_s = parse_limit(max_age)
    except DurationError as exc:
        raise SlurmParseError(f"PriorityMaxAge: {exc}") from None
    raw_tres = values.get("PriorityWeightTRES", "")
    flags = values.get("PriorityFlags", "")
    return PriorityWeights(
        **weights,
        tres=_tres_weights(raw_tres) if raw_tres and raw_tres != "(null)" else {},
        max_age_s=max_age_s if max_age_s is not None else 0.0,
        favor_small=values.get("PriorityFavorSmall", "No").lower() in ("yes", "1", "true"),
        flags=frozenset(f.strip().upper() for f in flags.split(",") if f.strip() and f.strip() != "(null)"),
    )


def bar_rows(text: str) -> list[list[str]]:
    """`-P` output (``a|b|c`` lines) -> its rows' fields; blank lines skipped."""
    return [line.split("|") for line in text.splitlines() if line.strip()]


def parse_sshare(text: str) -> dict[tuple[str, str], float]:
    """`sshare -P -a` -> {(account, user): FairShare}; an account's own row has user "".
    Rows with an empty FairShare (Fair Tree prints none for accounts) are left out."""
    rows = bar_rows(text)
    if not rows:
        return {}
    header = [h.strip() for h in rows[0]]
    try:
        ia, iu, ifs = header.index("Account"), header.index("User"), header.index("FairShare")
    except ValueError:
        raise SlurmParseError(f"sshare -P printed no Account/User/FairShare header: {header}") from None
    out = {}
    for row in rows[1:]:
        if len(row) <= max(ia, iu, ifs) or not row[ifs].strip():
            continue
        out[(row[ia].strip(), row[iu].strip())] = _number(row[ifs].strip(), "sshare FairShare")
    return out


def parse_qos(text: str) -> dict[str, int]:
    """`sacctmgr -P -n show qos format=name,priority` -> {QOS: priority}."""
    out = {}
    for row in bar_rows(text):
        if len(row) >= 2 and row[0].strip():
            out[row[0].strip()] = int(_number(row[1].strip() or "0", f"QOS {row[0]} priority"))
    return out


def parse_assoc_priority(text: str) -> dict[tuple[str, str], int]:
    """`sacctmgr -P -n show assoc format=account,user,priority` -> {(account, user): priority}
    (associations without a priority left out)."""
    out = {}
    for row in bar_rows(text):
        if len(row) >= 3 and row[2].strip():
            out[(row[0].strip(), row[1].strip())] = int(_number(row[2].strip(), "association priority"))
    return out


def _tres_counts(text: str) -> dict[str, float]:
    """A partition's ``TRES=cpu=64,mem=16000M,node=4,gres/gpu=8`` -> counts (mem in MB)."""
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep:
            continue
        scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}.get(value[-1:].upper(), 1.0)
        digits = value[:-1] if value[-1:].upper() in "KMGT" and value[-1:].isalpha() else value
        out[name.strip().lower()] = _number(digits, f"partition TRES {name}") * scale
    return out


@dataclass(frozen=True)
class PartitionPriority:
    """What the formula reads of one partition."""

    job_factor: int
    max_time_min: float | None  # None: unlimited
    tres: Mapping[str, float]


def parse_partition_priority(text: str) -> dict[str, PartitionPriority]:
    """`scontrol -o show partition` -> {name: PartitionPriority}."""
    out = {}
    for r in key_value_records(text):
        name = r.get("PartitionName")
        if not name:
            continue
        try:
            limit = parse_limit(r.get("MaxTime", "UNLIMITED"))
        except DurationError as exc:
            raise SlurmParseError(f"partition {name} MaxTime: {exc}") from None
        out[name] = PartitionPriority(
            job_factor=int(_number(r.get("PriorityJobFactor", "0"), f"partition {name} PriorityJobFactor")),
            max_time_min=None if limit is None else limit / 60,
            tres=_tres_counts(r.get("TRES", "")),
        )
    return out


@dataclass(frozen=True)
class SitePriorityRead:
    """The site's priority inputs, and which sources could not be read (source -> why)."""

    site: SitePriority
    partitions: Mapping[str, PartitionPriority]
    missing: Mapping[str, str]


def site_priority(weights: PriorityWeights, nodes: Iterable[NodeInfo], partitions: Mapping[str, PartitionPriority],
                  fairshare: Mapping[tuple[str, str], float], qos: Mapping[str, int],
                  assoc: Mapping[tuple[str, str], int]) -> SitePriority:
    """The `SitePriority` of parsed parts; the cluster's size from every node, in any state
    (slurmctld sums the CPUs of every configured node for the job size factor)."""
    active = list(nodes)
    return SitePriority(
        weights=weights, fairshare=dict(fairshare), qos_priority=dict(qos),
        partition_factor={name: p.job_factor for name, p in partitions.items()},
        partition_tres={name: p.tres for name, p in partitions.items()},
        assoc_priority=dict(assoc),
        cluster_cpus=sum(n.resources.cpus for n in active if n.resources is not None), node_count=len(active),
    )


def priority_job(job: JobInfo, partitions: Mapping[str, PartitionPriority]) -> PriorityJob:
    """What the formula reads of a squeue record. A job submitted to several partitions is
    scored in its first (model.priority's docstring)."""
    partition = job.partition.split(",")[0]
    part = partitions.get(partition)
    limit = job.time_limit_s / 60 if job.time_limit_s else (part.max_time_min if part else None)
    request = job.placement_request
    cpus = request.cpus if request is not None else 0
    return PriorityJob(
        submit_time=float(job.submit_time), eligible_time=float(job.eligible_time), account=job.account,
        user=job.user_name, partition=partition, qos=job.qos, cpus=cpus, min_nodes=max(1, job.node_count),
        time_limit_min=limit, nice=job.nice, tres={"cpu": float(cpus), "node": float(max(1, job.node_count))},
    )


def read_site_priority(runner: Runner, nodes: Iterable[NodeInfo]) -> SitePriorityRead | None:
    """The site's priority inputs as Slurm shows them now; None when it does not run
    priority/multifactor. A failing sshare/sacctmgr leaves its factors 0 (`missing` says why);
    a failing scontrol raises (pald cannot compute without the weights)."""
    weights = parse_priority_config(runner.run(["scontrol", "show", "config"]))
    if weights is None:
        return None
    partitions = parse_partition_priority(runner.run(["scontrol", "-o", "show", "partition"]))
    missing: dict[str, str] = {}
    fairshare: dict[tuple[str, str], float] = {}
    qos: dict[str, int] = {}
    assoc: dict[tuple[str, str], int] = {}
    if weights.fairshare:
        try:
            fairshare = parse_sshare(runner.run(["sshare", "-P", "-a"]))
        except SlurmError as exc:
            missing["sshare"] = str(exc)
    if weights.qos:
        try:
            qos = parse_qos(runner.run(["sacctmgr", "-P", "-n", "show", "qos", "format=name,priority"]))
        except SlurmError as exc:
            missing["sacctmgr qos"] = str(exc)
    if weights.assoc:
        try:
            assoc = parse_assoc_priority(
                runner.run(["sacctmgr", "-P", "-n", "show", "assoc", "format=account,user,priority"]))
        except SlurmError as exc:
            missing["sacctmgr assoc"] = str(exc)
    return SitePriorityRead(site_priority(weights, nodes, partitions, fairshare, qos, assoc), partitions, missing)


def held_priority(job: JobInfo, read: SitePriorityRead | None, now: float) -> float:
    """The priority Slurm's multifactor plugin would give `job` at `now` were it not held (a
    held job shows 0: docs/decisions/site-priority.md); 0 without the site's inputs (`read`
    None: the site does not run priority/multifactor, and every held job scores 0)."""
    if read is None:
        return 0.0
    return float(priority(priority_job(job, read.partitions), read.site, now))
