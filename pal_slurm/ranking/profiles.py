"""Per-GPU "true" performance profiles for simulation (what a GPU really does, per class).

`artifact_profiles` reproduces the PAL artifact's simulated cluster exactly: Python `random`
seeded 42, and for GPU 0..G-1, for class A, B, C, D: one `random.choice` over the normalised
*runs* of that class's Longhorn file. The same RNG then drives the random placements, so it is
returned too.
"""

from __future__ import annotations

import random

from pal_slurm.model.classes import CLASS_ORDER
from pal_slurm.ranking.datasets import RunSet, artifact_class_runs


def artifact_profiles(num_gpus: int, seed: int = 42) -> tuple[dict[str, tuple[float, ...]], random.Random]:
    runs = artifact_class_runs()
    rng = random.Random(seed)
    out: dict[str, list[float]] = {c: [] for c in CLASS_ORDER}
    for _g in range(num_gpus):
        for c in CLASS_ORDER:
            out[c].append(rng.choice(runs[c].perf_norm))
    return {c: tuple(v) for c, v in out.items()}, rng


def gpu_picks(num_gpus: int, seed: int = 0, runs: dict[str, RunSet] | None = None) -> dict[str, tuple[str, ...]]:
    """Which real measured GPU (dataset id) each simulated GPU 0..num_gpus-1 is, per class.

    Classes that come from the same file share their picks (a GPU keeps one identity). The
    replay backend replays exactly this draw on a lab cluster (`ReplayBackend(cluster=...)`),
    so a ranking measured there ranks the GPUs the event simulator simulates.
    """
    runs = runs or artifact_class_runs()
    rng = random.Random(seed)
    out: dict[str, tuple[str, ...]] = {}
    picks: dict[str, tuple[str, ...]] = {}
    for c in CLASS_ORDER:
        ids = sorted(runs[c].per_gpu_median())
        key = runs[c].source
        if key not in picks:
            picks[key] = tuple(rng.choice(ids) for _ in range(num_gpus))
        out[c] = picks[key]
    return out


def gpu_profiles(num_gpus: int, seed: int = 0, runs: dict[str, RunSet] | None = None) -> dict[str, tuple[float, ...]]:
    """Each simulated GPU becomes one *real* measured GPU (median of its runs), per class.

    Unlike the artifact's per-run draw, a GPU keeps a consistent identity: the same real GPU's
    medians for every class that comes from the same file (`gpu_picks`).
    """
    runs = runs or artifact_class_runs()
    picks = gpu_picks(num_gpus, seed, runs)
    out: dict[str, tuple[float, ...]] = {}
    for c in CLASS_ORDER:
        medians = runs[c].per_gpu_median()
        out[c] = tuple(medians[i] for i in picks[c])
    return out
