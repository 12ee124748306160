"""palctl: the admin CLI. One module per command group under `pal_slurm.cli.commands`."""
