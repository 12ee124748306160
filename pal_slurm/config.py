"""One typed configuration for every pal-slurm program (pald, palctl, prolog/epilog, failsafe).

Read once at start-up, in this order, later wins:

1. built-in defaults (the dataclasses below);
2. a TOML file: the path given, else `$PAL_CONFIG`, else `/etc/pal/pal.toml` when it exists
   (a missing *default* file means "all defaults"; a missing *named* file is an error);
3. environment overrides: `PAL_<SECTION>_<KEY>` for every key (e.g. `PAL_DAEMON_CYCLE_S=0.5`),
   plus the short aliases in `ENV_ALIASES` (`PAL_DB_URL`, `PAL_SOCKET`).

Why so strict: a typo in `/etc/pal/pal.toml` that silently falls back to a default would make
pald place jobs with a policy the admin did not choose. Unknown sections, unknown keys, wrong
types and out-of-range values all raise `ConfigError` naming the key and where it came from.

No defaults depend on who runs the program: the SQLite path is `/var/lib/pal/pal.db` for root
and for users alike; set `[store] url` or `PAL_DB_URL` to use another one.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping

from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.input_files import InputError
from pal_slurm.model.class_rules import parse_class_rules
from pal_slurm.model.modes import MODES, DefaultOn, ModeError, PartitionModes, parse_partition_modes
from pal_slurm.model.site_rules import NowPolicy, SiteRules

DEFAULT_CONFIG_PATH = "/etc/pal/pal.toml"

# Short environment names kept for convenience: env var -> (section, key).
ENV_ALIASES: Mapping[str, tuple[str, str]] = {
    "PAL_DB_URL": ("store", "url"),
    "PAL_SOCKET": ("daemon", "socket"),
}


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and its source."""


@dataclass(frozen=True)
class StoreConfig:
    """Where rankings, samples, decisions and held jobs live."""

    url: str = "sqlite:////var/lib/pal/pal.db"  # SQLAlchemy URL: sqlite:////path or postgresql://
    # pald deletes decisions, samples and finished held-job rows older than this (0: never);
    # samples inside [profiling] window_s and the newest keep_samples per GPU and class stay
    retention_s: float = 7776000.0  # 90 days
    keep_samples: int = 20  # newest samples kept per GPU and class whatever their age
    prune_every_s: float = 3600.0  # how often pald prunes (the leader only; off the cycle)


@dataclass(frozen=True)
class DaemonConfig:
    """pald: the socket the submit hook talks to and its scheduling cycle."""

    socket: str = "/run/pal/pald.sock"  # unix socket, mode 0600, owned by slurm_user (0660 with socket_group)
    socket_group: str = ""  # pald not root: the socket's group (SlurmUser's), mode 0660; "" keeps 0600
    cycle_s: float = 1.0  # seconds between scheduling cycles (deferred jobs, state sync), at its epoch multiples
    hook_timeout_ms: int = 150  # the submit hook's hard timeout when asking pald
    slurm_user: str = "slurm"  # SlurmUser: the only non-root peer allowed on the socket
    heartbeat_stale_s: float = 30.0  # pal-failsafe releases held jobs after this much silence
    heartbeat_file: str = "/run/pal/pald.heartbeat"  # touched every cycle; pal-failsafe reads its age
    default_mode: str = "auto"  # jobs without mode=: auto (place if it fits, else defer) | now | defer
    # PAL per partition (model/modes.py): off | shadow (decide and record, place nothing) | on;
    # `palctl mode` changes either at run time (the store's switches win)
    mode: str = "on"  # every partition not in partition_modes
    partition_modes: str = ""  # "gpu=on, debug=off"
    # partitions where every GPU job is PAL's without pal:class= ("gpu,a100"; "*": all; the hook's
    # PAL_DEFAULT_ON must name the same)
    default_on: str = ""
    # the site's rules (model/site_rules.py, first match): a job's class ("name:bert*=B;
    # account:vision=A; partition:big=C") and network sensitivity ("name:gpt*=high"); with
    # rules_override they win over the user's class= / net=, else they fill in what is not given
    class_rules: str = ""
    net_rules: str = ""
    rules_override: bool = False
    now_allowed: str = "*"  # who may use mode=now: "*" everyone, "" no one, "account:a, qos:b"
    # each Slurm read's state is frozen out of Python's collector (daemon.memory: its pauses set
    # place's p99 at a large site); a full collection every this many seconds reclaims cycles;
    # 0: Python's own collection
    gc_full_every_s: float = 600.0

    def modes(self) -> PartitionModes:
        """The file's modes (checked at load: a bad item never gets this far)."""
        return PartitionModes(self.mode, parse_partition_modes(self.partition_modes))

    def default_on_jobs(self) -> DefaultOn:
        """The default-on partitions."""
        return DefaultOn.parse(self.default_on)

    def site_rules(self) -> SiteRules:
        """The site's class, net and mode=now rules (checked at load)."""
        return SiteRules.parse(self.class_rules, self.net_rules, self.rules_override, self.now_allowed)
    backfill: bool = False  # deferred jobs: let smaller jobs pass a held job that does not fit
    reservation_ttl_s: float = 30.0  # GPUs promised at submit stay reserved until Slurm shows them busy
    submit_grace_s: float = 2.0  # a promise whose job a read started this long after the answer does not show is dropped
    user_reservations_max: int = 8  # placements per user not yet seen in Slurm; over it: defer (reason user_in_flight)
    release_start_s: float = 60.0  # a job pald released that has not started this long after is re-placed once, then unpinned
    leader_grace_s: float = 60.0  # active/standby: lead on this long with the lock unreachable (docs/decisions/leadership.md)


