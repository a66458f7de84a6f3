#!/usr/bin/env bash
# The emulated clusters' benchmark: all-reduce and training on emulated nodes of several ranks,
# hier against the node-aware flat algorithms, taking turns at each size (--rounds).
#   (a) 2x2:RATE, tcp and ucx, 1-64 MiB: ring, rhd and hier; hier's busbw over the ring's (the
#       ring puts 1.5x the buffer through each node's link on 2x2, hier 1.0x)
#   (b) 4x1, 2x2 and 1x4 at RATE over tcp: ring and hier
#   (c) ResNet-18 on 2x2:RATE over tcp, ring against hier, each with the cost model's prediction
#       from a model fitted in the same run (loopback and 2x1 rows)
#   (d) through mpirun on 2x2:RATE: MPI_Allreduce against hier and ring over the mpi transport
#   (e) 8x1:RATE and 4x2:RATE: all-reduce and training, ring and hier
# Needs root, ip and tc. Every run directory and summary.csv go to one results directory.
# usage: scripts/bench-cluster.sh [--fabench PATH] [--rate RATE] [--rounds R] [--parts a,b,c,d,e]
#                                 [--quick] [--out DIR]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench"
rate=1gbit rounds=3 parts="a,b,c,d,e" quick=0 out=""
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-cluster: unknown option '$1'" >&2; usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-cluster: bad --rounds '$rounds'" >&2; usage; }
[[ $parts =~ ^[a-e](,[a-e])*$ ]] || { echo "bench-cluster: bad --parts '$parts' (a,b,c,d,e)" >&2; usage; }
[[ $rate =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || { echo "bench-cluster: bad --rate '$rate' (e.g. 1gbit)" >&2; usage; }
[ -x "$fabench" ] || { echo "bench-cluster: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench-cluster: needs root (emulated clusters)" >&2; exit 1; }
want() { [[ ,$parts, == *,$1,* ]]; }
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-cluster}
mkdir -p "$out"
maxb=64M steps=30 warm=8
[ "$quick" = 1 ] && maxb=16M steps=12 warm=4
echo "part,config,transport,algo,bytes,figure,value,ratio" > "$out/summary.csv"
echo "bench-cluster: $out (rate $rate, rounds $rounds, parts $parts)"

# allreduce DIR ARGS...: one all-reduce sweep into $out/DIR
allreduce() {
  local dir=$1; shift
  "$fabench" allreduce "$@" --min-bytes 1M --max-bytes "$maxb" --step-factor 4 --warmup 1 --iters 6 \
    --rounds "$rounds" --peer none --no-spin --out "$out/$dir" > "$out/$dir.log" 2>&1 ||
    { echo "bench-cluster: $dir failed (see $dir.log)" >&2; tail -5 "$out/$dir.log" >&2; return 1; }
}

# busbw PART CONFIG DIR BASE_ALGO: every row's busbw into summary.csv, with its ratio to
# BASE_ALGO's at the same transport and size; printed as a table
busbw() {
  /usr/bin/python3 - "$@" "$out" <<'EOF'
import csv, sys
part, config, d, base, out = sys.argv[1:6]
rows = list(csv.DictReader(open(f"{out}/{d}/allreduce.csv")))
ref = {(r["transport"], r["bytes"]): float(r["busbw_gbps"]) for r in rows if r["algo"] == base}
with open(f"{out}/summary.csv", "a") as s:
    print(f"  {config}: busbw GB/s (x {base})")
    for r in rows:
        b = ref.get((r["transport"], r["bytes"]))
        v = float(r["busbw_gbps"])
        ratio = v / b if b else float("nan")
        pred = r.get("t_pred_us") or ""
        s.write(f"{part},{config},{r['transport']},{r['algo']},{r['bytes']},busbw_gbps,{v:.4f},{ratio:.3f}\n")
        p = f"  predicted {float(pred):.0f} us, measured {float(r['t_p50_us']):.0f}" if pred else ""
        print(f"    {r['transport']:4} {r['algo']:9} {int(r['bytes']) >> 20:3d} MiB  {v:6.3f}  x{ratio:5.2f}{p}")
EOF
}

# train DIR ARGS...: one training run into $out/DIR; its dp rows into summary.csv
train() {
  local dir=$1; shift
  "$fabench" train "$@" --model resnet18 --data synthetic:3x32x32 --batch 32 --threads 1 \
    --steps "$steps" --warmup-steps "$warm" --rounds "$rounds" --eval-every 0 --out "$out/$dir" \
    > "$out/$dir.log" 2>&1 ||
    { echo "bench-cluster: $dir failed (see $dir.log)" >&2; tail -5 "$out/$dir.log" >&2; return 1; }
}
trainrows() {
  /usr/bin/python3 - "$@" "$out" <<'EOF'
import csv, sys
part, config, d, out = sys.argv[1:5]
rows = [r for r in csv.DictReader(open(f"{out}/{d}/train.csv")) if r["role"] == "dp"]
ring = {r["transport"]: float(r["images_per_s"]) for r in rows if r["algo"] == "ring"}
with open(f"{out}/summary.csv", "a") as s:
    print(f"  {config}: ResNet-18 images/s (x ring), exposed ms, predicted images/s")
    for r in rows:
        v, b = float(r["images_per_s"]), ring.get(r["transport"])
        ratio = v / b if b else float("nan")
        s.write(f"{part},{config},{r['transport']},{r['algo']},,images_per_s,{v:.1f},{ratio:.3f}\n")
        print(f"    {r['transport']:4} {r['algo']:9} {v:7.1f} x{ratio:4.2f}  exposed {float(r['exposed_comm_ms']):6.1f} ms"
              f"  predicted {r['images_per_s_pred'] or '-'}")
EOF
}

if want a; then
  echo "(a) 2x2:$rate, 4 ranks: ring, rhd, hier over tcp and ucx"
  allreduce a-2x2 --emulate "2x2:$rate" --transport tcp,ucx --algo ring,rhd,hier
  busbw a 2x2 a-2x2 ring
fi
if want b; then
  echo "(b) 4x1, 2x2 and 1x4 at $rate over tcp: ring and hier"
  for lay in 4x1 2x2 1x4; do
    allreduce "b-$lay" --emulate "$lay:$rate" --transport tcp --algo ring,hier
    busbw b "$lay" "b-$lay" ring
  done
fi
if want c; then
  echo "(c) train on 2x2:$rate over tcp, ring against hier, predicted by a model fitted here"
  allreduce c-fit-intra -n 2 --transport tcp --algo ring,rhd
  allreduce c-fit-inter --emulate "2x1:$rate" --transport tcp --algo ring,rhd
  "$fabench" fit --out "$out/c-model.json" "$out/c-fit-intra" "$out/c-fit-inter" > "$out/c-fit.log" 2>&1 ||
    { echo "bench-cluster: fit failed (see c-fit.log)" >&2; exit 1; }
  train c-train --emulate "2x2:$rate" --transport none,tcp --algo ring,hier --no-single \
    --model-from "$out/c-model.json"
  trainrows c 2x2 c-train
fi
if want d; then
  echo "(d) through mpirun on 2x2:$rate: MPI_Allreduce against hier and ring over mpi"
  allreduce d-mpi --emulate "2x2:$rate" --transport mpi --algo native,hier,ring
  busbw d 2x2-mpi d-mpi native
fi
if want e; then
  echo "(e) 8x1:$rate and 4x2:$rate: all-reduce and ResNet-18 training, ring and hier"
  for lay in 8x1 4x2; do
    allreduce "e-$lay" --emulate "$lay:$rate" --transport tcp --algo ring,hier
    busbw e "$lay" "e-$lay" ring
    train "e-train-$lay" --emulate "$lay:$rate" --transport none,tcp --algo ring,hier --no-single
    trainrows e "$lay" "e-train-$lay"
  done
fi
echo "bench-cluster: summary in $out/summary.csv"
