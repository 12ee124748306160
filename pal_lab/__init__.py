"""pal-slurm's lab and replay tooling: real single-host Slurm clusters, the trace replay and the demo.

Kept out of the runtime package (`pal_slurm`, what compute nodes and the controller install):
it drives `scripts/slurm-lab.sh` from a source checkout, and nothing in `pal_slurm` imports it
at module level (`palctl replay` imports it when run and says so where it is absent).
"""
