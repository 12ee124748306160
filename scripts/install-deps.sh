#!/usr/bin/env bash
# Installs the Debian packages the demo and the integration tests need (idempotent).
# Debian python3-venv (the project's own .venv), Slurm 22.05 (controller, node daemon, clients), munge, Lua 5.1 with luasocket for the submit
# hook, PostgreSQL for the store tests, slurmdbd + MariaDB for the accounting lab (sacct), procps
# (ps: the lab finds its processes), prometheus (the metrics tests). Run as root on Debian 12 or 13
# (tested: Slurm 22.05 and 24.11; scripts/test-in-debian-root.sh trixie).
set -euo pipefail
PKGS=(python3-venv slurmctld slurmd slurm-client munge lua5.1 lua-socket postgresql bc procps prometheus slurmdbd mariadb-server)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: Debian packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing ${missing[*]}; run as root (apt-get install)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
# Debian starts services on install where it can; the tests start their own private instances.
