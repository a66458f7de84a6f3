#!/usr/bin/env bash
# Data-parallel `fabench train -n N` against PyTorch DDP (scripts/ddp_peer.py, gloo) on the same
# ResNet-18, data and batch, the two alternating within each round so that a slow spell of the
# machine hits both; the summary is the median over rounds of each ratio.
#   (a) loopback, 2 ranks: fabench over tcp, ucx and none against DDP and DDP in no_sync()
#   (b) emulated RATE (default 1gbit), 2 ranks: fabench f32 and bf16 against DDP and DDP's bf16
#       hook, and each step against its bounds measured in the same round: max(compute, the
#       all-reduce alone) and max(compute + comm_cpu_ms, all-reduce alone)
#   (c) emulated RATE: ring, rhd, ps and ps:4 on 4 ranks, ring and ps on 2, DDP on 4
# (b) and (c) need root, ip and tc. Every run and summary.csv (part, round, config, figures,
# ratio; in (b)'s "-step" rows the peer is the bound, in ms) go to one results directory. --fabench-args adds arguments to every fabench run;
# --bind core binds rank r of both to core r.
# usage: scripts/bench-dp.sh [--fabench PATH] [--rounds R] [--steps S] [--warmup-steps W]
#                            [--parts a,b,c] [--rate RATE] [--emu-transport T] [--quick] [--out DIR]
#                            [--fabench-args "ARGS"] [--bind none|core]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench"
rounds=3 steps=40 warm=10 parts="a,b,c" rate=1gbit emu_transport=tcp out="" fargs="" bind=none
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warm=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --emu-transport) emu_transport=$2; shift 2 ;;
    --quick) rounds=1 steps=20 warm=5; shift ;;
    --out) out=$2; shift 2 ;;
    --fabench-args) fargs=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-dp: unknown option '$1'" >&2; usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-dp: bad --rounds '$rounds'" >&2; usage; }
[[ $steps =~ ^[1-9][0-9]*$ && $warm =~ ^[0-9]+$ ]] && [ "$warm" -lt "$steps" ] ||
  { echo "bench-dp: --steps must be > --warmup-steps >= 0" >&2; usage; }
