"""The wire protocol between the submit hook (and palctl) and pald. Pure: no I/O.

One JSON object per line (UTF-8, `\\n`-terminated), one request and one reply per exchange:

    -> {"v":1,"op":"place","id":"h1a2b","deadline_ms":1732380000150,"job":{...},
        "pal":{"class":"resnet","gpus":4}}
    <- {"v":1,"ok":true,"decision":"place","reason":"pal","nodes":{"gpu03":[2,3]},
        "gres":"gres:gpu:s2:1,gres:gpu:s3:1","rank":7}
    <- {"v":1,"ok":false,"error":{"code":"bad_field","message":"job.uid: expected an integer"}}

Why so strict: the hook runs inside slurmctld while it holds its locks, and whatever pald
answers is written into a job. Every line is therefore bounded (MAX_LINE_BYTES), versioned
(`v`), and checked field by field; anything malformed becomes one typed `ProtocolError`, never
another exception. Unknown extra fields are ignored so that either side can add optional
fields without a version bump; a new *meaning* needs a new `v`.

`deadline_ms` (optional, epoch milliseconds) is when the hook stops waiting: pald drops a
request it reads after that (a frozen or overloaded pald must not record, reserve or count a
placement the hook never wrote into the job). Old hooks that do not send it still work.

Text fields come from Slurm's C strings, which need not be UTF-8 (a Latin-1 comment). Invalid
bytes are replaced (U+FFFD) rather than rejected, so such a job still gets PAL placement; the
`pal:` spec itself is ASCII by grammar, so its meaning cannot change.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Union

from pal_slurm.model.comment_grammar import DEFAULT_ON_CLASS, CommentSpec
from pal_slurm.model.decision import DecisionKind

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 64 * 1024  # one encoded line, its trailing newline included

OPS = ("place", "health", "reload", "samples")

# One GRES item that the hook may write into tres_per_node: gres:gpu[:type]:count.
_GRES_ITEM_RE = re.compile(r"gres:gpu(?::[A-Za-z0-9_.\-]+)?:[0-9]+")
# A Slurm node name as pald may return it (no host-list brackets: the hook joins names itself).
_NODE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


class ErrorCode(str, Enum):
    """Typed error codes. The first group is what a decoder finds; the second what pald says."""

    TOO_LONG = "too_long"  # line longer than MAX_LINE_BYTES
    NOT_JSON = "not_json"  # not one JSON text (syntax, NaN, embedded newline, too deep)
    NOT_OBJECT = "not_object"  # JSON, but not an object
    BAD_VERSION = "bad_version"  # `v` missing, not an integer, or not ours
    UNKNOWN_OP = "unknown_op"  # `op` missing or not in OPS
    BAD_FIELD = "bad_field"  # a field missing, of the wrong type or out of range
    INTERNAL = "internal"  # pald failed while answering (its log has the details)
    FORBIDDEN = "forbidden"  # peer not allowed (SO_PEERCRED check)
    UNAVAILABLE = "unavailable"  # pald cannot answer now (starting, standby)
    REFUSED = "refused"  # samples not taken: bad MUNGE credential, user, payload or node


class ProtocolError(Exception):
    """Anything malformed on the wire. `code` is an ErrorCode value, `message` says what."""

    def __init__(self, code: ErrorCode | str, message: str):
        known = isinstance(code, str) and code in ErrorCode._value2member_map_
        self.code = ErrorCode(code) if known else code
        self.message = message
        super().__init__(f"{self.code_str}: {message}")

    @property
    def code_str(self) -> str:
        return self.code.value if isinstance(self.code, ErrorCode) else str(self.code)


# ---------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class JobFields:
    """What the hook knows about a job at submit time (from Slurm's job_desc)."""

    uid: int  # submitting user's uid (job_desc.user_id, else submit_uid)
    comment: str  # the raw --comment, whole; pald re-parses it (comment_grammar.verify_spec)
    name: str | None = None  # job name (--job-name)
    user: str | None = None  # user name (job_desc.user_name)
    partition: str | None = None  # requested partition(s); None: the default partition
    gpus_per_node: int | None = None  # GPUs per node parsed from tres_per_node / --gres
    gpus_per_job: int | None = None  # GPUs per job parsed from tres_per_job / --gpus
    tres_per_node: str | None = None  # raw tres_per_node, e.g. "gres:gpu:2"
    tres_per_job: str | None = None  # raw tres_per_job, e.g. "gres:gpu:8"
    tres_per_task: str | None = None  # raw tres_per_task (--gpus-per-task), pald may pass
    tres_per_socket: str | None = None  # raw tres_per_socket (--gpus-per-socket)
    min_nodes: int | None = None  # -N min (None: not given, Slurm's NO_VAL)
    max_nodes: int | None = None  # -N max (None: not given)
    # where the job may run (pal_slurm/policy/eligibility.py); None: not given
    usable_partitions: tuple[str, ...] | None = None  # the hook's part_list: partitions Slurm lets this user use
    features: str | None = None  # --constraint
    exc_nodes: str | None = None  # --exclude (hostlist)
    req_nodes: str | None = None  # --nodelist (hostlist)
    reservation: str | None = None  # --reservation
    account: str | None = None  # --account
    qos: str | None = None  # --qos
    shared: int | None = None  # 0: --exclusive (Slurm's job_desc.shared)
    time_limit: int | None = None  # --time in minutes
    cpus_per_task: int | None = None
    ntasks_per_node: int | None = None
    num_tasks: int | None = None
    pn_min_cpus: int | None = None  # --mincpus
    min_cpus: int | None = None  # CPUs in all
    cpus_per_tres: str | None = None  # --cpus-per-gpu: "gres:gpu:2"
    min_mem_per_node: int | None = None  # --mem, MB
    min_mem_per_cpu: int | None = None  # --mem-per-cpu, MB
    mem_per_tres: str | None = None  # --mem-per-gpu: "gres:gpu:2048" (MB)
    # shapes PAL passes on purpose (pal_slurm/intake/refusals.py)
    array_inx: str | None = None  # --array
    het_job_offset: int | None = None  # set for a heterogeneous job's components
    dependency: str | None = None  # --dependency
    begin_time: int | None = None  # --begin, epoch seconds (0: now)
    priority: int | None = None  # 0: --hold
    ntasks_per_tres: int | None = None  # --ntasks-per-gpu

    def __post_init__(self) -> None:
        _check_int("job.uid", self.uid, minimum=0)
        _check_str("job.comment", self.comment)
        for name in STR_FIELDS:
            _check_opt_str(f"job.{name}", getattr(self, name))
        for name in INT_FIELDS:
            _check_opt_int(f"job.{name}", getattr(self, name), minimum=0)
        if self.usable_partitions is not None:
            if not isinstance(self.usable_partitions, (list, tuple)):
                raise ProtocolError(ErrorCode.BAD_FIELD, "job.usable_partitions: expected an array")
            for item in self.usable_partitions:
                _check_str("job.usable_partitions[]", item)
            object.__setattr__(self, "usable_partitions", tuple(self.usable_partitions))


STR_FIELDS = ("name", "user", "partition", "tres_per_node", "tres_per_job", "tres_per_task",
              "tres_per_socket", "features", "exc_nodes", "req_nodes", "reservation", "account",
              "qos", "cpus_per_tres", "mem_per_tres", "array_inx", "dependency")
INT_FIELDS = ("gpus_per_node", "gpus_per_job", "min_nodes", "max_nodes", "shared", "time_limit",
              "cpus_per_task", "ntasks_per_node", "num_tasks", "pn_min_cpus", "min_cpus",
              "min_mem_per_node", "min_mem_per_cpu", "het_job_offset", "begin_time", "priority",
              "ntasks_per_tres")
OPTIONAL_JOB_FIELDS = STR_FIELDS + INT_FIELDS + ("usable_partitions",)


@dataclass(frozen=True)
class PlaceRequest:
    """Where should this new job go? Sent by the hook for every job with a `pal:` comment."""

    job: JobFields  # the job as Slurm describes it
    pal: CommentSpec  # the hook's parse of the comment's pal: spec
    request_id: str | None = None  # hook-made id; also in admin_comment, joins logs and jobs
    deadline_ms: int | None = None  # epoch ms after which the hook no longer waits (None: unknown)

    op = "place"

    def __post_init__(self) -> None:
        if not isinstance(self.job, JobFields):
            raise ProtocolError(ErrorCode.BAD_FIELD, "job: expected JobFields")
        if not isinstance(self.pal, CommentSpec):
            raise ProtocolError(ErrorCode.BAD_FIELD, "pal: expected CommentSpec")
        _check_spec(self.pal)
        _check_opt_str("id", self.request_id)
        _check_opt_int("deadline_ms", self.deadline_ms, minimum=0)

    def expired(self, now_s: float) -> bool:
        """Has the hook stopped waiting for the answer (at wall-clock time `now_s`)?"""
        return self.deadline_ms is not None and now_s * 1000.0 > self.deadline_ms


@dataclass(frozen=True)
class HealthRequest:
    """Is pald alive, and which ranking does it serve? (palctl status, pal-failsafe)."""

    op = "health"


@dataclass(frozen=True)
class ReloadRequest:
    """Re-read configuration and the latest ranking snapshot (palctl after `rank`)."""

    op = "reload"


@dataclass(frozen=True)
class SamplesRequest:
    """A compute node's batch of samples: one MUNGE credential whose payload is the batch
    (pal_slurm.model.sample_batch; checked by pald's sample intake)."""

    credential: str

    op = "samples"

    def __post_init__(self) -> None:
        _check_str("credential", self.credential)
        if not self.credential:
            raise ProtocolError(ErrorCode.BAD_FIELD, "credential: empty")


Request = Union[PlaceRequest, HealthRequest, ReloadRequest, SamplesRequest]


# ------------------------------------------------------------------------------------ replies


@dataclass(frozen=True)
class PlaceReply:
    """pald's submit-time answer. `nodes`/`gres` only for PLACE."""

    decision: DecisionKind  # place now / defer (hook holds the job) / pass (job untouched)
    reason: str = ""  # short machine-friendly why, goes into admin_comment for pass
    nodes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # node -> GPU slots
    gres: str | None = None  # per-slot typed GRES for tres_per_node, "gres:gpu:s2:1,..."
    rank: int | None = None  # ranking snapshot version used (admin_comment rank=v<N>)
    perf_class: str | None = None  # class pald resolved (after unknown -> default)
    warning: str | None = None  # user-visible text the hook relays with slurm.log_user
    partition: str | None = None  # the one partition to write (a job that asked for several)
    # pald judged the job's --constraint/--reservation/--nodelist against its Slurm view; the
    # hook places such jobs only then (it cannot see node features or reservations itself)
    site_checked: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.decision, DecisionKind):
            known = isinstance(self.decision, str) and (
                self.decision in DecisionKind._value2member_map_)
            if not known:
                raise ProtocolError(
                    ErrorCode.BAD_FIELD, f"decision: {self.decision!r} not place, defer or pass"
                )
            object.__setattr__(self, "decision", DecisionKind(self.decision))
        _check_str("reason", self.reason)
        if not isinstance(self.nodes, Mapping):
            raise ProtocolError(ErrorCode.BAD_FIELD, "nodes: expected an object")
        for node, slots in self.nodes.items():
            if not isinstance(node, str) or not _NODE_NAME_RE.fullmatch(node):
                raise ProtocolError(ErrorCode.BAD_FIELD, f"nodes: bad node name {node!r}")
            if not isinstance(slots, (tuple, list)) or not slots:
                raise ProtocolError(ErrorCode.BAD_FIELD, f"nodes.{node}: expected GPU slots")
            for slot in slots:
                _check_int(f"nodes.{node}[]", slot, minimum=0)
        object.__setattr__(self, "nodes", {n: tuple(s) for n, s in self.nodes.items()})
        _check_opt_str("gres", self.gres)
        if self.gres is not None and not all(
            _GRES_ITEM_RE.fullmatch(item) for item in self.gres.split(",")
        ):
            raise ProtocolError(ErrorCode.BAD_FIELD, f"gres: {self.gres!r} is not gres:gpu[:type]:n,...")
        _check_opt_int("rank", self.rank, minimum=0)
        _check_opt_str("class", self.perf_class)
        _check_opt_str("warning", self.warning)
        if not isinstance(self.site_checked, bool):
            raise ProtocolError(ErrorCode.BAD_FIELD, f"site_checked: expected a boolean, got {_kind(self.site_checked)}")
        _check_opt_str("partition", self.partition)
        if self.partition is not None and not _NODE_NAME_RE.fullmatch(self.partition):
            raise ProtocolError(ErrorCode.BAD_FIELD, f"partition: bad name {self.partition!r}")
        # gres may be absent on place: the job keeps its own GPU request and only its nodes are
        # pinned (a --gpus=N job spread unevenly over nodes cannot be bound slot by slot).
        if self.decision is DecisionKind.PLACE and not self.nodes:
            raise ProtocolError(ErrorCode.BAD_FIELD, "decision place needs nodes")
        if self.decision is not DecisionKind.PLACE and (self.nodes or self.gres or self.partition):
            raise ProtocolError(ErrorCode.BAD_FIELD, "nodes and gres only go with decision place")