@dataclass(frozen=True)
class PolicyConfig:
    """Which policy places jobs, and its knobs."""

    placement: str = "pal-fit"  # placement policy name (pal_slurm.policy registry)
    queue: str = "fifo"  # queue order for deferred jobs: fifo | las | srtf | srtf-aged | slurm
    locality_penalty: float = 1.7  # slowdown factor for a job spanning more than one node
    default_class: str = "A"  # class for unknown applications (A = most sensitive)
    binning: str = "optimal"  # ranking binning: optimal (exact 1-D k-means) | artifact (PAL's)
    rack_wait_s: float = 600.0  # multi-node deferred jobs wait this long (x sensitivity) for one rack
    # backfilling placements (pal-net, pal-fit): a job that cannot start holds a reservation once
    # it has waited this long; until then later jobs pass it freely
    reserve_after_s: float = 3600.0
    # placements with a starvation bound (pal-fit): no wait they add (for a tighter tier, faster
    # bins, a consolidated placement) plans a job's start later than this long after it began
    # waiting, and a job that waited longer is placed as stock Slurm would (docs/policies.md)
    starvation_bound_s: float = 4 * 3600.0


@dataclass(frozen=True)
class ProfilingConfig:
    """Benchmarks taken by the prolog/epilog and `palctl profile-nodes`."""

    backend: str = "auto"  # auto | nvml | kernel | replay
    timeout_s: float = 5.0  # hard bound on one prolog/epilog benchmark
    spool_dir: str = "/var/spool/pal"  # samples queued here while the store is unreachable
    duration_s: float = 2.0  # measuring time of one benchmark call (all GPUs of a job)
    window_s: float = 604800.0  # palctl rank: median over samples of this window (7 days)
    replay_seed: int = 0  # replay backend: which dataset GPU each (node, slot) replays
    replay_slowdown: str = ""  # replay backend: "node:slot=factor,..." emulates degraded GPUs
    replay_cluster: str = ""  # replay backend: "gpu[01-16]x4" replays the event simulator's draw
    max_load_per_cpu: float = 0.8  # 1-min load per CPU above which a sample is flagged busy
    # the prolog's budget (pal_slurm.bench.due): a GPU is due for a prolog sample when its last
    # one is older than this many hours (0: every job is measured)
    prolog_every_h: float = 24.0
    prolog_pal_only: bool = False  # true: only jobs whose comment carries pal: are measured
    prolog_max_delay_s: float = 3.0  # the most a due measurement may add to a job's start


@dataclass(frozen=True)
class SamplesConfig:
    """How compute nodes' samples (prolog, epilog, `profile-nodes --local`) reach the store."""

    # store: the node opens [store] url itself (one host, or nodes with database access);
    # pald: the node hands them to pald signed with MUNGE and needs no store URL (docs/profiling.md)
    send: str = "store"
    pald: str = ""  # send = "pald": host:port of pald's samples listener
    listen: str = ""  # pald: host:port on which it takes nodes' samples ("" = off)
    munge_socket: str = ""  # munged's socket for munge/unmunge ("" = munge's default)
    slurmd_user: str = "root"  # pald: credentials of this user (SlurmdUser) and of root are accepted
    timeout_s: float = 2.0  # a node's wait for pald's answer to one batch


