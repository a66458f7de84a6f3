#!/usr/bin/env bash
# The cost model's out-of-sample benchmark (docs/cost-model.md): every cell (fabric x rank count)
# is measured twice, minutes apart; `fabench fit` fits the first pass and `fit --check` predicts
# the second, so the machine's drift shows as error, as it would for a user. check.txt gives
# the error per fabric, transport, ranks, algorithm and size, the drift between the passes
# ("again"), and the error on rows whose rounds agreed ("steady").
#   cells:  lo (tcp and ucx on loopback) and, as root, emulated 1gbit and 5gbit; 2 and 4 ranks;
#           ring, rhd, rd, tree, dtree, ps; fit 256 KiB-64 MiB by 4, check 1-64 MiB by 2
# Between the passes each cell's ring runs beside a compute load (--beside-compute). Then,
# unless --no-train, ResNet-18 and ResNet-20 train on every cell, each data-parallel row
# predicted from the model (train.txt). Outputs: fit/ and val/ run directories, model.json,
# model_check.csv, fit.txt, check.txt, load.txt, state.txt. About 16 minutes on two cores.
#
# usage: scripts/bench-model.sh [--fabench PATH] [--quick] [--fabrics LIST] [--ranks LIST]
#                               [--transports LIST] [--algos LIST] [--no-train]
#                               [--train-models LIST] [--train-rounds R] [--out DIR]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench"
quick=0 train=1 fabrics="" ranks="2,4" transports="tcp,ucx" algos="ring,rhd,rd,tree,dtree,ps" out=""
trounds=""
tmodels=""
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --no-train) train=0; shift ;;
    --train-models) tmodels=$2; shift 2 ;;
    --train-rounds) trounds=$2; shift 2 ;;
    --fabrics) fabrics=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --transports) transports=$2; shift 2 ;;
    --algos) algos=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-model: unknown option '$1'" >&2; usage ;;
  esac
done
[ -x "$fabench" ] || { echo "bench-model: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
[[ $ranks =~ ^[2-8](,[2-8])*$ ]] || { echo "bench-model: bad --ranks '$ranks' (e.g. 2,4)" >&2; usage; }
if [ -z "$fabrics" ]; then
  if [ "$(id -u)" -eq 0 ] && command -v tc > /dev/null && command -v ip > /dev/null; then
    fabrics="lo,1gbit,5gbit"
  else
    fabrics="lo"
    echo "bench-model: not root (or no ip/tc): loopback only, no emulated links" >&2
  fi
fi
[[ $fabrics =~ ^(lo|[0-9]+(mbit|gbit))(,(lo|[0-9]+(mbit|gbit)))*$ ]] ||
  { echo "bench-model: bad --fabrics '$fabrics' (lo and rates, e.g. lo,1gbit)" >&2; usage; }
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-model}
mkdir -p "$out/fit" "$out/val"
start=$(date +%s)
load() { echo "$(date -u +%H:%M:%S) $1: load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }

# The sizes of a pass and fabric: the fit set from 256 KiB by factors of 4 (the small sizes pin the
# start-up costs), the validation set from 1 MiB by factors of 2, so half its sizes were never
# fitted; slow links stop earlier, so that a cell takes a minute or two, not ten.
sizes() { # pass fabric -> "min max factor"
  local pass=$1 f=$2 max=64M
  case $f in
    lo) max=64M ;;
    *mbit) max=2M ;;
    *gbit) [ "${f%gbit}" -lt 5 ] && max=8M || max=32M ;;
  esac
  if [ $quick = 1 ]; then
    case $max in 64M|32M) max=16M ;; 8M) max=4M ;; esac
  fi
  if [ $pass = fit ]; then
    echo "256K $max 4"
  elif [ $pass = busy ]; then
    case $max in 2M) echo "1M 2M 2" ;; 8M|4M) echo "2M $max 2" ;; *) echo "4M 16M 4" ;; esac
  else
    echo "1M $max $([ $quick = 1 ] && echo 4 || echo 2)"
  fi
}

# A machine's cross-core copies may switch between a fast and a slow state for seconds to
# minutes (docs/measurements.md, "The machine's two states"). A probe (a 4 MiB tcp ring, 0.3 s)
# before and after each loopback cell says which state the cell was measured in: state.txt, and
# check.txt counts apart the loopback rows of the cells measured in their fit's state. A spell
# inside a cell escapes the probes; fit's "repeated" does not depend on them.
probe() { # label -> "label fastest_us median_us" appended to state.txt
  local d=$out/probe
  rm -rf "$d"
  if "$fabench" allreduce -n 2 --transport tcp --algo ring --min-bytes 4M --max-bytes 4M --time-per-size 0.3 \
       --rounds 1 --peer none --out "$d" > /dev/null 2>&1; then
    awk -F, -v l="$1" 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
      { printf "%s %.0f %.0f\n", l, $h["t_min_us"], $h["t_p50_us"] }' "$d/allreduce.csv" >> "$out/state.txt"
  fi
  rm -rf "$d"
}

