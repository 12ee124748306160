"""pal-slurm: variability- and locality-aware GPU placement for Slurm clusters."""

__version__ = "0.1.0"
