"""`palctl replay`: a trace replayed on a real Slurm lab, stock Slurm against pal-slurm.

plan.py (pure: trace -> Slurm submissions, time scale, time limits), payload.py (the job itself:
reads where Slurm put it and sleeps accordingly), jobcomp.py + metrics.py (pure: Slurm's own
records -> results), harness.py (the one place that starts labs and pald and drives an arm),
plots.py (CDF and Gantt), predict.py + compare.py (the simulator's prediction of an arm and where
the lab parted from it), summary.py (pure: several replays of a trace taken together).
"""
