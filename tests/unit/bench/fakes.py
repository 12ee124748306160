"""Fakes for the bench tests: a pynvml-like module and a torch-like module with a fake clock."""

from __future__ import annotations

import contextlib
import types


class FakeNVMLError(Exception):
    def __init__(self, value, msg=""):
        super().__init__(msg or f"NVML error {value}")
        self.value = value


class FakeNotSupported(FakeNVMLError):
    def __init__(self):
        super().__init__(3, "Not Supported")


class FakeLibraryNotFound(FakeNVMLError):
    def __init__(self):
        super().__init__(12, "NVML Shared Library Not Found")


def make_pynvml(gpus, init_error=None, unsupported=()):
    """A pynvml-like module. `gpus`: list of dicts with sm, max_sm, mem, max_mem, power_mw,
    limit_mw, temp, throttle, ecc, remapped (tuple), uuid, procs (pids), util (GPU utilization %,
    default 100); sm, throttle and util may be callables, read at each poll.
    `unsupported`: names of functions that raise NotSupported."""
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.NVMLError_NotSupported = FakeNotSupported
    m.NVMLError_LibraryNotFound = FakeLibraryNotFound
    m.NVML_CLOCK_SM, m.NVML_CLOCK_MEM = 1, 2
    m.NVML_TEMPERATURE_GPU = 0
    m.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, m.NVML_VOLATILE_ECC = 1, 0
    m.calls = {"init": 0, "shutdown": 0}

    def guard(name, fn):
        def wrapped(*a):
            if name in unsupported:
                raise FakeNotSupported()
            return fn(*a)

        return wrapped

    def init():
        m.calls["init"] += 1
        if init_error is not None:
            raise init_error

    def shutdown():
        m.calls["shutdown"] += 1

    def now(v):
        return v() if callable(v) else v  # a callable figure changes from poll to poll

    def clock(h, kind):
        return now(gpus[h]["sm"]) if kind == 1 else gpus[h]["mem"]

    def max_clock(h, kind):
        return gpus[h]["max_sm"] if kind == 1 else gpus[h]["max_mem"]

    funcs = {
        "nvmlInit": init,
        "nvmlShutdown": shutdown,
        "nvmlSystemGetDriverVersion": lambda: b"550.54",
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetUUID": lambda h: gpus[h].get("uuid", f"GPU-fake-{h}"),
        "nvmlDeviceGetClockInfo": clock,
        "nvmlDeviceGetMaxClockInfo": max_clock,
        "nvmlDeviceGetPowerUsage": lambda h: gpus[h]["power_mw"],
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: gpus[h]["limit_mw"],
        "nvmlDeviceGetTemperature": lambda h, s: gpus[h]["temp"],
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: now(gpus[h].get("throttle", 0)),
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=now(gpus[h].get("util", 100)), memory=0),
        "nvmlDeviceGetTotalEccErrors": lambda h, t, c: gpus[h].get("ecc", 0),
        "nvmlDeviceGetRemappedRows": lambda h: gpus[h].get("remapped", (0, 0, 0, 0)),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            types.SimpleNamespace(pid=p) for p in gpus[h].get("procs", ())
        ],
    }
    for name, fn in funcs.items():
        setattr(m, name, guard(name, fn))
    return m


def gpu(sm=1410, max_sm=1410, **kw):
    d = dict(sm=sm, max_sm=max_sm, mem=1593, max_mem=1593, power_mw=300000, limit_mw=400000, temp=60)
    d.update(kw)
    return d


class FakeClock:
    def __init__(self, t=0.0):
        self.t = t

    def __call__(self):
        return self.t


class FakeTorch:
    """torch-like: matmul on device i costs matmul_s[i] fake seconds; copy costs copy_s[i]."""

    float32 = "float32"

    def __init__(self, clock, matmul_s, copy_s, available=True):
        self.clock = clock
        self.matmul_s = matmul_s
        self.copy_s = copy_s
        self.ops = []
        torch = self

        class _Cuda:
            @staticmethod
            def is_available():
                return available

            @staticmethod
            def device_count():
                return len(matmul_s) if available else 0

            @staticmethod
            def synchronize(i):
                torch.ops.append(("sync", i))

            @staticmethod
            def device(i):
                return contextlib.nullcontext()

        self.cuda = _Cuda()

    class _T:
        def __init__(self, torch, dev):
            self.torch, self.dev = torch, dev

        def copy_(self, other):
            i = int(self.dev.split(":")[1])
            self.torch.clock.t += self.torch.copy_s[i]
            self.torch.ops.append(("copy", i))

    def randn(self, *shape, device, dtype):
        return FakeTorch._T(self, device)

    def empty(self, n, device, dtype):
        return FakeTorch._T(self, device)

    def matmul(self, a, b):
        i = int(a.dev.split(":")[1])
        self.clock.t += self.matmul_s[i]
        self.ops.append(("matmul", i))