@dataclass(frozen=True)
class HealthReply:
    """pald's state for operators and the failsafe."""

    status: str  # "ok" or "degraded" (e.g. database down, serving from memory)
    rank: int | None = None  # ranking snapshot version in memory
    details: Mapping[str, Any] = field(default_factory=dict)  # free-form JSON (uptime, counts...)

    def __post_init__(self) -> None:
        _check_str("status", self.status)
        _check_opt_int("rank", self.rank, minimum=0)
        if not isinstance(self.details, Mapping):
            raise ProtocolError(ErrorCode.BAD_FIELD, "details: expected an object")


@dataclass(frozen=True)
class ReloadReply:
    """What a reload changed."""

    rank: int | None = None  # ranking snapshot version now served
    message: str = ""  # one line for the operator

    def __post_init__(self) -> None:
        _check_opt_int("rank", self.rank, minimum=0)
        _check_str("message", self.message)


@dataclass(frozen=True)
class ErrorReply:
    """pald refused or failed the request; `code` is usually an ErrorCode value."""

    code: str  # machine-readable, e.g. "bad_field"
    message: str  # one line for a human

    def __post_init__(self) -> None:
        if isinstance(self.code, ErrorCode):
            object.__setattr__(self, "code", self.code.value)
        _check_str("error.code", self.code)
        if not self.code:
            raise ProtocolError(ErrorCode.BAD_FIELD, "error.code: empty")
        _check_str("error.message", self.message)

    @classmethod
    def from_error(cls, err: ProtocolError) -> "ErrorReply":
        return cls(err.code_str, err.message)


