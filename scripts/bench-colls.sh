#!/usr/bin/env bash
# The collectives sharded training uses (reduce-scatter, all-gather, broadcast, all-to-all) against
# MPI's own (MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast, MPI_Alltoallv) in the same run:
# each fabench command with every algorithm, the pairs taking turns at each size (--rounds), and
# busbw_vs_peer against mpi/native over the same kind of path. Two passes (--passes):
#   shm: ucx and mpi against MPI over its shared memory (vader), the path ucx's mapped reads take;
#   tcp: tcp and mpi against MPI over its TCP sockets (pml ob1, btl tcp,self), tcp's own path.
# summary.csv: per pass, collective, rank count, transport and size, fabench's best algorithm
# and its busbw over MPI's.
# usage: scripts/bench-colls.sh [--fabench PATH] [--ranks 2,4] [--max-bytes 64M]
#                               [--time-per-size S] [--passes shm,tcp] [--colls LIST] [--out DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
fabench="$root/build/fabench" ranks=2,4 maxb=64M tps=0.2 out="" passes=shm,tcp
colls=reducescatter,allgather,bcast,alltoall
usage() { sed -n '/^# usage:/,/^set -euo/p' "$0" | grep '^#' | sed 's/^# //' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --fabench) fabench=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --max-bytes) maxb=$2; shift 2 ;;
    --time-per-size) tps=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-colls: unknown option '$1'" >&2; usage ;;
  esac
done
[[ $ranks =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "bench-colls: bad --ranks '$ranks'" >&2; usage; }
[[ $passes =~ ^(shm|tcp)(,(shm|tcp))?$ ]] || { echo "bench-colls: bad --passes '$passes' (shm, tcp)" >&2; usage; }
[[ $colls =~ ^(reducescatter|allgather|bcast|alltoall)(,(reducescatter|allgather|bcast|alltoall))*$ ]] ||
  { echo "bench-colls: bad --colls '$colls'" >&2; usage; }
[ -x "$fabench" ] || { echo "bench-colls: no fabench binary at $fabench (--fabench PATH)" >&2; exit 1; }
out=${out:-$root/results/$(date -u +%Y%m%dT%H%M%SZ)-bench-colls}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
shm_transports=mpi
ldd "$fabench" | grep -q libucp && shm_transports=ucx,mpi  # ucx where it is built in
declare -A algos=([reducescatter]=ring,rhd,direct,native [allgather]=ring,rd,bruck,direct,native
                  [bcast]=tree,chain,vdg,linear,direct,native [alltoall]=pairwise,linear,bruck,direct,native)
for n in ${ranks//,/ }; do
  for c in ${colls//,/ }; do
    for p in ${passes//,/ }; do
      if [ "$p" = tcp ]; then tr=tcp,mpi mpiargs=(--mpirun-args "--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo")
      else tr=$shm_transports mpiargs=(); fi
      echo "bench-colls: $c -n $n over $tr (MPI over $p)" >&2
      "$fabench" "$c" -n "$n" --transport "$tr" --algo "${algos[$c]}" --min-bytes 8 \
        --max-bytes "$maxb" --step-factor 4 --time-per-size "$tps" --rounds 5 --peer mpi/native \
        "${mpiargs[@]}" --out "$out/$p/$c-$n" > "$out/$p-$c-$n.txt"
    done
  done
done
python3 - "$out" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "*", "*-*", "colls.csv"))):
    p = os.path.basename(os.path.dirname(os.path.dirname(f)))
    rows += [dict(r, mpi_path=p) for r in csv.DictReader(open(f))]
best = {}
for r in rows:
    if r["algo"] == "native" or not r["busbw_vs_peer"]:
        continue
    k = (r["mpi_path"], r["coll"], int(r["ranks"]), r["transport"], int(r["bytes"]))
    v = float(r["busbw_vs_peer"])
    if k not in best or v > best[k][0]:
        best[k] = (v, r["algo"], float(r["busbw_gbps"]))
with open(os.path.join(out, "summary.csv"), "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["mpi_path", "coll", "ranks", "transport", "bytes", "best_algo", "busbw_gbps", "vs_mpi"])
    for k in sorted(best):
        v, a, bw = best[k]
        w.writerow([*k, a, f"{bw:.3f}", f"{v:.2f}"])
print("MPI over  coll           ranks transport  min vs MPI from 64 KiB (at bytes)   median from 64 KiB")
for p in ("shm", "tcp"):
    for c in ("reducescatter", "allgather", "bcast", "alltoall"):
        for n in sorted({k[2] for k in best}):
            for t in ("tcp", "ucx", "mpi"):
                vs = sorted((best[k][0], k[4]) for k in best if k[:4] == (p, c, n, t) and k[4] >= 65536)
                if vs:
                    med = sorted(v for v, _ in vs)[len(vs) // 2]
                    print(f"{p:9} {c:14} {n:5} {t:9}  {vs[0][0]:.2f}x ({vs[0][1]})" + " " * 18 + f"{med:.2f}x")
PY
echo "bench-colls: $out" >&2
