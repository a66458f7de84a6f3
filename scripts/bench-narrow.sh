#!/usr/bin/env bash
# fabench train on every model it ships and the narrow CIFAR ResNets, against PyTorch (Debian's
# python3-torch 1.13, on the same oneDNN 2.6) and optionally against another fabench build (the one
# before a change): one rank, the same model, input, batch and thread count, SGD with momentum,
# synthetic data. The engines run in turns within each repeat, the first one rotating from repeat
# to repeat, so load from other processes hits all of them; figures are the median of the repeats.
# On a shared host, compare the ratios, not the absolute figures, and keep the load average the
# script records in mind.
#
# Besides the ratio to PyTorch (target: >= --target), each narrow ResNet's efficiency against the
# standard width's: images/s x forward FLOPs per image (convolutions and the classifier, from the
# PyTorch model), over the same for resnet20 (target: >= 0.5, i.e. within 2x).
#
# usage: scripts/bench-narrow.sh [--fabench PATH] [--base PATH] [--repeats R] [--threads "1 2"]
#                                [--models "resnet20 resnet20-w8 ..."] [--input CxHxW] [--batch B]
#                                [--steps S] [--warmup W] [--base-steps S] [--target X] [--quick]
#                                [--out DIR]
# --base-steps: fewer measured steps (and one warm-up) for --base, whose steps on the reference
# code take seconds.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench"
base=""
repeats=3
threads_list="1 2"
models="resnet20 resnet20-w4 resnet20-w8 resnet20-w12 resnet20-w16 resnet32 resnet56 resnet18 resnet34 resnet50"
input=1x28x28
classes=10
batch=32
steps=20
warm=3
base_steps=""
target=1.3
out=""
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --base) base=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads_list=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --input) input=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warm=$2; shift 2 ;;
    --base-steps) base_steps=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --quick) repeats=1 steps=8 warm=2; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-narrow: unknown option '$1'" >&2; usage ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench-narrow: bad --repeats '$repeats'" >&2; usage; }
[[ "$input" =~ ^[0-9]+x[0-9]+x[0-9]+$ ]] || { echo "bench-narrow: bad --input '$input' (CxHxW)" >&2; usage; }
[ -x "$fabench" ] || { echo "bench-narrow: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
[ -z "$base" ] || [ -x "$base" ] || { echo "bench-narrow: no fabench binary at $base (--base PATH)" >&2; exit 1; }
py=/usr/bin/python3   # Debian's, where python3-torch lives; not the first python3 on PATH
"$py" -c "import torch" 2>/dev/null || { echo "bench-narrow: $py cannot import torch (apt install python3-torch)" >&2; exit 1; }
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-narrow}
mkdir -p "$out"

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"} else if (NR%2) {print v[(NR+1)/2]} else {print (v[NR/2]+v[NR/2+1])/2}}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "nan" || b == "nan" || b <= 0) print "nan"; else printf "%.3f", a / b}'; }

# Forward GFLOPs of one image: 2 x the multiply-adds of the convolutions and the classifier.
gflops() {
  "$py" - "$here" "$1" "$input" "$classes" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import torch
from torch_train_bench import build
c, h, w = (int(v) for v in sys.argv[3].split("x"))
m = build(sys.argv[2], c, int(sys.argv[4]))
macs = 0
def hook(mod, inp, out):
    global macs
    if isinstance(mod, torch.nn.Conv2d):
        macs += out.numel() * mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
    elif isinstance(mod, torch.nn.Linear):
        macs += out.numel() * mod.in_features
for mod in m.modules():
    mod.register_forward_hook(hook)
m.eval()
with torch.no_grad():
    m(torch.zeros(1, c, h, w))
print(f"{2 * macs / 1e9:.6f}")
EOF
}

run_fabench() { # binary model threads tag [steps warm-up]
  local dir="$out/$4" s=${5:-$steps} w=${6:-$warm}
  rm -rf "$dir"
  "$1" train --model "$2" --data "synthetic:$input:$classes" --batch "$batch" --threads "$3" \
    --steps $((s + w)) --warmup-steps "$w" --eval-every 0 --log-every 1000000 --out "$dir" \
    > "$dir.log" 2>&1 || { echo "bench-narrow: fabench failed, see $dir.log" >&2; echo nan; return 0; }
  awk -F, 'NR==1 {for (i=1;i<=NF;i++) c[$i]=i} NR==2 {print $c["images_per_s"]}' "$dir/train.csv"
}

