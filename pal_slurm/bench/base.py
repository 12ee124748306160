"""The one interface every benchmark backend implements. What it produces is the one sample
type, `pal_slurm.model.sample.Sample` (imported here for the backends)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol, Sequence, runtime_checkable

from pal_slurm.model.sample import KIND_BENCH, KIND_WALLTIME, Sample

__all__ = ["BACKENDS", "KIND_BENCH", "KIND_WALLTIME", "Availability", "Backend", "GpuTarget", "MemorySink", "NoGpuAvailable",
           "Sample", "SampleSink", "Unavailable"]

# The backend names a config or palctl may name (bench/select.py builds them). Here, not in
# select.py, so that config.py validates them without importing the selection, which reads
# config.py's parsers.
BACKENDS = ("auto", "kernel", "nvml", "replay")


class NoGpuAvailable(RuntimeError):
    """No backend can measure this host: no library, no driver, or no visible GPU.

    A typed condition, not a crash: callers (prolog, palctl) report it and carry on.
    """


class Unavailable(str, Enum):
    """Why a backend cannot run here."""

    NO_LIBRARY = "no-library"  # pynvml / torch / cupy not importable
    NO_DRIVER = "no-driver"  # library present, driver or libnvidia-ml missing
    NO_DEVICE = "no-device"  # driver fine, zero GPUs visible
    NOT_REQUESTED = "not-requested"  # replay: only when asked for explicitly
    ERROR = "error"  # anything else (message in `detail`)


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: Unavailable | None = None  # None when ok
    detail: str = ""  # human-readable explanation

    @classmethod
    def yes(cls, detail: str = "") -> "Availability":
        return cls(True, None, detail)

    @classmethod
    def no(cls, reason: Unavailable, detail: str) -> "Availability":
        return cls(False, reason, detail)

    def __str__(self) -> str:
        if self.ok:
            return "available"
        return f"{self.reason.value if self.reason else Unavailable.ERROR.value}: {self.detail}"


@dataclass(frozen=True)
class GpuTarget:
    """A GPU to measure: node name and slot (the GPU's index in gres.conf / NVML order)."""

    node: str
    slot: int
    uuid: str | None = None
    device: int | None = None  # index the backend opens on this host, when it is not `slot`

    @property
    def index(self) -> int:
        """Device index to open: `device` inside a job that renumbers GPUs, else the slot."""
        return self.slot if self.device is None else self.device


@runtime_checkable
class Backend(Protocol):
    """A way of measuring GPUs. `sample` may raise NoGpuAvailable; never anything for 'no GPU'."""

    name: str

    def available(self) -> Availability: ...

    def device_count(self) -> int:
        """GPUs this host shows the backend (indices 0..n-1); NoGpuAvailable when it cannot count."""
        ...

    def prepare(self, gpus: Sequence[GpuTarget]) -> None:
        """Ready what `sample` needs for these GPUs (imports, CUDA, a load), so that the hook
        can tell a backend's start from its measuring time and fit the latter to its deadline."""
        ...

    def sample(
        self, gpus: Sequence[GpuTarget], perf_class: str, duration_s: float
    ) -> list[Sample]: ...


@runtime_checkable
class SampleSink(Protocol):
    """Where samples go: the store's repository, a local file repository, or a test list."""

    def add_samples(self, samples: Sequence[Sample]) -> None: ...


class MemorySink:
    """A SampleSink that keeps samples in a list (tests, dry runs)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []

    def add_samples(self, samples: Sequence[Sample]) -> None:
        self.samples.extend(samples)
