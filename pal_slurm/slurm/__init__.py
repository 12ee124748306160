"""The only code that runs Slurm commands: readers, hostlist, actuator, gres.conf."""
