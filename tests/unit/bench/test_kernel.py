import pytest

from pal_slurm.bench.base import GpuTarget, NoGpuAvailable, Unavailable
from pal_slurm.bench.kernel import KernelBackend, TorchAccelerator

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
