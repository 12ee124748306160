#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU, in one run (CI has none): the gpu-marked tests, the
# backends' figures (benchmarks/gpu_backends.py), and palctl profile-nodes --local / rank /
# rankings against a SQLite store. Run from the repository root on a GPU host whose Python
# (PYTHON, default python3; a site's: PYTHON=/opt/pal-slurm/bin/python) has torch or cupy,
# nvidia-ml-py and pytest; the project's own Python dependencies come from that environment or,
# with WHEELS=dir, are installed from wheels there into /tmp/pal-site first.
# Writes everything to ${LOG:-gpu-check.log} as well as stdout. Exits non-zero when a step fails.
set -u -o pipefail
LOG=${LOG:-gpu-check.log}
exec > >(tee "$LOG") 2>&1
fail=0
PY=${PYTHON:-python3}
step() { echo; echo "== $*"; "$@" || { echo "!! failed ($?): $*"; fail=1; }; }

if [ -n "${WHEELS:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/pal-site "$WHEELS"/*.whl || exit 1
  export PYTHONPATH=/tmp/pal-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

step nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
step "$PY" -c 'import sys, importlib
print(sys.version.split()[0])
for m in ("torch", "cupy", "pynvml", "sqlalchemy", "alembic", "click", "numpy"):
    try: print(m, getattr(importlib.import_module(m), "__version__", "?"))
    except Exception as e: print(m, "MISSING", e)'
step "$PY" -m pytest -q -p no:cacheprovider -rs tests/unit/bench
step "$PY" -m pytest -q -p no:cacheprovider -rs -m gpu tests/unit/bench
step "$PY" benchmarks/gpu_backends.py ${GPU_BACKENDS_ARGS:-}

tmp=$(mktemp -d)
cat > "$tmp/pal.toml" <<EOF
[store]
url = "sqlite:///$tmp/pal.db"
[profiling]
spool_dir = "$tmp/spool"
EOF
export PAL_CONFIG=$tmp/pal.toml
palctl() { "$PY" -m pal_slurm.cli "$@"; }
step palctl profile-nodes --local --backend kernel --classes A,B --rounds 3
step palctl profile-nodes --local --backend nvml --classes A --rounds 2
step palctl profile-nodes --local --classes C --rounds 2
step palctl rank
step palctl rankings
echo
[ "$fail" = 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: some steps FAILED"
exit "$fail"
