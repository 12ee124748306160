#!/usr/bin/env bash
# A bare Debian root to try the project as a new user would (see scripts/fresh-debian-check.sh).
#
#   debian-root.sh build SUITE DIR   debootstrap --variant=minbase SUITE (bookworm = Debian 12,
#                                    trixie = Debian 13) into DIR; a finished DIR is reused
#   debian-root.sh run DIR CMD...    run CMD as root inside DIR (clean environment, cwd /root)
#   debian-root.sh clean DIR         stop what still runs in DIR, unmount, remove DIR
#
# Packages come from the Debian mirror the host's apt is configured with (the first .../debian
# URI in /etc/apt/sources.list{,.d/*}; $DEBIAN_MIRROR overrides it). The host's apt proxy
# settings and system pip configuration are copied in, so the root reaches Debian's packages and
# PyPI the way the host does. Needs root (debootstrap, chroot, mount) and util-linux's unshare.
#
# `run` works in private namespaces (unshare): mount, so every mount below vanishes when the
# command ends, whether it succeeds or fails, and nothing propagates to the host; PID, so any
# daemon left behind (slurmd, munged, postgres) dies with it (bash stays that namespace's init
# and reaps orphans such as a postmaster after pg_ctl, which would otherwise stay zombies); UTS,
# so the root has its own hostname without renaming the host. The network is the host's (apt, PyPI, loopback tests).
set -euo pipefail

