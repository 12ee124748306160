"""Kernel backend: measure what jobs feel, with a short matmul and a device-to-device copy.

When torch (or cupy) is importable and sees a GPU, each GPU runs a square FP32 matmul, timed
after one warm-up and calibrated so the whole measurement stays within the time budget, then a
device-to-device copy. The sample stores raw TFLOP/s (`value`, higher is better) and GB/s; the
ranking turns rates into scores at ranking time: score = fleet median TFLOP/s / this GPU's,
so >1 is slower, as for every other backend.

The GPU work goes through a small `Accelerator` adapter (torch or cupy); tests inject a fake
torch-like module whose operations advance a fake clock.
"""

from __future__ import annotations

import importlib
import os
import time
from types import ModuleType
from typing import Callable, Mapping, Protocol, Sequence

from pal_slurm.bench.base import Availability, GpuTarget, NoGpuAvailable, Sample, Unavailable

MATMUL_N = 4096  # square size: big enough to saturate a data-centre GPU, ~0.5 GiB in FP32
COPY_BYTES = 256 * 1024 * 1024
MAX_ITERS = 200


class Accelerator(Protocol):
    """What the kernel backend needs from a GPU array library."""

    library: str

    def device_count(self) -> int: ...

    def matmul(self, index: int, n: int, iters: int) -> Callable[[], None]: ...

    def copy(self, index: int, nbytes: int, iters: int) -> Callable[[], None]: ...

    def synchronize(self, index: int) -> None: ...


