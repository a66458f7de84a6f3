#!/bin/bash
# fabench's GPU checks and figures in one call (a lent GPU machine is paid by the minute): the
# GPU tests, the copy ceilings (PyTorch's copies beside them), the ring over CUDA IPC, ResNet-50
# training against the PyTorch peer (and AdamW's step beside SGD's), time to 91% on Fashion-MNIST
# on the GPU against the CPU, two ranks sharing the GPU, a --device cpu,cuda sweep and fc6 (an MLP)
# on both devices; last, fabench's own reduce-scatter, all-gather, broadcast and all-to-all on GPU
# buffers, every algorithm verified (ONLY=colls: that part alone, into colls.log).
# usage: scripts/gpu-check.sh BIN_DIR OUT_DIR [FMNIST_DIR]
# Run from the source tree. BIN_DIR holds fabench, test_allreduce, test_colls, test_nn_cuda, test_nn_layers,
# test_nn_torch, test_train_sweep and nn_bench (and lib/ with any shared library the machine lacks); CUDA's
# libraries are taken from there, the toolkit, or the nvidia-* Python wheels. Each part logs to
# OUT_DIR (env.txt, tests.log, copy.log, bench.log, train.log, cputta.log, colls.log) as it goes, and the
# run directories end in OUT_DIR/results.tgz. Nothing starts after DEADLINE seconds [420].
# nvbandwidth (NVBANDWIDTH=PATH, or on the PATH) runs beside the copy ceilings where present.
set -u
bin=$(cd "$1" && pwd); out=$2; fmnist=${3:-/usr/share/datasets/fashion-mnist}
mkdir -p "$out"
T0=$(date +%s); el() { echo "[t=$(($(date +%s) - T0))s]"; }
libdirs=$(find /usr/local/cuda*/lib* /usr/lib /opt /usr/local/lib \( -name 'libcudnn.so.9' -o -name 'libcublas.so.13' \
  -o -name 'libnccl.so.2' -o -name 'libcudart.so.13' \) -exec dirname {} + 2>/dev/null | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="$bin/lib:${libdirs}${LD_LIBRARY_PATH:-}"
export FABENCH_SRC=$PWD FABENCH_BIN=$bin/fabench
res=$(mktemp -d /tmp/fabench-gpu.XXXXXX)
t() {
  local s=$1; shift
  if (($(date +%s) - T0 > ${DEADLINE:-420})); then echo "== skipped (deadline) $*"; return; fi
  echo "== $(el) $*"; timeout "$s" "$@"; echo "rc=$? $(el)"
}
{
  date -u; uname -r; nproc
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max,clocks.max.memory,mig.mode.current --format=csv
  ldd "$bin/fabench" | grep -E "not found|cudnn|cublas|nccl|cudart|dnnl"
  python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version())"
  "$bin/fabench" topo
} > "$out/env.txt" 2>&1
# MPS lets ranks sharing the GPU run their kernels side by side; off again if a probe fails
mps=0
if nvidia-cuda-mps-control -d 2>/dev/null; then
  if timeout 60 "$bin/fabench" p2p --transport nccl --tests d2d --min-bytes 1M --max-bytes 1M --out "$res/probe" >/dev/null 2>&1; then
    mps=1
  else
    echo quit | nvidia-cuda-mps-control
  fi
