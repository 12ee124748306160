#!/usr/bin/env bash
# The main job (make demo): see pal_slurm/demo.py. Everything it starts, it stops.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m pal_slurm.demo "$@"
