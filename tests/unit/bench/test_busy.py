import types

from pal_slurm.bench.base import Sample
from pal_slurm.bench.busy import BusyProbe, flag_busy, gpu_process_reason


def fake_psutil(load, cpus=4, pct=10.0):
    return types.SimpleNamespace(cpu_count=lambda: cpus, getloadavg=lambda: (load, 0, 0),
                                 cpu_percent=lambda interval=None: pct)


def test_host_load_threshold():
    assert BusyProbe(psutil_module=fake_psutil(1.0)).host_reason() == ""
    assert "cpu load 3.60 on 4 cpus" == BusyProbe(psutil_module=fake_psutil(3.6)).host_reason()
    assert "cpu 97% busy" == BusyProbe(psutil_module=fake_psutil(0.5, pct=97)).host_reason()


def test_gpu_processes_other_than_ours():
    assert gpu_process_reason([10, 11], own_pids=[10, 11]) == ""
    assert gpu_process_reason([10, 99], own_pids=[10]) == "other gpu processes: 99"


def test_flag_busy_keeps_per_gpu_reason():
    s = Sample("n", 0, "A", "nvml", 1.0, False)
    own = s.flagged_busy("other gpu processes: 5")
    out = flag_busy([s, own], "cpu load")
    assert out[0].busy and out[0].busy_reason == "cpu load"
    assert out[1].busy_reason == "other gpu processes: 5"
    assert flag_busy([s], "") == [s]
