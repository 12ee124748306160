import pytest

from pal_slurm.bench.base import Availability, NoGpuAvailable, Unavailable
from pal_slurm.bench.select import select_backend


class Fake:
    def __init__(self, name, ok):
        self.name = name
        self._ok = ok

    def available(self):
        return Availability.yes() if self._ok else Availability.no(Unavailable.NO_DRIVER, f"{self.name} broken")

    def sample(self, gpus, perf_class, duration_s):
        return []


def factories(kernel, nvml, replay=True):
    return {"kernel": lambda: Fake("kernel", kernel), "nvml": lambda: Fake("nvml", nvml),
            "replay": lambda: Fake("replay", replay)}


def test_auto_prefers_kernel_then_nvml():
    assert select_backend("auto", factories=factories(True, True)).name == "kernel"
    assert select_backend("auto", factories=factories(False, True)).name == "nvml"


def test_auto_never_picks_replay():
    with pytest.raises(NoGpuAvailable) as e:
        select_backend("auto", factories=factories(False, False, True))
    assert "kernel: no-driver" in str(e.value) and "nvml: no-driver" in str(e.value)
    assert "--backend replay" in str(e.value)


def test_explicit_names():
    assert select_backend("replay", factories=factories(False, False)).name == "replay"
    with pytest.raises(NoGpuAvailable, match="backend nvml cannot run here"):
        select_backend("nvml", factories=factories(True, False))
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        select_backend("cuda", factories=factories(True, True))


def test_real_auto_on_this_host_is_typed_not_a_crash():
    try:
        b = select_backend("auto")
    except NoGpuAvailable as exc:
        assert "no GPU benchmark backend" in str(exc)
    else:
        assert b.name in ("kernel", "nvml")
