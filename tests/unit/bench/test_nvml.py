import os

import pytest

from pal_slurm.bench.base import GpuTarget, NoGpuAvailable, Unavailable
from pal_slurm.bench.nvml import NvmlBackend, clock_slowdown, decode_throttle, other_gpu_processes

from .fakes import FakeClock, FakeLibraryNotFound, gpu, make_pynvml


def backend(mod, clock=None):
    clock = clock or FakeClock(100.0)

    def sleep(dt):
        clock.t += dt

    return NvmlBackend(loader=lambda: mod, clock=clock, sleep=sleep, poll_s=0.125)


def test_decode_throttle_names_and_unknown_bits():
    assert decode_throttle(0) == ()
    assert decode_throttle(None) == ()
    assert decode_throttle(0x4 | 0x40) == ("SwPowerCap", "HwThermalSlowdown")
    assert decode_throttle(0x1 | 0x1000) == ("GpuIdle", "Unknown(0x1000)")


def test_clock_slowdown_proxy():
    assert clock_slowdown(1410, 1410) == 1.0
    assert clock_slowdown(1410, 1128) == pytest.approx(1.25)
    assert clock_slowdown(None, 1000) == 1.0
    assert clock_slowdown(1410, 0) == 1.0


def test_sample_reports_clocks_power_throttle_and_score():
    mod = make_pynvml([gpu(), gpu(sm=1128, throttle=0x4 | 0x20, temp=87, ecc=2, remapped=(0, 3, 1, 0))])
    b = backend(mod)
    out = b.sample([GpuTarget("n1", 0), GpuTarget("n1", 1)], "A", duration_s=0.5)
    assert [s.slot for s in out] == [0, 1]
    fast, slow = out
    assert fast.value == 1.0 and slow.value == pytest.approx(1410 / 1128)
    assert slow.metrics["throttle_reasons"] == "SwPowerCap,SwThermalSlowdown"
    assert slow.metrics["temperature_c"] == 87
    assert slow.metrics["power_w"] == 300.0 and slow.metrics["power_limit_w"] == 400.0
    assert slow.metrics["ecc_uncorrected"] == 2
    assert slow.metrics["remapped_rows_uncorrectable"] == 3 and slow.metrics["remap_pending"] is True
    assert slow.metrics["polls"] == 5  # t=100, 100.125 .. 100.5
    assert fast.uuid == "GPU-fake-0" and fast.backend == "nvml" and not fast.higher_is_better
    assert mod.calls["init"] == mod.calls["shutdown"] == 1


def test_not_supported_queries_become_none_not_failures():
    mod = make_pynvml(
        [gpu()],
        unsupported={"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRemappedRows", "nvmlDeviceGetPowerUsage"},
    )
    (s,) = backend(mod).sample([GpuTarget("n1", 0)], "B", 0.0)
    assert s.metrics["ecc_uncorrected"] is None
    assert s.metrics["remapped_rows_uncorrectable"] is None
    assert s.metrics["power_w"] is None
    assert s.value == 1.0


def test_other_gpu_processes_flag_the_sample_busy():
    mod = make_pynvml([gpu(procs=(4242,))])
    (s,) = backend(mod).sample([GpuTarget("n1", 0)], "A", 0.0)
    assert s.busy and "4242" in s.busy_reason


def test_an_idle_gpu_is_flagged_with_the_neutral_value_not_its_idle_clock():
    """Seen on an H200: unloaded, NVML read 345 of 1980 MHz and the proxy said 5.7x slower."""
    mod = make_pynvml([gpu(sm=345, max_sm=1980, util=0, throttle=0x1)])
    (s,) = backend(mod).sample([GpuTarget("n1", 0)], "A", 0.5)
    assert s.value == 1.0 and s.busy and s.busy_reason.startswith("idle:")
    assert s.metrics["sm_clock_mhz"] == 345 and s.metrics["working_polls"] == 0
    assert s.metrics["gpu_util_pct"] == 0 and s.metrics["polls"] == 5


def test_only_the_polls_that_saw_the_gpu_working_set_the_clock():
    """A load that starts late: the first polls see the idle clock, which must not count."""
    clock = FakeClock(100.0)

    def working():
        return clock.t >= 100.25

    mod = make_pynvml([gpu(max_sm=1980, sm=lambda: 1800 if working() else 345,
                           util=lambda: 97 if working() else 0)])
    (s,) = backend(mod, clock).sample([GpuTarget("n1", 0)], "A", 0.5)
    assert s.metrics["working_polls"] == 3 and s.metrics["polls"] == 5
    assert s.value == pytest.approx(1980 / 1800) and not s.busy


