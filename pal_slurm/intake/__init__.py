"""The edge between Slurm and the engine: every parser of what Slurm says about a job or a node
(durations, hostlists, Slurm's JSON numbers and unset values, TRES/GRES strings, feature
constraints) and the refusal of input pald does not read, each concept in one module.

Nothing here imports the daemon, the simulator or the policies: they read Slurm through this
package, so a job reads the same wherever it comes from.
"""
