#!/bin/bash
# The nccl transport's checks and figures on a GPU machine, in one go (a lent machine is paid
# by the minute). usage: scripts/gpu-nccl.sh BIN_DIR OUT_DIR [quick]
# BIN_DIR holds fabench and test_allreduce (and lib/ with any shared libraries the machine
# lacks); libnccl.so.2 is taken from there, from the CUDA toolkit, or from the nvidia-nccl
# Python wheel. Everything goes to OUT_DIR: env.txt, tests.log, p2p.log, allreduce.log and the
# run directories' CSVs in results.tgz.
set -u
bin=$(cd "$1" && pwd); out=$2; mode=${3:-full}
mkdir -p "$out"
nccl_dir=$(dirname "$(find /usr/local/cuda*/lib* /opt /usr/lib /usr/local/lib -name 'libnccl.so.2' 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="$bin/lib:${nccl_dir:-}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
{
  date -u; uname -r; lsb_release -ds 2>/dev/null; nproc
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max,pcie.link.gen.current,pcie.link.width.current,clocks.max.memory,mig.mode.current --format=csv
  nvidia-smi topo -m
  echo "libnccl: $nccl_dir"; find / -xdev -name 'libcudnn.so*' 2>/dev/null | head -3
  ldd "$bin/fabench" | grep -E "nccl|cudart|not found"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"
res=/tmp/fabench-gpu; rm -rf $res; mkdir -p $res
t() { echo "== $*"; timeout 120 "$@"; echo "rc=$?"; }
{
  t "$bin/test_allreduce" --transport nccl --algo native --ranks 1
  t "$bin/test_allreduce" --transport nccl --algo ring --ranks 1,2,3,4 --mem comm --mapped yes
  for a in rhd rd tree dtree ps ps:2 auto; do
    t "$bin/test_allreduce" --transport nccl --algo $a --ranks 2,3,4 --mem comm --big 100003
  done
} > "$out/tests.log" 2>&1
grep -E "^==|rc=|FAIL|PASSED|wrong|error" "$out/tests.log" | head -60
"$bin/fabench" p2p --transport nccl --tests d2d,h2d,d2h,peer --min-bytes 64K --max-bytes 1G \
  --step-factor 4 --time-per-size 0.2 --out $res/p2p > "$out/p2p.log" 2>&1
cat "$out/p2p.log"
{
  echo "== 1 rank: ncclAllReduce"
  "$bin/fabench" allreduce --transport nccl --algo native --min-bytes 8 --max-bytes 1G --step-factor 4 \
    --time-per-size 0.1 --rounds 1 --out $res/ar1
  for n in 2 4; do
    echo "== $n ranks on one GPU (CUDA IPC)"
    "$bin/fabench" allreduce -n $n --transport nccl --algo ring,rhd,rd,tree,ps --min-bytes 8 \
      --max-bytes 256M --step-factor 8 --time-per-size 0.1 --rounds 1 --out $res/ar$n
  done
  echo "== every dtype and op, 3 ranks"
  "$bin/fabench" allreduce -n 3 --transport nccl --algo ring,rhd --dtype f32,f64,f16,bf16,i32,i64 \
    --op sum,prod,min,max --min-bytes 4K --max-bytes 4M --step-factor 32 --iters 5 --rounds 1 --out $res/ar3
} > "$out/allreduce.log" 2>&1
cat "$out/allreduce.log" | grep -v "^\s*$" | tail -120
tar -C $res -czf "$out/results.tgz" . 2>/dev/null
