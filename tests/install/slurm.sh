#!/usr/bin/env bash
# The installed package under Slurm: a one-node cluster of its own (munged, slurmctld, slurmd
# on loopback, configuration and state in a temp directory) runs `fabench allreduce` and
# `fabench train` through srun on 2 and 4 ranks, bootstrapped through fabench's environment
# rendezvous and through MPI (srun --mpi=pmix). The daemons and ranks live in a PID namespace
# of the test's: when it ends, however it ends, none of them is left.
TEST=test_slurm
if [ "${1:-}" = --inner ]; then
  inner=1
else
  inner=0
  . "$(dirname "$0")/lib.sh"
  [ "$(id -u)" -eq 0 ] || skip "not root (a Slurm of its own needs root)"
  for t in slurmctld slurmd srun sinfo scancel munged mungekey unshare ss; do
    command -v "$t" > /dev/null ||
      skip "$t missing (slurmctld slurmd slurm-client munge iproute2: scripts/install-deps.sh)"
  done
  start
  build_deb
  install_deb
  # free ports outside the ephemeral range: slurmctld, slurmd, and one rendezvous per run
  ports=()
  while [ ${#ports[@]} -lt 12 ]; do
    p=$((20000 + RANDOM % 12000))
    [[ " ${ports[*]} " == *" $p "* ]] && continue
    [ -z "$(ss -Htan "sport = :$p")" ] && ports+=("$p")
  done
  mpi=0
  dpkg-deb -f "$DEB" Depends | grep -q libopenmpi && mpi=1
  # the whole cluster: at most 200 s, then the namespace and everything in it is killed
  timeout -k 5 200 unshare --pid --fork --mount-proc --kill-child \
    bash "$0" --inner "$TMP" "$FAB" "$mpi" "${ports[@]}"
  rc=$?
  [ $rc -eq 124 ] && die "the cluster's runs took over 200 s"
  exit $rc
fi

# --- inside the PID namespace: TMP FAB MPI PORT... ------------------------------------------
set -uo pipefail
say() { echo "$TEST: $*"; }
TMP=$2 FAB=$3 MPI=$4
shift 4
ctld_port=$1 slurmd_port=$2
shift 2
free_ports=("$@")
C=$TMP/cluster
# every Slurm command of this script talks to this cluster, never to one the machine belongs to
export SLURM_CONF=$C/slurm.conf
mkdir -p "$C/state" "$C/spool" "$C/munge" "$C/runs"
chmod 700 "$C/munge"
node=fabenchnode
host=$(hostname -s)
pids=()

stop() { # daemons in reverse order, each given 10 s before SIGKILL
  trap - EXIT
  local i p
  timeout 10 scancel --full --quiet --user=root 2> /dev/null
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[i]}
    kill -TERM "$p" 2> /dev/null || continue
    for _ in $(seq 100); do kill -0 "$p" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2> /dev/null
  done
}
logs() { # what the daemons said, for a failure
  local f
  for f in "$C"/munged.log "$C"/slurmctld.log "$C"/slurmd.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
  done
}
fail() { say "FAIL: $*"; logs; exit 1; }
trap stop EXIT

mungekey --create --keyfile="$C/munge/munge.key" --force 2> /dev/null ||
  dd if=/dev/urandom of="$C/munge/munge.key" bs=1024 count=1 2> /dev/null
chmod 400 "$C/munge/munge.key"
munged -F -f --key-file="$C/munge/munge.key" --socket="$C/munge/munge.sock" \
  --pid-file="$C/munge/munged.pid" --log-file="$C/munged.log" --seed-file="$C/munge/seed" > "$C/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$C/munge/munge.sock" ] && break; sleep 0.1; done
[ -S "$C/munge/munge.sock" ] || fail "munged did not start: $(cat "$C/munged.out")"

