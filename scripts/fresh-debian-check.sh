#!/usr/bin/env bash
# Proves the README's promise: on a bare Debian 12 (or 13) with only git, make and python3, a fresh clone
# of this repository passes `make demo` and `make test`, and a second run of each reuses the
# set-up (faster). Not for CI: it needs root and a few GB, and takes a while.
#
#   scripts/fresh-debian-check.sh [ROOT_DIR]      (default /var/tmp/pal-fresh/$SUITE)
#   PAL_FRESH_SUITE=trixie    Debian 13 instead of 12 (bookworm, the default)
#   PAL_FRESH_TARGETS=demo    only `make demo` (default: "demo test")
#
# ROOT_DIR-base is a cached debootstrap --variant=minbase root plus git, make and python3 (kept
# for the next check). Each command gets its own copy of it, so the first `make demo` and the
# first `make test` both start from a bare machine and a fresh `git clone` of the committed HEAD
# with nothing beside it (no ../shared); each then runs a second time in the same clone.
# Logs stay in ROOT_DIR-{demo,test}/root/*.log; the copies are left for inspection.
set -uo pipefail
main() {   # all in one function, read whole before it runs: editing this file meanwhile is safe
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
SUITE=${PAL_FRESH_SUITE:-bookworm}
TARGETS=${PAL_FRESH_TARGETS:-demo test}
ROOTS=${1:-/var/tmp/pal-fresh/$SUITE}
BASE=$ROOTS-base
DR="$HERE/debian-root.sh"

"$DR" build "$SUITE" "$BASE" || exit 1
if [ ! -f "$BASE/.fresh-base" ]; then
  "$DR" run "$BASE" sh -c 'apt-get update -qq && apt-get install -y -qq git make python3 >/dev/null' \
    || exit 1
  touch "$BASE/.fresh-base"
fi

BUNDLE=$(mktemp -u /tmp/pal-slurm-XXXXXX.bundle)
git -C "$REPO" bundle create -q "$BUNDLE" HEAD || exit 1
HEAD_SHA=$(git -C "$REPO" rev-parse --short HEAD)

results=()
overall=0
run_in() {   # run_in ROOT LABEL CMD: runs CMD in the clone, logs it, records wall time and status
  local root=$1 label=$2 cmd=$3 t0 t1 rc
  t0=$(date +%s%N)
  "$DR" run "$root" bash -c "cd /root/pal-slurm && $cmd" >"$root/root/$label.log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  local ds=$(( (t1 - t0) / 100000000 )) wall; wall="$((ds / 10)).$((ds % 10))"   # seconds, 0.1 s
  local verdict=PASS; [ $rc = 0 ] || { verdict="FAIL (exit $rc)"; overall=1; }
  results+=("$(printf '%-14s %8s s  %s' "$label" "$wall" "$verdict")")
  echo "fresh-check: $label: ${wall} s, $verdict; last lines of its log:"
  tail -n 6 "$root/root/$label.log" | sed 's/^/    /'
}

for target in $TARGETS; do
  work=$ROOTS-$target
  "$DR" clean "$work" >/dev/null && [ ! -e "$work" ] || { echo "fresh-check: cannot remove $work" >&2; exit 1; }
  echo "fresh-check: bare $SUITE copy $work, fresh clone of $HEAD_SHA, make $target twice"
  cp -a "$BASE" "$work"
  cp "$BUNDLE" "$work/root/pal-slurm.bundle"
  "$DR" run "$work" sh -c 'git -c advice.detachedHead=false clone -q /root/pal-slurm.bundle pal-slurm && rm pal-slurm.bundle \
    && ls -A /root && python3 --version && command -v python3' || { overall=1; continue; }
  run_in "$work" "make-$target-1" "make $target"
  run_in "$work" "make-$target-2" "make $target"
done
rm -f "$BUNDLE"

echo
echo "fresh-check: $SUITE minbase + git make python3, fresh clone of $HEAD_SHA (no ../shared):"
printf '  %s\n' "${results[@]}"
exit $overall
}
main "$@"; exit