@dataclass(frozen=True)
class SlurmConfig:
    """How to reach Slurm's commands."""

    conf: str | None = None  # exported as SLURM_CONF to Slurm commands when set
    bin_dir: str | None = None  # directory of sinfo/squeue/scontrol; None = search $PATH
    topology_conf: str | None = None  # Slurm topology.conf: nodes -> leaf switches (tree) or blocks (block)
    # how often pald reads Slurm (pal_slurm/daemon/read_plan.py, docs/operations.md): the nodes
    # every nodes_every_s; the jobs on events, at most every read_floor_s and at least every
    # jobs_every_s; partitions and reservations every site_every_s and when the node list changes
    read_floor_s: float = 1.0
    jobs_every_s: float = 30.0
    site_every_s: float = 60.0
    nodes_every_s: float = 1.0


@dataclass(frozen=True)
class MetricsConfig:
    """pald's Prometheus endpoint (GET /metrics over HTTP)."""

    listen: str = "127.0.0.1:9464"  # host:port to serve /metrics on; "" = off


@dataclass(frozen=True)
class DriftConfig:
    """What counts as a GPU that got slower between two rankings, and what `palctl rank` does."""

    threshold: float = 0.05  # a GPU whose class score got this much worse (0.05 = 5%) has drifted
    action: str = "none"  # none | comment (node Comment=) | drain (State=DRAIN Reason=)


@dataclass(frozen=True)
class SimulateConfig:
    """`palctl simulate` / `palctl whatif` on the site's own accounting."""

    # jobs without a `pal:class=` comment: "FIELD:GLOB=CLASS; ..." with FIELD name|account|partition,
    # first match wins (e.g. "name:bert*=B; account:vision=A"); unmatched jobs are simulated unclassed
    class_rules: str = ""


@dataclass(frozen=True)
class Config:
    """The whole configuration; `source` is the file it was read from (None: defaults only)."""

    store: StoreConfig = field(default_factory=StoreConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    profiling: ProfilingConfig = field(default_factory=ProfilingConfig)
    samples: SamplesConfig = field(default_factory=SamplesConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    simulate: SimulateConfig = field(default_factory=SimulateConfig)
    source: str | None = None


SECTIONS: Mapping[str, type] = {
    "store": StoreConfig,
    "daemon": DaemonConfig,
    "policy": PolicyConfig,
    "profiling": ProfilingConfig,
    "samples": SamplesConfig,
    "slurm": SlurmConfig,
    "metrics": MetricsConfig,
    "drift": DriftConfig,
    "simulate": SimulateConfig,
}

# Values restricted to a set (section, key) -> allowed.
CHOICES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("daemon", "default_mode"): ("auto", "now", "defer"),
    ("daemon", "mode"): MODES,
    ("policy", "default_class"): CLASS_ORDER,
    ("drift", "action"): ("none", "comment", "drain"),
    ("samples", "send"): ("store", "pald"),
}

# Numbers that must be strictly positive.
POSITIVE: frozenset[tuple[str, str]] = frozenset(
    {
        ("daemon", "cycle_s"),
        ("daemon", "hook_timeout_ms"),
        ("daemon", "heartbeat_stale_s"),
        ("daemon", "reservation_ttl_s"),
        ("daemon", "user_reservations_max"),
        ("daemon", "release_start_s"),
        ("daemon", "leader_grace_s"),
        ("policy", "locality_penalty"),
        ("profiling", "timeout_s"),
        ("profiling", "window_s"),
        ("profiling", "max_load_per_cpu"),
        ("profiling", "prolog_max_delay_s"),
        ("drift", "threshold"),
        ("store", "prune_every_s"),
        ("samples", "timeout_s"),
        ("slurm", "read_floor_s"),
        ("slurm", "jobs_every_s"),
        ("slurm", "site_every_s"),
        ("slurm", "nodes_every_s"),
    }
)

# Durations where 0 means "at once" (a negative one means nothing).
NON_NEGATIVE: frozenset[tuple[str, str]] = frozenset(
    {("policy", "rack_wait_s"), ("policy", "reserve_after_s"), ("policy", "starvation_bound_s"), ("store", "retention_s"),
     ("store", "keep_samples"), ("daemon", "submit_grace_s"), ("profiling", "prolog_every_h")}
)

# Strings that must not be empty.
NON_EMPTY: frozenset[tuple[str, str]] = frozenset(
    {
        ("store", "url"),
        ("daemon", "socket"),
        ("daemon", "slurm_user"),
        ("policy", "placement"),
        ("profiling", "spool_dir"),
        ("samples", "slurmd_user"),
    }
)


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _base_type(hint: Any) -> tuple[type, bool]:
    """(scalar type, optional?) for `str`, `float`, `int`, `bool`, `X | None`."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Check a TOML value against a field type (int is accepted where a float is wanted)."""
    base, optional = _base_type(hint)
    if value is None and optional:
        return None
    if base is bool:
        if isinstance(value, bool):
            return value
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif base is str:
        if isinstance(value, str):
            return value
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}[base]
    raise ConfigError(f"{where}: expected {kind}, got {value!r} ({type(value).__name__})")