measure() { # pass fabric ranks
  local pass=$1 f=$2 n=$3 cell="$2-p$3"
  read -r lo hi step <<< "$(sizes "$pass" "$f")"
  local dir=$out/$pass/$cell algo=$algos
  # beside a load: what a computing core loses to the ring (training's algorithm), in the fit set
  [ $pass = busy ] && dir=$out/fit/$cell-busy algo=ring
  local args=(allreduce -n "$n" --transport "$transports" --algo "$algo" --min-bytes "$lo"
              --max-bytes "$hi" --step-factor "$step" --peer none --out "$dir")
  [ $pass = busy ] && args+=(--beside-compute)
  if [ "$f" = lo ]; then
    args+=(--warmup 2 $([ $quick = 1 ] && echo "--time-per-size 0.2 --rounds 2" || echo "--time-per-size 0.3 --rounds 3"))
  else
    # a fixed count per size: a 8 MiB ps on 4 ranks at 1gbit takes 0.2 s each
    args+=(--emulate "$f" --warmup 1 $([ $quick = 1 ] && echo "--iters 3 --rounds 1" || echo "--iters 6 --rounds 2"))
  fi
  load "$pass $cell"
  echo "bench-model: $pass $cell ($(($(date +%s) - start)) s)" >&2
  local probed=0
  [ "$f" = lo ] && [ $pass != busy ] && probed=1 && probe "$pass $cell before"
  if ! "$fabench" "${args[@]}" > "$dir.log" 2>&1; then
    echo "bench-model: $pass $cell failed (see $dir.log):" >&2
    tail -3 "$dir.log" >&2
    return 1
  fi
  [ $probed = 0 ] || probe "$pass $cell after"
}

