"""Is the host too busy for a clean measurement?

A sample taken while other work loads the CPU or the GPU measures the contention, not the GPU.
Such samples are flagged (never dropped here): ranking ignores flagged samples unless a GPU has
nothing else, so noise does not move rankings but nothing is lost either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

from pal_slurm.bench.base import Sample


class HostLoad(Protocol):
    """What BusyProbe reads of psutil (tests hand it a stand-in)."""

    def cpu_count(self) -> int | None: ...

    def getloadavg(self) -> tuple[float, float, float]: ...

    def cpu_percent(self, interval: float | None = None) -> float: ...


@dataclass(frozen=True)
class BusyProbe:
    """Checks host load with psutil (injectable for tests).

    `max_load_per_cpu`: 1-minute load average per logical CPU above which the host is busy.
    `max_cpu_percent`: instantaneous CPU use (%) above which the host is busy.
    """

    max_load_per_cpu: float = 0.8
    max_cpu_percent: float = 85.0
    psutil_module: HostLoad | None = None

    def _psutil(self) -> HostLoad:
        if self.psutil_module is not None:
            return self.psutil_module
        import psutil

        module: HostLoad = psutil
        return module

    def host_reason(self) -> str:
        """'' when quiet, else why the host counts as busy. Errors count as quiet (logged by caller)."""
        ps = self._psutil()
        try:
            cpus = ps.cpu_count() or 1
            load1 = ps.getloadavg()[0]
            if load1 / cpus > self.max_load_per_cpu:
                return f"cpu load {load1:.2f} on {cpus} cpus"
            pct = ps.cpu_percent(interval=0.1)
            if pct > self.max_cpu_percent:
                return f"cpu {pct:.0f}% busy"
        except (OSError, AttributeError):
            return ""
        return ""


#: an NVML sample whose polls never saw the GPU working: its clocks say nothing of its speed
IDLE_GPU_REASON = "idle: nothing ran on the GPU while NVML polled it (the clock proxy needs a load)"

#: what `reason_kind` calls each flag, in the order palctl rank lists them
REASON_KINDS = ("busy host", "other GPU processes", "idle GPU")


def reason_kind(reason: str) -> str:
    """The kind of a flag's reason, for counting (one of REASON_KINDS, else the reason itself)."""
    if reason.startswith("cpu "):
        return "busy host"
    if reason.startswith("other gpu processes"):
        return "other GPU processes"
    if reason == IDLE_GPU_REASON:
        return "idle GPU"
    return reason


def gpu_process_reason(pids: Iterable[int], own_pids: Iterable[int] = ()) -> str:
    """'' unless processes other than ours use the GPU."""
    others = sorted(set(pids) - set(own_pids))
    if not others:
        return ""
    shown = ",".join(str(p) for p in others[:5])
    return f"other gpu processes: {shown}{'...' if len(others) > 5 else ''}"


def flag_busy(samples: Sequence[Sample], host_reason: str) -> list[Sample]:
    """Flag every sample with the host reason, keeping a sample's own (per-GPU) reason first."""
    out = []
    for s in samples:
        if s.busy:
            out.append(s)
        elif host_reason:
            out.append(s.flagged_busy(host_reason))
        else:
            out.append(s)
    return out