fi
echo "MPS: $mps" >> "$out/env.txt"
# the CPU's time to 91% on all cores but four, while the GPU's work runs on those four
n=$(nproc); G=(taskset -c 0-3); C=(taskset -c "4-$((n - 1))")
((n >= 8)) || { G=(); C=(); }
# fabench's own reduce-scatter, all-gather, broadcast and all-to-all(v) on GPU buffers, every
# algorithm, every element checked on every rank (test_colls: every dtype and op, counts 0 to
# 4099; the commands: sizes to 16M, in turns): 1 rank (NCCL), 2 ranks (a GPU each through
# NCCL's send and receive, or one shared through CUDA IPC, which has no native). native at 2
# ranks only where there are two GPUs.
colls_gpu() {
  local ngpu ca r k
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  for ca in rs:native rs:ring rs:rhd rs:hier rs:direct rs:auto ag:native ag:ring ag:rd ag:bruck ag:hier ag:direct \
    ag:auto bcast:native bcast:tree bcast:chain bcast:vdg bcast:linear bcast:hier bcast:direct bcast:auto a2a:native \
    a2a:pairwise a2a:linear a2a:bruck a2a:hier a2a:direct a2a:auto; do
    r=1,2
    [ "${ca#*:}" = native ] && ((ngpu < 2)) && r=1
    t 60 "${G[@]}" "$bin/test_colls" --transport nccl --coll "${ca%%:*}" --algo "${ca#*:}" --ranks $r
  done
  for k in 1 2; do
    t 90 "${G[@]}" "$bin/fabench" reducescatter -n $k --transport nccl --algo native,ring,rhd,hier,direct,auto \
      --dtype f32,bf16,i64 --min-bytes 8 --max-bytes 16M --step-factor 7 --iters 3 --rounds 1 --out "$res/gcolls-rs$k"
    t 90 "${G[@]}" "$bin/fabench" allgather -n $k --transport nccl --algo native,ring,rd,bruck,hier,direct,auto \
      --dtype f32,bf16,i64 --min-bytes 8 --max-bytes 16M --step-factor 7 --iters 3 --rounds 1 --out "$res/gcolls-ag$k"
    t 90 "${G[@]}" "$bin/fabench" bcast -n $k --root $((k - 1)) --transport nccl --algo native,tree,chain,vdg,linear,hier,direct,auto \
      --dtype f32,bf16,i64 --min-bytes 8 --max-bytes 16M --step-factor 7 --iters 3 --rounds 1 --out "$res/gcolls-bc$k"
    t 90 "${G[@]}" "$bin/fabench" alltoall -n $k --imbalance 1 --transport nccl --algo native,pairwise,linear,hier,auto \
      --dtype f32,bf16,i64 --min-bytes 8 --max-bytes 16M --step-factor 7 --iters 3 --rounds 1 --out "$res/gcolls-av$k"
    t 90 "${G[@]}" "$bin/fabench" alltoall -n $k --transport nccl --algo bruck,direct,pairwise \
      --dtype f32,bf16,i64 --min-bytes 8 --max-bytes 16M --step-factor 7 --iters 3 --rounds 1 --out "$res/gcolls-aa$k"
  done
}
if [ "${ONLY:-}" = colls ]; then
  colls_gpu > "$out/colls.log" 2>&1
  ((mps)) && echo quit | nvidia-cuda-mps-control
  tar -C "$res" -czf "$out/results.tgz" . && rm -rf "$res"
  grep -hE "rc=[1-9]|FAILED|skipped|wrong" "$out/colls.log"
  echo "done $(el)"
  exit 0
fi
( t 330 "${C[@]}" "$bin/fabench" train --device cpu --threads $((n >= 8 ? n - 4 : n)) --model resnet20 --data "fmnist:$fmnist" \
    --batch 128 --epochs 5 --target-acc 0.91 --log-every 100 --out "$res/tta-cpu" > "$out/cputta.log" 2>&1 ) &
