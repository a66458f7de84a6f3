#!/bin/bash
# Starts this node's ranks with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT); run it on every node, NODE_RANK 0 on the node MASTER_ADDR names:
#   NODE_RANK=0 NNODES=2 MASTER_ADDR=node01 ./per-node.sh allreduce --transport tcp
#   NODE_RANK=1 NNODES=2 MASTER_ADDR=node01 ./per-node.sh allreduce --transport tcp
# Under torchrun itself (--no-python fabench ...), its agent may hold MASTER_PORT on the first
# node: give fabench another port there with FABENCH_ROOT=node01:29501.
set -euo pipefail
: "${NODE_RANK:?set NODE_RANK}" "${NNODES:?set NNODES}" "${MASTER_ADDR:?set MASTER_ADDR}"
per_node=${NPROC_PER_NODE:-4}
export MASTER_ADDR MASTER_PORT=${MASTER_PORT:-29500} WORLD_SIZE=$((NNODES * per_node))
pids=()
for ((i = 0; i < per_node; i++)); do
  RANK=$((NODE_RANK * per_node + i)) LOCAL_RANK=$i fabench "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
