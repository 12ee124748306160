"""Benchmark backends (nvml, kernel, replay) and the prolog/epilog sample recorders."""
