"""Trace-driven simulator: `compat` (the PAL artifact's round model) and `event` (ours)."""