def _parse_env(raw: str, hint: Any, where: str) -> Any:
    """Environment values are text: parse them into the field's type."""
    base, optional = _base_type(hint)
    if optional and raw == "":
        return None
    try:
        if base is bool:
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if base is int:
            return int(raw.strip())
        if base is float:
            return float(raw.strip())
    except ValueError:
        kind = {bool: "a boolean", int: "an integer", float: "a number"}[base]
        raise ConfigError(f"{where}: expected {kind}, got {raw!r}") from None
    return raw


# Values restricted to what a registry holds (registry_choices).
REGISTERED: frozenset[tuple[str, str]] = frozenset(
    {("policy", "placement"), ("policy", "queue"), ("policy", "binning"), ("profiling", "backend")}
)


def registry_choices() -> dict[tuple[str, str], tuple[str, ...]]:
    """Allowed values that come from the registries (placements with their aliases, queue
    orders, binning methods, benchmark backends): whatever is registered is configurable.
    Imported here, not at module load, so reading a config (the prolog does) does not load the
    policies."""
    from pal_slurm.bench.base import BACKENDS
    from pal_slurm.policy.registry import ALIASES, PLACEMENTS, QUEUE_ORDERS
    from pal_slurm.ranking.binning import METHODS

    return {("policy", "placement"): (*sorted(PLACEMENTS), *sorted(ALIASES)),
            ("policy", "queue"): tuple(QUEUE_ORDERS),
            ("policy", "binning"): METHODS,
            ("profiling", "backend"): BACKENDS}


