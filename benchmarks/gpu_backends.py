#!/usr/bin/env python3
"""The real benchmark backends on a real GPU: what they measure, how steady, what a prolog costs.

Needs an NVIDIA GPU (torch or cupy for `kernel`, nvidia-ml-py and a driver for `nvml`); on a host
without one it says so and exits 1. Prints:

  start      what a fresh process pays before measuring: Python, pal_slurm's imports, torch /
             cupy / NVML imported and started
  kernel     --rounds samples of GPU 0 at each duration, with each array library there: matmul
             TFLOP/s, copy GB/s, the call's wall time, and the spread between rounds (what the
             ranking's median sees)
  nvml       the clock proxy with the GPU idle (what a prolog sees: the job has not started)
             and with the kernel's matmul as its load (what select_backend gives it)
  others     the kernel backend beside another process on the GPU (idle, then computing):
             its TFLOP/s and whether the sample is flagged
  prolog     `sbin/pal-prolog` as slurmd starts it (a fresh Python, a SQLite store, the job's
             GPU from the environment: no scontrol here) with backend replay (the baseline), nvml,
             kernel and auto; wall time against profiling.timeout_s, and the samples that landed

Usage: python3 benchmarks/gpu_backends.py [--rounds 5] [--prolog-runs 3] [--durations 0.5,2]
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pal_slurm.bench.base import GpuTarget  # noqa: E402
from pal_slurm.bench.kernel import (  # noqa: E402
    Accelerator, CupyAccelerator, KernelBackend, MatmulLoad, TorchAccelerator)
from pal_slurm.bench.nvml import NvmlBackend  # noqa: E402
from pal_slurm.bench.select import select_backend  # noqa: E402
from pal_slurm.bench.repository import StoreProfilingRepository  # noqa: E402
from pal_slurm.store import open_store  # noqa: E402

GPU = GpuTarget("local", 0)


def spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    cv = statistics.pstdev(values) / mean if mean else 0.0
    return f"min {min(values):.3f} median {statistics.median(values):.3f} max {max(values):.3f} (cv {cv:.2%})"


def libraries() -> list[tuple[str, Callable[[], Accelerator]]]:
    """Each array library importable here, as the kernel backend would use it."""
    out: list[tuple[str, Callable[[], Accelerator]]] = []
    for name, adapter in (("torch", TorchAccelerator), ("cupy", CupyAccelerator)):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        out.append((name, lambda module=module, adapter=adapter: adapter(module)))
    return out


STARTS = {
    "python": "pass",
    "pal_slurm": "import pal_slurm.bench.prolog, pal_slurm.store, sqlalchemy",
    "torch": "import torch; torch.cuda.device_count(); torch.zeros(1, device='cuda')",
    "cupy": "import cupy; cupy.cuda.runtime.getDeviceCount(); cupy.zeros(1)",
    "pynvml": "import pynvml; pynvml.nvmlInit(); pynvml.nvmlDeviceGetCount()",
}


def start_costs(runs: int) -> None:
    """What a fresh prolog process pays before it measures anything: a cold import and CUDA start."""
    print("start of a fresh process (import + first GPU call), wall s:")
    for name, code in STARTS.items():
        walls = []
        for _ in range(runs):
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])))
            walls.append(time.perf_counter() - t0)
        print(f"  {name:<10} {spread(walls)}" + ("" if res.returncode == 0 else f"  FAILED: {res.stderr.strip()[-120:]}"))


def kernel_rounds(rounds: int, durations: list[float]) -> None:
    for name, accelerator in libraries():
        backend = KernelBackend(accelerator=accelerator)
        print(f"kernel with {name}: {backend.available()}")
        _kernel_rounds(backend, rounds, durations)


def _kernel_rounds(backend: KernelBackend, rounds: int, durations: list[float]) -> None:
    for d in durations:
        tf, gb, wall = [], [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            (s,) = backend.sample([GPU], "A", d)
            wall.append(time.perf_counter() - t0)
            tf.append(s.metrics["matmul_tflops"])
            gb.append(s.metrics["copy_gbps"])
        print(f"  duration {d:.2f} s: TFLOP/s {spread(tf)}")
        print(f"  {'':17} copy GB/s {spread(gb)}")
        print(f"  {'':17} wall s {spread(wall)}")


OTHER_JOB = """
import sys, time
import cupy
a = cupy.ones((4096, 4096), dtype=cupy.float32)
busy = sys.argv[1] == "busy"
(a @ a); cupy.cuda.Device(0).synchronize()
print("ready", flush=True)
end = time.time() + 30
while time.time() < end:
    if busy:
        for _ in range(20):
            a @ a
        cupy.cuda.Device(0).synchronize()
    else:
        time.sleep(0.1)