cpu=$!
{
  t 120 "${G[@]}" "$bin/test_nn_cuda"
  t 120 "${G[@]}" "$bin/test_nn_layers"
  t 120 "${G[@]}" "$bin/test_nn_torch"
  t 120 "${G[@]}" "$bin/test_train_sweep" # its --device cpu,cuda test trains the cuda rows here
  t 60 "${G[@]}" "$bin/test_allreduce" --transport nccl --algo native --ranks 1
  t 90 "${G[@]}" "$bin/test_allreduce" --transport nccl --algo ring --ranks 1,2,3,4 --mem comm --mapped yes --big 100003
  FABENCH_RING_PIECES=3 t 90 "${G[@]}" "$bin/test_allreduce" --transport nccl --algo ring --ranks 2,3,4 --mem comm --mapped yes \
    --big 100003
  FABENCH_IPC_EVENTS=0 t 90 "${G[@]}" "$bin/test_allreduce" --transport nccl --algo ring --ranks 2,3 --mem comm --mapped yes \
    --big 100003
  for a in rhd tree ps:2; do t 60 "${G[@]}" "$bin/test_allreduce" --transport nccl --algo $a --ranks 2,3 --mem comm --big 100003; done
  t 90 "${G[@]}" "$bin/fabench" allreduce -n 3 --transport nccl --algo ring,rhd --dtype f32,f64,f16,bf16,i32,i64 \
    --op sum,prod,min,max --min-bytes 4 --max-bytes 4M --step-factor 37 --iters 3 --rounds 1 --out "$res/ar3"
} > "$out/tests.log" 2>&1
{
  for p in bf16 tf32 fp32; do
    t 60 "${G[@]}" "$bin/nn_bench" resnet50 3x224x224 1000 128 0 25 5 $p
    t 90 "${G[@]}" python3 scripts/torch_train_bench.py --device cuda --precision $p --model resnet50 --shape 3x224x224 \
      --classes 1000 --batch 128 --steps 25 --warmup-steps 5
  done
  for p in bf16 tf32; do
    t 90 "${G[@]}" "$bin/fabench" train --device cuda --precision $p --model resnet50 --data synthetic:3x224x224:1000 \
      --batch 128 --epochs 20 --steps 45 --warmup-steps 10 --eval-every 0 --out "$res/tr50-$p"
  done
  # AdamW's fused step against SGD's (tr50-bf16 above): the same run but the optimizer
  t 60 "${G[@]}" "$bin/fabench" train --device cuda --precision bf16 --optimizer adamw --lr 1e-3 --model resnet50 \
    --data synthetic:3x224x224:1000 --batch 128 --epochs 20 --steps 45 --warmup-steps 10 --eval-every 0 --out "$res/tr50-adamw"
} > "$out/bench.log" 2>&1
{
  t 60 "${G[@]}" "$bin/fabench" p2p --transport nccl --tests d2d,h2d,d2h,d2d-sm,h2d-sm,d2h-sm --min-bytes 1M --max-bytes 1G \
    --step-factor 4 --time-per-size 0.2 --out "$res/p2p"
  t 60 "${G[@]}" "$bin/fabench" p2p --transport nccl --tests d2d --min-bytes 4G --max-bytes 4G --time-per-size 0.3 \
    --out "$res/p2p4g"
  t 60 "${G[@]}" python3 scripts/torch_copy_bench.py --sizes 1G,4G
  nvbw=${NVBANDWIDTH:-$(command -v nvbandwidth)}
  [ -n "$nvbw" ] && t 60 "${G[@]}" "$nvbw" -b 1024 -t device_local_copy host_to_device_memcpy_ce device_to_host_memcpy_ce \
    host_to_device_memcpy_sm device_to_host_memcpy_sm
  t 60 "${G[@]}" "$bin/fabench" allreduce --transport nccl --algo native --min-bytes 64K --max-bytes 1G --step-factor 16 \
    --time-per-size 0.1 --rounds 1 --out "$res/ar1"
  for r in 2 4; do
    t 90 "${G[@]}" "$bin/fabench" allreduce -n $r --transport nccl --algo ring --min-bytes 64K --max-bytes 1G --step-factor 4 \
      --time-per-size 0.2 --rounds 1 --out "$res/ar$r"
  done
} > "$out/copy.log" 2>&1
{
  for p in fp32 bf16; do
    t 90 "${G[@]}" "$bin/fabench" train --device cuda --precision $p --model resnet20 --data "fmnist:$fmnist" --batch 128 \
      --epochs 5 --target-acc 0.91 --log-every 100 --out "$res/tta-$p"
  done
  t 90 "${G[@]}" "$bin/fabench" train -n 2 --device cuda --transport none,tcp,nccl --model resnet20 --data synthetic:3x32x32 \
    --batch 128 --steps 40 --warmup-steps 10 --eval-every 0 --out "$res/dp"
  wait $cpu
  t 60 "$bin/fabench" train --device cpu,cuda --model resnet20 --data "fmnist:$fmnist" --batch 128 --steps 150 \
    --warmup-steps 20 --eval-every 0 --log-every 50 --out "$res/cpucuda"
  # a sweep over both devices and the three optimizers: a row per setting and device
  t 90 "$bin/fabench" train --device cpu,cuda --optimizer sgd,adam,adamw --lr 0.01 --model resnet20 \
    --data synthetic:3x32x32 --batch 64 --steps 20 --warmup-steps 5 --eval-every 0 --out "$res/sweep-dev"
  # the MLP on both devices: a row each, their accuracy after one epoch alike
  t 90 "$bin/fabench" train --device cpu,cuda --model fc6 --data "fmnist:$fmnist" --batch 128 --epochs 1 \
    --log-every 100 --out "$res/fc6"
} > "$out/train.log" 2>&1
colls_gpu > "$out/colls.log" 2>&1
((mps)) && echo quit | nvidia-cuda-mps-control
tar -C "$res" -czf "$out/results.tgz" . && rm -rf "$res"
grep -hE "rc=[1-9]|FAILED|skipped" "$out"/*.log
echo "done $(el)"
