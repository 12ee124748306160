"""Choose a backend by name or by what this host offers.

auto: `kernel` when torch/cupy is importable and sees a GPU (it measures what jobs feel), else
`nvml` when NVML initialises and sees a GPU (clock telemetry, a proxy, under the kernel's matmul
where one can run, else of an idle GPU, which its samples flag), else NoGpuAvailable
with every backend's reason. `replay` is never chosen automatically: replayed profiles on a
real cluster would be wrong data, so it must be asked for by name.
"""

from __future__ import annotations

from typing import Callable, Mapping

from pal_slurm.bench.base import BACKENDS, Backend, NoGpuAvailable

AUTO_ORDER = ("kernel", "nvml")


def _default_factories(seed: int, nonce: object | None, slowdown: str,
                       cluster: str = "") -> dict[str, Callable[[], Backend]]:
    from pal_slurm.bench.kernel import KernelBackend, MatmulLoad
    from pal_slurm.bench.nvml import NvmlBackend, other_gpu_processes
    from pal_slurm.bench.replay import ReplayBackend
    from pal_slurm.config import parse_replay_cluster, parse_slowdowns

    return {
        "kernel": lambda: KernelBackend(other_processes=other_gpu_processes),
        "nvml": lambda: NvmlBackend(load=MatmulLoad()),
        "replay": lambda: ReplayBackend(seed=seed, nonce=nonce, slowdown=parse_slowdowns(slowdown),
                                        cluster=parse_replay_cluster(cluster)),
    }


def select_backend(
    name: str = "auto",
    *,
    seed: int = 0,
    nonce: object | None = None,
    replay_slowdown: str = "",
    replay_cluster: str = "",
    factories: Mapping[str, Callable[[], Backend]] | None = None,
) -> Backend:
    """The backend to use; ValueError for an unknown name, NoGpuAvailable when none can run."""
    name = (name or "auto").strip().lower()
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    made = dict(factories) if factories is not None else _default_factories(seed, nonce, replay_slowdown, replay_cluster)
    if name != "auto":
        backend = made[name]()
        avail = backend.available()
        if not avail.ok:
            raise NoGpuAvailable(f"backend {name} cannot run here: {avail}")
        return backend
    reasons = []
    for candidate in AUTO_ORDER:
        backend = made[candidate]()
        avail = backend.available()
        if avail.ok:
            return backend
        reasons.append(f"{candidate}: {avail}")
    raise NoGpuAvailable(
        "no GPU benchmark backend can run on this host ("
        + "; ".join(reasons)
        + "); use --backend replay for a lab cluster without GPUs"
    )
