"""NVML telemetry backend (nvidia-ml-py; module `pynvml`, imported lazily).

NVML cannot measure throughput; what it can tell is whether a GPU runs at the clocks it should.
Under load, a GPU that is power- or thermally-limited runs below its maximum SM clock and is
slower by roughly that ratio for compute-bound work. So the score is a *proxy*:

    value = max SM clock / observed (median) SM clock     (1.0 = full speed, > 1 slower)

It ignores memory-bound slowdowns and per-chip differences at equal clocks (the kernel backend
measures those). Telemetry is polled over `duration_s` while the optional `load` callable (the
kernel backend's matmul, `kernel.MatmulLoad`, wherever torch or cupy is importable) runs on the
GPUs. Only polls that saw the GPU working count (utilization above 0, or where NVML cannot tell
that, no `GpuIdle` clock reason): an idle GPU drops to its idle clock (345 of 1980 MHz on an
H200, a "slowness" of 5.7) or keeps its last clock, and neither says how fast it is. Slurm runs
the prolog before the job's tasks, so nothing loads the GPU there but `load`. A sample with no
working poll keeps its telemetry, has the neutral value 1.0 and is flagged (`busy`, reason
`idle: ...`): ranking ignores it unless a GPU has nothing else.
Everything else NVML knows that matters for variability is recorded in `metrics`: memory clock
vs max, power vs limit, temperature, throttle reasons decoded to names, uncorrected ECC errors
and remapped rows. A query the GPU does not support is None, never a failure.
"""

from __future__ import annotations

import importlib
import os
import statistics
import threading
import time
from types import ModuleType
from typing import Any, Callable, Sequence

from pal_slurm.bench.base import Availability, GpuTarget, NoGpuAvailable, Sample, Unavailable
from pal_slurm.bench.busy import IDLE_GPU_REASON, gpu_process_reason

GPU_IDLE = 0x1  # nvmlClocksEventReasonGpuIdle: nothing runs on the GPU
#: NVML clock event ("throttle") reason bits -> names (nvml.h, nvmlClocksEventReason*)
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (GPU_IDLE, "GpuIdle"),
    (0x2, "ApplicationsClocksSetting"),
    (0x4, "SwPowerCap"),
    (0x8, "HwSlowdown"),
    (0x10, "SyncBoost"),
    (0x20, "SwThermalSlowdown"),
    (0x40, "HwThermalSlowdown"),
    (0x80, "HwPowerBrakeSlowdown"),
    (0x100, "DisplayClockSetting"),
)


def decode_throttle(mask: int | None) -> tuple[str, ...]:
    """Names of the set bits; unknown bits become 'Unknown(0x..)'. None -> ()."""
    if not mask:
        return ()
    names, known = [], 0
    for bit, name in THROTTLE_REASONS:
        known |= bit
        if mask & bit:
            names.append(name)
    rest = mask & ~known
    if rest:
        names.append(f"Unknown(0x{rest:x})")
    return tuple(names)


def clock_slowdown(max_sm_mhz: float | None, observed_sm_mhz: float | None) -> float:
    """The ranking proxy: max / observed SM clock (>1 slower); 1.0 when unknown or zero."""
    if not max_sm_mhz or not observed_sm_mhz or observed_sm_mhz <= 0:
        return 1.0
    return float(max_sm_mhz) / float(observed_sm_mhz)


# One poll of a GPU: NVML's figures by name (clocks MHz, power mW, temperature C, throttle mask,
# utilisation %), None where NVML did not answer.
Poll = dict[str, int | None]


def _load_pynvml() -> ModuleType:
    return importlib.import_module("pynvml")


