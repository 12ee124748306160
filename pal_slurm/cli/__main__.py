"""`python3 -m pal_slurm.cli`: the same as `palctl`."""

from pal_slurm.cli.main import main

main()
