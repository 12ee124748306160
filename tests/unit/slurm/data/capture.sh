#!/usr/bin/env bash
# Re-captures the sinfo/squeue JSON in this directory from a real lab cluster (scripts/slurm-lab.sh).
# The parsers' unit tests run on these files, so they test what Slurm 22.05 really prints.
#   tests/unit/slurm/data/capture.sh          (uses ports 27817/27901+ and LAB=/tmp/pal-capture-lab)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../../.." && pwd)
export LAB=${LAB:-/tmp/pal-capture-lab} CTLD_PORT=${CTLD_PORT:-27817} NODE_PORT0=${NODE_PORT0:-27901}
export SLURM_CONF=$LAB/etc/slurm.conf
lab() { "$REPO/scripts/slurm-lab.sh" "$@"; }
trap 'lab stop' EXIT
# keep only the stable parts: drop meta (host, timestamps)
save() { python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("meta",None); json.dump(d,sys.stdout,indent=1,sort_keys=True)' > "$HERE/$1"; echo "captured $1"; }
sb() { sbatch --parsable -o "$LAB/out/%j.out" "$@"; }
wait_running() { for _ in $(seq 1 100); do [ "$(squeue -h -t R -o %i | wc -l)" -ge "$1" ] && return 0; sleep 0.1; done; squeue; return 1; }

# ---- typed (per-slot) GRES: pal-slurm's configuration ----
LAB_GRES=typed lab start
sinfo --json | save sinfo_typed_idle.json
squeue --json | save squeue_empty.json
sb -w gpu01 --gres=gpu:s2:1,gpu:s3:1 --comment='pal:class=resnet' -J typed --wrap 'sleep 300' >/dev/null
a=$(sb -N2 -w 'gpu[02-03]' --gres=gpu:2 -J untyped2n --wrap 'sleep 300')
sb -w gpu04 --gres=gpu:4 -J full --wrap 'sleep 300' >/dev/null
wait_running 3
scontrol update jobid="$a" AdminComment='pal:placed=gpu[02-03];rank=v3'
scontrol update nodename=gpu04 state=drain reason=capture-test
sb --hold --gres=gpu:1 --comment='pal:class=bert,mode=defer' -J held --wrap 'sleep 1' >/dev/null
sb --gres=gpu:4 -N1 -J waiting --wrap 'sleep 1' >/dev/null   # no node has 4 free GPUs: pending (Resources)
sleep 1.2
sinfo --json | save sinfo_typed_busy.json
squeue --json | save squeue_typed_busy.json
lab stop

# ---- plain Gres=gpu:4 (stock Slurm) ----
LAB_GRES=plain lab start
sb -w gpu01 --gres=gpu:1 -J one --wrap 'sleep 300' >/dev/null
sb -w gpu01 --gres=gpu:2 -J two --wrap 'sleep 300' >/dev/null
sb -N2 -w 'gpu[03-04]' --gres=gpu:3 -J twonode --wrap 'sleep 300' >/dev/null
wait_running 3
sinfo --json | save sinfo_plain_busy.json
squeue --json | save squeue_plain_busy.json