[[ $parts =~ ^[abc](,[abc])*$ ]] || { echo "bench-dp: bad --parts '$parts' (a,b,c)" >&2; usage; }
[[ $bind =~ ^(none|core)$ ]] || { echo "bench-dp: bad --bind '$bind' (none or core)" >&2; usage; }
[[ $rate =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || { echo "bench-dp: bad --rate '$rate' (e.g. 1gbit)" >&2; usage; }
[ -x "$fabench" ] || { echo "bench-dp: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
py=/usr/bin/python3   # Debian's, where python3-torch lives; not the first python3 on PATH
"$py" -c "import torch.distributed" 2>/dev/null ||
  { echo "bench-dp: $py cannot import torch.distributed (apt install python3-torch)" >&2; exit 1; }
want() { [[ ,$parts, == *,$1,* ]]; }
if want b || want c; then
  [ "$(id -u)" -eq 0 ] || { echo "bench-dp: parts b and c emulate links: they need root (or --parts a)" >&2; exit 1; }
fi
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-dp}
mkdir -p "$out"
summary="$out/summary.csv"
echo "part,round,config,fabench_images_per_s,peer,peer_images_per_s,ratio,step_ms,comm_ms,exposed_comm_ms,fabric_eff" > "$summary"

common=(--model resnet18 --batch 64 --threads 1 --steps "$steps" --warmup-steps "$warm" --bind "$bind")
load() { echo "$(date -u +%H:%M:%S) $1: load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }

# col FILE COLUMN [KEY=VALUE...]: COLUMN of the first row whose columns match every KEY=VALUE
# (rows whose role is "single" are skipped); "nan" when there is none or it is empty (a run
# without its none row has no fabric_eff). Columns by name.
col() {
  local f=$1 c=$2; shift 2
  [ -s "$f" ] || { echo nan; return; }
  awk -F, -v want="$c" -v conds="$*" '
    NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; n = split(conds, cs, " "); next }
    { if ("role" in h && $h["role"] == "single") next
      ok = 1
      for (k = 1; k <= n; k++) { split(cs[k], kv, "="); if (!(kv[1] in h) || $h[kv[1]] != kv[2]) ok = 0 }
      if (ok && (want in h)) { print ($h[want] == "" ? "nan" : $h[want]); found = 1; exit } }
    END { if (!found) print "nan" }' "$f"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b + 0 <= 0) print "nan"; else printf "%.3f", a / b }'; }
median() { grep -v '^nan$' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

run_fabench() { # tag args...: run directory $out/<tag>, log beside it
  local tag=$1; shift
  load "fabench $tag"
  # shellcheck disable=SC2086 # fargs: words on purpose
  "$fabench" train "$@" "${common[@]}" $fargs --data synthetic:3x32x32 --eval-every 0 --no-single \
    --out "$out/$tag" > "$out/$tag.log" 2>&1 ||
    { echo "bench-dp: fabench $tag failed (see $out/$tag.log)" >&2; return 0; }
}
run_allreduce() { # tag args...: an allreduce run directory $out/<tag> over the emulated link
  local tag=$1; shift
  load "allreduce $tag"
  "$fabench" allreduce -n 2 --emulate "$rate" --transport "$emu_transport" --algo ring \
    --warmup 1 --iters 5 --rounds 1 --no-check "$@" --out "$out/$tag" > "$out/$tag.log" 2>&1 ||
    { echo "bench-dp: allreduce $tag failed (see $out/$tag.log)" >&2; return 0; }
}
run_ddp() { # tag args...: CSV $out/<tag>.csv, log beside it
  local tag=$1; shift
  load "ddp $tag"
  "$py" "$here/ddp_peer.py" "$@" "${common[@]}" --data synthetic:3x32x32 --csv "$out/$tag.csv" \
    > "$out/$tag.log" 2>&1 ||
    { echo "bench-dp: DDP $tag failed (see $out/$tag.log)" >&2; return 0; }
}
# in_turn ROUND FABENCH_FN DDP_FN: both, fabench first on odd rounds
in_turn() { if [ $(($1 % 2)) -eq 1 ]; then $2; $3; else $3; $2; fi; }
row() { echo "$*" | tr ' ' ',' >> "$summary"; }
fmt() { awk -v v="$1" 'BEGIN { if (v == "nan") print "-"; else printf "%.1f", v }'; }
fmt3() { awk -v v="$1" 'BEGIN { if (v == "nan" || v == "") print "-"; else printf "%.3f", v }'; }

part_a() {
  local r=$1 d
  d="a-r$r"
  fa() { run_fabench "$d-fabench" -n 2 --transport tcp,ucx,none --algo ring; }
  da() { run_ddp "$d-ddp" -n 2; run_ddp "$d-ddp-nosync" -n 2 --no-sync; }
  in_turn "$r" fa da
  local f="$out/$d-fabench/train.csv" ddp nos
  ddp=$(col "$out/$d-ddp.csv" images_per_s)
  nos=$(col "$out/$d-ddp-nosync.csv" images_per_s)
  local line
  line="(a) round $r: DDP $(fmt "$ddp"), DDP no_sync $(fmt "$nos") (DDP fabric_eff $(ratio "$ddp" "$nos"))"
  for t in tcp ucx none; do
    local ips peer pname
    ips=$(col "$f" images_per_s transport=$t)
    if [ $t = none ]; then peer=$nos pname=ddp-nosync; else peer=$ddp pname=ddp; fi
    row a "$r" "loopback-2x1-$t" "$ips" "$pname" "$peer" "$(ratio "$ips" "$peer")" \
      "$(col "$f" step_ms transport=$t)" "$(col "$f" comm_ms transport=$t)" \
      "$(col "$f" exposed_comm_ms transport=$t)" "$(col "$f" fabric_eff transport=$t)"
    line+="; fabench $t $(fmt "$ips") (x$(ratio "$ips" "$peer") $pname, fabric_eff $(col "$f" fabric_eff transport=$t))"
  done
  row a "$r" "loopback-2x1-ddp-fabric-eff" nan ddp "$ddp" "$(ratio "$ddp" "$nos")" \
    "$(col "$out/$d-ddp.csv" step_ms)" nan nan "$(ratio "$ddp" "$nos")"
  echo "$line"
}

part_b() {
  local r=$1 d
  d="b-r$r"
  fb() { run_fabench "$d-fabench-f32" -n 2 --emulate "$rate" --transport "$emu_transport,none" --algo ring
         run_fabench "$d-fabench-bf16" -n 2 --emulate "$rate" --transport "$emu_transport" --algo ring --grad-dtype bf16
         # the gradient all-reduce alone on the same link, at the size training sends
         local gb
         gb=$(col "$out/$d-fabench-f32/train.csv" grad_bytes transport="$emu_transport")
         if [ "$gb" != nan ]; then
           run_allreduce "$d-allreduce-f32" --dtype f32 --min-bytes "$gb" --max-bytes "$gb"
           run_allreduce "$d-allreduce-bf16" --dtype bf16 --min-bytes $((gb / 2)) --max-bytes $((gb / 2))
         fi; }
  db() { run_ddp "$d-ddp-f32" -n 2 --emulate "$rate"; run_ddp "$d-ddp-bf16" -n 2 --emulate "$rate" --grad-dtype bf16; }
  in_turn "$r" fb db
  local d32 d16 line="(b) round $r, $rate:"
  d32=$(col "$out/$d-ddp-f32.csv" images_per_s)
  d16=$(col "$out/$d-ddp-bf16.csv" images_per_s)
  line+=" DDP f32 $(fmt "$d32"), DDP bf16 $(fmt "$d16")"
  # issue 10's bound: step <= 1.05 x max(compute step = the none row's, all-reduce alone)
  local comp tc="transport=$emu_transport"
  comp=$(col "$out/$d-fabench-f32/train.csv" step_ms transport=none)
  for g in f32 bf16; do
    local f="$out/$d-fabench-$g/train.csv" ips ar bound step cpu shared
    ips=$(col "$f" images_per_s "$tc")
    step=$(col "$f" step_ms "$tc")
    ar=$(awk -v v="$(col "$out/$d-allreduce-$g/allreduce.csv" t_p50_us)" 'BEGIN { print (v == "nan" ? v : v / 1e3) }')
    bound=$(awk -v a="$comp" -v b="$ar" 'BEGIN { print ((a == "nan" || b == "nan") ? "nan" : (a + 0 > b + 0 ? a : b)) }')
    row b "$r" "emu-$rate-2-fabench-$g-step" "$ips" max-compute-allreduce-ms "$bound" \
      "$(ratio "$step" "$bound")" "$step" "$ar" "$(col "$f" exposed_comm_ms "$tc")" nan
    cpu=$(col "$f" comm_cpu_ms "$tc")
    shared=$(awk -v a="$comp" -v c="$cpu" -v b="$ar" 'BEGIN { if (a == "nan" || c == "nan" || b == "nan") print "nan";
                                                          else print (a + c > b + 0 ? a + c : b) }')
    row b "$r" "emu-$rate-2-fabench-$g-step-shared" "$ips" max-compute+commcpu-allreduce-ms "$shared" \
      "$(ratio "$step" "$shared")" "$step" "$ar" "$(col "$f" exposed_comm_ms "$tc")" nan
    for peer in f32 bf16; do
      local p=$d32; [ $peer = bf16 ] && p=$d16
      row b "$r" "emu-$rate-2-fabench-$g" "$ips" "ddp-$peer" "$p" "$(ratio "$ips" "$p")" "$step" \
        "$(col "$f" comm_ms "$tc")" "$(col "$f" exposed_comm_ms "$tc")" "$(col "$f" fabric_eff "$tc")"
    done
    line+="; fabench $g $(fmt "$ips") (x$(ratio "$ips" "$d32") DDP f32, x$(ratio "$ips" "$d16") DDP bf16;"
    line+=" step $(fmt "$step") ms = x$(ratio "$step" "$bound") max(compute $(fmt "$comp"), all-reduce $(fmt "$ar")),"
    line+=" x$(ratio "$step" "$shared") max(compute + comm CPU $(fmt "$cpu"), all-reduce),"
    line+=" comm $(fmt "$(col "$f" comm_ms "$tc")"), exposed $(fmt "$(col "$f" exposed_comm_ms "$tc")"))"
  done
  echo "$line"
}

part_c() {
  local r=$1 d
  d="c-r$r"
  fc() { run_fabench "$d-fabench-n4" -n 4 --emulate "$rate" --transport "$emu_transport" --algo ring,rhd,ps,ps:4
         run_fabench "$d-fabench-n2" -n 2 --emulate "$rate" --transport "$emu_transport" --algo ring,ps; }
  dc() { run_ddp "$d-ddp-n4" -n 4 --emulate "$rate"; }
  in_turn "$r" fc dc
  local ddp line
  ddp=$(col "$out/$d-ddp-n4.csv" images_per_s)
  line="(c) round $r, $rate: DDP 4 ranks $(fmt "$ddp")"
  for cfg in 4:ring 4:rhd 4:ps 4:ps:4 2:ring 2:ps; do
    local n=${cfg%%:*} algo=${cfg#*:} f ips
    f="$out/$d-fabench-n$n/train.csv"
    ips=$(col "$f" images_per_s algo="$algo")
    local peer=ddp-n4 p=$ddp
    [ "$n" = 4 ] || peer=- p=nan
    row c "$r" "emu-$rate-$n-$algo" "$ips" "$peer" "$p" "$(ratio "$ips" "$p")" "$(col "$f" step_ms algo="$algo")" \
      "$(col "$f" comm_ms algo="$algo")" "$(col "$f" exposed_comm_ms algo="$algo")" "$(col "$f" fabric_eff algo="$algo")"
    line+="; n$n $algo $(fmt "$ips") (comm $(fmt "$(col "$f" comm_ms algo="$algo")") exposed $(fmt "$(col "$f" exposed_comm_ms algo="$algo")") ms)"
  done
  echo "$line"
}

echo "bench-dp: $rounds round(s), $steps steps ($warm warm-up) per run, parts $parts, results in $out"
load start
for r in $(seq 1 "$rounds"); do
  for p in a b c; do want $p && "part_$p" "$r"; done
done
load end

# The table: per configuration, the median over rounds of fabench's images/s, the peer's, and of
# the per-round ratio.
echo
printf '%-4s %-37s %12s %-32s %12s %8s %9s %9s %9s %7s\n' part config "fabench im/s" peer "peer im/s" \
  ratio step_ms comm_ms exposed fab_eff
awk -F, 'NR > 1 { k = $1 "," $3 "," $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
         END { for (i = 1; i <= n; i++) print order[i] }' "$summary" |
while IFS=, read -r part cfg peer; do
  m() { awk -F, -v p="$part" -v c="$cfg" -v q="$peer" -v k="$1" 'NR > 1 && $1 == p && $3 == c && $5 == q { print $k }' "$summary" | median; }
  printf '%-4s %-37s %12s %-32s %12s %8s %9s %9s %9s %7s\n' "$part" "$cfg" "$(fmt "$(m 4)")" "$peer" \
    "$(fmt "$(m 6)")" "$(fmt3 "$(m 7)")" "$(fmt "$(m 8)")" "$(fmt "$(m 9)")" "$(fmt "$(m 10)")" "$(fmt3 "$(m 11)")"
done | tee "$out/table.txt"
echo
echo "ratio = fabench images/s / the peer's, median over $rounds round(s) of the per-round ratio;" \
     "no_sync is the peer of fabench's none; the machine's load during the runs is in $out/load.txt"
echo "results: $out (summary.csv, table.txt, one train.csv per fabench run, one CSV per DDP run)"
