#!/usr/bin/env bash
# debian-root.sh - a cached Debian root (debootstrap) in which the project's real parts run: Slurm,
# munge, Lua + LuaSocket, PostgreSQL, Python + venv. Used to test other Debian/Slurm versions than
# the host's (Debian 13: Slurm 24.11, Python 3.13, PostgreSQL 17, LuaSocket 3.1) without a VM.
#
#   scripts/debian-root.sh build SUITE DIR   debootstrap SUITE into DIR and install the packages;
#                                            reused as is when DIR/.pal-root-ready exists
#   scripts/debian-root.sh run DIR CMD...    run CMD (as root) inside DIR with /proc, /sys, /dev,
#                                            /dev/pts, /dev/shm and a private /tmp and /run mounted
#                                            in a private mount + PID namespace: the mounts vanish
#                                            and every process left behind is killed when CMD ends
#   scripts/debian-root.sh clean DIR         remove DIR (refuses while something runs inside)
#
# Knobs: MIRROR (default: the host's first deb.debian.org-style URI in its apt sources, else
# http://deb.debian.org/debian), ROOT_PKGS (extra packages), BIND="host:inside ..." (extra binds
# for `run`, read-only unless suffixed :rw). Needs root, debootstrap, util-linux unshare.
# Never point DIR inside a git worktree (the tree would be carried along by git tools).
set -euo pipefail

# Everything the project needs inside: Slurm (controller, node daemon, clients), munge, Lua 5.1 +
# LuaSocket for the submit hook, PostgreSQL, Python with venv/pip, and the small tools scripts use.
PKGS=(slurmctld slurmd slurm-client munge lua5.1 lua-socket postgresql python3 python3-venv
      python3-pip bc procps make ca-certificates util-linux iproute2)

log() { echo "[debian-root $(date +%T)] $*" >&2; }
die() { log "error: $*"; exit 1; }

host_mirror() {
  local uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -v security | head -1 | awk '{print $2}') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

ready_mark() { echo "$1/.pal-root-ready"; }

build() {
  local suite=$1 dir=$2 mirror=${MIRROR:-$(host_mirror)}
  if [ -f "$(ready_mark "$dir")" ]; then
    log "reusing $dir ($(cat "$(ready_mark "$dir")"))"
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap missing (apt-get install debootstrap)"
  local t0=$SECONDS
  if [ ! -x "$dir/usr/bin/apt-get" ]; then
    rm -rf "$dir"
    mkdir -p "$(dirname "$dir")"
    log "debootstrap $suite from $mirror into $dir"
    debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 \
      || { tail -20 "$dir.debootstrap.log" >&2; die "debootstrap failed (log: $dir.debootstrap.log)"; }
  fi
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  # No services start inside a root: the tests start their own private daemons.
  printf '#!/bin/sh\nexit 101\n' > "$dir/usr/sbin/policy-rc.d"
  chmod 755 "$dir/usr/sbin/policy-rc.d"
  log "installing ${PKGS[*]} ${ROOT_PKGS:-}"
  # shellcheck disable=SC2086
  run "$dir" env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get update -qq && apt-get install -y -qq ${PKGS[*]} ${ROOT_PKGS:-} >/dev/null" \
    || die "apt-get install inside $dir failed"
  run "$dir" apt-get clean
  local slurm python pg
  slurm=$(run "$dir" sinfo --version 2>/dev/null || echo '?')
  python=$(run "$dir" python3 --version 2>/dev/null || echo '?')
  pg=$(run "$dir" sh -c 'ls /usr/lib/postgresql' 2>/dev/null || echo '?')
  echo "$suite: $slurm, $python, postgresql $pg; built in $((SECONDS - t0)) s" > "$(ready_mark "$dir")"
  log "ready: $(cat "$(ready_mark "$dir")")"
}

# The body that runs inside the new namespaces (as PID 1's child of unshare --fork).
inner() {
  local dir=$1; shift
  mount --make-rprivate / 2>/dev/null || true
  mount -t proc proc "$dir/proc"
  mount --rbind /sys "$dir/sys"
  mount --rbind /dev "$dir/dev"
  mkdir -p "$dir/dev/pts" "$dir/dev/shm"
  mount -t tmpfs -o mode=1777 tmpfs "$dir/dev/shm" 2>/dev/null || true
  mount -t tmpfs -o mode=755 tmpfs "$dir/run"
  mkdir -p "$dir/run/lock" && chmod 1777 "$dir/run/lock"
  local b host inside mode
  for b in ${BIND:-}; do
    IFS=: read -r host inside mode <<<"$b"
    mkdir -p "$dir$inside"
    mount --bind "$host" "$dir$inside"
    [ "${mode:-ro}" = rw ] || mount -o remount,bind,ro "$dir$inside"
  done
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  exec chroot "$dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" ${PASS_ENV:-} "$@"
}

run() {
  local dir=$1; shift
  [ -d "$dir/usr" ] || die "$dir is not a root (build it first)"
  [ $# -gt 0 ] || set -- /bin/bash
  # --kill-child: when CMD ends, everything it left running (daemons, stray jobs) dies with the
  # PID namespace; the mount namespace takes the mounts along.
  unshare --mount --pid --fork --kill-child -- "$0" __inner "$dir" "$@"
}

clean() {
  local dir=$1
  [ -d "$dir" ] || return 0
  if grep -q " $dir/" /proc/mounts; then die "$dir has mounts (something runs inside)"; fi
  rm -rf --one-file-system "$dir" "$dir.debootstrap.log"
}

cmd=${1:-}; shift || true
case "$cmd" in
  build) [ $# -eq 2 ] || die "usage: $0 build SUITE DIR"; build "$1" "$(realpath -m "$2")" ;;
  run) [ $# -ge 1 ] || die "usage: $0 run DIR CMD..."; d=$(realpath -m "$1"); shift; run "$d" "$@" ;;
  clean) [ $# -eq 1 ] || die "usage: $0 clean DIR"; clean "$(realpath -m "$1")" ;;
  __inner) inner "$@" ;;
  *) die "usage: $0 build SUITE DIR | run DIR CMD... | clean DIR" ;;
esac
