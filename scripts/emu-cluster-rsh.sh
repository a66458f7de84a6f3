#!/usr/bin/env bash
# emu-cluster-rsh.sh: a remote shell into an emulated cluster's nodes (scripts/emu-cluster.sh),
# for launchers that start their remote daemons with ssh, above all Open MPI's mpirun:
#   EMU_CLUSTER_ID=ID mpirun --mca plm_rsh_agent /path/to/emu-cluster-rsh.sh --hostfile H ...
# where the hostfile names node0, node1, ... Called as ssh would be, `[options] HOST CMD...`:
# HOST "node<k>" (or node k's address) is node k of set $EMU_CLUSTER_ID, and CMD (words joined
# with spaces and given to sh -c, as sshd gives them to the login shell) runs there through
# `emu-cluster.sh exec`. Options before HOST (ssh's -x, -T, -o X=Y ...) are ignored.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "emu-cluster-rsh: $*" >&2; exit 255; } # 255: ssh's own failures

id=${EMU_CLUSTER_ID:-}
[ -n "$id" ] || die "EMU_CLUSTER_ID is not set (the set's id, from 'emu-cluster.sh up')"
while [ $# -gt 0 ]; do
  case $1 in
    -o|-l|-p|-i|-F) shift 2 ;; # ssh options with an argument
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || die "usage: emu-cluster-rsh.sh [options] HOST CMD..."
host=$1
shift
if [[ $host =~ ^node([0-9]+)$ ]]; then
  k=${BASH_REMATCH[1]}
else # an address of the set's subnet: node k is at .(k+1)
  subnet=$("$HERE/emu-cluster.sh" subnet "$id") || exit 255
  pre=${subnet%0/24}
  [[ $host == "$pre"* && ${host#"$pre"} =~ ^[0-9]+$ ]] || die "'$host' is no node of set $id (node<k> or ${pre}<k+1>)"
  k=$((${host#"$pre"} - 1))
fi
"$HERE/emu-cluster.sh" addr "$id" "$k" >/dev/null || exit 255 # no such node: says why
exec "$HERE/emu-cluster.sh" exec "$id" "$k" /bin/sh -c "$*"