# The loopback cells' machine state (state.txt) and the validation rows of those measured in
# their fit's state (the four probes' fastest calls within 25% of each other; a state is within
# about 5%, the two are 3x apart): model_check.csv's loopback rows, the ranks naming the cell.
state_check() {
  [ -s "$out/state.txt" ] || return 0
  echo "# machine state: a 4 MiB tcp ring's fastest call on 2 ranks (us) before/after each loopback cell"
  local same=""
  for c in "${cells[@]}"; do
    set -- $c
    [ "$1" = lo ] || continue
    local v
    v=$(awk -v c="lo-p$2" '$2 == c { printf " %s:%s", $1, $4 }' "$out/state.txt")
    [ -n "$v" ] || continue
    if awk -v c="lo-p$2" '$2 == c { n++; if (!lo || $4 < lo) lo = $4; if ($4 > hi) hi = $4 }
         END { exit !(n == 4 && hi <= 1.25 * lo) }' "$out/state.txt"; then
      echo "  lo-p$2 $v  -> one state"
      same="$same $2"
    else
      echo "  lo-p$2 $v  -> the state changed (or a probe is missing)"
    fi
  done
  [ -s "$out/model_check.csv" ] || return 0
  awk -F, -v same="$same" 'BEGIN { n = split(same, s, " "); for (i = 1; i <= n; i++) ok[s[i]] = 1 }
    NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
    $h["fabric"] !~ /^emu/ && $h["host_count"] == 1 && ($h["ranks"] in ok) && $h["pred_err"] != "" {
      t = $h["transport"]; m[t]++; any = 1; e = $h["pred_err"] + 0; w[t] += (e < 0 ? -e : e) <= 0.1 }
    END { for (t in m) printf "  loopback %s, cells measured in their fit'"'"'s state: within 10%%: %d/%d\n", t, w[t], m[t]
          if (!any) print "  no loopback cell was measured in its fit'"'"'s state" }' "$out/model_check.csv" | sort
}

cells=()
for f in ${fabrics//,/ }; do for n in ${ranks//,/ }; do cells+=("$f $n"); done; done
failed=0
passes="fit val"
[ $train = 1 ] && passes="fit busy val" # the busy rows serve the training step only
for pass in $passes; do
  for c in "${cells[@]}"; do measure $pass $c || failed=1; done
done

fitdirs=() valdirs=()
for c in "${cells[@]}"; do
  set -- $c
  [ -s "$out/fit/$1-p$2/allreduce.csv" ] && fitdirs+=("$out/fit/$1-p$2")
  [ -s "$out/fit/$1-p$2-busy/allreduce.csv" ] && fitdirs+=("$out/fit/$1-p$2-busy")
  [ -s "$out/val/$1-p$2/allreduce.csv" ] && valdirs+=("$out/val/$1-p$2")
done
[ ${#fitdirs[@]} -gt 0 ] || { echo "bench-model: no cell was measured" >&2; exit 1; }
load fit
"$fabench" fit --out "$out/model.json" "${fitdirs[@]}" | tee "$out/fit.txt"   # every size measured: 256 KiB up
if [ ${#valdirs[@]} -gt 0 ]; then
  checks=()
  for d in "${valdirs[@]}"; do checks+=(--check "$d"); done
  for d in "${fitdirs[@]}"; do checks+=(--repeat "$d"); done # the sizes both passes measured: the drift
  "$fabench" fit --model "$out/model.json" --min-bytes 1M --check-out "$out" "${checks[@]}" |
    tee "$out/check.txt"
fi
state_check | tee -a "$out/check.txt"

# The training step, predicted from the model and measured: each fabric, rank count and model.
if [ $train = 1 ]; then
  steps=$([ $quick = 1 ] && echo 12 || echo 25) warm=$([ $quick = 1 ] && echo 4 || echo 5)
  trounds=${trounds:-$([ $quick = 1 ] && echo 1 || echo 3)}
  [[ $trounds =~ ^[1-9][0-9]?$ ]] || { echo "bench-model: bad --train-rounds '$trounds' (1..99)" >&2; usage; }
  tranks=$ranks
  [ $quick = 1 ] && tranks=2 && tmodels=${tmodels:-resnet18}
  tmodels=${tmodels:-resnet18,resnet20}
  [[ $tmodels =~ ^(resnet[0-9]+)(,resnet[0-9]+)*$ ]] || { echo "bench-model: bad --train-models '$tmodels'" >&2; usage; }
  mkdir -p "$out/train"
  echo "# training step: measured (mean) against predicted from the model" > "$out/train.txt"
  for f in ${fabrics//,/ }; do
    for n in ${tranks//,/ }; do
      for mdl in ${tmodels//,/ }; do
        cell="$f-p$n-$mdl"
        args=(train -n "$n" --transport "none,$transports" --algo ring --model "$mdl" --batch 64 --threads 1
              --rounds "$trounds"
              --steps "$steps" --warmup-steps "$warm" --data synthetic:3x32x32 --eval-every 0 --no-single
              --model-from "$out/model.json" --out "$out/train/$cell")
        [ "$f" = lo ] || args+=(--emulate "$f")
        load "train $cell"
        echo "bench-model: train $cell ($(($(date +%s) - start)) s)" >&2
        if ! "$fabench" "${args[@]}" > "$out/train/$cell.log" 2>&1; then
          echo "bench-model: train $cell failed (see $out/train/$cell.log)" >&2
          failed=1
          continue
        fi
        awk -F, -v cell="$f" -v mdl="$mdl" 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
          $h["role"] == "dp" { printf "  %-6s %-9s p%-2s %-4s %-5s step %8.1f ms  predicted %8.1f ms  error %+6.1f%%  exposed %6.1f (pred %6.1f) ms\n",
            cell, mdl, $h["ranks"], $h["transport"], $h["algo"], $h["step_ms_mean"], $h["step_ms_pred"],
            100 * $h["pred_err"], $h["exposed_comm_ms"], $h["exposed_comm_ms_pred"] }' \
          "$out/train/$cell/train.csv" | tee -a "$out/train.txt"
      done
    done
  done
  # per fabric and transport: the median |error| and how many within 10%
  grep -v '^#' "$out/train.txt" | awk '{ e = $13; sub(/%/, "", e); e += 0; print $1 " " $4, (e < 0 ? -e : e) }' |
    sort -k1,1 -k2,2 -k3,3n |
    awk '{ k = $1 " " $2; v[k, ++n[k]] = $3; w[k] += $3 <= 10 }
      END { for (k in n) { m = n[k]; med = m % 2 ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2;
              printf "  %-12s median |error| %5.1f%%  within 10%%: %d/%d\n", k, med, w[k], m } }' |
    sort | { echo "# per fabric and transport"; cat; } | tee -a "$out/train.txt"
fi
echo "bench-model: $(($(date +%s) - start)) s; results in $out" | tee -a "$out/check.txt"
exit $failed