"""


def kernel_beside_another_process() -> None:
    """A process left on the GPU (idle, or still computing): the kernel sample must be flagged."""
    backend = select_backend("kernel")
    for mode in ("idle", "busy"):
        other = subprocess.Popen([sys.executable, "-c", OTHER_JOB, mode], stdout=subprocess.PIPE, text=True)
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == "ready"
            (s,) = backend.sample([GPU], "A", 2.0)
            print(f"  kernel beside a {mode} process (pid {other.pid}): TFLOP/s {s.value:.2f}  busy {s.busy} "
                  f"[{s.busy_reason}]")
        finally:
            other.kill()
            other.wait()
    (s,) = backend.sample([GPU], "A", 2.0)
    print(f"  kernel alone again: TFLOP/s {s.value:.2f}  busy {s.busy} [{s.busy_reason}]")


def nvml_idle_and_loaded(duration: float) -> None:
    print(f"nvml: {NvmlBackend().available()}")
    for label, backend in (("idle", NvmlBackend()), ("matmul load", NvmlBackend(load=MatmulLoad()))):
        (s,) = backend.sample([GPU], "A", duration)
        m = s.metrics
        print(f"  {label:<13} value {s.value:.3f}  SM {m['sm_clock_mhz']} / max {m['sm_clock_max_mhz']} MHz  "
              f"mem {m['mem_clock_mhz']} / {m['mem_clock_max_mhz']} MHz  power {m['power_w']} / "
              f"{m['power_limit_w']} W  temp {m['temperature_c']} C  reasons [{m['throttle_reasons']}]  "
              f"polls {m['working_polls']}/{m['polls']} working, util {m['gpu_util_pct']}%  ecc {m['ecc_uncorrected']}  remapped {m['remapped_rows_uncorrectable']}  "
              f"busy {s.busy} [{s.busy_reason}]")


def prolog_runs(runs: int, timeout_s: float, duration_s: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        url = f"sqlite:///{tmp_path / 'pal.db'}"
        open_store(url).close()
        (tmp_path / "spool").mkdir()
        conf = tmp_path / "pal.toml"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                   PAL_CONFIG=str(conf), SLURMD_NODENAME="gpu01", CUDA_VISIBLE_DEVICES="0",
                   SLURM_JOB_GPUS="0", SLURM_JOB_COMMENT="pal:class=resnet", PATH="/usr/bin:/bin")
        print(f"prolog: profiling.timeout_s {timeout_s}, duration_s {duration_s}, 1 GPU, {os.cpu_count()} CPUs")
        job = 100
        for backend in ("replay", "nvml", "kernel", "auto"):
            conf.write_text(f'[store]\nurl = "{url}"\n[profiling]\nbackend = "{backend}"\n'
                            f'timeout_s = {timeout_s}\nduration_s = {duration_s}\n'
                            f'spool_dir = "{tmp_path / "spool"}"\n'
                            f'prolog_every_h = 0.0\nprolog_max_delay_s = {timeout_s}\n')  # each run measures
            walls, landed, gave_up = [], 0, 0
            for _ in range(runs):
                job += 1
                t0 = time.perf_counter()
                res = subprocess.run([sys.executable, str(REPO / "sbin" / "pal-prolog")],
                                     env=dict(env, SLURM_JOB_ID=str(job)), capture_output=True, text=True)
                walls.append(time.perf_counter() - t0)
                gave_up += "gave up" in res.stderr
                repo = StoreProfilingRepository(open_store(url, upgrade=False))
                try:
                    got = [s for s in repo.samples() if s.job_id == str(job)]
                finally:
                    repo.close()
                landed += len(got)
                if res.returncode != 0:
                    print(f"    exit {res.returncode}")
            print(f"  {backend:<7} wall s {spread(walls)}  samples stored {landed}/{runs}  gave up {gave_up}")
            for line in res.stderr.strip().splitlines():
                print(f"          log: {line.split(' pal.hook ', 1)[-1][:200]}")
            if got:
                print(f"          last sample: backend {got[0].backend} value {got[0].value:.3f} busy {got[0].busy} "
                      f"[{got[0].busy_reason}]")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--durations", default="0.5,2")
    ap.add_argument("--nvml-duration", type=float, default=2.0)
    ap.add_argument("--prolog-runs", type=int, default=3)
    ap.add_argument("--start-runs", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=5.0, help="profiling.timeout_s (the shipped default)")
    ap.add_argument("--duration-s", type=float, default=2.0, help="profiling.duration_s (the shipped default)")
    args = ap.parse_args()
    if not (KernelBackend().available().ok or NvmlBackend().available().ok):
        print(f"no GPU here: kernel {KernelBackend().available()}; nvml {NvmlBackend().available()}")
        return 1
    start_costs(args.start_runs)
    kernel_rounds(args.rounds, [float(x) for x in args.durations.split(",")])
    nvml_idle_and_loaded(args.nvml_duration)
    kernel_beside_another_process()
    prolog_runs(args.prolog_runs, args.timeout_s, args.duration_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
