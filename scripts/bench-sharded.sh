#!/usr/bin/env bash
# Sharded (ZeRO stages 2 and 3) against replicated data-parallel training (fabench train --dp
# replicated|sharded|sharded3) and against PyTorch (scripts/ddp_peer.py: DDP, and DDP with
# ZeroRedundancyOptimizer, --zero), on the same model, data, batch and ranks, the five alternating
# within each round so that a slow spell of the machine hits all. summary.csv: per round and rank
# count, images/s, bytes each rank sends per step, the state each rank keeps between steps and at
# its peak, and fabench sharded (stage 2) over each.
# --emulate RATE runs every rank in its own namespace on links shaped to RATE (root).
# usage: scripts/bench-sharded.sh [--fabench PATH] [--ranks 2,4] [--rounds R] [--steps S]
#                                 [--warmup-steps W] [--model M] [--batch B] [--emulate RATE]
#                                 [--out DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench" ranks=2,4 rounds=3 steps=30 warm=10 model=resnet18 batch=32 emu="" out=""
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup-steps) warm=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --emulate) emu=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-sharded: unknown option '$1'" >&2; usage ;;
  esac
done
[[ $ranks =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "bench-sharded: bad --ranks '$ranks'" >&2; usage; }
[[ $rounds =~ ^[1-9][0-9]*$ && $steps =~ ^[1-9][0-9]*$ && $warm =~ ^[0-9]+$ ]] && [ "$warm" -lt "$steps" ] ||
  { echo "bench-sharded: --rounds >= 1 and --steps > --warmup-steps >= 0" >&2; usage; }
[ -z "$emu" ] || [[ $emu =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || { echo "bench-sharded: bad --emulate '$emu'" >&2; usage; }
[ -x "$fabench" ] || { echo "bench-sharded: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
py=/usr/bin/python3 # Debian's, where python3-torch lives
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-sharded}
mkdir -p "$out"
common=(--model "$model" --data synthetic:3x32x32 --batch "$batch" --threads 1 --steps "$steps" --warmup-steps "$warm")
emu_f=() emu_p=()
[ -z "$emu" ] || emu_f=(--emulate "$emu") emu_p=(--emulate "$emu")
for r in $(seq 1 "$rounds"); do
  for n in ${ranks//,/ }; do
    for dp in replicated sharded sharded3; do
      echo "bench-sharded: round $r, $n ranks, fabench $dp" >&2
      "$fabench" train -n "$n" "${common[@]}" "${emu_f[@]}" --transport tcp --no-single --eval-every 0 \
        --dp "$dp" --out "$out/r$r-n$n-$dp" > "$out/r$r-n$n-$dp.txt" 2>&1
    done
    for z in ddp zero; do
      echo "bench-sharded: round $r, $n ranks, torch $z" >&2
      extra=(); [ "$z" = zero ] && extra=(--zero)
      "$py" "$here/ddp_peer.py" -n "$n" "${common[@]}" "${emu_p[@]}" "${extra[@]}" \
        --csv "$out/torch.csv" > "$out/r$r-n$n-torch-$z.txt" 2>&1
    done
  done
done
"$py" - "$out" <<'PY'
import csv, glob, os, re, statistics, sys
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "r*-n*-*", "train.csv"))):
    m = re.search(r"r(\d+)-n(\d+)-(\w+)$", os.path.dirname(f))
    t = [x for x in csv.DictReader(open(f)) if x["role"] == "dp"][0]
    rows.append((int(m[1]), int(m[2]), m[3], float(t["images_per_s"]), float(t["sent_mb_step"]), float(t["state_mb"]),
                 float(t["peak_mb"])))
peer = {}
order = {}
for i, t in enumerate(csv.DictReader(open(os.path.join(out, "torch.csv")))):
    key = (int(t["ranks"]), t["role"])
    order.setdefault(key, []).append(float(t["images_per_s"]))
with open(os.path.join(out, "summary.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["round", "ranks", "config", "images_per_s", "sent_mb_step", "state_mb", "peak_mb"])
    for r in rows:
        w.writerow(r)
    for (n, role), v in sorted(order.items()):
        for i, x in enumerate(v):
            w.writerow([i + 1, n, "torch-" + role, x, "", "", ""])
print("ranks  config               images/s (median)   sent MB/step  state MB  peak MB   sharded over it")
for n in sorted({r[1] for r in rows}):
    sh = statistics.median(r[3] for r in rows if r[1] == n and r[2] == "sharded")
    for cfg in ("replicated", "sharded", "sharded3"):
        v = [r for r in rows if r[1] == n and r[2] == cfg]
        ips = statistics.median(r[3] for r in v)
        print(f"{n:5}  fabench {cfg:12} {ips:10.1f}          {v[0][4]:10.2f}  {v[0][5]:8.1f} {v[0][6]:8.1f}   {sh / ips:.2f}x")
    for role in ("ddp", "ddp-zero"):
        if (n, role) in order:
            ips = statistics.median(order[(n, role)])
            print(f"{n:5}  torch {role:14} {ips:10.1f}                                         {sh / ips:.2f}x")
PY
echo "bench-sharded: $out" >&2
