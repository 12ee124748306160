"""The trial path's evidence: what PAL would have done in `shadow` partitions (or did in `on`
ones) set against what Slurm did (report.py), for `palctl trial report`."""