@dataclass(frozen=True)
class SamplesReply:
    """The batch is pald's: queued for the store (`stored` samples), or `duplicate` (a batch
    pald took before; nothing stored again)."""

    stored: int = 0
    duplicate: bool = False

    def __post_init__(self) -> None:
        _check_int("stored", self.stored, minimum=0)
        if not isinstance(self.duplicate, bool):
            raise ProtocolError(ErrorCode.BAD_FIELD, f"duplicate: expected a boolean, got {_kind(self.duplicate)}")


Reply = Union[PlaceReply, HealthReply, ReloadReply, SamplesReply, ErrorReply]


# ------------------------------------------------------------------------------- field checks


def _check_int(name: str, value: Any, minimum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{name}: expected an integer, got {_kind(value)}")
    if minimum is not None and value < minimum:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{name}: {value} is below {minimum}")
    if value > 2**53:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{name}: {value} is too large")


def _check_opt_int(name: str, value: Any, minimum: int | None = None) -> None:
    if value is not None:
        _check_int(name, value, minimum)


def _check_str(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{name}: expected a string, got {_kind(value)}")


def _check_opt_str(name: str, value: Any) -> None:
    if value is not None:
        _check_str(name, value)


def _check_spec(spec: CommentSpec) -> None:
    _check_str("pal.class", spec.perf_class)
    _check_opt_int("pal.gpus", spec.gpus, minimum=1)
    _check_opt_str("pal.mode", spec.mode)
    _check_opt_str("pal.net", spec.net)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null", float: "a number with a fraction", int: "an integer"}.get(
        type(value), type(value).__name__)


# ---------------------------------------------------------------------------------- framing


def _line_to_object(line: bytes | str) -> dict[str, Any]:
    """Bytes or text of one line -> the JSON object, or ProtocolError. Never anything else."""
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
    if len(raw) > MAX_LINE_BYTES:
        raise ProtocolError(ErrorCode.TOO_LONG, f"line of {len(raw)} bytes > {MAX_LINE_BYTES}")
    if raw.endswith(b"\n"):
        raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
    if b"\n" in raw:
        raise ProtocolError(ErrorCode.NOT_JSON, "more than one line")
    text = raw.decode("utf-8", "replace")
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                         object_pairs_hook=_unique_keys)
    except ProtocolError:
        raise
    except RecursionError:
        raise ProtocolError(ErrorCode.NOT_JSON, "JSON nested too deep") from None
    except ValueError as err:  # JSONDecodeError, and int() digit-limit errors
        raise ProtocolError(ErrorCode.NOT_JSON, f"not JSON: {err}") from None
    if _too_deep(obj):  # Python 3.13's parser no longer stops at a few thousand levels
        raise ProtocolError(ErrorCode.NOT_JSON, "JSON nested too deep")
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.NOT_OBJECT, f"expected a JSON object, got {_kind(obj)}")
    version = obj.get("v")
    if version is None:
        raise ProtocolError(ErrorCode.BAD_VERSION, "missing protocol version 'v'")
    if isinstance(version, bool) or not isinstance(version, int) or version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.BAD_VERSION,
            f"unsupported protocol version {version!r} (this side speaks {PROTOCOL_VERSION})",
        )
    return obj


