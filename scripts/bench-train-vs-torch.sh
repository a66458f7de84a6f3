#!/usr/bin/env bash
# fabench train against PyTorch (Debian's python3-torch 1.13 on the same oneDNN 2.6): the same
# ResNet, synthetic data, SGD with momentum, the same thread count, run alternately in the same
# invocation (fabench first on odd repeats, PyTorch first on even ones, so drift hits both).
# Figures: images/s over the measured steps (warm-up excluded), median of the repeats.
# fabench's figure includes its loader thread (data time); PyTorch's synthetic batch is resident.
#
# usage: scripts/bench-train-vs-torch.sh [--fabench PATH] [--repeats R] [--quick]
#                                        [--only small|large] [--threads N] [--out DIR]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench"
repeats=3
only=""
only_threads=""
out=""
small_steps=30 small_warm=5 large_steps=8 large_warm=2
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --quick) repeats=1 small_steps=10 small_warm=3 large_steps=3 large_warm=1; shift ;;
    --only) only=$2; shift 2 ;;
    --threads) only_threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-train-vs-torch: unknown option '$1'" >&2; usage ;;
  esac
done
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench-train-vs-torch: bad --repeats '$repeats'" >&2; usage; }
[ -x "$fabench" ] || { echo "bench-train-vs-torch: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
py=/usr/bin/python3   # Debian's, where python3-torch lives; not the first python3 on PATH
"$py" -c "import torch" 2>/dev/null || { echo "bench-train-vs-torch: $py cannot import torch (apt install python3-torch)" >&2; exit 1; }
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-train-vs-torch}
mkdir -p "$out"

# model input classes batch threads target-ratio size
configs=(
  "resnet18 1x28x28 10 64 1 1.2 small"
  "resnet18 1x28x28 10 64 2 1.2 small"
  "resnet18 3x32x32 10 64 1 1.2 small"
  "resnet18 3x32x32 10 64 2 1.2 small"
  "resnet18 3x224x224 1000 16 2 1.0 large"
  "resnet50 3x224x224 1000 16 2 1.0 large"
)

median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"} else if (NR%2) {print v[(NR+1)/2]} else {print (v[NR/2]+v[NR/2+1])/2}}'; }

run_fabench() { # model input classes batch threads steps warm tag
  local dir="$out/fabench-$8"
  "$fabench" train --model "$1" --data "synthetic:$2:$3" --batch "$4" --threads "$5" \
    --steps $(($6 + $7)) --warmup-steps "$7" --eval-every 0 --log-every 1000000 --out "$dir" \
    > "$dir.log" 2>&1 || { echo "bench-train-vs-torch: fabench failed, see $dir.log" >&2; return 1; }
  awk -F, 'NR==1 {for (i=1;i<=NF;i++) c[$i]=i} NR==2 {print $c["images_per_s"]}' "$dir/train.csv"
}

run_torch() { # model input classes batch threads steps warm tag
  local log="$out/torch-$8.log"
  OMP_NUM_THREADS="$5" "$py" "$here/torch_train_bench.py" --model "$1" --shape "$2" --classes "$3" \
    --batch "$4" --threads "$5" --steps "$6" --warmup-steps "$7" > "$log" 2>&1 ||
    { echo "bench-train-vs-torch: PyTorch failed, see $log" >&2; return 1; }
  sed -n 's/^torch_train_bench: .*images_per_s=\([0-9.e+-]*\).*/\1/p' "$log"
}

csv="$out/train_vs_torch.csv"
echo "model,input,batch,threads,repeats,fabench_images_per_s,torch_images_per_s,ratio,target,pass,fabench_runs,torch_runs" > "$csv"
printf '%-9s %-10s %5s %7s %14s %14s %7s %7s  %s\n' model input batch threads "fabench img/s" "torch img/s" ratio target ""
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/load.txt"
for cfg in "${configs[@]}"; do
  read -r model input classes batch threads target size <<< "$cfg"
  [ -n "$only" ] && [ "$only" != "$size" ] && continue
  [ -n "$only_threads" ] && [ "$only_threads" != "$threads" ] && continue
  if [ "$size" = small ]; then steps=$small_steps warm=$small_warm; else steps=$large_steps warm=$large_warm; fi
  fb=() tv=()
  for r in $(seq 1 "$repeats"); do
    tag="$model-$input-b$batch-t$threads-r$r"
    if [ $((r % 2)) -eq 1 ]; then
      fb+=("$(run_fabench "$model" "$input" "$classes" "$batch" "$threads" "$steps" "$warm" "$tag")")
      tv+=("$(run_torch "$model" "$input" "$classes" "$batch" "$threads" "$steps" "$warm" "$tag")")
    else
      tv+=("$(run_torch "$model" "$input" "$classes" "$batch" "$threads" "$steps" "$warm" "$tag")")
      fb+=("$(run_fabench "$model" "$input" "$classes" "$batch" "$threads" "$steps" "$warm" "$tag")")
    fi
  done
  fm=$(printf '%s\n' "${fb[@]}" | median)
  tm=$(printf '%s\n' "${tv[@]}" | median)
  ratio=$(awk -v a="$fm" -v b="$tm" 'BEGIN {printf (b > 0 ? "%.3f" : "nan"), (b > 0 ? a / b : 0)}')
  pass=$(awk -v r="$ratio" -v t="$target" 'BEGIN {print (r + 0 >= t ? "PASS" : "FAIL")}')
  printf '%-9s %-10s %5s %7s %14.1f %14.1f %7s %7s  %s\n' "$model" "$input" "$batch" "$threads" "$fm" "$tm" "$ratio" "$target" "$pass"
  echo "$model,$input,$batch,$threads,$repeats,$fm,$tm,$ratio,$target,$pass,$(IFS=';'; echo "${fb[*]}"),$(IFS=';'; echo "${tv[*]}")" >> "$csv"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"
echo "steps measured: small $small_steps (+$small_warm warm-up), 224x224 $large_steps (+$large_warm); repeats $repeats; $(cat "$out/load.txt" | tr '\n' ' ')"
echo "results: $csv"