die() { echo "debian-root: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"

host_mirror() {   # the host's Debian mirror (deb822 "URIs:" or one-line "deb URI suite ...")
  local suffix=$1
  if [ -n "${DEBIAN_MIRROR:-}" ] && [ "$suffix" = debian ]; then echo "$DEBIAN_MIRROR"; return; fi
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
      2>/dev/null | sed -n -E 's/^(URIs:|deb)[[:space:]]+(\[[^]]*\][[:space:]]+)?//p' \
    | tr ' ' '\n' | grep -E "^https?://[^ ]+/${suffix}/?$" | head -n1 | sed 's,/$,,'; true
}

root_hostname() { echo "pal-$(basename "$1" | tr -c 'a-zA-Z0-9-\n' '-')"; }

cmd_build() {
  local suite=$1 dir=$2 mirror security
  [ -f "$dir/.debian-root-$suite" ] && { echo "debian-root: reusing $dir ($suite)"; return; }
  [ -e "$dir" ] && die "$dir exists but is not a finished $suite root (debian-root.sh clean $dir)"
  mirror=$(host_mirror debian); security=$(host_mirror debian-security)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  [ -n "$security" ] || security=${mirror%/debian}/debian-security
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
  # A suite newer than the host's debootstrap (Debian testing, say) has no script of its own
  # yet; every Debian suite since squeeze uses sid's, which debootstrap takes as its 4th argument.
  local script=()
  [ -e "/usr/share/debootstrap/scripts/$suite" ] || script=(/usr/share/debootstrap/scripts/sid)
  echo "debian-root: debootstrap --variant=minbase $suite $dir $mirror ${script[*]}"
  mkdir -p "$(dirname "$dir")"
  rm -rf --one-file-system "$dir.part"                 # what an interrupted build left
  debootstrap --variant=minbase "$suite" "$dir.part" "$mirror" "${script[@]}" >"$dir.debootstrap.log" 2>&1 \
    || { tail -n 20 "$dir.debootstrap.log" >&2; die "debootstrap failed (log: $dir.debootstrap.log)"; }
  # The suite's updates and security fixes, as a Debian install has them.
  cat >"$dir.part/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
EOF
  root_hostname "$dir" >"$dir.part/etc/hostname"
  # A hostname that resolves: Slurm and munge look the node up; localhost is the test network.
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
    "$(root_hostname "$dir")" >"$dir.part/etc/hosts"
  mv "$dir.part" "$dir"
  touch "$dir/.debian-root-$suite"
  echo "debian-root: built $dir"
}

copy_host_config() {   # what the root needs to reach the network the way the host does
  local dir=$1 f
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf"       # name resolution for apt and pip
  # An apt proxy, if the host uses one, and the host's view of release dates: a host whose
  # mirror is a dated snapshot tells apt not to check Valid-Until/Date, and a root of a suite
  # whose Release files expire (testing's, the security suites') needs the same.
  for f in /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -qiE 'proxy|Check-Valid-Until|Check-Date' "$f" && cp "$f" "$dir/etc/apt/apt.conf.d/"
  done
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$dir/etc/pip.conf"   # system pip config (index, cert)
  [ -d /etc/xdg/pip ] && { mkdir -p "$dir/etc/xdg"; cp -r /etc/xdg/pip "$dir/etc/xdg/"; }
  # The host's local CAs (a TLS-inspecting proxy's, say), where Debian keeps them; Debian's
  # ca-certificates adds them to the bundle when it is installed or updated (see `run`).
  CA_CHANGED=
  for f in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$f" ] || continue
    mkdir -p "$dir/usr/local/share/ca-certificates"
    cmp -s "$f" "$dir/usr/local/share/ca-certificates/${f##*/}" && continue
    cp "$f" "$dir/usr/local/share/ca-certificates/" && CA_CHANGED=1
  done
  return 0
}

cmd_run() {
  local dir; dir=$(readlink -f "$1"); shift
  ls "$dir"/.debian-root-* >/dev/null 2>&1 || die "$dir is not a root built by debian-root.sh"
  copy_host_config "$dir"
  local name; name=$(cat "$dir/etc/hostname")
  # Inside the new namespaces: the mounts, each for a reason; then chroot with a clean environment.
  DIR=$dir NAME=$name CA_CHANGED=$CA_CHANGED unshare --mount --uts --pid --fork --propagation private -- bash -c '
    set -e
    hostname "$NAME"
    mount -t proc proc "$DIR/proc"                  # ps, psutil, slurmd, munge, postgres read /proc
    mount --rbind /sys "$DIR/sys"                   # topology (hwloc), and the cgroup hierarchies a booted
                                                    # Debian has under /sys/fs/cgroup (slurmd cgroup plugin)
    mount --bind /dev "$DIR/dev"                    # /dev/null, /dev/urandom (munge keys), ttys
    mount -t devpts -o newinstance,ptmxmode=0666 devpts "$DIR/dev/pts" 2>/dev/null \
      || mount --bind /dev/pts "$DIR/dev/pts"       # pseudo-terminals (apt, su, pytest capture)
    mount -t tmpfs -o mode=1777 shm "$DIR/dev/shm"  # POSIX shared memory: PostgreSQL, multiprocessing
    mount -t tmpfs -o mode=0755 run "$DIR/run"      # pid files and sockets: munge, slurm, postgres
    mkdir -p -m 1777 "$DIR/run/lock"
    mount -t tmpfs -o mode=1777 tmp "$DIR/tmp"      # scratch dirs of the labs and pg fixtures
    if [ -n "$CA_CHANGED" ] && [ -x "$DIR/usr/sbin/update-ca-certificates" ]; then
      chroot "$DIR" /usr/sbin/update-ca-certificates >/dev/null 2>&1 || true
    fi
    exec chroot "$DIR" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      /bin/bash -c "cd /root && \"\$@\"; exit \$?" bash "$@"
  ' bash "$@"
}

cmd_clean() {
  local dir=$1 pid root
  [ -e "$dir" ] || [ -e "$dir.part" ] || return 0
  for d in "$dir" "$dir.part"; do
    [ -e "$d" ] || continue
    d=$(readlink -f "$d")
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do   # processes still running inside this root
      root=$(readlink "/proc/$pid/root" 2>/dev/null) || continue
      [ "$root" = "$d" ] && kill -9 "$pid" 2>/dev/null || true
    done
    # Mounts exist only in `run`'s private namespace; any under DIR in ours are stale leftovers.
    { grep -o " $d/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf --one-file-system "$d"
  done
  rm -f "$dir.debootstrap.log"
  echo "debian-root: removed $dir"
}

main() {
  case "${1:-}" in
    build) [ $# = 3 ] || die "usage: $0 build SUITE DIR"; cmd_build "$2" "$3" ;;
    run)   [ $# -ge 3 ] || die "usage: $0 run DIR CMD..."; cmd_run "$2" "${@:3}" ;;
    clean) [ $# = 2 ] || die "usage: $0 clean DIR"; cmd_clean "$2" ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
}
main "$@"; exit  # one line: bash has read it all before a long `run` starts, so editing this file then is safe
