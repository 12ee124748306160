#!/usr/bin/env bash
# slurm-lab.sh - a REAL Slurm 22.05 cluster on one host (Debian 12 packages): one slurmctld, one
# slurmd per emulated node, emulated GPUs (fake char devices) with per-slot typed GRES (s0..sN-1),
# so `tres_per_node=gres:gpu:s2:1` binds exactly GPU 2. Used by the integration tests and the demo.
#
#   scripts/slurm-lab.sh start      (re)start from a clean state; returns when all nodes are idle
#                                   and the scheduler has loaded its parameters (a few seconds)
#   scripts/slurm-lab.sh stop       kill every process of this lab, by PID (never by name)
#   scripts/slurm-lab.sh status
#   eval "$(scripts/slurm-lab.sh env)"   export SLURM_CONF for sinfo/squeue/scontrol/sbatch
#
# Knobs (environment):
#   LAB=<repo>/.slurm-lab  the lab directory (absolute or relative); several labs may coexist
#   NNODES=4 NGPUS=4 NCPUS=16 MEM_MB=4000     node names gpu01..gpuNN
#   CTLD_PORT=26817 NODE_PORT0=26901          slurmd ports NODE_PORT0 .. NODE_PORT0+NNODES-1
#   LAB_HOOK=<path>        job_submit.lua to use (symlinked, with the other *.lua files of its
#                          directory, next to slurm.conf; slurmctld re-reads it when it changes).
#                          Default: a pass-through hook written into $LAB/etc.
#   LAB_PROLOG / LAB_EPILOG / LAB_TASK_PROLOG=<path>   optional Prolog=/Epilog=/TaskProlog=
#   Any other variable in the environment of `start` (e.g. PAL_SOCKET) reaches slurmctld and
#   therefore the hook's os.getenv().
#   LAB_GRES=typed  typed: one GRES type per GPU slot (Gres=gpu:s0:1,...; pal-slurm's binding);
#                   plain: Gres=gpu:N (stock Slurm, for comparisons)
#                   from-plain: the plain lab's gres.conf turned per-slot by
#                   `palctl slurm gres-conf --from` (the site's file is kept as gres.conf.site)
#                   model: GPU model types as sites use them (Gres=gpu:<model>:N), per node from
#                   LAB_GPU_MODELS="gpu01=a100 gpu02=v100 ..." (nodes not named: a100)
#                   model-slots: that model gres.conf turned per-slot by `palctl slurm gres-conf
#                   --from`, each node's model added to its Features
#   LAB_FEATURES="gpu03=big,f3 gpu04=f4"   node features (one NodeName line per node then)
#   LAB_EXTRA_CONF=<lines> appended to slurm.conf (more partitions, a QOS-free site's limits...)
#   UTS=1        each slurmd in its own UTS namespace, so `hostname` in a job prints gpuNN
#   WAIT_SCHED=1 wait for the scheduler's first pass (otherwise the first job waits ~3 s)
#   START_TIMEOUT=20
# Needs: slurmctld slurmd slurm-client munge (Debian), python3 (gres.conf via palctl).
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${LAB:-$REPO/.slurm-lab}
case "$LAB" in /*) ;; *) LAB=$PWD/$LAB ;; esac
NNODES=${NNODES:-4}; NGPUS=${NGPUS:-4}; NCPUS=${NCPUS:-16}; MEM_MB=${MEM_MB:-4000}
CTLD_PORT=${CTLD_PORT:-26817}; NODE_PORT0=${NODE_PORT0:-26901}
UTS=${UTS:-1}; WAIT_SCHED=${WAIT_SCHED:-1}; START_TIMEOUT=${START_TIMEOUT:-20}
LAB_HOOK=${LAB_HOOK:-}; LAB_PROLOG=${LAB_PROLOG:-}; LAB_EPILOG=${LAB_EPILOG:-}
LAB_TASK_PROLOG=${LAB_TASK_PROLOG:-}; LAB_GRES=${LAB_GRES:-typed}
LAB_FEATURES=${LAB_FEATURES:-}; LAB_EXTRA_CONF=${LAB_EXTRA_CONF:-}; LAB_GPU_MODELS=${LAB_GPU_MODELS:-}
SBIN=${SLURM_SBIN:-/usr/sbin}
export SLURM_CONF=$LAB/etc/slurm.conf
MARK="env SLURM_LAB_ID=$LAB"   # in the environment of every daemon we start
NODES=$(for i in $(seq 1 "$NNODES"); do printf 'gpu%02d ' "$i"; done)
LAST=$(printf '%02d' "$NNODES"); LASTPORT=$((NODE_PORT0 + NNODES - 1)); GLAST=$((NGPUS - 1))

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
since() { local d=$(( $(now_ms) - $1 )); printf '%d.%03d' $((d / 1000)) $((d % 1000)); }
log() { echo "[slurm-lab $(date +%T.%3N)] $*" >&2; }

check_binaries() {
  local b missing=""
  for b in "$SBIN/slurmctld-wlm" "$SBIN/slurmd-wlm" "$SBIN/slurmstepd-wlm" /usr/sbin/munged; do
    [ -x "$b" ] || missing="$missing $b"
  done
  for b in sinfo squeue scontrol sbatch; do command -v "$b" >/dev/null || missing="$missing $b"; done
  [ -z "$missing" ] || { log "missing:$missing (run scripts/install-deps.sh)"; return 1; }
}

write_hook_passthrough() {
  cat > "$1" <<'EOF'
-- pass-through job_submit.lua written by slurm-lab.sh (no LAB_HOOK given): accepts every job
function slurm_job_submit(job_desc, part_list, submit_uid)
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end
EOF
}

write_configs() {
  mkdir -p "$LAB"/{bin,etc,run,log,state,spool,dev,out}
  chmod 755 "$LAB" "$LAB/run"
  # Slurm decides "am I slurmctld/slurmd/slurmstepd?" from basename(argv[0]): started as
  # slurmctld-wlm it never loads node GRES. Our own symlinks with the canonical names also bypass
  # /etc/alternatives (which may point at the front-end emulator builds).
  ln -sfn "$SBIN/slurmctld-wlm"  "$LAB/bin/slurmctld"
  ln -sfn "$SBIN/slurmd-wlm"     "$LAB/bin/slurmd"
  ln -sfn "$SBIN/slurmstepd-wlm" "$LAB/bin/slurmstepd"
  [ -s "$LAB/etc/munge.key" ] || dd if=/dev/urandom of="$LAB/etc/munge.key" bs=1024 count=1 2>/dev/null
  chmod 600 "$LAB/etc/munge.key"
  # fake GPUs: must stat() as character devices, or jobs get an empty CUDA_VISIBLE_DEVICES
  local g f
  for g in $(seq 0 "$GLAST"); do
    f=$LAB/dev/nvidia$g
    [ -c "$f" ] && continue
    rm -f "$f"; mknod "$f" c 1 3 2>/dev/null || ln -s /dev/null "$f"
  done

  # per-slot typed GRES from the product's own generator (palctl slurm gres-conf)
  local out gres_field
  # (palctl through its main(): `python3 -m pal_slurm.cli.main` would import the CLI twice)
  out=$(cd "$REPO" && PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" python3 -c \
        'import sys; from pal_slurm.cli.main import main; sys.exit(main(sys.argv[1:]))' \
        slurm gres-conf --nodes "gpu[01-$LAST]" --gpus "$NGPUS" \
        --device-pattern "$LAB/dev/nvidia{slot}" --output "$LAB/etc/gres.conf") \
    || { log "gres.conf generation failed"; return 1; }
  gres_field=$(echo "$out" | grep -o 'Gres=[^ ]*' | tail -1)
  [ -n "$gres_field" ] || { log "no Gres= field from palctl: $out"; return 1; }
  if [ "$LAB_GRES" = plain ] || [ "$LAB_GRES" = from-plain ]; then
    gres_field="Gres=gpu:$NGPUS"
    printf 'AutoDetect=off\nNodeName=gpu[01-%s] Name=gpu File=%s/dev/nvidia[0-%s]\n' "$LAST" "$LAB" "$GLAST" > "$LAB/etc/gres.conf"
  fi
  if [ "$LAB_GRES" = model ] || [ "$LAB_GRES" = model-slots ]; then
    gres_field="Gres=gpu:{model}:$NGPUS"
    { echo AutoDetect=off; for n in $NODES; do
        printf 'NodeName=%s Name=gpu Type=%s File=%s/dev/nvidia[0-%s]\n' "$n" "$(gpu_model "$n")" "$LAB" "$GLAST"
      done; } > "$LAB/etc/gres.conf"
  fi
  # a site's own gres.conf (plain, or with model types) turned per-slot by palctl --from; with
  # models, each node's model becomes a feature (node_lines)
  if [ "$LAB_GRES" = from-plain ] || [ "$LAB_GRES" = model-slots ]; then
    mv "$LAB/etc/gres.conf" "$LAB/etc/gres.conf.site"
    out=$(cd "$REPO" && PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" python3 -c \
          'import sys; from pal_slurm.cli.main import main; sys.exit(main(sys.argv[1:]))' \
          slurm gres-conf --from "$LAB/etc/gres.conf.site" --output "$LAB/etc/gres.conf") \
      || { log "gres.conf generation from the site's file failed"; return 1; }
    gres_field=$(echo "$out" | grep -o 'Gres=[^ ]*' | tail -1)
  fi

  # the job_submit hook: a symlink to LAB_HOOK (+ sibling *.lua modules), or a pass-through
  rm -f "$LAB"/etc/*.lua
  if [ -n "$LAB_HOOK" ]; then
    [ -f "$LAB_HOOK" ] || { log "LAB_HOOK=$LAB_HOOK: no such file"; return 1; }
    local hook_abs m; hook_abs=$(readlink -f "$LAB_HOOK")
    for m in "$(dirname "$hook_abs")"/*.lua; do
      [ "$m" = "$hook_abs" ] || ln -sfn "$m" "$LAB/etc/$(basename "$m")"
    done
    ln -sfn "$hook_abs" "$LAB/etc/job_submit.lua"
  else
    write_hook_passthrough "$LAB/etc/job_submit.lua"
  fi
  local scripts="" p
  for p in LAB_PROLOG:Prolog LAB_EPILOG:Epilog LAB_TASK_PROLOG:TaskProlog; do
    local var=${p%%:*} key=${p#*:}
    [ -n "${!var}" ] || continue
    [ -x "${!var}" ] || { log "$var=${!var}: not an executable file"; return 1; }
    scripts="$scripts$key=$(readlink -f "${!var}")"$'\n'
  done

  cat > "$LAB/etc/slurm.conf" <<EOF
# slurm-lab: single-host Slurm 22.05 cluster, $NNODES emulated nodes x $NGPUS GPUs (scripts/slurm-lab.sh)
ClusterName=lab
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$LAB/run/munge.sock
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd-%n.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
# the built-in batch_sched_delay=3 delays batch jobs by up to 3 s
SchedulerParameters=batch_sched_delay=0
KillWait=2
MinJobAge=300
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# emulated nodes claim more CPUs/memory than the host has
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
JobSubmitPlugins=lua
${scripts}$(node_lines "$gres_field")
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
${LAB_EXTRA_CONF}
EOF
}

# The GPU model of a node (LAB_GRES=model): from LAB_GPU_MODELS, a100 when not named.
gpu_model() {
  local item
  for item in $LAB_GPU_MODELS; do [ "${item%%=*}" = "$1" ] && { echo "${item#*=}"; return; }; done
  echo a100
}

# The NodeName lines: one line for all nodes, or one per node when some carry features or
# GPU models ({model} in the Gres= field stands for the node's model).
node_lines() {
  local common="NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$NCPUS RealMemory=$MEM_MB $1 State=UNKNOWN"
  if [ -z "$LAB_FEATURES" ] && [ "$LAB_GRES" != model ] && [ "$LAB_GRES" != model-slots ]; then
    echo "NodeName=gpu[01-$LAST] Port=[$NODE_PORT0-$LASTPORT] $common"
    return
  fi
  local i name feats item
  for i in $(seq 1 "$NNODES"); do
    name=$(printf 'gpu%02d' "$i"); feats=""
    for item in $LAB_FEATURES; do [ "${item%%=*}" = "$name" ] && feats=" Features=${item#*=}"; done
    if [ "$LAB_GRES" = model-slots ]; then  # the node's GPU model as a feature (gres-conf --from says so)
      if [ -n "$feats" ]; then feats="$feats,$(gpu_model "$name")"; else feats=" Features=$(gpu_model "$name")"; fi
    fi
    echo "NodeName=$name Port=$((NODE_PORT0 + i - 1)) ${common//\{model\}/$(gpu_model "$name")}$feats"
  done
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pidfile() { cat "$1" 2>/dev/null; }
# daemons we started carry SLURM_LAB_ID=$LAB in their environment
marked_pids() { grep -lzx "SLURM_LAB_ID=$LAB" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx "$$"; }
# slurm daemons and stepds of THIS lab: a slurm*-wlm executable holding a file under $LAB open
# (slurmstepd overwrites its environ with its process title, so the marker cannot find it)
lab_slurm_pids() {
  local d exe
  for d in /proc/[0-9]*; do
    exe=$(readlink "$d/exe" 2>/dev/null) || continue
    case "$exe" in "$SBIN/slurmstepd-wlm"|"$SBIN/slurmd-wlm"|"$SBIN/slurmctld-wlm") ;; *) continue ;; esac
    ls -l "$d/fd" 2>/dev/null | grep -q -- "-> $LAB/" && echo "${d#/proc/}"
  done
}
# every process in the sessions of the given PIDs (job tasks share their stepd's session), never ours
session_members() {
  [ $# -gt 0 ] || return 0
  local mysid sids
  mysid=$(ps -o sid= -p $$ | tr -d ' ')
  sids=$(ps -o sid= -p "$(echo "$@" | tr ' ' ',')" 2>/dev/null | tr -d ' ' | sort -u | grep -vx -e 0 -e "$mysid")
  [ -n "$sids" ] || return 0
  ps -eo pid=,sid= | awk -v L=" $(echo $sids) " 'index(L, " " $2 " ") {print $1}'
}
all_lab_pids() {
  local f p pids=""
  for f in "$LAB"/run/*.pid; do p=$(pidfile "$f"); pid_alive "$p" && pids="$pids $p"; done
  pids="$pids $(lab_slurm_pids) $(marked_pids)"
  echo $pids $(session_members $pids) | tr ' ' '\n' | grep -v '^$' | sort -un | grep -vx "$$" | tr '\n' ' '
}

# fast stop: SIGKILL every process of this lab (the next start wipes the state anyway)
do_stop() {
  local t0 p pids alive; t0=$(now_ms)
  pids=$(all_lab_pids)
  if [ -n "${pids// /}" ]; then
    kill -KILL $pids 2>/dev/null
    for _ in $(seq 1 60); do   # wait until gone (zombies count as gone)
      alive=""
      for p in $pids; do
        [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null && alive="$alive $p"
      done
      [ -z "$alive" ] && break; sleep 0.05
    done
    [ -z "$alive" ] || log "still alive after SIGKILL:$alive"
  fi
  rm -f "$LAB"/run/*.pid "$LAB/run/munge.sock"
  log "stopped in $(since "$t0") s"
}

do_start() {
  local t0 n; t0=$(now_ms)
  check_binaries || return 1
  [ -d "$LAB/run" ] && do_stop 2>/dev/null
  rm -rf "$LAB"/state "$LAB"/spool "$LAB"/log "$LAB"/out
  write_configs || return 1
  for n in $NODES; do mkdir -p "$LAB/spool/$n"; done
  if [ "$UTS" = 1 ] && ! unshare --uts true 2>/dev/null; then log "unshare --uts not permitted: UTS=0"; UTS=0; fi

  # a private munged (own key and socket): independent of any system munged. Its credentials
  # name 127.0.0.1 as their origin, the NodeAddr of every lab node, whatever this host's name
  # resolves to (pald's sample intake compares the two)
  $MARK /usr/sbin/munged --socket="$LAB/run/munge.sock" --key-file="$LAB/etc/munge.key" \
     --pid-file="$LAB/run/munged.pid" --seed-file="$LAB/run/munged.seed" --origin=127.0.0.1 \
     --log-file="$LAB/log/munged.log" --num-threads=8 --force || { log "munged failed"; return 1; }
  $MARK "$LAB/bin/slurmctld" -f "$SLURM_CONF" \
    || { log "slurmctld failed"; tail -5 "$LAB/log/slurmctld.log" >&2; return 1; }
  for n in $NODES; do
    if [ "$UTS" = 1 ]; then
      $MARK unshare --uts /bin/sh -c "hostname $n && exec '$LAB/bin/slurmd' -f '$SLURM_CONF' -d '$LAB/bin/slurmstepd' -N $n"
    else
      $MARK "$LAB/bin/slurmd" -f "$SLURM_CONF" -d "$LAB/bin/slurmstepd" -N "$n"
    fi || { log "slurmd $n failed"; tail -5 "$LAB/log/slurmd-$n.log" >&2; return 1; }
  done
  local deadline=$(( $(date +%s) + START_TIMEOUT )) idle=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    pid_alive "$(pidfile "$LAB/run/slurmctld.pid")" || { sleep 0.2; pid_alive "$(pidfile "$LAB/run/slurmctld.pid")"; } \
      || { log "slurmctld died:"; tail -5 "$LAB/log/slurmctld.log" >&2; return 1; }
    idle=$(timeout 2 sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)
    [ "$idle" = "$NNODES" ] && break; sleep 0.1
  done
  [ "$idle" = "$NNODES" ] || { log "only $idle/$NNODES nodes idle:"; timeout 2 sinfo -N -o '%N %T %E' >&2; return 1; }
  log "nodes idle after $(since "$t0") s"
  if [ "$WAIT_SCHED" = 1 ]; then
    # slurmctld reads SchedulerParameters lazily at its first scheduling pass (after the built-in
    # 3 s batch delay): wait for it, so the first sbatch is not delayed
    while [ "$(date +%s)" -lt "$deadline" ] && ! grep -q 'SchedulerParameters=' "$LAB/log/slurmctld.log"; do sleep 0.1; done
  fi
  log "cluster up in $(since "$t0") s: export SLURM_CONF=$SLURM_CONF"
}

case "${1:-}" in
  start|restart) do_start ;;
  stop) do_stop ;;
  status)
    for f in "$LAB"/run/*.pid; do
      [ -f "$f" ] || continue; p=$(pidfile "$f"); pid_alive "$p" && s=up || s=DEAD
      echo "$(basename "$f" .pid) pid=$p $s"
    done
    timeout 3 sinfo -N -o '%N %T %c %G %E' 2>/dev/null; timeout 3 squeue 2>/dev/null ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *) echo "usage: $0 start|stop|restart|status|env" >&2; exit 2 ;;
esac