MAX_DEPTH = 64  # messages nest 3 levels; this bounds what a decoder will walk, on any Python


def _too_deep(obj: Any) -> bool:
    """Nested deeper than MAX_DEPTH (iterative: no recursion on hostile input)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return False


def _reject_constant(name: str) -> Any:
    raise ProtocolError(ErrorCode.NOT_JSON, f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ProtocolError(ErrorCode.NOT_JSON, f"number {text[:20]} out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ProtocolError(ErrorCode.NOT_JSON, f"duplicate key {key!r}")
        out[key] = value
    return out


def _object_to_line(obj: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"cannot encode: {err}") from None
    line = text.encode("ascii") + b"\n"
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(ErrorCode.TOO_LONG, f"line of {len(line)} bytes > {MAX_LINE_BYTES}")
    return line


def _field(obj: Mapping[str, Any], key: str, where: str = "") -> Any:
    if key not in obj:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{where}{key}: missing")
    return obj[key]


def _object(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = _field(obj, key)
    if not isinstance(value, dict):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{key}: expected an object, got {_kind(value)}")
    return value


# ---------------------------------------------------------------------------------- requests


def encode_request(request: Request) -> bytes:
    """A request as one wire line (bytes, newline included)."""
    obj: dict[str, Any] = {"v": PROTOCOL_VERSION, "op": request.op}
    if isinstance(request, PlaceRequest):
        if request.request_id is not None:
            obj["id"] = request.request_id
        if request.deadline_ms is not None:
            obj["deadline_ms"] = request.deadline_ms
        job = request.job
        obj["job"] = {k: v for k, v in job.__dict__.items() if v is not None}
        obj["pal"] = request.pal.to_wire()
    elif isinstance(request, SamplesRequest):
        obj["credential"] = request.credential
    return _object_to_line(obj)


def decode_request(line: bytes | str) -> Request:
    """One wire line -> a request dataclass, or ProtocolError."""
    obj = _line_to_object(line)
    op = obj.get("op")
    if op not in OPS:
        raise ProtocolError(ErrorCode.UNKNOWN_OP, f"unknown op {op!r} (known: {', '.join(OPS)})")
    if op == "health":
        return HealthRequest()
    if op == "reload":
        return ReloadRequest()
    if op == "samples":
        return SamplesRequest(credential=_field(obj, "credential"))
    job = _object(obj, "job")
    pal = _object(obj, "pal")
    job_fields = JobFields(
        uid=_field(job, "uid", "job."),
        comment=_field(job, "comment", "job."),
        **{k: job.get(k) for k in OPTIONAL_JOB_FIELDS},
    )
    spec = CommentSpec(  # an empty `pal`: a job of a default-on partition (DEFAULT_ON_CLASS)
        perf_class=DEFAULT_ON_CLASS if not pal else _field(pal, "class", "pal."),
        gpus=pal.get("gpus"),
        mode=pal.get("mode"),
        net=pal.get("net"),
    )
    return PlaceRequest(job=job_fields, pal=spec, request_id=obj.get("id"),
                        deadline_ms=obj.get("deadline_ms"))


# ------------------------------------------------------------------------------------ replies


def encode_reply(reply: Reply) -> bytes:
    """A reply as one wire line (bytes, newline included)."""
    obj: dict[str, Any] = {"v": PROTOCOL_VERSION}
    if isinstance(reply, ErrorReply):
        obj.update(ok=False, error={"code": reply.code, "message": reply.message})
        return _object_to_line(obj)
    obj["ok"] = True
    if isinstance(reply, PlaceReply):
        obj.update(decision=reply.decision.value, reason=reply.reason)
        if reply.nodes:
            obj["nodes"] = {n: list(s) for n, s in reply.nodes.items()}
        for key, value in (("gres", reply.gres), ("rank", reply.rank),
                           ("class", reply.perf_class), ("warning", reply.warning),
                           ("partition", reply.partition)):
            if value is not None:
                obj[key] = value
        if reply.site_checked:
            obj["site_checked"] = True
    elif isinstance(reply, HealthReply):
        obj.update(status=reply.status, details=dict(reply.details))
        if reply.rank is not None:
            obj["rank"] = reply.rank
    elif isinstance(reply, SamplesReply):
        obj.update(stored=reply.stored, duplicate=reply.duplicate)
    elif isinstance(reply, ReloadReply):
        obj["message"] = reply.message
        if reply.rank is not None:
            obj["rank"] = reply.rank
    else:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"not a reply: {type(reply).__name__}")
    return _object_to_line(obj)


def decode_reply(line: bytes | str, op: str) -> Reply:
    """One wire line answering a request of `op` -> a reply dataclass, or ProtocolError."""
    if op not in OPS:
        raise ProtocolError(ErrorCode.UNKNOWN_OP, f"unknown op {op!r}")
    obj = _line_to_object(line)
    ok = _field(obj, "ok")
    if not isinstance(ok, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"ok: expected a boolean, got {_kind(ok)}")
    if not ok:
        error = _object(obj, "error")
        return ErrorReply(code=_field(error, "code", "error."),
                          message=_field(error, "message", "error."))
    if op == "place":
        return PlaceReply(
            decision=_field(obj, "decision"),
            reason=obj.get("reason", ""),
            nodes=obj.get("nodes", {}),
            gres=obj.get("gres"),
            rank=obj.get("rank"),
            perf_class=obj.get("class"),
            warning=obj.get("warning"),
            partition=obj.get("partition"),
            site_checked=obj.get("site_checked", False),
        )
    if op == "health":
        return HealthReply(status=_field(obj, "status"), rank=obj.get("rank"),
                           details=obj.get("details", {}))
    if op == "samples":
        return SamplesReply(stored=_field(obj, "stored"), duplicate=obj.get("duplicate", False))
    return ReloadReply(rank=obj.get("rank"), message=obj.get("message", ""))


__all__ = [
    "MAX_LINE_BYTES", "OPS", "PROTOCOL_VERSION", "ErrorCode", "ErrorReply", "HealthReply",
    "HealthRequest", "JobFields", "PlaceReply", "PlaceRequest", "ProtocolError", "ReloadReply",
    "ReloadRequest", "Reply", "Request", "SamplesReply", "SamplesRequest", "decode_reply", "decode_request", "encode_reply",
    "encode_request",
]
