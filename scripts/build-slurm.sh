#!/usr/bin/env bash
# Builds Slurm from SchedMD's source and installs it over the Debian packages of a Debian root
# (scripts/test-in-debian-root.sh runs it inside the root, once per tarball): the lab then runs
# that release's daemons and clients with everything else Debian's (munge, MariaDB, the slurm
# user, /etc/slurm). Debian 13 (trixie) packages Slurm 24.11 and testing 26.05; SchedMD's
# releases between them (25.11, the one large GPU sites build themselves) come only as source.
#
#   build-slurm.sh TARBALL       third_party/slurm-VERSION.tar.xz (see third_party/README.md)
#
# Configured as Debian configures its own build where the lab depends on it: /usr prefix,
# /etc/slurm, the multiarch libdir, Lua 5.1 for job_submit/lua (the Lua LuaSocket is built for),
# MySQL/MariaDB accounting for slurmdbd, JSON and YAML for `--json`/`--yaml`, and
# --enable-multiple-slurmd (the lab runs one slurmd per emulated node on one host). Debian's
# daemons are named slurm*-wlm; those names become links to the new daemons, so paths that name
# either work. Run as root inside the root; needs the network to Debian's mirror once.
set -euo pipefail
TARBALL=${1:?usage: $0 TARBALL}
[ "$(id -u)" = 0 ] || { echo "build-slurm: run as root" >&2; exit 1; }
DEPS=(build-essential pkg-config libmunge-dev default-libmysqlclient-dev liblua5.1-0-dev
      libjson-c-dev libyaml-dev libhwloc-dev libpam0g-dev python3)
missing=()
for p in "${DEPS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-slurm: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
work=$(mktemp -d /root/slurm-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
tar -xJf "$TARBALL" -C "$work"
src=$(echo "$work"/slurm-*)
cd "$src"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
./configure -q --prefix=/usr --sysconfdir=/etc/slurm --localstatedir=/var \
  --libdir="/usr/lib/$multiarch" --enable-multiple-slurmd --without-rpath --disable-debug \
  --with-munge --disable-slurmrestd >/dev/null
make -s -j"$(nproc)" >/dev/null
# Debian's slurmctld/slurmd/slurmstepd are alternatives links to their *-wlm files: make way for
# the real files, then point the *-wlm names at them.
for d in slurmctld slurmd slurmstepd; do rm -f "/usr/sbin/$d"; done
make -s install >/dev/null
for d in slurmctld slurmd slurmstepd; do ln -sfn "/usr/sbin/$d" "/usr/sbin/$d-wlm"; done
ldconfig
echo "build-slurm: installed $(/usr/sbin/slurmctld -V)"