# 4 CPUs on any machine (config_overrides: slurmd takes the configured count) so that 4 tasks
# fit; no cgroups, no accounting, every address loopback
cat > "$C/slurm.conf" << EOF
ClusterName=fabenchtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$C/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$C/state
SlurmdSpoolDir=$C/spool
SlurmctldPidFile=$C/slurmctld.pid
SlurmdPidFile=$C/slurmd.pid
SlurmctldLogFile=$C/slurmctld.log
SlurmdLogFile=$C/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$host CPUs=4 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=10 State=UP
EOF
slurmctld -D -f "$SLURM_CONF" > "$C/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" > "$C/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 60); do
  state=$(timeout 5 sinfo -h -n "$node" -o %t 2> /dev/null)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || fail "the node is '$state', not idle, 30 s after the daemons started"
say "Slurm up: node $node idle (slurmctld :$ctld_port, slurmd :$slurmd_port)"

# MPI ranks talk over loopback only
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
AR=(allreduce --min-bytes 4K --max-bytes 64K --iters 3 --warmup 1 --rounds 1 --timeout 30)
TR=(train --model resnet20-w2 --batch 16 --steps 3 --warmup-steps 1 --eval-every 0 --no-single
  --threads 1 --timeout 30)
# the environment rendezvous under a plain srun: each task's rank from Slurm's own variables
# (SLURM_PROCID, SLURM_NTASKS), rank 0 at FABENCH_ROOT on loopback
ENVBOOT=()

# run NAME N BOOT SRUN-ARGS -- FABENCH-ARGS: srun, then the run directory says N ranks, BOOT
run() {
  local name=$1 n=$2 boot=$3 sargs=() out=$C/runs/$1
  shift 3
  while [ "$1" != -- ]; do sargs+=("$1"); shift; done
  shift
  local t0=$SECONDS
  FABENCH_ROOT=127.0.0.1:${free_ports[0]} timeout -k 5 100 srun -n "$n" -t 2 --kill-on-bad-exit=1 \
    "${sargs[@]}" "$@" --out "$out" > "$C/$name.log" 2>&1
  local rc=$?
  free_ports=("${free_ports[@]:1}")
  [ $rc -eq 0 ] || { tail -n 30 "$C/$name.log"; fail "$name: srun exited $rc"; }
  [ -f "$out/run.json" ] || fail "$name: no $out/run.json"
  grep -q "\"ranks\":[[:space:]]*$n," "$out/run.json" || fail "$name: run.json does not say $n ranks"
  grep -q "\"bootstrap\":[[:space:]]*\"$boot\"" "$out/run.json" ||
    fail "$name: run.json's bootstrap is not $boot: $(grep -o '"bootstrap":[^,]*' "$out/run.json")"
  say "$name: $n ranks, bootstrap $boot, $((SECONDS - t0)) s"
}

for n in 2 4; do
  run "allreduce-env-$n" "$n" env -- "${ENVBOOT[@]}" "$FAB" "${AR[@]}" --transport tcp
  grep -q "allreduce: $n rank(s) on 1 host(s)" "$C/allreduce-env-$n.log" ||
    fail "allreduce-env-$n: its output does not say $n ranks"
  run "train-env-$n" "$n" env -- "${ENVBOOT[@]}" "$FAB" "${TR[@]}" --transport tcp
  grep -q "$n rank(s) x batch 16" "$C/train-env-$n.log" || fail "train-env-$n: its output does not say $n ranks"
done

if [ "$MPI" != 1 ]; then
  say "MPI bootstrap not tested: this fabench is built without MPI"
elif ! timeout 10 srun --mpi=list 2>&1 | grep -q pmix; then
  say "MPI bootstrap not tested: srun has no pmix plugin (srun --mpi=list)"
else
  # sanitizer builds: Open MPI's PMIx components are unloaded before LeakSanitizer reports
  # what they keep; the slow unwinder's whole stacks reach the libraries tests/lsan.supp names
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0
  for n in 2 4; do
    run "allreduce-mpi-$n" "$n" mpi --mpi=pmix -- "$FAB" "${AR[@]}" --transport mpi,tcp
  done
  run "train-mpi-4" 4 mpi --mpi=pmix -- "$FAB" "${TR[@]}" --transport mpi
fi
say "PASS"
