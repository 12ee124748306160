import types

import pytest

from pal_slurm.bench.base import GpuTarget, NoGpuAvailable, Unavailable
from pal_slurm.bench import kernel
from pal_slurm.bench.kernel import KernelBackend, MatmulLoad, TorchAccelerator

from .fakes import FakeClock, FakeTorch


def make(matmul_s, copy_s, available=True, n=1000, nbytes=10**9):
    clock = FakeClock()
    torch = FakeTorch(clock, matmul_s, copy_s, available)
    b = KernelBackend(accelerator=lambda: TorchAccelerator(torch), clock=clock, wall_clock=lambda: 5.0,
                      matmul_n=n, copy_bytes=nbytes)
    return b, torch


def test_tflops_and_gbps_from_timed_work():
    # 2*1000^3 flop per matmul = 2 GFLOP; 0.01 s each -> 0.2 TFLOP/s; 0.02 s -> 0.1
    b, torch = make([0.01, 0.02], [0.1, 0.1])
    fast, slow = b.sample([GpuTarget("n1", 0), GpuTarget("n1", 1)], "A", duration_s=1.0)
    assert fast.value == pytest.approx(0.2) and slow.value == pytest.approx(0.1)
    assert fast.higher_is_better and fast.slowness() == pytest.approx(5.0)
    assert fast.metrics["copy_gbps"] == pytest.approx(2 * 1e9 / 0.1 / 1e9)
    # calibration: budget 0.25 s per GPU for the matmul -> 25 iterations of 0.01 s
    assert fast.metrics["matmul_iters"] == 25 and slow.metrics["matmul_iters"] == 12
    assert ("sync", 0) in torch.ops and ("matmul", 1) in torch.ops
    assert fast.taken_at == 5.0 and fast.metrics["library"] == "torch"


def test_time_budget_is_respected():
    b, torch = make([0.05], [0.05])
    b.sample([GpuTarget("n1", 0)], "A", duration_s=2.0)
    # warm-up + single + calibrated runs must stay within ~the budget (plus two warm-ups each)
    assert torch.clock.t <= 2.0 + 4 * 0.05


def test_no_gpu_and_no_library_are_typed():
    b, _ = make([], [], available=False)
    assert b.available().reason is Unavailable.NO_DEVICE
    with pytest.raises(NoGpuAvailable):
        b.sample([GpuTarget("n1", 0)], "A", 1.0)

    def missing():
        raise ImportError("No module named 'torch'")

    nb = KernelBackend(accelerator=missing)
    assert nb.available().reason is Unavailable.NO_LIBRARY
    with pytest.raises(NoGpuAvailable, match="neither torch nor cupy"):
        nb.sample([GpuTarget("n1", 0)], "A", 1.0)


def test_unknown_slot_is_typed():
    b, _ = make([0.01], [0.01])
    with pytest.raises(NoGpuAvailable, match="index 2"):
        b.sample([GpuTarget("n1", 2)], "A", 1.0)


@pytest.mark.gpu
def test_real_kernel_on_a_gpu():
    b = KernelBackend()
    a = b.available()
    if not a.ok:
        pytest.skip(f"no torch/cupy GPU: {a}")
    (s,) = b.sample([GpuTarget("local", 0)], "A", 2.0)
    assert s.value > 0.1 and s.metrics["copy_gbps"] > 1


def test_device_index_differs_from_slot_inside_a_job():
    """Slot 3 seen by the job as CUDA device 0: measured on device 0, recorded as slot 3."""
    b, torch = make([0.01, 0.02], [0.1, 0.1])
    (s,) = b.sample([GpuTarget("n1", 3, device=1)], "A", duration_s=1.0)
    assert s.slot == 3 and s.value == pytest.approx(0.1)
    assert ("matmul", 1) in torch.ops and ("matmul", 0) not in torch.ops


def test_matmul_load_readies_before_it_runs_and_stops_on_time():
    clock = FakeClock()
    torch = FakeTorch(clock, [0.01, 0.02], [0.1, 0.1])
    load = MatmulLoad(accelerator=lambda: TorchAccelerator(torch), matmul_n=8, clock=clock)
    run_for = load([GpuTarget("n1", 0, device=1)])
    assert torch.ops == [("matmul", 1), ("sync", 1)]  # the warm-up, on the job's CUDA device
    run_for(0.1)
    assert clock.t == pytest.approx(0.02 + 0.1, abs=0.02)  # whole matmuls until 0.1 s have passed
    assert {op for op in torch.ops} == {("matmul", 1), ("sync", 1)}


def test_matmul_load_without_a_library_is_typed():
    def missing():
        raise ImportError("No module named 'cupy'")

    with pytest.raises(NoGpuAvailable, match="neither torch nor cupy"):
        MatmulLoad(accelerator=missing)([GpuTarget("n1", 0)])


def fake_cupy(devices):
    def count():
        if isinstance(devices, Exception):
            raise devices
        return devices

    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=count)))


@pytest.mark.parametrize("cupy, torch, library", [
    (fake_cupy(1), "torch", "cupy"),                        # both: cupy (starts 3x faster)
    (fake_cupy(RuntimeError("CUDA driver too old")), "torch", "torch"),  # a cupy that sees no GPU
    (None, "torch", "torch"),                               # torch alone
    (fake_cupy(0), None, "cupy"),                           # cupy alone, even seeing none (typed later)
])
def test_default_accelerator_prefers_a_cupy_that_sees_a_gpu(monkeypatch, cupy, torch, library):
    modules = {"cupy": cupy, "torch": FakeTorch(FakeClock(), [0.01], [0.01]) if torch else None}

    def import_module(name):
        if modules.get(name) is None:
            raise ImportError(f"No module named {name!r}")
        return modules[name]

    monkeypatch.setattr(kernel.importlib, "import_module", import_module)
    assert kernel.default_accelerator().library == library


def test_neither_library_is_an_import_error(monkeypatch):
    def import_module(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(kernel.importlib, "import_module", import_module)
    with pytest.raises(ImportError):
        kernel.default_accelerator()


def test_prepare_starts_cuda_on_each_gpu_before_any_measuring():
    b, torch = make([0.01, 0.01], [0.1, 0.1])
    b.prepare([GpuTarget("n1", 0), GpuTarget("n1", 5, device=1)])
    assert torch.ops == [("sync", 0), ("sync", 1)] and torch.clock.t == 0.0


def test_a_gpu_another_process_uses_is_flagged_by_slot():
    """A process left behind by an earlier job slows the matmul: the sample must say so."""
    clock = FakeClock()
    torch = FakeTorch(clock, [0.01, 0.01], [0.1, 0.1])
    asked = []

    def others(slots):
        asked.append(list(slots))
        return {7: "other gpu processes: 4242", 3: ""}

    b = KernelBackend(accelerator=lambda: TorchAccelerator(torch), clock=clock, wall_clock=lambda: 5.0,
                      matmul_n=1000, copy_bytes=10**9, other_processes=others)
    three, seven = b.sample([GpuTarget("n1", 3, device=0), GpuTarget("n1", 7, device=1)], "A", 1.0)
    assert asked == [[3, 7]]  # NVML's index is the slot, not the job's CUDA device
    assert not three.busy and seven.busy and "4242" in seven.busy_reason