class NvmlBackend:
    """Samples NVML telemetry per GPU (see module docstring).

    `loader` returns the pynvml module (tests inject a fake); `load`, given the GPUs, readies a
    workload on them (imports, allocations, a warm-up: before polling starts, so it costs no
    polls) and returns what runs it for N seconds beside the polls; a load that cannot start
    leaves the GPUs idle, and the samples say so. `poll_s` is the polling interval.
    """

    name = "nvml"

    def __init__(
        self,
        loader: Callable[[], ModuleType] = _load_pynvml,
        load: Callable[[Sequence[GpuTarget]], Callable[[float], object]] | None = None,
        poll_s: float = 0.1,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._loader = loader
        self._load = load
        self._poll_s = poll_s
        self._clock = clock
        self._sleep = sleep
        self._prepared: tuple[tuple[GpuTarget, ...], Callable[[float], object] | None] | None = None

    # ---- availability -----------------------------------------------------------------
    def _module(self) -> ModuleType:
        try:
            return self._loader()
        except ImportError as exc:
            raise NoGpuAvailable(f"nvml: nvidia-ml-py is not installed ({exc})") from None

    def _init(self, nv: ModuleType) -> None:
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise NoGpuAvailable(f"nvml: cannot initialise NVML: {exc} (no NVIDIA driver?)") from None

    def available(self) -> Availability:
        try:
            nv = self._loader()
        except ImportError as exc:
            return Availability.no(Unavailable.NO_LIBRARY, f"nvidia-ml-py not importable: {exc}")
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            return Availability.no(Unavailable.NO_DRIVER, f"NVML did not initialise: {exc}")
        try:
            count = nv.nvmlDeviceGetCount()
            driver = _text(nv.nvmlSystemGetDriverVersion())
        except nv.NVMLError as exc:
            return Availability.no(Unavailable.ERROR, f"NVML query failed: {exc}")
        finally:
            _shutdown(nv)
        if count == 0:
            return Availability.no(Unavailable.NO_DEVICE, "NVML sees no GPU")
        return Availability.yes(f"{count} GPU(s), driver {driver}")

    def device_count(self) -> int:
        """GPUs NVML sees (global indices 0..n-1); NoGpuAvailable when NVML cannot start."""
        nv = self._module()
        self._init(nv)
        try:
            return int(nv.nvmlDeviceGetCount())
        finally:
            _shutdown(nv)

    # ---- sampling ---------------------------------------------------------------------
    def prepare(self, gpus: Sequence[GpuTarget]) -> None:
        """Ready the load (torch/cupy import, CUDA, a warm-up) for the next `sample` of these GPUs."""
        self._prepared = (tuple(gpus), self._ready_load(gpus))

    def sample(self, gpus: Sequence[GpuTarget], perf_class: str, duration_s: float = 1.0) -> list[Sample]:
        nv = self._module()
        self._init(nv)
        try:
            count = nv.nvmlDeviceGetCount()
            if count == 0:
                raise NoGpuAvailable("nvml: NVML sees no GPU")
            handles: dict[GpuTarget, object] = {}
            for g in gpus:
                if not 0 <= g.index < count:
                    raise NoGpuAvailable(f"nvml: GPU index {g.index} on {g.node} not visible ({count} GPUs)")
                handles[g] = nv.nvmlDeviceGetHandleByIndex(g.index)
            loader = None
            prepared, self._prepared = self._prepared, None
            run_load = prepared[1] if prepared and prepared[0] == tuple(gpus) else self._ready_load(gpus)
            if run_load is not None:
                loader = threading.Thread(target=run_load, args=(duration_s,), daemon=True)
                loader.start()
            polls: dict[GpuTarget, list[Poll]] = {g: [] for g in gpus}
            deadline = self._clock() + max(duration_s, 0.0)
            while True:
                for g, h in handles.items():
                    polls[g].append(_poll(nv, h))
                if self._clock() >= deadline:
                    break
                self._sleep(self._poll_s)
            if loader is not None:
                loader.join(timeout=max(duration_s, 0.0) + 5.0)
            now = self._clock()
            return [self._summarise(nv, g, handles[g], polls[g], perf_class, now, loader is not None) for g in gpus]
        finally:
            _shutdown(nv)

    def _ready_load(self, gpus: Sequence[GpuTarget]) -> Callable[[float], object] | None:
        if self._load is None:
            return None
        try:
            return self._load(gpus)
        except Exception:  # noqa: BLE001 - no load (no torch/cupy, a CUDA error): idle polls flag it
            return None

    def _summarise(self, nv: ModuleType, g: GpuTarget, h: object, polls: list[Poll], perf_class: str, now: float,
                   loaded: bool) -> Sample:
        def med(key: str, among: list[Poll] = polls) -> float | None:
            vals = [v for p in among if (v := p.get(key)) is not None]
            return statistics.median(vals) if vals else None

        def peak(key: str) -> int | None:
            vals = [v for p in polls if (v := p.get(key)) is not None]
            return max(vals) if vals else None

        mask = 0
        for p in polls:
            mask |= p.get("throttle") or 0
        working = [p for p in polls if _working(p)]
        max_sm = _opt(nv, nv.nvmlDeviceGetMaxClockInfo, h, getattr(nv, "NVML_CLOCK_SM", 1))
        max_mem = _opt(nv, nv.nvmlDeviceGetMaxClockInfo, h, getattr(nv, "NVML_CLOCK_MEM", 2))
        limit_mw = _opt(nv, nv.nvmlDeviceGetEnforcedPowerLimit, h)
        sm = med("sm_mhz", working or polls)
        power_mw = med("power_mw")
        uuid = g.uuid or _text(_opt(nv, nv.nvmlDeviceGetUUID, h))
        ecc = _opt(
            nv,
            nv.nvmlDeviceGetTotalEccErrors,
            h,
            getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
            getattr(nv, "NVML_VOLATILE_ECC", 0),
        )
        remapped = _opt(nv, getattr(nv, "nvmlDeviceGetRemappedRows", None), h)
        metrics = {
            "sm_clock_mhz": sm,
            "sm_clock_max_mhz": max_sm,
            "mem_clock_mhz": med("mem_mhz"),
            "mem_clock_max_mhz": max_mem,
            "power_w": None if power_mw is None else power_mw / 1000.0,
            "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
            "temperature_c": peak("temp_c"),
            "throttle_mask": mask,
            "throttle_reasons": ",".join(decode_throttle(mask)),
            "ecc_uncorrected": None if ecc is None else int(ecc),
            "remapped_rows_uncorrectable": None if remapped is None else int(remapped[1]),
            "remap_pending": None if remapped is None else bool(remapped[2]),
            "gpu_util_pct": med("util_pct"),
            "polls": len(polls),
            "working_polls": len(working),
            "load": loaded,  # our load ran beside the polls
        }
        reason = _others_on(nv, h)
        if not working and not reason:
            reason = IDLE_GPU_REASON
        return Sample(
            node=g.node,
            slot=g.slot,
            perf_class=perf_class,
            backend=self.name,
            value=clock_slowdown(max_sm, sm) if working else 1.0,
            higher_is_better=False,
            metrics=metrics,
            uuid=uuid,
            taken_at=now,
            busy=bool(reason),
            busy_reason=reason,
        )


def _text(v: bytes | str | None) -> str | None:
    """NVML's strings: bytes from older bindings, str from newer ones."""
    return v.decode() if isinstance(v, bytes) else v


def _opt(nv: ModuleType, fn: Callable[..., Any] | None, *args: object) -> Any:
    """Call an NVML query; NotSupported or any other NVML error -> None (not a failure)."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except nv.NVMLError:
        return None


def _poll(nv: ModuleType, h: object) -> Poll:
    throttle_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    return {
        "sm_mhz": _opt(nv, nv.nvmlDeviceGetClockInfo, h, getattr(nv, "NVML_CLOCK_SM", 1)),
        "mem_mhz": _opt(nv, nv.nvmlDeviceGetClockInfo, h, getattr(nv, "NVML_CLOCK_MEM", 2)),
        "power_mw": _opt(nv, nv.nvmlDeviceGetPowerUsage, h),
        "temp_c": _opt(nv, nv.nvmlDeviceGetTemperature, h, getattr(nv, "NVML_TEMPERATURE_GPU", 0)),
        "throttle": _opt(nv, throttle_fn, h),
        "util_pct": _utilization(nv, h),
    }


def other_gpu_processes(slots: Sequence[int], loader: Callable[[], ModuleType] = _load_pynvml) -> dict[int, str]:
    """For each NVML index (a GPU's slot), why it counts as busy: processes other than this one
    on it ('' when none). {} when NVML cannot tell (no library, no driver): nothing is flagged.

    The kernel backend's check: a process left behind by an earlier job slows the matmul, and an
    unflagged sample would blame the GPU for it.
    """
    try:
        nv = loader()
        nv.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: the kernel's figures stand unflagged
        return {}
    try:
        out: dict[int, str] = {}
        for slot in slots:
            h = _opt(nv, nv.nvmlDeviceGetHandleByIndex, slot)
            out[slot] = "" if h is None else _others_on(nv, h)
        return out
    finally:
        _shutdown(nv)


def _others_on(nv: ModuleType, h: object) -> str:
    """Why this GPU counts as busy: processes other than this one on it ('' when none)."""
    procs = _opt(nv, nv.nvmlDeviceGetComputeRunningProcesses, h) or []
    return gpu_process_reason((getattr(p, "pid", -1) for p in procs), (os.getpid(),))


def _working(poll: Poll) -> bool:
    """Did this poll see the GPU at work? Utilization when NVML gives it, else no GpuIdle reason."""
    util = poll.get("util_pct")
    if util is not None:
        return util > 0
    return not (poll.get("throttle") or 0) & GPU_IDLE


def _utilization(nv: ModuleType, h: object) -> int | None:
    rates = _opt(nv, getattr(nv, "nvmlDeviceGetUtilizationRates", None), h)
    return None if rates is None else int(getattr(rates, "gpu", 0))


def _shutdown(nv: ModuleType) -> None:
    try:
        nv.nvmlShutdown()
    except Exception:  # noqa: BLE001 - shutdown failing must not hide the result
        pass
