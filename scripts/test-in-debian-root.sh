#!/usr/bin/env bash
# Runs the tests against another Debian release's Slurm, PostgreSQL, Python and LuaSocket, in a
# cached Debian root on this host (scripts/debian-root.sh): Debian 13 (trixie) gives Slurm 24.11,
# PostgreSQL 17, Python 3.13 and LuaSocket 3.1, Debian testing (forky) Slurm 26.05, PostgreSQL 18
# and Python 3.14, next to the host's Debian 12 (Slurm 22.05, PostgreSQL 15, Python 3.11).
# `make test` calls it for each of the Makefile's ROOT_SUITES.
#
#   scripts/test-in-debian-root.sh SUITE [PYTEST ARGS...]     (default args: the whole suite)
#   scripts/test-in-debian-root.sh SUITE ARGS... --beside ARGS...
#       two pytest runs at once in the same copy (e.g. lab tests, which mostly wait on Slurm,
#       beside unit tests, which use one core); the second one's output follows the first's
#   scripts/test-in-debian-root.sh --prepare SUITE            (steps 1-3 and the root's venv only:
#       `make test` runs it beside the host's tests, so the later run finds everything cached)
#   PAL_ROOTS=/var/tmp/pal-roots   where the roots live (never inside a git work tree)
#
# What it does, each step cached where it can be:
#   1. `debian-root.sh build SUITE $PAL_ROOTS/SUITE` (debootstrap from the host's mirror, once)
#   2. inside, the project's own scripts/install-deps.sh (the Debian packages, once per change
#      of that script)
#   3. on the host, a wheelhouse for the root's Python: `pip download --only-binary` of the
#      dependencies for that Python (once per change of setup.cfg) plus `pip wheel` of this tree;
#      inside, `python3 -m venv` + `pip install --no-index --find-links`: the root needs no index
#   4. a copy of this work tree (tracked and untracked, not ignored, files) in /root/pal-slurm,
#      then pytest there, with the venv's bin first on PATH as the Makefile does
# Prints the time of each step. Needs root, debootstrap (installed if missing) and the network
# to Debian's mirror and PyPI for steps 1-3 the first time.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
PREPARE=0
if [ "${1:-}" = --prepare ]; then PREPARE=1; shift; fi
SUITE=${1:?usage: $0 [--prepare] SUITE [PYTEST ARGS...]}; shift
ROOTS=${PAL_ROOTS:-/var/tmp/pal-roots}
ROOT=$ROOTS/$SUITE
# SUITE is a Debian suite, or slurm-X.Y: Debian 13 with SchedMD's Slurm X.Y built from the one
# third_party/slurm-X.Y.*.tar.xz over Debian's packages (scripts/build-slurm.sh, step 2b)
BASE=$SUITE; SLURM_TARBALL=
case "$SUITE" in
  slurm-*)
    BASE=trixie
    tarballs=("$REPO/third_party/$SUITE".*.tar.xz)
    [ ${#tarballs[@]} = 1 ] && [ -f "${tarballs[0]}" ] \
      || { echo "test-in-debian-root: no single third_party/$SUITE.*.tar.xz" >&2; exit 2; }
    SLURM_TARBALL=${tarballs[0]} ;;
esac
DR="$HERE/debian-root.sh"
HOST_PY=${PAL_HOST_PYTHON:-$REPO/.venv/bin/python}
[ -x "$HOST_PY" ] || HOST_PY=python3
case "$ROOT" in "$REPO"/*) echo "test-in-debian-root: $ROOT is inside the work tree" >&2; exit 2 ;; esac

step() { echo "[test-in-debian-root $SUITE $(date +%T)] $*" >&2; }
timed() { local t0=$SECONDS; "$@"; step "  ($(( SECONDS - t0 )) s)"; }
inside() { "$DR" run "$ROOT" "$@"; }
fingerprint() { cat "$@" | sha256sum | cut -c1-16; }

step "1. root $ROOT"
timed "$DR" build "$BASE" "$ROOT"

deps_mark=$ROOT/root/.pal-deps-$(fingerprint "$REPO/scripts/install-deps.sh")
if [ ! -f "$deps_mark" ]; then
  step "2. Debian packages (scripts/install-deps.sh inside the root)"
  mkdir -p "$ROOT/root/pal-deps"
  cp "$REPO/scripts/install-deps.sh" "$ROOT/root/pal-deps/"
  timed inside bash /root/pal-deps/install-deps.sh
  touch "$deps_mark"
else
  step "2. Debian packages: cached"
fi
if [ -n "$SLURM_TARBALL" ]; then
  slurm_mark=$ROOT/root/.pal-slurm-$(fingerprint "$SLURM_TARBALL" "$HERE/build-slurm.sh")
  if [ ! -f "$slurm_mark" ]; then
    step "2b. Slurm from ${SLURM_TARBALL##*/} (scripts/build-slurm.sh inside the root)"
    mkdir -p "$ROOT/root/pal-deps"
    cp "$SLURM_TARBALL" "$HERE/build-slurm.sh" "$ROOT/root/pal-deps/"
    timed inside bash /root/pal-deps/build-slurm.sh "/root/pal-deps/${SLURM_TARBALL##*/}"
    rm -f "$ROOT/root/pal-deps/${SLURM_TARBALL##*/}" "$ROOT"/root/.pal-slurm-*
    touch "$slurm_mark"
  else
    step "2b. Slurm from ${SLURM_TARBALL##*/}: cached"
  fi
fi

# The lab's node names resolve, as a site's do: Slurm 24.11's slurmctld looks up the batch
# node's name (srun there answers under it, UTS namespaces name each node), and waits ~10 s per
# multi-node step when it cannot (22.05 took the address). Only inside the root.
grep -qs 'pal-slurm lab nodes' "$ROOT/etc/hosts" || {
  printf '127.0.0.1\t%s # pal-slurm lab nodes\n' "$(seq -f 'gpu%02g' -s ' ' 1 32)" >>"$ROOT/etc/hosts"; }

PYVER=$(inside python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
WHEELS=$ROOT/root/pal-wheels
wheels_mark=$WHEELS/.deps-$(fingerprint "$REPO/setup.cfg" "$REPO/pyproject.toml")
if [ ! -f "$wheels_mark" ]; then
  step "3. wheels for Python $PYVER (pip download on the host)"
  rm -rf "$WHEELS"; mkdir -p "$WHEELS"
  # the dependencies of .[test,postgres] as setup.cfg lists them, for the root's Python
  reqs=$("$HOST_PY" - "$REPO/setup.cfg" <<'EOF'
import configparser, sys
cfg = configparser.ConfigParser(); cfg.read(sys.argv[1])
lines = cfg["options"]["install_requires"].splitlines()
extras = cfg["options.extras_require"]
lines += extras["test"].splitlines() + extras["postgres"].splitlines()
print("\n".join(sorted({line.strip() for line in lines if line.strip()})))
EOF
)
  tag=${PYVER/./}
  # shellcheck disable=SC2086
  timed "$HOST_PY" -m pip download -q --disable-pip-version-check -d "$WHEELS" --only-binary=:all: \
    --python-version "$PYVER" --implementation cp --abi "cp$tag" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
    --platform any $(echo "$reqs" | tr '\n' ' ')
  touch "$wheels_mark"
else
  step "3. dependency wheels for Python $PYVER: cached"
fi
rm -f "$WHEELS"/pal_slurm-*.whl
# One build of this tree at a time: `make test` prepares and runs several roots at once, and
# pip builds in the tree (its build/ and egg-info are shared).
flock "$ROOTS/.pal-wheel.lock" \
  "$HOST_PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WHEELS" "$REPO" >/dev/null
venv_mark=$ROOT/root/pal-venv/.deps-${wheels_mark##*/.deps-}
if [ ! -f "$venv_mark" ]; then   # the dependencies: once per wheelhouse
  step "   the root's venv from the wheels"
  timed inside sh -c 'rm -rf /root/pal-venv && python3 -m venv /root/pal-venv &&
    /root/pal-venv/bin/pip install -q --disable-pip-version-check --no-index \
      --find-links /root/pal-wheels "pal-slurm[test,postgres]"'
  touch "$venv_mark"
fi
if [ "$PREPARE" = 1 ]; then step "prepared"; exit 0; fi

main_args=(); beside_args=(); beside=0
for a in "$@"; do
  if [ "$a" = --beside ]; then beside=1; continue; fi
  if [ $beside = 1 ]; then beside_args+=("$a"); else main_args+=("$a"); fi
done
step "4. this work tree -> /root/pal-slurm; pytest ${main_args[*]:-(whole suite)}"
[ $beside = 1 ] && step "   beside it: pytest ${beside_args[*]}"
rm -rf "$ROOT/root/pal-slurm"; mkdir -p "$ROOT/root/pal-slurm"
(cd "$REPO" && git ls-files -co --exclude-standard -z | tar -cf - --null -T - 2>/dev/null) \
  | tar -xf - -C "$ROOT/root/pal-slurm"
# the project itself: every run (the tree may have changed)
inside sh -c '/root/pal-venv/bin/pip install -q --disable-pip-version-check --no-index --no-deps \
  --force-reinstall /root/pal-wheels/pal_slurm-*.whl'
run_pytest() {
  inside bash -c 'cd /root/pal-slurm && export PATH=/root/pal-venv/bin:$PATH &&
    echo "inside: $(. /etc/os-release; echo "$PRETTY_NAME"), $(/usr/sbin/slurmctld -V),
    $(python3 --version), PostgreSQL $(ls /usr/lib/postgresql), $(dpkg-query -W -f "lua-socket \${Version}" lua-socket)" &&
    exec python -m pytest -q -p no:cacheprovider "$@"' bash "$@"
}
t0=$SECONDS
set +e
beside_rc=0
if [ $beside = 1 ]; then
  beside_log=$(mktemp)
  run_pytest --basetemp=/tmp/pal-beside "${beside_args[@]}" >"$beside_log" 2>&1 &
  beside_pid=$!
fi
run_pytest "${main_args[@]}"
rc=$?
if [ $beside = 1 ]; then
  wait $beside_pid; beside_rc=$?
  step "beside it: pytest ${beside_args[*]}: exit $beside_rc"
  cat "$beside_log"; rm -f "$beside_log"
fi
set -e
step "pytest in $SUITE: exit $rc after $(( SECONDS - t0 )) s"
[ $rc = 0 ] || exit $rc
exit $beside_rc
