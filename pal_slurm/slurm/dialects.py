"""Which Slurm is this, and how does its JSON look: one `Dialect` per release family.

pal-slurm reads Slurm through `sinfo/squeue/scontrol --json`, whose shape changed in 23.02:

- 22.05 prints the fixed openapi v0.0.38 shape: `sinfo --json` has one record per node
  (``state: "mixed"`` + ``state_flags: ["DRAIN"]``), numbers are plain integers, TRES are
  written ``gres:gpu:2``.
- 23.02 and later print through a *data_parser* plugin (v0.0.39 in 23.02 ... v0.0.45 in 26.05;
  each release carries the last three, e.g. 24.11: v0.0.40-v0.0.42, `--json=list`). `sinfo
  --json` then groups nodes by partition, so nodes come from `scontrol show nodes --json`
  (23.02+); states are lists (``["MIXED", "DRAIN"]``), most numbers are
  ``{"set", "infinite", "number"}`` objects, job states lists, TRES ``gres/gpu:2``, and
  job_resources changed twice (v0.0.41 moved the allocation under ``nodes.allocation``), and
  `squeue --json` applies squeue's filters (22.05 printed every job): finished jobs need
  ``--states=all``.
- v0.0.45 (26.05) no longer prints a job's sharing mode: its ``shared`` is always ``[]`` (the
  field is marked removed; the ``exclusive``/``oversubscribe`` that replace it are in sacct's
  records only), so an ``--exclusive`` job would read as one that shares its nodes.

`detect` asks `sinfo --version` once, and for 23.02+ `scontrol --json=list`, and pins the newest
data_parser version pal-slurm knows that the clients offer: a site that upgrades Slurm keeps the
shape pal-slurm reads for as long as Slurm still offers it. Jobs are read in the newest of those
that still prints the sharing mode (26.05: nodes v0.0.45, jobs v0.0.44), as long as one is
offered. The dialect's `node_record` /
`job_record` turn one raw record into the 22.05 field names and plain values, so the readers map
every release to the same view. Facts from tests/unit/slurm/data/<release>/ (captured from real
22.05, 24.11, 25.05, 25.11 and 26.05 daemons) and Slurm's src/plugins/data_parser/v0.0.3x-4x/parsers.c.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pal_slurm.intake.slurm_numbers import NO_VAL, number
from pal_slurm.slurm.errors import SlurmError, SlurmUnsupported
from pal_slurm.slurm.runner import Runner

OLDEST = (22, 5)  # the first release whose --json pal-slurm reads (openapi v0.0.38)
DATA_PARSER_SINCE = (23, 2)
# data_parser versions whose shape the record functions below handle (source: Slurm's parsers.c)
KNOWN_DATA_PARSERS = ("v0.0.39", "v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
# the last data_parser version whose job records give the sharing mode (--exclusive)
JOB_SHARING_UNTIL = "v0.0.44"
NEWEST_KNOWN_RELEASE = (26, 5)
# releases whose real daemons ran the readers' fixture tests and the integration suite
TESTED_RELEASES = ((22, 5), (24, 11), (25, 5), (25, 11), (26, 5))


@dataclass(frozen=True, order=True)
class SlurmVersion:
    major: int
    minor: int
    micro: int = 0

    @property
    def release(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"


def parse_version(text: str) -> SlurmVersion:
    """``slurm 24.11.5`` / ``slurm-wlm 22.05.8`` (what `sinfo --version` prints) -> version."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not m:
        raise SlurmError(f"cannot read a Slurm version from {text.strip()[:80]!r}")
    return SlurmVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def _release(r: tuple[int, int]) -> str:
    return f"{r[0]}.{r[1]:02d}"


SUPPORTED_TEXT = (
    f"pal-slurm reads Slurm {_release(OLDEST)} to {_release(NEWEST_KNOWN_RELEASE)} "
    f"(tested: {', '.join(_release(r) for r in TESTED_RELEASES)})"
)


# ---- value normalisers (pure) ---------------------------------------------------------------
def _flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """Every top-level number object of a record unwrapped (other fields as they are)."""
    return {k: number(v) for k, v in record.items()}


def _csv(value: Any) -> Any:
    """A CSV_STRING field: a list in data_parser output, a comma string in 22.05."""
    return ",".join(str(v) for v in value) if isinstance(value, list) else value


# data_parser's job "shared" flag names that 22.05 (v0.0.38) spelled differently
JOB_SHARED_AS_22_05 = {"oversubscribe": "shared"}
NODE_BASE_STATES = ("IDLE", "MIXED", "ALLOCATED", "DOWN", "ERROR", "FUTURE", "UNKNOWN")
# job state flags that 22.05 printed instead of the base state (job_state_string's order)
JOB_STATE_FLAGS_SHOWN = ("COMPLETING", "CONFIGURING", "RESIZING", "REQUEUED", "STAGE_OUT")


