"""Parse Slurm's node and job JSON into plain values, the same for every supported release.

Slurm 22.05 has no `scontrol --json`, and pyslurm 22.05 is not installable from PyPI, so
the JSON of the client commands is the only structured view pald gets. Each release's shape
is turned into 22.05's field names first (`pal_slurm.slurm.dialects`: detect the release ->
its record functions), then mapped here to one view. This module is pure (text in,
dataclasses out) apart from `SlurmReader`, which detects the release once and runs the
commands through the runner.

GRES strings seen in 22.05 (all in tests/unit/slurm/data/*.json):
- configured ``gres``: ``gpu:s0:1,gpu:s1:1,...`` (per-slot types) or ``gpu:4``; may carry a
  socket suffix ``gpu:a100:4(S:0-1)``.
- ``gres_used``: ``gpu:s1:1(IDX:1),gpu:s0:0(IDX:N/A)`` (typed), but only ``gpu:3`` for plain
  GRES: sinfo gives no indices then, squeue's ``gres_detail`` does.
- job ``gres_detail``, one string per allocated node: ``gpu:2(IDX:0-1)``,
  ``gpu:s2:1(IDX:2),gpu:s3:1(IDX:3)``, and for untyped requests on typed nodes
  ``gpu:s0:1(IDX:0),gpu:s2:0(IDX:)``. IDX lists may contain commas: ``IDX:0,2-3``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence, TypeVar

from pal_slurm.model.cluster import ClusterView
from pal_slurm.model.site import SiteView
from pal_slurm.slurm.dialects import LEGACY_22_05, Dialect, detect
from pal_slurm.intake.durations import minutes_field
from pal_slurm.intake.gres import gpu_indices, gpus_in, parse_gres
from pal_slurm.intake.slurm_numbers import NO_VAL, count
from pal_slurm.intake.tres import canonical_tres
from pal_slurm.slurm.errors import SlurmError, SlurmParseError, SlurmUnsupported
from pal_slurm.intake.hostlist import HostSet, expand
from pal_slurm.slurm.nodes import (  # re-exported: the node types are part of the readers' view
    NodeInfo as NodeInfo,
    NodeResources as NodeResources,
)
from pal_slurm.slurm.runner import Runner
from pal_slurm.slurm.site import read_site


Parsed = TypeVar("Parsed")  # what one of the parse_* functions makes of a command's JSON


def _require(obj: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in obj:
        raise SlurmParseError(f"{what} has no {key!r} field")
    return obj[key]


def _load(doc: str | bytes | Mapping[str, Any], command: str) -> Mapping[str, Any]:
    if isinstance(doc, Mapping):
        data = doc
    else:
        try:
            data = json.loads(doc)
        except (ValueError, TypeError) as exc:
            raise SlurmParseError(f"{command} --json printed invalid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise SlurmParseError(f"{command} --json printed {type(data).__name__}, not an object")
    errors = data.get("errors") or []
    if errors:
        raise SlurmParseError(f"{command} --json reported errors: {errors}")
    return data


def _split_csv(text: str | None) -> tuple[str, ...]:
    return tuple(p for p in (text or "").split(",") if p)


def parse_node(raw: Mapping[str, Any]) -> NodeInfo:
    name = _require(raw, "name", "sinfo node")
    try:
        configured = parse_gres(raw.get("gres"))
        used = parse_gres(raw.get("gres_used"))
        weight = raw.get("weight")
        return NodeInfo(
            name=name,
            state=str(_require(raw, "state", f"node {name}")).lower(),
            state_flags=tuple(str(f).upper() for f in raw.get("state_flags") or ()),
            gpus=gpus_in(configured),
            gpus_used=gpus_in(used),
            used_slots=gpu_indices(used),
            weight=int(weight) if isinstance(weight, int) and weight != NO_VAL else 1,
            features=_split_csv(raw.get("active_features") or raw.get("features")),
            partitions=tuple(raw.get("partitions") or ()),
            reason=raw.get("reason") or "",
            gres=raw.get("gres") or "",
            resources=parse_node_resources(raw),
            address=str(raw.get("address") or ""),
            hostname=str(raw.get("hostname") or ""),
        )
    except SlurmParseError as exc:
        raise SlurmParseError(f"node {name}: {exc}") from None


def parse_sinfo(
    doc: str | bytes | Mapping[str, Any], dialect: Dialect = LEGACY_22_05
) -> list[NodeInfo]:
    """Nodes in Slurm's node order (slurm.conf order), from the JSON of `dialect.nodes_argv`:
    22.05's `sinfo --json`, 23.02+'s `scontrol show nodes --json`."""
    command = dialect.nodes_argv[0]
    data = _load(doc, command)
    nodes = _require(data, "nodes", f"{command} --json")
    if not isinstance(nodes, list):
        raise SlurmParseError(f"{command} --json: 'nodes' is not a list")
    out: list[NodeInfo] = []
    seen: set[str] = set()
    for raw in nodes:
        if not isinstance(raw, Mapping):
            raise SlurmParseError(f"{command} --json: a node is {type(raw).__name__}, not an object")
        node = parse_node(dialect.node_record(raw))
        if node.name not in seen:  # a node in several partitions is listed once per partition
            seen.add(node.name)
            out.append(node)
    return out


# ---- jobs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobInfo:
    """One job as `squeue --json` reports it."""

    job_id: int
    name: str
    state: str  # PENDING, RUNNING, COMPLETING, ...
    reason: str  # state_reason: None, Resources, JobHeldUser, ...
    user_id: int
    comment: str
    admin_comment: str
    nodes: tuple[str, ...]  # allocated nodes (empty while pending)
    required_nodes: tuple[str, ...]  # ReqNodeList (--nodelist / hook / scontrol update)
    node_count: int
    tres_per_node: str  # e.g. gres:gpu:s2:1,gres:gpu:s3:1
    gpu_slots: Mapping[str, frozenset[int]]  # node -> allocated GPU indices (running jobs)
    priority: int
    submit_time: int  # epoch seconds
    start_time: int
    partition: str = ""
    time_limit_s: float | None = None  # --time in seconds; None when unlimited or not set
    tres_per_job: str = ""  # e.g. gres:gpu:8 (--gpus=N)
    placement_request: "JobPlacementRequest | None" = None  # where it may run (parse_job_placement_request)
    unreadable: str = ""  # why the full record could not be parsed ("" when it could)
    restart_count: int = 0  # times Slurm requeued it (scontrol requeue, node failure with --requeue)
    array_job_id: int = 0  # an array's id (its first job id), 0 for a job outside an array
    array_task_id: int | None = None  # this record's element; None for a record of several pending ones
    array_tasks: str = ""  # the pending elements a record of several stands for ("1,3-8")
    eligible_time: int = 0  # epoch seconds it may start from (a requeued job waits Slurm's requeue delay)
    end_time: int = 0  # epoch seconds it ended (once it has; before: when its time limit ends it)
    tres_per_task: str = ""  # e.g. gres:gpu:1 (--gpus-per-task)
    tres_per_socket: str = ""  # e.g. gres:gpu:1 (--gpus-per-socket)
    user_name: str = ""  # its user's name (sshare's rows name users so)
    nice: int = 0  # --nice (lowers its priority by this much; negative raises it)

    @property
    def account(self) -> str:
        """Its account (the site's rules read it; "" when squeue gave none)."""
        return self.placement_request.account if self.placement_request is not None else ""

    @property
    def qos(self) -> str:
        return self.placement_request.qos if self.placement_request is not None else ""

    @property
    def held(self) -> bool:
        """Pending with priority 0 (sbatch --hold, the hook's defer, scontrol hold)."""
        return self.state == "PENDING" and (
            self.priority == 0 or self.reason in ("JobHeldUser", "JobHeldAdmin")
        )

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def ref(self) -> int | str:
        """How scontrol names this record: ``A_I`` for one array element (Slurm 22.05 keeps the
        pending elements of an array in one record until one is updated or started, which
        splits it off under a job id of its own), else the job id."""
        if self.array_job_id and self.array_task_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        return self.job_id

    def element_refs(self) -> list[int | str]:
        """The scontrol names of the elements this record stands for (one unless it is an
        array's record of several pending elements). Raises SlurmParseError for a task string
        this does not read."""
        if not self.is_array_record:
            return [self.ref]
        return [f"{self.array_job_id}_{i}" for i in array_task_ids(self.array_tasks)]

    @property
    def is_array_record(self) -> bool:
        """An array's one record of several pending elements (not one element, not a job)."""
        return bool(self.array_job_id and self.array_task_id is None and self.array_tasks)

    def own_ref(self, without: Collection[int | str] = ()) -> int | str | None:
        """The scontrol name of exactly the elements this record stands for, less the element
        refs in `without` (those a cycle just released); None when none is left.

        Why not the job id: an array's pending record keeps the array's own job id, and
        `scontrol hold <array id>` holds *every* pending element of the array, those pald has
        just pinned and released too (they then wait held until pald places them again). The
        ``A_[1,3-8]`` form names only the record's elements (Slurm 22.05 and 24.11, lab-tested
        in tests/integration/test_slurm_adapter.py). Raises SlurmParseError for a task string
        this does not read."""
        if not self.is_array_record:
            return None if self.ref in without or self.job_id in without else self.ref
        gone = {str(ref) for ref in without}
        tasks = [i for i in array_task_ids(self.array_tasks) if f"{self.array_job_id}_{i}" not in gone]
        return f"{self.array_job_id}_[{task_string(tasks)}]" if tasks else None


_TASK_RANGE = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")
MAX_ARRAY_TASKS = 1_000_000  # Slurm's MaxArraySize is at most 4000001; more is not a task string


def array_task_ids(text: str) -> list[int]:
    """Slurm's array task string (``1,3-8``, ``0-9:2``, a ``%N`` throttle suffix) -> task ids."""
    body = text.split("%", 1)[0].strip()
    out: list[int] = []
    for part in body.split(","):
        m = _TASK_RANGE.fullmatch(part.strip())
        if not m:
            raise SlurmParseError(f"bad array task string {text!r}")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else first
        step = int(m.group(3)) if m.group(3) else 1
        if last < first or step < 1 or len(out) + (last - first) // step >= MAX_ARRAY_TASKS:
            raise SlurmParseError(f"bad array task string {text!r}")
        out.extend(range(first, last + 1, step))
    return out


def task_string(ids: Iterable[int]) -> str:
    """Task ids -> an array task string (``1,3-5``): what `array_task_ids` reads back."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _allocated_nodes(raw: Mapping[str, Any]) -> list[str]:
    resources = raw.get("job_resources") or {}
    listed = [a.get("nodename") for a in resources.get("allocated_nodes") or ()]
    if listed and all(listed):
        return listed
    return expand(raw.get("nodes") or "")


def parse_job(raw: Mapping[str, Any]) -> JobInfo:
    job_id = _require(raw, "job_id", "squeue job")
    try:
        nodes = _allocated_nodes(raw)
        details = list(raw.get("gres_detail") or ())
        slots: dict[str, frozenset[int]] = {}
        if details:
            if len(details) != len(nodes):
                raise SlurmParseError(
                    f"{len(details)} gres_detail entries for {len(nodes)} nodes"
                )
            for node, detail in zip(nodes, details):
                idx = gpu_indices(parse_gres(detail))
                if idx:
                    slots[node] = idx
        priority = raw.get("priority")
        return JobInfo(
            job_id=int(job_id),
            name=raw.get("name") or "",
            state=str(raw.get("job_state") or ""),
            reason=str(raw.get("state_reason") or ""),
            user_id=int(raw.get("user_id") or 0),
            comment=raw.get("comment") or "",
            admin_comment=raw.get("admin_comment") or "",
            nodes=tuple(nodes),
            required_nodes=tuple(expand(raw.get("required_nodes") or "")),
            node_count=int(raw.get("node_count") or 0),
            tres_per_node=canonical_tres(raw.get("tres_per_node") or ""),
            gpu_slots=slots,
            priority=int(priority) if isinstance(priority, int) else 0,
            submit_time=int(raw.get("submit_time") or 0),
            start_time=int(raw.get("start_time") or 0),
            partition=raw.get("partition") or "",
            time_limit_s=minutes_field(raw.get("time_limit")),
            tres_per_job=raw.get("tres_per_job") or "",
            placement_request=parse_job_placement_request(raw),
            restart_count=count(raw.get("restart_cnt")),
            eligible_time=count(raw.get("eligible_time")),
            end_time=count(raw.get("end_time")),
            tres_per_task=canonical_tres(raw.get("tres_per_task") or ""),
            tres_per_socket=canonical_tres(raw.get("tres_per_socket") or ""),
            array_job_id=count(raw.get("array_job_id")),
            array_task_id=_task_id(raw.get("array_task_id")),
            array_tasks=raw.get("array_task_string") or "",
            user_name=raw.get("user_name") or "",
            nice=_nice(raw.get("nice")),
        )
    except SlurmParseError as exc:
        raise SlurmParseError(f"job {job_id}: {exc}") from None


NICE_OFFSET = 0x80000000  # Slurm stores nice offset by this; a record may print it so
NICE_RANGE = 2**30  # a nice this large or more (Slurm allows up to 2^31 - 3) reads as 0


def _nice(value: object) -> int:
    """A job's nice (negative raises its priority); unset or unreadable -> 0."""
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    if abs(value) < NICE_RANGE:
        return value
    if abs(value - NICE_OFFSET) < NICE_RANGE:
        return value - NICE_OFFSET
    return 0


def _task_id(value: object) -> int | None:
    """An array element's task id (None: not one element; NO_VAL on some releases)."""
    task = count(value, -1)
    return None if task < 0 else task


def salvage_job(raw: Mapping[str, Any], problem: str) -> JobInfo | None:
    """The identity and hold state of a job whose full record did not parse, or None when
    even its id is unusable. Enough to release it (the failsafe, pald's fail-open path);
    nothing about its GPUs, which sinfo's per-node counts still cover."""
    try:
        job_id = int(raw["job_id"])
    except (KeyError, TypeError, ValueError):
        return None
    priority = raw.get("priority")
    admin_comment = raw.get("admin_comment")
    return JobInfo(
        job_id=job_id, name="", state=str(raw.get("job_state") or ""),
        reason=str(raw.get("state_reason") or ""), user_id=0, comment="",
        admin_comment=admin_comment if isinstance(admin_comment, str) else "",
        nodes=(), required_nodes=(), node_count=0, tres_per_node="", gpu_slots={},
        priority=priority if isinstance(priority, int) else 0, submit_time=0, start_time=0,
        unreadable=problem or "unreadable record",
    )


def parse_squeue(
    doc: str | bytes | Mapping[str, Any], dialect: Dialect = LEGACY_22_05
) -> list[JobInfo]:
    """Jobs of `squeue --json` (22.05 ignores -j filters: this is every job).

    One malformed job record never hides the others: it is salvaged (`salvage_job`, its
    `unreadable` says why) or, without a usable id, left out."""
    data = _load(doc, "squeue")
    jobs = _require(data, "jobs", "squeue --json")
    if not isinstance(jobs, list):
        raise SlurmParseError("squeue --json: 'jobs' is not a list")
    out = []
    for raw in jobs:
        if not isinstance(raw, Mapping):
            continue
        try:
            out.append(parse_job(dialect.job_record(raw)))
        except (SlurmParseError, TypeError, ValueError, AttributeError) as exc:
            salvaged = salvage_job(raw, str(exc))
            if salvaged is not None:
                out.append(salvaged)
    return out


# ---- what decides where a job may run (pal_slurm/policy/eligibility.py) --------------------
def parse_node_resources(raw: Mapping[str, Any]) -> NodeResources:
    return NodeResources(count(raw.get("cpus")), count(raw.get("alloc_cpus")),
                         count(raw.get("real_memory")), count(raw.get("alloc_memory")))


@dataclass(frozen=True)
class JobPlacementRequest:
    """A pending job's restrictions from `squeue --json` (for jobs pald places from its cycle)."""

    features: str = ""
    excluded_nodes: HostSet = HostSet()  # --exclude as the user wrote it: matched, never listed
    reservation: str = ""
    exclusive: bool = False
    account: str = ""
    qos: str = ""
    min_cpus_per_node: int = 0
    cpus: int = 0  # the job's CPUs in all
    cpus_per_tres: str = ""  # "gres:gpu:2" (--cpus-per-gpu)
    memory_per_node_mb: int = 0
    memory_per_cpu_mb: int = 0
    memory_per_tres: str = ""  # "gres:gpu:2048" (--mem-per-gpu, MB)
    tres_per_job: str = ""  # "gres:gpu:8" (--gpus=8)


def parse_job_placement_request(raw: Mapping[str, Any]) -> JobPlacementRequest:
    return JobPlacementRequest(
        features=raw.get("features") or "",
        excluded_nodes=HostSet.from_expr(raw.get("excluded_nodes")),
        reservation=raw.get("resv_name") or "",
        exclusive=str(raw.get("shared") or "").lower() == "none",
        account=raw.get("account") or "",
        qos=raw.get("qos") or "",
        min_cpus_per_node=count(raw.get("minimum_cpus_per_node")),
        cpus=count(raw.get("cpus")),
        cpus_per_tres=raw.get("cpus_per_tres") or "",
        memory_per_node_mb=count(raw.get("memory_per_node")),
        memory_per_cpu_mb=count(raw.get("memory_per_cpu")),
        memory_per_tres=raw.get("memory_per_tres") or "",
        tres_per_job=raw.get("tres_per_job") or "",
    )


# ---- the cluster view -------------------------------------------------------------------
# the job states in which Slurm counts a job's GPUs allocated
JOB_STATES_HOLDING_GPUS = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"})


def slots_held_by_jobs(jobs: Iterable[JobInfo]) -> dict[str, set[int]]:
    """Per node, the GPU slots the jobs in a state that holds GPUs show in their gres detail."""
    held: dict[str, set[int]] = {}
    for job in jobs:
        if job.state in JOB_STATES_HOLDING_GPUS:
            for node, idx in job.gpu_slots.items():
                held.setdefault(node, set()).update(idx)
    return held


def used_slots_by_node(
    nodes: Sequence[NodeInfo], jobs: Iterable[JobInfo] = ()
) -> dict[str, frozenset[int]]:
    """Allocated GPU slots per node: sinfo's IDX, plus running jobs' gres_detail.

    With plain ``Gres=gpu:N`` sinfo prints only a count; the jobs fill in the indices. If the
    count still exceeds the known indices (a job finished between the two reads, or no jobs
    given), the lowest unknown slots are counted as used: cons_tres allocates lowest first,
    and over-counting only defers a placement, while under-counting could double-book a GPU.
    """
    from_jobs = slots_held_by_jobs(jobs)
    out: dict[str, frozenset[int]] = {}
    for node in nodes:
        used = set(node.used_slots or ()) | from_jobs.get(node.name, set())
        missing = node.gpus_used - len(used)
        slot = 0
        while missing > 0 and slot < node.gpus:
            if slot not in used:
                used.add(slot)
                missing -= 1
            slot += 1
        out[node.name] = frozenset(s for s in used if 0 <= s < node.gpus)
    return out


def unheld_slots(nodes: Sequence[NodeInfo], jobs: Iterable[JobInfo]) -> dict[str, frozenset[int]]:
    """Allocated GPU slots on usable nodes that no job in `jobs` holds (from the same read):
    a job that has just ended (Slurm counts a job's GRES until its cleanup is done, and a read
    that took sinfo before squeue lost a job that ended in between; pald reads squeue first,
    `daemon.app`). Such GPUs free within moments; `PlacementService.observe_running`
    sees them ending so. Nodes that take no work (down, drained) are left out: their GPUs do
    not free, and so are the nodes of a job whose GPU slots the read does not give (a record
    without gres detail, or a CPU job: what it holds there is not known), or every node when
    such a job names none."""
    jobs = list(jobs)
    gpu_nodes = [n for n in nodes if n.gpus > 0]
    used = used_slots_by_node(gpu_nodes, jobs)
    held = slots_held_by_jobs(jobs)
    unknown: set[str] = set()
    for job in jobs:
        if job.state not in JOB_STATES_HOLDING_GPUS:
            continue
        if not job.gpu_slots and not job.nodes:
            return {}  # held somewhere: no GPU can be called unheld
        unknown |= set(job.nodes) - set(job.gpu_slots)
    out = {n.name: frozenset(used[n.name] - held.get(n.name, set())) for n in gpu_nodes
           if n.usable and n.name not in unknown}
    return {name: slots for name, slots in out.items() if slots}


def cluster_view(
    nodes: Sequence[NodeInfo],
    jobs: Iterable[JobInfo] = (),
    racks: Mapping[str, str] | None = None,
) -> ClusterView:
    """A `ClusterView` of the GPU nodes: dense GPU ids in node order then slot.

    `free` holds GPUs that are not allocated, on nodes that accept work (not down, drained,
    failing or powered down). Nodes without GPUs are left out.
    """
    gpu_nodes = [n for n in nodes if n.gpus > 0]
    view = ClusterView.from_layout(
        [(n.name, n.gpus) for n in gpu_nodes],
        racks=racks,
        weights={n.name: n.weight for n in gpu_nodes},
    )
    used = used_slots_by_node(gpu_nodes, jobs)
    where = view.gpu_by_location()
    free = [
        where[(n.name, slot)]
        for n in gpu_nodes
        if n.usable
        for slot in range(n.gpus)
        if slot not in used[n.name]
    ]
    return view.with_free(free)


# ---- reading from a live cluster --------------------------------------------------------
class SlurmReader:
    """Reads nodes and jobs through a runner (the only I/O in this module).

    The Slurm release is detected at the first read (`dialects.detect`: `sinfo --version`,
    and `scontrol --json=list` on 23.02+) and kept; pass `dialect` to skip that. A release
    pal-slurm does not read, or an untested one whose JSON does not parse, raises
    `SlurmUnsupported` with the release found and the supported ones.
    """

    def __init__(self, runner: Runner, dialect: Dialect | None = None) -> None:
        self.runner = runner
        self._dialect = dialect

    @property
    def dialect(self) -> Dialect:
        if self._dialect is None:
            self._dialect = detect(self.runner)  # not cached on failure: retried next read
        return self._dialect

    @property
    def release(self) -> str | None:
        """The release found ("Slurm 24.11.5 (data_parser v0.0.42)", with why it is untested
        when it is); None before the first read. No I/O."""
        if self._dialect is None:
            return None
        d = self._dialect
        return d.describe() + (f" - {d.note}" if d.note else "")

    def _parse(self, argv: list[str], parse: Callable[[str, Dialect], Parsed]) -> Parsed:
        dialect = self.dialect
        text = self.runner.run(argv)
        try:
            return parse(text, dialect)
        except SlurmUnsupported:
            raise
        except SlurmError as exc:
            if dialect.tested:
                raise
            raise SlurmUnsupported(
                f"{dialect.describe()} printed JSON pal-slurm cannot read ({exc}); {dialect.note}"
            ) from None

    def nodes(self) -> list[NodeInfo]:
        return self._parse(self.dialect.nodes_argv, parse_sinfo)

    def jobs(self) -> list[JobInfo]:
        return self._parse(self.dialect.jobs_argv, parse_squeue)

    def site(self, nodes: Sequence[NodeInfo], earlier: SiteView | None = None) -> SiteView:
        """Partitions, reservations, blocks, features and free CPUs/memory (a SiteView) for
        `nodes`; `earlier`: a read whose partitions and blocks are kept (then only the
        reservations are read)."""
        return read_site(self.runner, nodes, earlier)

    def cluster_view(
        self, racks: Mapping[str, str] | None = None, with_jobs: bool = True
    ) -> ClusterView:
        nodes = self.nodes()
        return cluster_view(nodes, self.jobs() if with_jobs else (), racks)


def admin_comments(jobs: Iterable[JobInfo]) -> dict[int | str, str]:
    """Each job's admin_comment by every scontrol name that may act on it (its id, its ``A_I``
    name, an array record's elements; a record whose elements do not read: its own names)."""
    out: dict[int | str, str] = {}
    for j in jobs:
        try:
            refs = j.element_refs()
        except SlurmError:
            refs = []
        for ref in (j.job_id, j.ref, *refs):
            out[ref] = j.admin_comment
    return out
