"""Figures of a replay: JCT CDF per arm and a per-GPU Gantt chart per arm (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from pal_lab.replay.metrics import JobResult


def write_plots(out_dir: str | Path, trace: str, arms: Mapping[str, Sequence[JobResult]],
                gpus_per_node: int, node_names: Sequence[str]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, jobs in arms.items():
        xs = sorted(j.jct_s / 3600.0 for j in jobs)
        ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=arm)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (trace hours)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"{trace}: JCT CDF (replayed on Slurm)")
    ax.legend()
    path = out / f"{trace}-jct-cdf.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    written.append(path)
    row = {(n, s): i * gpus_per_node + s for i, n in enumerate(node_names) for s in range(gpus_per_node)}
    for arm, jobs in arms.items():
        fig, ax = plt.subplots(figsize=(9, 6))
        cmap = plt.get_cmap("tab20")
        for k, j in enumerate(jobs):
            for node, slots in j.placement.items():
                for s in slots:
                    ax.barh(row[(node, s)], (j.end_s - j.start_s) / 3600.0, left=j.start_s / 3600.0,
                            color=cmap(k % 20), edgecolor="black", linewidth=0.2)
        ax.set_yticks([i * gpus_per_node + (gpus_per_node - 1) / 2 for i in range(len(node_names))], list(node_names))
        ax.set_xlabel("trace hours")
        ax.set_title(f"{trace} / {arm}: GPU occupancy (one row per GPU, one colour per job)")
        path = out / f"{trace}-{arm}-gantt.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written
