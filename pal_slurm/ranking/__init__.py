"""Samples -> per-class per-GPU scores (median-normalised) -> bins -> ranking snapshots."""

from pal_slurm.ranking.binning import METHODS, artifact_bins, bin_scores, optimal_bins
from pal_slurm.ranking.snapshot import ClassRanking, Ranking

__all__ = ["METHODS", "ClassRanking", "Ranking", "artifact_bins", "bin_scores", "optimal_bins"]
