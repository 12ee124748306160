#!/usr/bin/env bash
# The main job (make demo): see pal_lab/demo.py. Everything it starts, it stops.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m pal_lab.demo "$@"
