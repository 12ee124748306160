"""Read a site's partitions and reservations (`scontrol -o show partition|reservation`) and
build the `SiteView` pald judges eligibility against. Pure apart from `read_site`.

Slurm 22.05 has no JSON for partitions or reservations (`scontrol --json` came in 23.02, and
`sinfo --json` lists nodes only, without reservations: a node in an active reservation still
shows plain `idle` there), so the one-line `scontrol -o` output is parsed: whitespace-separated
`Key=Value` pairs, one record per line.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Callable, Iterable, Mapping, Sequence

from pal_slurm.model.site import NO_BLOCKS, Blocks, NodeFacts, PartitionFacts, ReservationFacts, SiteView
from pal_slurm.slurm.errors import SlurmParseError
from pal_slurm.intake.durations import DurationError, parse_limit
from pal_slurm.intake.hostlist import expand
from pal_slurm.intake.gres import GPU, parse_gres
from pal_slurm.slurm.nodes import NodeInfo
from pal_slurm.slurm.runner import Runner
from pal_slurm.slurm.topology import read_blocks

_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "NONE", "N/A", ""})


def key_value_records(text: str) -> list[dict[str, str]]:
    """One {KEY: VALUE} dict per line of `scontrol -o` style output (also jobcomp/filetxt)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("No "):  # "No reservations in the system"
            continue
        record = {}
        for item in line.split():
            key, sep, value = item.partition("=")
            if sep:
                record[key] = value
        out.append(record)
    return out


def parse_minutes(text: str) -> int | None:
    """A partition's time limit (`UNLIMITED`, `01:00:00`, `2-00:00:00`, `30:00`) in whole
    minutes, a part minute counted whole; read by the one duration parser (intake.durations)."""
    try:
        seconds = parse_limit(text)
    except DurationError as exc:
        raise SlurmParseError(str(exc)) from None
    return None if seconds is None else math.ceil(seconds / 60)


def _limit(text: str | None) -> int | None:
    if text is None or text.upper() in _UNLIMITED:
        return None
    if not text.isdigit():
        raise SlurmParseError(f"bad limit {text!r}")
    return int(text)


def _name_list(text: str | None) -> frozenset[str] | None:
    """`ALL` (or absent) -> None (everyone); `a,b` -> {a, b}."""
    if text is None or text.upper() == "ALL":
        return None
    return frozenset(p for p in text.split(",") if p and p != "(null)")


def _nodes(text: str | None) -> frozenset[str]:
    if not text or text == "(null)":
        return frozenset()
    return frozenset(expand(text))


def parse_partitions(text: str) -> dict[str, PartitionFacts]:
    """`scontrol -o show partition` -> {name: PartitionFacts}."""
    out = {}
    for r in key_value_records(text):
        name = r.get("PartitionName")
        if not name:
            raise SlurmParseError(f"partition record without PartitionName: {sorted(r)[:5]}")
        try:
            out[name] = PartitionFacts(
                name=name,
                nodes=_nodes(r.get("Nodes")),
                default=r.get("Default", "NO").upper() == "YES",
                up=r.get("State", "UP").upper() == "UP",
                max_nodes=_limit(r.get("MaxNodes")),
                min_nodes=_limit(r.get("MinNodes")) or 0,
                max_time_min=parse_minutes(r.get("MaxTime", "UNLIMITED")),
                allow_accounts=_name_list(r.get("AllowAccounts")),
                deny_accounts=_name_list(r.get("DenyAccounts")) or frozenset(),
                allow_qos=_name_list(r.get("AllowQos")),
                deny_qos=_name_list(r.get("DenyQos")) or frozenset(),
                allow_groups=_name_list(r.get("AllowGroups")),
                root_only=r.get("RootOnly", "NO").upper() == "YES",
                req_resv=r.get("ReqResv", "NO").upper() == "YES",
            )
        except SlurmParseError as exc:
            raise SlurmParseError(f"partition {name}: {exc}") from None
    return out


def _epoch(text: str | None) -> float:
    try:
        return datetime.fromisoformat(text or "").timestamp()
    except ValueError:
        raise SlurmParseError(f"bad time {text!r}") from None


def _access_list(text: str | None) -> tuple[frozenset[str] | None, bool]:
    """An access list (`Users=a,b`, `Accounts=-c,-d`): (the names, whether they are the ones
    refused); (None, False) for none (`(null)`, absent)."""
    if not text or text == "(null)":
        return None, False
    names = [n for n in text.split(",") if n]
    refused = bool(names) and all(n.startswith("-") for n in names)
    return frozenset(n.lstrip("-") for n in names), refused


def uid_of(name: str) -> int | None:
    """The uid of a user name (the system's user database), None when it has none."""
    import pwd

    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def parse_reservations(text: str, uid_of: Callable[[str], int | None] = uid_of) -> dict[str, ReservationFacts]:
    """`scontrol -o show reservation` -> {name: ReservationFacts}; `uid_of` turns the Users=
    names into uids (the job side knows its user by uid)."""
    out = {}
    for r in key_value_records(text):
        name = r.get("ReservationName")
        if not name:
            raise SlurmParseError("reservation record without ReservationName")
        users, users_except = _access_list(r.get("Users"))
        accounts, accounts_except = _access_list(r.get("Accounts"))
        uids = None if users is None else frozenset(u for u in map(uid_of, users) if u is not None)
        groups, _ = _access_list(r.get("Groups"))
        out[name] = ReservationFacts(name, _nodes(r.get("Nodes")), _epoch(r.get("StartTime")),
                                     _epoch(r.get("EndTime")), r.get("State", "").upper() == "ACTIVE",
                                     uids, users_except, accounts, accounts_except, groups is not None)
    return out


def node_facts(node: NodeInfo) -> NodeFacts:
    res = node.resources
    cpus = res.cpus if res else 0
    memory = res.memory_mb if res else 0
    return NodeFacts(
        name=node.name,
        usable=node.usable,
        partitions=node.partitions,
        features=frozenset(node.features),
        cpus=cpus,
        free_cpus=max(0, cpus - (res.alloc_cpus if res else 0)),
        memory_mb=memory,
        free_memory_mb=max(0, memory - (res.alloc_memory_mb if res else 0)),
        gpus=node.gpus,
        gpu_types=frozenset(i.type or "" for i in parse_gres(node.gres) if i.name == GPU),
    )


def site_view(nodes: Sequence[NodeInfo], partitions: Mapping[str, PartitionFacts],
              reservations: Mapping[str, ReservationFacts] | None = None, blocks: Blocks = NO_BLOCKS) -> SiteView:
    return SiteView({n.name: node_facts(n) for n in nodes}, dict(partitions), dict(reservations or {}), blocks)


def read_site(runner: Runner, nodes: Iterable[NodeInfo], earlier: SiteView | None = None) -> SiteView:
    """The site as Slurm shows it now (`nodes` from the same cycle's sinfo): the reservations
    read, and the partitions and the topology's blocks too unless an earlier read's are given
    (`earlier`: they change only with slurm.conf/topology.conf, read on pald's slower period)."""
    if earlier is None:
        partitions: Mapping[str, PartitionFacts] = parse_partitions(runner.run(["scontrol", "-o", "show", "partition"]))
        blocks = read_blocks(runner.run)
    else:
        partitions, blocks = earlier.partitions, earlier.blocks
    reservations = parse_reservations(runner.run(["scontrol", "-o", "show", "reservation"]))
    return site_view(list(nodes), partitions, reservations, blocks)
