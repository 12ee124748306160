"""The trial report's plot: per job, PAL's slowdown over Slurm's (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

from pal_slurm.trial.report import TrialReport


def write_plots(folder: str | Path, report: TrialReport) -> list[Path]:
    """One PNG (the histogram of per-job ratios, GPU-weighted); none without compared jobs."""
    if not report.compared:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ratios = [j.ratio for j in report.compared]
    ax.hist(ratios, bins=30, weights=[j.gpus for j in report.compared], color="tab:blue")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("PAL's GPUs' slowdown / Slurm's (< 1: PAL faster)")
    ax.set_ylabel("GPUs")
    ax.set_title(f"{len(ratios)} jobs")
    fig.tight_layout()
    path = out / "trial-ratio.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
