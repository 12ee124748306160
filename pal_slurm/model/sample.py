"""The one sample type: one measurement of one GPU (node, slot) for one variability class.

Backends measure different things (NVML clocks, kernel TFLOP/s, replayed run times), so a
sample carries its backend's raw figures in `metrics` plus one primary `value` and its direction
(`higher_is_better`); ranking turns values into "time-like" slowness (>1 slower) and never
needs to know which backend produced them. Made by the benchmark backends and the epilog
(`pal_slurm.bench`), spooled and stored as it is (`pal_slurm.store`), ranked by
`pal_slurm.ranking.rank`. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

#: sample kinds: a benchmark measurement, or a job's wall time recorded by the epilog
KIND_BENCH = "bench"
KIND_WALLTIME = "walltime"


@dataclass(frozen=True)
class Sample:
    """One measurement of one GPU for one class (JSON-serialisable, used by spool and store)."""

    node: str
    slot: int
    perf_class: str
    backend: str  # "nvml" | "kernel" | "replay" | "epilog"
    value: float  # the backend's primary figure (see higher_is_better)
    higher_is_better: bool  # True for rates (TFLOP/s), False for times and slowdowns
    metrics: Mapping[str, Any] = field(default_factory=dict)  # raw figures, None = not supported
    uuid: str | None = None
    job_id: str | None = None
    taken_at: float = 0.0  # epoch seconds
    busy: bool = False  # host was busy: ranking ignores it unless nothing else exists
    busy_reason: str = ""
    kind: str = KIND_BENCH

    def slowness(self) -> float:
        """Time-like figure, larger = slower: the value itself, or 1/value for rates."""
        if self.higher_is_better:
            return math.inf if self.value <= 0 else 1.0 / self.value
        return self.value

    def flagged_busy(self, reason: str) -> "Sample":
        return replace(self, busy=True, busy_reason=reason)

    def to_json(self) -> str:
        d = asdict(self)
        d["metrics"] = dict(self.metrics)
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sample":
        """Build from a decoded JSON object; ValueError names what is wrong."""
        if not isinstance(d, Mapping):
            raise ValueError("a sample must be a JSON object")
        try:
            value = float(d["value"])
            slot = int(d["slot"])
            node, perf_class, backend = str(d["node"]), str(d["perf_class"]), str(d["backend"])
        except KeyError as exc:
            raise ValueError(f"sample lacks field {exc.args[0]!r}") from None
        except (TypeError, ValueError):
            raise ValueError("sample value/slot must be numbers") from None
        if not node or not math.isfinite(value) or slot < 0:
            raise ValueError("sample needs a node, a finite value and a slot >= 0")
        metrics = d.get("metrics") or {}
        if not isinstance(metrics, Mapping):
            raise ValueError("sample metrics must be an object")
        return cls(
            node=node,
            slot=slot,
            perf_class=perf_class,
            backend=backend,
            value=value,
            higher_is_better=bool(d.get("higher_is_better", False)),
            metrics=dict(metrics),
            uuid=d.get("uuid"),
            job_id=None if d.get("job_id") is None else str(d["job_id"]),
            taken_at=float(d.get("taken_at", 0.0)),
            busy=bool(d.get("busy", False)),
            busy_reason=str(d.get("busy_reason", "")),
            kind=str(d.get("kind", KIND_BENCH)),
        )

    @classmethod
    def from_json(cls, line: str) -> "Sample":
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc.msg}") from None
        return cls.from_dict(d)
