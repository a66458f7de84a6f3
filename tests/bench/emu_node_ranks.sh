#!/usr/bin/env bash
# emu_node_ranks.sh: one node's share of a torchrun-style launch, as torchrun's agent or a
# Kubernetes operator's per-pod command does it: the node's ranks get RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID in
# their environment and nothing else of the launch; the script waits for them all and exits
# with the first failure's status. Run on a node with `emu-cluster.sh exec ID K`.
#   emu_node_ranks.sh NODE_RANK NPROC_PER_NODE WORLD_SIZE MASTER_ADDR MASTER_PORT CMD...
# EMU_SKIP_RANKS="3 ..." leaves those global ranks unstarted (a launch short of its world).
# Each rank's output goes to stderr with a "[rank R] " prefix.
set -uo pipefail

[ $# -ge 6 ] || { echo "usage: emu_node_ranks.sh NODE_RANK NPROC_PER_NODE WORLD_SIZE MASTER_ADDR MASTER_PORT CMD..." >&2; exit 2; }
node=$1 nproc=$2 world=$3 maddr=$4 mport=$5
shift 5

pids=()
# A node killed or interrupted takes its ranks with it, as torchrun's agent does.
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done' TERM INT HUP
for ((l = 0; l < nproc; l++)); do
  r=$((node * nproc + l))
  case " ${EMU_SKIP_RANKS:-} " in *" $r "*) continue ;; esac
  (
    export RANK=$r WORLD_SIZE=$world LOCAL_RANK=$l LOCAL_WORLD_SIZE=$nproc GROUP_RANK=$node
    export MASTER_ADDR=$maddr MASTER_PORT=$mport TORCHELASTIC_RUN_ID=${TORCHELASTIC_RUN_ID:-emu}
    exec "$@" > >(sed -u "s/^/[rank $r] /" >&2) 2>&1 # the rank itself is this pid
  ) &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  wait "$p"
  st=$?
  [ "$rc" -ne 0 ] || rc=$st
done
exit "$rc"