def data_parser_node(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One `scontrol show nodes --json` record (v0.0.39+) in 22.05's names and values."""
    out = _flat(raw)
    states = raw.get("state")
    if isinstance(states, list):
        names = [str(s).upper() for s in states]
        base = next((s for s in names if s in NODE_BASE_STATES), "UNKNOWN")
        out["state"] = base.lower()
        out["state_flags"] = [s for s in names if s != base]
    for key in ("features", "active_features"):
        if key in out:
            out[key] = _csv(out[key])
    return out


def _job_resources_as_22_05(resources: Any) -> Any:
    """job_resources in 22.05's form ``{"allocated_nodes": [{"nodename": n}], "nodes": hl}``."""
    if not isinstance(resources, Mapping):
        return resources
    nodes = resources.get("nodes")
    if isinstance(nodes, Mapping):  # v0.0.41+: {"nodes": {"list": hl, "allocation": [{"name"}]}}
        return {
            "nodes": nodes.get("list") or "",
            "allocated_nodes": [{"nodename": a.get("name")} for a in nodes.get("allocation") or ()],
        }
    return resources  # v0.0.39/40: already allocated_nodes[].nodename


def data_parser_job(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One `squeue --json` job (v0.0.39+) in 22.05's names and values."""
    out = _flat(raw)
    states = raw.get("job_state")
    if isinstance(states, list):
        names = [str(s).upper() for s in states]
        shown = next((f for f in JOB_STATE_FLAGS_SHOWN if f in names), None)
        out["job_state"] = shown or (names[0] if names else "")
    if "priority" in out and out["priority"] is None:
        out["priority"] = NO_VAL
    shared = raw.get("shared")
    if isinstance(shared, list):  # v0.0.40+: ["none"] (--exclusive), ["oversubscribe"], [] (unset)
        first = str(shared[0]).lower() if shared else None
        out["shared"] = JOB_SHARED_AS_22_05.get(first, first) if first else None
    out["job_resources"] = _job_resources_as_22_05(raw.get("job_resources"))
    return out


def _same(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    return raw


# ---- dialects -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dialect:
    """How to ask one Slurm release for nodes and jobs, and how to read one record of each."""

    version: SlurmVersion
    data_parser: str | None  # pinned "v0.0.42"; None: 22.05's fixed shape, or none we know
    node_record: Callable[[Mapping[str, Any]], Mapping[str, Any]] = _same
    job_record: Callable[[Mapping[str, Any]], Mapping[str, Any]] = _same
    note: str = ""  # why this release is outside what was tested ("" when it is tested)
    jobs_data_parser: str | None = None  # jobs read in another version than nodes (None: the same)

    @property
    def uses_data_parser(self) -> bool:
        return self.version.release >= DATA_PARSER_SINCE

    @property
    def tested(self) -> bool:
        return not self.note

    @staticmethod
    def _json_flag(parser: str | None) -> str:
        return f"--json={parser}" if parser else "--json"

    @property
    def nodes_argv(self) -> list[str]:
        if self.uses_data_parser:  # sinfo --json groups nodes by partition since 23.02
            return ["scontrol", "show", "nodes", self._json_flag(self.data_parser)]
        return ["sinfo", "--json"]

    @property
    def jobs_argv(self) -> list[str]:
        if self.uses_data_parser:  # 23.02+ applies squeue's default filter (no finished jobs)
            return ["squeue", self._json_flag(self.jobs_data_parser or self.data_parser), "--states=all"]
        return ["squeue", "--json"]  # 22.05 prints every job whatever the filters

    def job_argv(self, job_id: int | str) -> list[str]:
        """One job's record: `jobs_argv` limited to it (22.05 prints every job all the same,
        so the caller picks the record by its job_id)."""
        return [*self.jobs_argv, f"--jobs={job_id}"]

    def describe(self) -> str:
        shape = (f"data_parser {self.data_parser or 'default'}" if self.uses_data_parser
                 else "openapi v0.0.38")
        if self.jobs_data_parser and self.jobs_data_parser != self.data_parser:
            shape += f", jobs {self.jobs_data_parser}"
        return f"Slurm {self.version} ({shape})"


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.lstrip("v").split("."))


def offered_parsers(text: str) -> list[str]:
    """`--json=list` output -> ["v0.0.40", ...] (the plugins the client can print with)."""
    return sorted(set(re.findall(r"data_parser/(v\d+\.\d+\.\d+)", text or "")), key=_version_key)


def dialect_for(version: SlurmVersion, offered: list[str] | None = None) -> Dialect:
    """The dialect of `version`; `offered`: data_parser versions its clients print (23.02+)."""
    release = version.release
    if release < OLDEST:
        raise SlurmUnsupported(f"Slurm {version} is too old: {SUPPORTED_TEXT}")
    if release < DATA_PARSER_SINCE:
        return Dialect(version, None,
                       note="" if release in TESTED_RELEASES else f"untested release; {SUPPORTED_TEXT}")
    known = [p for p in offered or () if p in KNOWN_DATA_PARSERS]
    pinned = max(known, key=_version_key) if known else None
    with_sharing = [p for p in known if _version_key(p) <= _version_key(JOB_SHARING_UNTIL)]
    jobs_pinned = max(with_sharing, key=_version_key) if with_sharing else None
    notes = []
    if release > NEWEST_KNOWN_RELEASE:
        notes.append(f"Slurm {version} is newer than pal-slurm knows")
    elif release not in TESTED_RELEASES:
        notes.append(f"Slurm {version} is not among the tested releases")
    if pinned is None:
        notes.append(f"its clients offer no data_parser version pal-slurm reads "
                     f"({', '.join(offered or ()) or 'none listed'}; known: {', '.join(KNOWN_DATA_PARSERS)})")
    note = "; ".join(notes) + (f". {SUPPORTED_TEXT}" if notes else "")
    return Dialect(version, pinned, data_parser_node, data_parser_job, note,
                   jobs_pinned if jobs_pinned != pinned else None)


def detect(runner: Runner) -> Dialect:
    """Ask Slurm which release it is (and which JSON versions it prints): 1-2 commands."""
    version = parse_version(runner.run(["sinfo", "--version"]))
    offered = None
    if version.release >= DATA_PARSER_SINCE:
        try:
            offered = offered_parsers(runner.run(["scontrol", "--json=list"]))
        except SlurmError:
            offered = []  # an unknown client: read its default shape, flagged as untested
    return dialect_for(version, offered)


LEGACY_22_05 = Dialect(SlurmVersion(22, 5, 0), None)