def test_without_utilization_the_idle_reason_decides():
    clock = FakeClock(100.0)
    mod = make_pynvml([gpu(max_sm=1980, sm=lambda: 1650 if clock.t >= 100.25 else 345,
                           throttle=lambda: 0x4 if clock.t >= 100.25 else 0x1)],
                      unsupported={"nvmlDeviceGetUtilizationRates"})
    (s,) = backend(mod, clock).sample([GpuTarget("n1", 0)], "A", 0.5)
    assert s.metrics["gpu_util_pct"] is None and s.metrics["working_polls"] == 3
    assert s.value == pytest.approx(1980 / 1650) and s.metrics["throttle_reasons"] == "GpuIdle,SwPowerCap"


def test_other_processes_win_over_idle_as_the_reason():
    mod = make_pynvml([gpu(util=0, procs=(77,))])
    (s,) = backend(mod).sample([GpuTarget("n1", 0)], "A", 0.0)
    assert s.busy and "77" in s.busy_reason and s.value == 1.0


def test_the_load_is_readied_before_polling_and_runs_beside_it():
    events = []

    def load(gpus):
        events.append(("ready", [g.slot for g in gpus]))
        return lambda seconds: events.append(("run", seconds))

    mod = make_pynvml([gpu()])
    b = NvmlBackend(loader=lambda: mod, load=load, clock=FakeClock(1.0), sleep=lambda dt: None)
    (s,) = b.sample([GpuTarget("n1", 2, device=0)], "A", 0.0)
    assert events == [("ready", [2]), ("run", 0.0)] and s.metrics["load"] is True


def test_prepare_readies_the_load_once_for_the_next_sample_of_those_gpus():
    readied = []

    def load(gpus):
        readied.append([g.slot for g in gpus])
        return lambda seconds: None

    mod = make_pynvml([gpu(), gpu()])
    b = NvmlBackend(loader=lambda: mod, load=load, clock=FakeClock(1.0), sleep=lambda dt: None)
    b.prepare([GpuTarget("n1", 1)])
    b.sample([GpuTarget("n1", 1)], "A", 0.0)
    assert readied == [[1]]  # not readied again inside sample
    b.sample([GpuTarget("n1", 0)], "A", 0.0)  # other GPUs, or a second sample: readied there
    b.sample([GpuTarget("n1", 0)], "A", 0.0)
    assert readied == [[1], [0], [0]]


def test_a_load_that_cannot_start_leaves_an_idle_sample_not_a_failure():
    def load(gpus):
        raise RuntimeError("CUDA error: out of memory")

    mod = make_pynvml([gpu(util=0)])
    b = NvmlBackend(loader=lambda: mod, load=load, clock=FakeClock(1.0), sleep=lambda dt: None)
    (s,) = b.sample([GpuTarget("n1", 0)], "A", 0.0)
    assert s.metrics["load"] is False and s.busy and s.busy_reason.startswith("idle:")


def test_library_not_found_is_a_typed_condition():
    mod = make_pynvml([], init_error=FakeLibraryNotFound())
    b = backend(mod)
    a = b.available()
    assert not a.ok and a.reason is Unavailable.NO_DRIVER and "Library Not Found" in a.detail
    with pytest.raises(NoGpuAvailable, match="cannot initialise NVML"):
        b.sample([GpuTarget("n1", 0)], "A", 0.1)


def test_no_library_and_no_device():
    def missing():
        raise ImportError("No module named 'pynvml'")

    a = NvmlBackend(loader=missing).available()
    assert a.reason is Unavailable.NO_LIBRARY
    with pytest.raises(NoGpuAvailable):
        NvmlBackend(loader=missing).sample([GpuTarget("n", 0)], "A", 0)
    assert backend(make_pynvml([])).available().reason is Unavailable.NO_DEVICE
    assert backend(make_pynvml([gpu()])).available().ok


def test_slot_out_of_range_is_typed():
    with pytest.raises(NoGpuAvailable, match="index 3"):
        backend(make_pynvml([gpu()])).sample([GpuTarget("n1", 3)], "A", 0)


@pytest.mark.gpu
def test_real_nvml_on_a_gpu():
    b = NvmlBackend()
    a = b.available()
    if not a.ok:
        pytest.skip(f"no NVIDIA GPU: {a}")
    (s,) = b.sample([GpuTarget("local", 0)], "A", 0.5)
    assert s.metrics["sm_clock_max_mhz"] > 0 and s.value > 0


def test_other_gpu_processes_per_slot_for_the_kernel_backend():
    mod = make_pynvml([gpu(procs=(os.getpid(),)), gpu(procs=(os.getpid(), 555))])
    assert other_gpu_processes([0, 1], loader=lambda: mod) == {0: "", 1: "other gpu processes: 555"}
    assert mod.calls["init"] == mod.calls["shutdown"] == 1


def test_other_gpu_processes_without_nvml_flags_nothing():
    def missing():
        raise ImportError("No module named 'pynvml'")

    assert other_gpu_processes([0], loader=missing) == {}
    assert other_gpu_processes([0], loader=lambda: make_pynvml([], init_error=FakeLibraryNotFound())) == {}