def _check_value(section: str, key: str, value: Any, where: str, registries: bool = True) -> None:
    if value is None:
        return
    allowed = CHOICES.get((section, key))
    if allowed is None and registries and (section, key) in REGISTERED:
        allowed = registry_choices()[(section, key)]
    if allowed is not None and value not in allowed:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    if (section, key) in POSITIVE and not value > 0:
        raise ConfigError(f"{where}: must be greater than 0, got {value!r}")
    if (section, key) in NON_NEGATIVE and not value >= 0:
        raise ConfigError(f"{where}: must be 0 or more, got {value!r}")
    if (section, key) in NON_EMPTY and not str(value).strip():
        raise ConfigError(f"{where}: must not be empty")
    if (section, key) == ("profiling", "replay_slowdown") and value:
        try:
            parse_slowdowns(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if (section, key) == ("profiling", "replay_cluster") and value:
        try:
            parse_replay_cluster(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if (section, key) == ("daemon", "partition_modes") and value:
        try:
            parse_partition_modes(value, where)
        except ModeError as exc:
            raise ConfigError(str(exc)) from None
    if (section, key) in (("daemon", "class_rules"), ("daemon", "net_rules"), ("simulate", "class_rules")) and value:
        try:
            parse_class_rules(value, where)
        except InputError as exc:
            raise ConfigError(str(exc)) from None
    if (section, key) == ("daemon", "now_allowed"):
        try:
            NowPolicy.parse(value, where)
        except InputError as exc:
            raise ConfigError(str(exc)) from None
    if (section, key) in (("metrics", "listen"), ("samples", "listen"), ("samples", "pald")) and value:
        try:
            parse_listen(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def parse_replay_cluster(text: str) -> tuple[tuple[str, ...], int] | None:
    """`gpu[01-16]x4` -> (nodes in cluster order, GPUs per node); '' -> None; ValueError."""
    text = (text or "").strip()
    if not text:
        return None
    from pal_slurm.intake.hostlist import expand

    nodes, sep, per_node = text.rpartition("x")
    if not sep or not per_node.isdigit() or int(per_node) <= 0 or not nodes:
        raise ValueError(f"replay cluster {text!r}: expected NODELISTxGPUS, e.g. gpu[01-16]x4")
    names = tuple(expand(nodes))
    if not names or len(set(names)) != len(names):
        raise ValueError(f"replay cluster {text!r}: no nodes or repeated nodes")
    return names, int(per_node)


def parse_slowdowns(text: str) -> dict[tuple[str, int], float]:
    """'gpu02:1=1.6,gpu03:0=2' -> {('gpu02', 1): 1.6, ('gpu03', 0): 2.0}; '' -> {}."""
    out: dict[tuple[str, int], float] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        where, sep, factor = item.partition("=")
        node, sep2, slot = where.rpartition(":")
        try:
            value = float(factor)
            if not (sep and sep2 and node and slot.isdigit()) or not 0 < value < 1000:
                raise ValueError
        except ValueError:
            raise ValueError(f"{item!r} is not node:slot=factor (e.g. gpu02:1=1.5, factor > 0)") from None
        out[(node, int(slot))] = value
    return out


def parse_listen(text: str) -> tuple[str, int] | None:
    """'127.0.0.1:9464' / '[::1]:9464' / ':9464' -> (address, port); '' -> None (off)."""
    text = text.strip()
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port (e.g. 127.0.0.1:9464; empty = off)")
    return host.strip("[]") or "0.0.0.0", int(port)


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except PermissionError:
        raise ConfigError(f"{path}: permission denied reading the configuration") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _resolve_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> str | None:
    """The file to read, or None for defaults only (only when no file was asked for)."""
    if path is not None:
        return os.fspath(path)
    if env.get("PAL_CONFIG"):
        return env["PAL_CONFIG"]
    if os.path.exists(DEFAULT_CONFIG_PATH):
        return DEFAULT_CONFIG_PATH
    return None


def from_mapping(data: Mapping[str, Any], source: str | None = None, registries: bool = True) -> Config:
    """Build a Config from parsed TOML (sections of keys), validating every key (the values
    that name a registry's entry only with `registries`, see `load_config`)."""
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    label = source or "configuration"
    for section, body in data.items():
        if section not in SECTIONS:
            raise ConfigError(
                f"{label}: unknown section [{section}] (known: {', '.join(SECTIONS)})"
            )
        if not isinstance(body, Mapping):
            raise ConfigError(f"{label}: [{section}] must be a table, got {body!r}")
        hints = _field_types(SECTIONS[section])
        for key, value in body.items():
            where = f"{label}: [{section}] {key}"
            if key not in hints:
                raise ConfigError(
                    f"{label}: unknown key '{key}' in [{section}] "
                    f"(known: {', '.join(sorted(hints))})"
                )
            coerced = _coerce(value, hints[key], where)
            _check_value(section, key, coerced, where, registries)
            values[section][key] = coerced
    parts = {name: SECTIONS[name](**values[name]) for name in SECTIONS}
    return Config(**parts, source=source)


def _env_overrides(env: Mapping[str, str], registries: bool = True) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    names: dict[str, tuple[str, str]] = dict(ENV_ALIASES)
    for section, cls in SECTIONS.items():
        for key in _field_types(cls):
            names[f"PAL_{section.upper()}_{key.upper()}"] = (section, key)
    for var, (section, key) in names.items():
        if var not in env:
            continue
        hint = _field_types(SECTIONS[section])[key]
        where = f"environment {var} ([{section}] {key})"
        value = _parse_env(env[var], hint, where)
        _check_value(section, key, value, where, registries)
        out.setdefault(section, {})[key] = value
    return out


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
    registries: bool = True,
) -> Config:
    """Read the configuration: defaults <- TOML file <- environment. Raises ConfigError.

    `registries=False` leaves unchecked the values that name a registry's entry (placement,
    queue, binning, backend): checking them imports the policies and numpy, which the prolog's
    "nothing is due" check must not pay on every job start; it reads none of those keys, and
    the path that measures reads the configuration again with every check."""
    env = os.environ if env is None else env
    resolved = _resolve_path(path, env)
    data = _read_toml(resolved) if resolved is not None else {}
    config = from_mapping(data, source=resolved, registries=registries)
    for section, changes in _env_overrides(env, registries).items():
        config = dataclasses.replace(
            config, **{section: dataclasses.replace(getattr(config, section), **changes)}
        )
    if config.samples.send == "pald" and not config.samples.pald.strip():
        raise ConfigError(f"{config.source or 'configuration'}: [samples] send = \"pald\" needs "
                          "[samples] pald (host:port of pald's samples listener)")
    return config