class TorchAccelerator:
    """torch.cuda adapter. `matmul`/`copy` allocate once and return the timed closure."""

    library = "torch"

    def __init__(self, torch: ModuleType) -> None:
        self.torch = torch

    def device_count(self) -> int:
        t = self.torch
        return int(t.cuda.device_count()) if t.cuda.is_available() else 0

    def matmul(self, index: int, n: int, iters: int) -> Callable[[], None]:
        t = self.torch
        dev = f"cuda:{index}"
        a = t.randn(n, n, device=dev, dtype=t.float32)
        b = t.randn(n, n, device=dev, dtype=t.float32)

        def run() -> None:
            with t.cuda.device(index):  # the NVML load runs it on a thread with no current device
                for _ in range(iters):
                    t.matmul(a, b)

        return run

    def copy(self, index: int, nbytes: int, iters: int) -> Callable[[], None]:
        t = self.torch
        dev = f"cuda:{index}"
        src = t.empty(nbytes // 4, device=dev, dtype=t.float32)
        dst = t.empty(nbytes // 4, device=dev, dtype=t.float32)

        def run() -> None:
            for _ in range(iters):
                dst.copy_(src)

        return run

    def synchronize(self, index: int) -> None:
        self.torch.cuda.synchronize(index)


class CupyAccelerator:
    """cupy adapter (same contract as TorchAccelerator)."""

    library = "cupy"

    def __init__(self, cupy: ModuleType) -> None:
        self.cp = cupy

    def device_count(self) -> int:
        try:
            return int(self.cp.cuda.runtime.getDeviceCount())
        except Exception:  # noqa: BLE001 - cupy raises its own CUDARuntimeError without a driver
            return 0

    def matmul(self, index: int, n: int, iters: int) -> Callable[[], None]:
        cp = self.cp
        with cp.cuda.Device(index):
            a = cp.random.rand(n, n, dtype=cp.float32)
            b = cp.random.rand(n, n, dtype=cp.float32)

        def run() -> None:
            with cp.cuda.Device(index):
                for _ in range(iters):
                    cp.matmul(a, b)

        return run

    def copy(self, index: int, nbytes: int, iters: int) -> Callable[[], None]:
        cp = self.cp
        with cp.cuda.Device(index):
            src = cp.empty(nbytes // 4, dtype=cp.float32)
            dst = cp.empty(nbytes // 4, dtype=cp.float32)

        def run() -> None:
            with cp.cuda.Device(index):
                for _ in range(iters):
                    cp.copyto(dst, src)

        return run

    def synchronize(self, index: int) -> None:
        with self.cp.cuda.Device(index):
            self.cp.cuda.Device(index).synchronize()


def default_accelerator() -> Accelerator:
    """cupy when it is importable and sees a GPU, else torch, else cupy as it is; ImportError
    when neither is importable.

    Why cupy first: both measured the same on an H200 (51.39 FP32 TFLOP/s, ~4,185 GB/s), but a
    fresh process imported cupy and started CUDA in 0.63 s against torch's 2.05 s, which the
    prolog pays on every job; the `gpu` extra installs cupy. A cupy that sees no GPU (a CUDA
    mismatch) does not hide a torch that does.

    CUDA numbers GPUs fastest-first by default; Slurm, gres.conf and NVML use PCI bus order.
    PCI_BUS_ID order (set before CUDA initialises) makes CUDA index i the same GPU as slot i.
    """
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    cupy: Accelerator | None = None
    try:
        cupy = CupyAccelerator(importlib.import_module("cupy"))
        if cupy.device_count() > 0:
            return cupy
    except ImportError:
        pass
    try:
        return TorchAccelerator(importlib.import_module("torch"))
    except ImportError:
        if cupy is None:
            raise
        return cupy


class MatmulLoad:
    """The kernel backend's matmul as a load for the NVML backend: the prolog runs before the
    job, so without one NVML polls an idle GPU (`nvml.NvmlBackend`'s `load`).

    Called with the GPUs, it readies one matmul per GPU (import, allocation, a warm-up) and
    returns what runs them for N seconds; NoGpuAvailable when neither torch nor cupy is there.
    """

    def __init__(self, accelerator: Callable[[], Accelerator] = default_accelerator, matmul_n: int = MATMUL_N,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._factory = accelerator
        self.matmul_n = matmul_n
        self._clock = clock

    def __call__(self, gpus: Sequence[GpuTarget]) -> Callable[[float], None]:
        try:
            acc = self._factory()
        except ImportError as exc:
            raise NoGpuAvailable(f"no load: neither torch nor cupy is importable ({exc})") from None
        runs = [(g.index, acc.matmul(g.index, self.matmul_n, 1)) for g in gpus]
        for index, run in runs:
            run()
            acc.synchronize(index)

        def run_for(seconds: float) -> None:
            end = self._clock() + seconds
            while self._clock() < end:
                for _, run in runs:
                    run()
                for index, _ in runs:
                    acc.synchronize(index)

        return run_for


class KernelBackend:
    """Matmul TFLOP/s and copy GB/s per GPU (see module docstring)."""

    name = "kernel"

    def __init__(
        self,
        accelerator: Callable[[], Accelerator] = default_accelerator,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
        matmul_n: int = MATMUL_N,
        copy_bytes: int = COPY_BYTES,
        other_processes: Callable[[Sequence[int]], Mapping[int, str]] | None = None,
    ) -> None:
        self._factory = accelerator
        self._other_processes = other_processes  # slot -> busy reason ('' none), e.g. nvml's
        self._acc: Accelerator | None = None
        self._clock = clock
        self._wall = wall_clock
        self.matmul_n = matmul_n
        self.copy_bytes = copy_bytes

    def _accelerator(self) -> Accelerator:
        if self._acc is None:
            try:
                self._acc = self._factory()
            except ImportError as exc:
                raise NoGpuAvailable(f"kernel: neither torch nor cupy is importable ({exc})") from None
        return self._acc

    def available(self) -> Availability:
        try:
            acc = self._accelerator()
        except NoGpuAvailable as exc:
            return Availability.no(Unavailable.NO_LIBRARY, str(exc))
        try:
            count = acc.device_count()
        except Exception as exc:  # noqa: BLE001 - a broken CUDA install is "not available"
            return Availability.no(Unavailable.NO_DRIVER, f"{acc.library} cannot reach CUDA: {exc}")
        if count == 0:
            return Availability.no(Unavailable.NO_DEVICE, f"{acc.library} sees no GPU")
        return Availability.yes(f"{acc.library}, {count} GPU(s)")

    def device_count(self) -> int:
        """GPUs the array library sees (CUDA indices, after CUDA_VISIBLE_DEVICES)."""
        return self._accelerator().device_count()

    def prepare(self, gpus: Sequence[GpuTarget]) -> None:
        """Import the array library and start CUDA on each GPU (2 s with torch on an H200, 0.6 s
        with cupy), so that none of it counts as measuring time."""
        acc = self._accelerator()
        for g in gpus:
            acc.synchronize(g.index)

    def _timed(self, index: int, make: Callable[[int], Callable[[], None]], budget_s: float) -> tuple[float, int]:
        """Warm up once, calibrate the iteration count to `budget_s`, return (seconds, iters)."""
        acc = self._accelerator()
        one = make(1)
        one()  # warm-up (allocation, cuBLAS handle, clocks ramp)
        acc.synchronize(index)
        t0 = self._clock()
        one()
        acc.synchronize(index)
        single = max(self._clock() - t0, 1e-9)
        iters = int(min(MAX_ITERS, max(1, budget_s / single)))
        run = make(iters)
        acc.synchronize(index)
        t0 = self._clock()
        run()
        acc.synchronize(index)
        return max(self._clock() - t0, 1e-9), iters

    def sample(self, gpus: Sequence[GpuTarget], perf_class: str, duration_s: float = 2.0) -> list[Sample]:
        acc = self._accelerator()
        count = acc.device_count()
        if count == 0:
            raise NoGpuAvailable(f"kernel: {acc.library} sees no GPU")
        # half the per-GPU budget to the matmul, a quarter to the copy (warm-ups use the rest)
        per_gpu = max(duration_s, 0.05) / max(len(gpus), 1)
        out = []
        for g in gpus:
            i = g.index
            if not 0 <= i < count:
                raise NoGpuAvailable(f"kernel: GPU index {i} on {g.node} not visible ({count} GPUs)")
            n = self.matmul_n
            mm_s, mm_iters = self._timed(i, lambda k: acc.matmul(i, n, k), per_gpu / 2)
            tflops = 2.0 * n**3 * mm_iters / mm_s / 1e12
            cp_s, cp_iters = self._timed(i, lambda k: acc.copy(i, self.copy_bytes, k), per_gpu / 4)
            gbps = 2.0 * self.copy_bytes * cp_iters / cp_s / 1e9  # read + write
            out.append(
                Sample(
                    node=g.node,
                    slot=g.slot,
                    perf_class=perf_class,
                    backend=self.name,
                    value=tflops,
                    higher_is_better=True,
                    metrics={
                        "matmul_tflops": tflops,
                        "matmul_n": n,
                        "matmul_iters": mm_iters,
                        "copy_gbps": gbps,
                        "copy_bytes": self.copy_bytes,
                        "copy_iters": cp_iters,
                        "library": acc.library,
                    },
                    uuid=g.uuid,
                    taken_at=self._wall(),
                )
            )
        others = self._other_processes([g.slot for g in gpus]) if self._other_processes else {}
        return [s.flagged_busy(others[s.slot]) if others.get(s.slot) else s for s in out]
