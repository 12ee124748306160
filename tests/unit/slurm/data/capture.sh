#!/usr/bin/env bash
# Re-captures what Slurm prints, from a real lab cluster (scripts/slurm-lab.sh), into
# tests/unit/slurm/data/<X.Y>/ (X.Y: the Slurm release of the commands on PATH). The readers' and
# the actuator's unit tests run on these files, so they test what each Slurm really prints.
#
#   tests/unit/slurm/data/capture.sh         Slurm of this host (Debian 12: 22.05), with the
#                                            project's venv first on PATH (the lab runs palctl)
# Slurm 24.11 (SUITE=trixie, Debian 13), 25.11 (SUITE=slurm-25.11, built from source) or 26.05
# (SUITE=forky, Debian testing), in the cached
# Debian root `make test` prepares (scripts/test-in-debian-root.sh --prepare SUITE):
#   R=${PAL_ROOTS:-/var/tmp/pal-roots}/$SUITE
#   scripts/test-in-debian-root.sh $SUITE tests/unit/slurm      (copies this tree to $R/root/pal-slurm)
#   scripts/debian-root.sh run $R bash -c \
#     'cd /root/pal-slurm && PATH=/root/pal-venv/bin:$PATH tests/unit/slurm/data/capture.sh'
#   cp -r $R/root/pal-slurm/tests/unit/slurm/data/<X.Y> tests/unit/slurm/data/
# Uses ports 27817/27901+ and LAB=/tmp/pal-capture-lab.
#
# Per version: version.txt (`sinfo --version`), json_list.txt (the data_parser versions each
# client accepts with --json=vX; 23.02+), then the same scenes for every version:
#   typed idle   sinfo/squeue --json (+ `scontrol show nodes --json`, 23.02+)
#   typed busy   jobs on exact typed slots, an untyped 2-node job, a full node that is then
#                drained, a held PAL job and a pending (Resources) one
#   plain busy   Gres=gpu:4 with 3 running jobs
# 23.02+ also gets the busy scenes in every data_parser version the clients accept
# (nodes_typed_busy.v0.0.40.json ...) and a held --exclusive job in each of them
# (squeue_exclusive_held.v0.0.4x.json: v0.0.45 no longer prints a job's sharing mode), and
# every release gets `scontrol show job -d` / `show node` text.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../../.." && pwd)
export LAB=${LAB:-/tmp/pal-capture-lab} CTLD_PORT=${CTLD_PORT:-27817} NODE_PORT0=${NODE_PORT0:-27901}
export SLURM_CONF=$LAB/etc/slurm.conf
lab() { "$REPO/scripts/slurm-lab.sh" "$@"; }
trap 'lab stop' EXIT
LAB_GRES=typed lab start
VERSION=$(sinfo --version | awk '{print $2}')          # "slurm-wlm 24.11.5", "slurm 25.11.7" -> X.Y.Z
OUT=$HERE/${VERSION%.*}
mkdir -p "$OUT"
echo "$(sinfo --version)" > "$OUT/version.txt"
# keep only the stable parts of meta: which parser printed it and for which Slurm release
save() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
meta = d.pop("meta", None) or {}
keep = {k: meta[k] for k in ("plugin", "Slurm", "slurm") if k in meta}
for k in ("Slurm", "slurm"):
    keep.get(k, {}).pop("cluster", None)
if keep:
    d["meta"] = keep
json.dump(d, sys.stdout, indent=1, sort_keys=True)' > "$OUT/$1"
  echo "captured ${OUT#"$HERE"/}/$1"
}
text() { cat > "$OUT/$1"; echo "captured ${OUT#"$HERE"/}/$1"; }
sb() { sbatch --parsable -o "$LAB/out/%j.out" "$@"; }
wait_running() { for _ in $(seq 1 100); do [ "$(squeue -h -t R -o %i | wc -l)" -ge "$1" ] && return 0; sleep 0.1; done; squeue; return 1; }
# data_parser versions the clients accept (23.02+; 22.05 has the fixed openapi v0.0.38 shape)
PARSERS=""
if sinfo --json=list >/dev/null 2>&1; then
  for c in sinfo squeue scontrol; do echo "== $c --json=list"; $c --json=list 2>&1; done | text json_list.txt
  PARSERS=$(scontrol --json=list 2>&1 | grep -o 'v0\.0\.[0-9]*' | sort -u)
fi
nodes_json() { if [ -n "$PARSERS" ]; then scontrol show nodes --json${1:+=$1}; fi; }
# one scene in the default shape (and each data_parser version, with ALL=1)
scene() {
  local tag=$1 all=${2:-0} p
  sinfo --json | save "sinfo_$tag.json"
  [ -z "$PARSERS" ] || nodes_json | save "nodes_$tag.json"
  if [ "$all" = 1 ]; then
    for p in $PARSERS; do
      nodes_json "$p" | save "nodes_$tag.$p.json"
      squeue --json="$p" | save "squeue_$tag.$p.json"
    done
  fi
}

# ---- typed (per-slot) GRES: pal-slurm's configuration ----
scene typed_idle
squeue --json | save squeue_empty.json
t=$(sb -w gpu01 --gres=gpu:s2:1,gpu:s3:1 --comment='pal:class=resnet' -J typed --wrap 'sleep 300')
a=$(sb -N2 -w 'gpu[02-03]' --gres=gpu:2 -J untyped2n --wrap 'sleep 300')
sb -w gpu04 --gres=gpu:4 -J full --wrap 'sleep 300' >/dev/null
wait_running 3
scontrol update jobid="$a" AdminComment='pal:placed=gpu[02-03];rank=v3'
scontrol update nodename=gpu04 state=drain reason=capture-test
h=$(sb --hold --gres=gpu:1 --comment='pal:class=bert,mode=defer' -J held --wrap 'sleep 1')
sb --gres=gpu:4 -N1 -J waiting --wrap 'sleep 1' >/dev/null   # no node has 4 free GPUs: pending (Resources)
sleep 1.2
scene typed_busy 1
squeue --json | save squeue_typed_busy.json
x=$(sb --hold --exclusive --gres=gpu:1 -J exclusive --wrap 'sleep 1')   # held: it takes nothing
for p in $PARSERS; do squeue --json="$p" --jobs="$x" | save "squeue_exclusive_held.$p.json"; done
scontrol -o show job "$h" | text scontrol_show_job_held.txt
scontrol show job -d "$t" | text scontrol_show_job_typed.txt
scontrol show node gpu01 | text scontrol_show_node_gpu01.txt
scontrol show node gpu04 | text scontrol_show_node_gpu04_drained.txt
lab stop

# ---- plain Gres=gpu:4 (stock Slurm) ----
LAB_GRES=plain lab start
sb -w gpu01 --gres=gpu:1 -J one --wrap 'sleep 300' >/dev/null
sb -w gpu01 --gres=gpu:2 -J two --wrap 'sleep 300' >/dev/null
p=$(sb -N2 -w 'gpu[03-04]' --gres=gpu:3 -J twonode --wrap 'sleep 300')
wait_running 3
scene plain_busy
squeue --json | save squeue_plain_busy.json
scontrol show job -d "$p" | text scontrol_show_job_plain_twonode.txt