run_torch() { # model threads tag
  local log="$out/$3.log"
  OMP_NUM_THREADS="$2" "$py" "$here/torch_train_bench.py" --model "$1" --shape "$input" --classes "$classes" \
    --batch "$batch" --threads "$2" --steps "$steps" --warmup-steps "$warm" > "$log" 2>&1 ||
    { echo "bench-narrow: PyTorch failed, see $log" >&2; echo nan; return 0; }
  sed -n 's/^torch_train_bench: .*images_per_s=\([0-9.e+-]*\).*/\1/p' "$log"
}

engines=(fabench torch)
[ -n "$base" ] && engines=(fabench base torch)
csv="$out/narrow.csv"
echo "model,input,batch,threads,repeats,gflop_per_image,fabench_images_per_s,base_images_per_s,torch_images_per_s,ratio_vs_torch,speedup_vs_base,target,pass,fabench_runs,base_runs,torch_runs" > "$csv"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/load.txt"
echo "$(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); fabench $fabench${base:+; base $base}; $repeats repeat(s) of $steps steps (+$warm warm-up), batch $batch, $input"
printf '%-13s %7s %9s %12s %12s %12s %8s %8s  %s\n' model threads GFLOP/img "fabench/s" "base/s" "torch/s" "x torch" "x base" ""
declare -A eff
for model in $models; do
  gf=$(gflops "$model") || gf=nan
  for t in $threads_list; do
    declare -A runs=([fabench]="" [base]="" [torch]="")
    for r in $(seq 1 "$repeats"); do
      n=${#engines[@]}
      for k in $(seq 0 $((n - 1))); do
        e=${engines[$(((k + r - 1) % n))]}
        tag="$e-$model-t$t-r$r"
        case $e in
          fabench) v=$(run_fabench "$fabench" "$model" "$t" "$tag") ;;
          base) v=$(run_fabench "$base" "$model" "$t" "$tag" "${base_steps:-$steps}" "${base_steps:+1}") ;;
          torch) v=$(run_torch "$model" "$t" "$tag") ;;
        esac
        runs[$e]="${runs[$e]}${runs[$e]:+;}$v"
      done
    done
    fm=$(tr ';' '\n' <<< "${runs[fabench]}" | median)
    tm=$(tr ';' '\n' <<< "${runs[torch]}" | median)
    bm=nan
    [ -n "$base" ] && bm=$(tr ';' '\n' <<< "${runs[base]}" | median)
    rt=$(ratio "$fm" "$tm")
    rb=$(ratio "$fm" "$bm")
    pass=$(awk -v r="$rt" -v t="$target" 'BEGIN {print (r != "nan" && r + 0 >= t ? "PASS" : "FAIL")}')
    eff["$model/$t"]=$(awk -v a="$fm" -v g="$gf" 'BEGIN {print (a == "nan" || g == "nan") ? "nan" : a * g}')
    printf '%-13s %7s %9s %12.1f %12s %12.1f %8s %8s  %s\n' "$model" "$t" "$gf" "$fm" "$bm" "$tm" "$rt" "$rb" "$pass"
    echo "$model,$input,$batch,$t,$repeats,$gf,$fm,$bm,$tm,$rt,$rb,$target,$pass,${runs[fabench]},${runs[base]},${runs[torch]}" >> "$csv"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"

# narrow widths against the standard one: GFLOP/s of training throughput, as a fraction of resnet20's
ecsv="$out/narrow_efficiency.csv"
echo "model,threads,gflop_per_s,resnet20_gflop_per_s,fraction,target,pass" > "$ecsv"
for model in $models; do
  case $model in resnet20-w*) ;; *) continue ;; esac
  for t in $threads_list; do
    [ -n "${eff[resnet20/$t]:-}" ] || continue
    f=$(ratio "${eff[$model/$t]}" "${eff[resnet20/$t]}")
    pass=$(awk -v r="$f" 'BEGIN {print (r != "nan" && r + 0 >= 0.5 ? "PASS" : "FAIL")}')
    printf 'per FLOP: %-13s %s thread(s): %s of resnet20 (target 0.5) %s\n' "$model" "$t" "$f" "$pass"
    echo "$model,$t,${eff[$model/$t]},${eff[resnet20/$t]},$f,0.5,$pass" >> "$ecsv"
  done
done
cat "$out/load.txt" | tr '\n' ' '
echo
echo "results: $csv $ecsv"
