#!/usr/bin/env bash
# emu-cluster.sh: an emulated cluster on this machine for launchers that fabench does not start
# itself (torchrun-style scripts, mpirun with a hostfile, an operator's per-node commands).
# The network is fabric-emu.sh's scheme, one namespace per node (so fabench's stale-set cleanup
# knows the set): fb<id>n<k>, links fb<id>h<k> <-> fb<id>e<k>, bridge fb<id>br at .254,
# node k at 198.18.S.(k+1)/24. On top of that, as `fabench --emulate NODESxRANKS:RATE` does, each
# node gets a host of its own: a holder process sleeping in its node's network namespace and in
# a UTS and an IPC namespace of its own, hostname node<k>; `exec` joins all three.
# The set's id is the pid of a live process that owns it: by default `up` starts one (a
# sleeping "fabench-emu-owner"), or the caller names itself (e.g. a test's $$), so the set is
# stale, and fabench's next --emulate run or `emu-cluster.sh cleanup` removes it, once that
# process is gone. State (nodes, subnet, owner, holder pids) lives in /run/fabench-emu/<id>/.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FABRIC_EMU=$HERE/fabric-emu.sh
STATE_ROOT=/run/fabench-emu

usage() {
  cat >&2 <<'EOF'
usage: emu-cluster.sh up NODES RATE [ID]  NODES emulated hosts node0.. on a bridge, links shaped to
                                          RATE (e.g. 1gbit); ID: a live pid owning the set
                                          (default: a sleeping owner process started here)
       emu-cluster.sh exec ID K CMD...    run CMD on node K (its network, UTS and IPC namespaces)
       emu-cluster.sh addr ID K           node K's address
       emu-cluster.sh subnet ID           the set's subnet, e.g. 198.18.7.0/24
       emu-cluster.sh down ID             remove set ID: holders, processes, links, namespaces,
                                          state, and the owner process if `up` started it
       emu-cluster.sh list                sets with state here, and whether their owner lives
       emu-cluster.sh cleanup             remove every set whose owner is gone
`up` prints "set ID subnet S bridge B ADDR" and one line per node: "nodeK ADDR netns NS dev DEV
holder PID". For tests only: EMU_CLUSTER_FAIL_NODE=K makes `up` fail at node K's holder
(EMU_CLUSTER_FAIL_MODE=stall: wait there to be killed instead).
EOF
  exit 2
}

die() { echo "emu-cluster: $*" >&2; exit 1; }

need_tools() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tc)"
  local t
  for t in ip tc unshare nsenter setsid flock; do
    command -v "$t" >/dev/null || die "needs $t (iproute2, util-linux)"
  done
}

valid_id() { [[ $1 =~ ^[1-9][0-9]{0,6}$ ]] || die "ID must be a pid (a number below 10000000), not '$1'"; }

# state_get ID KEY: one value of the set's state file (lines KEY=VALUE; read, never sourced).
state_get() {
  local f=$STATE_ROOT/$1/state
  [ -r "$f" ] || return 1
  sed -n "s/^$2=//p" "$f" | head -n1
}

# holder_ok ID K PID: PID is node K's holder (still in the node's network namespace), not a
# process that reused a dead holder's pid.
holder_ok() {
  [[ $3 =~ ^[0-9]+$ ]] && [ -d "/proc/$3" ] || return 1
  [ "$(ip netns identify "$3" 2>/dev/null)" = "fb$1n$2" ]
}

# owner_started ID: `up` started the owner and it is still that process.
owner_started() {
  [ "$(state_get "$1" owner_started 2>/dev/null)" = 1 ] || return 1
  tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q '^fabench-emu-owner'
}

# Removes everything of set ID, also a partial one, in an order where nothing is left behind:
# holders and whatever else runs in the namespaces first, then links and namespaces
# (fabric-emu.sh teardown), the state dir, and the owner process last if `up` started it.
down() {
  local id=$1 k p ns
  for f in "$STATE_ROOT/$id"/holder.*; do
    [ -e "$f" ] || continue
    k=${f##*.}
    p=$(cat "$f" 2>/dev/null || true)
    holder_ok "$id" "$k" "$p" && kill -9 "$p" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^fb${id}n[0-9]+$" || true); do
    for p in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$p" 2>/dev/null || true; done
  done
  "$FABRIC_EMU" teardown "$id" >/dev/null 2>&1 || true
  if owner_started "$id"; then kill -9 "$id" 2>/dev/null || true; fi
  rm -rf "${STATE_ROOT:?}/$id"
}

# Sets whose state dir outlived their owner (fabench's cleanup removes the network, not this).
sweep_stale() {
  local d id
  for d in "$STATE_ROOT"/*; do
    [ -d "$d" ] || continue
    id=${d##*/}
    [[ $id =~ ^[0-9]+$ ]] || continue
    kill -0 "$id" 2>/dev/null || { down "$id"; echo "removed stale set $id" >&2; }
  done
}

# start_holder ID K: node K's holder, detached (its own session, no tty, none of our fds, so a
# caller capturing our output is not kept waiting); waits until it has its hostname.
start_holder() {
  local id=$1 k=$2 ns="fb$1n$2" pid t
  if [ "${EMU_CLUSTER_FAIL_NODE:-}" = "$k" ]; then
    if [ "${EMU_CLUSTER_FAIL_MODE:-}" = stall ]; then
      echo "emu-cluster: stalling at node $k's holder (EMU_CLUSTER_FAIL_MODE=stall)" >&2
      sleep 60 &
      STALL_PID=$!
      wait "$STALL_PID"
    fi
    echo "emu-cluster: failing at node $k's holder (EMU_CLUSTER_FAIL_NODE=$k)" >&2
    return 1
  fi
  setsid ip netns exec "$ns" unshare --uts --ipc \
    bash -c 'echo "$1" > /proc/sys/kernel/hostname && exec -a "fabench-emu-holder $1" sleep infinity' \
    holder "node$k" </dev/null >/dev/null 2>&1 &
  pid=$!
  disown "$pid" # not our job: no "Killed" notice when `down` ends it
  echo "$pid" >"$STATE_ROOT/$id/holder.$k"
  for ((t = 0; t < 100; t++)); do
    if [ "$(nsenter -t "$pid" -u cat /proc/sys/kernel/hostname 2>/dev/null)" = "node$k" ] &&
       holder_ok "$id" "$k" "$pid"; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "emu-cluster: node $k's holder (pid $pid) did not come up" >&2
  return 1
}

# A failed or interrupted `up`: its set goes, and so does a stall's sleep.
STALL_PID=
up_abort() {
  [ -z "$STALL_PID" ] || kill "$STALL_PID" 2>/dev/null || true
  down "$UP_ID"
}

up() {
  local n=$1 rate=$2 id=${3:-} started=0 prefix k addr
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || { echo "emu-cluster: NODES must be 1..250" >&2; exit 2; }
  [[ $rate =~ ^[0-9]+(kbit|mbit|gbit)$ ]] || { echo "emu-cluster: bad rate '$rate' (use e.g. 500mbit, 1gbit)" >&2; exit 2; }
  mkdir -p "$STATE_ROOT"
  sweep_stale
  if [ -z "$id" ]; then
    setsid bash -c 'exec -a fabench-emu-owner sleep infinity' </dev/null >/dev/null 2>&1 &
    id=$!
    disown "$id"
    started=1
  else
    valid_id "$id"
    kill -0 "$id" 2>/dev/null || die "ID $id is not a live process (the set's owner must be)"
  fi
  # An existing set of this id (ours, or a fabench launcher's) must not be touched, not even
  # by the clean-up of a failed `up`: refuse before anything is made.
  if [ -e "$STATE_ROOT/$id" ] || ip link show "fb${id}br" >/dev/null 2>&1 ||
     ip netns list 2>/dev/null | awk '{print $1}' | grep -qE "^fb${id}n[0-9]+$"; then
    [ "$started" = 0 ] || kill -9 "$id"
    die "set $id exists (down $id first)"
  fi
  # From here on any failure or signal removes what was made (a global: the trap may run
  # after this function's locals are gone).
  UP_ID=$id
  trap 'up_abort' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM HUP
  mkdir "$STATE_ROOT/$id"
  printf 'nodes=%s\nrate=%s\nowner_started=%s\n' "$n" "$rate" "$started" >"$STATE_ROOT/$id/state"
  "$FABRIC_EMU" setup "$n" "$rate" "$id" >/dev/null
  prefix=$(ip -o -4 addr show dev "fb${id}br" | awk '{print $4}' | sed -nE 's/^([0-9]+\.[0-9]+\.[0-9]+\.)254\/24$/\1/p')
  [ -n "$prefix" ] || die "set $id: no address on bridge fb${id}br"
  printf 'prefix=%s\nsubnet=%s0/24\n' "$prefix" "$prefix" >>"$STATE_ROOT/$id/state"
  for ((k = 0; k < n; k++)); do start_holder "$id" "$k"; done
  trap - EXIT INT TERM HUP
  echo "set $id subnet ${prefix}0/24 bridge fb${id}br ${prefix}254"
  for ((k = 0; k < n; k++)); do
    addr="$prefix$((k + 1))"
    echo "node$k $addr netns fb${id}n$k dev fb${id}e$k holder $(cat "$STATE_ROOT/$id/holder.$k")"
  done
}

# node_holder ID K: node K's live holder pid, or a one-line reason and exit 1.
node_holder() {
  local id=$1 k=$2 n p
  valid_id "$id"
  n=$(state_get "$id" nodes) || die "no set $id (no $STATE_ROOT/$id/state)"
  [[ $k =~ ^[0-9]+$ ]] && [ "$k" -lt "$n" ] || die "set $id has nodes 0..$((n - 1)), not '$k'"
  p=$(cat "$STATE_ROOT/$id/holder.$k" 2>/dev/null || true)
  holder_ok "$id" "$k" "$p" || die "set $id: node $k's holder ($p) is gone"
  echo "$p"
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
case $cmd in
  up)
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    need_tools; up "$@" ;;
  exec)
    [ $# -ge 3 ] || usage
    need_tools
    id=$1 k=$2; shift 2
    holder=$(node_holder "$id" "$k")
    prefix=$(state_get "$id" prefix)
    # For what runs there: which node it is on, and its device (e.g. for UCX_NET_DEVICES).
    export EMU_CLUSTER_ID=$id EMU_NODE=$k EMU_NODE_ADDR="$prefix$((k + 1))" EMU_NODE_DEV="fb${id}e$k"
    # ip netns exec, not nsenter -n: it also remounts /sys for the namespace (UCX reads its
    # network devices there); nsenter first, so the hostname and IPC namespace are the node's.
    exec nsenter -t "$holder" -u -i ip netns exec "fb${id}n$k" "$@" ;;
  addr)
    [ $# -eq 2 ] || usage
    valid_id "$1"
    n=$(state_get "$1" nodes) || die "no set $1"
    [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -lt "$n" ] || die "set $1 has nodes 0..$((n - 1)), not '$2'"
    echo "$(state_get "$1" prefix)$(($2 + 1))" ;;
  subnet)
    [ $# -eq 1 ] || usage
    valid_id "$1"
    state_get "$1" subnet || die "no set $1" ;;
  down)
    [ $# -eq 1 ] || usage
    valid_id "$1"
    need_tools; down "$1" ;;
  list)
    for d in "$STATE_ROOT"/*; do
      [ -d "$d" ] || continue
      id=${d##*/}
      if kill -0 "$id" 2>/dev/null; then st="owner $id alive"; else st="stale"; fi
      echo "set $id: $(state_get "$id" nodes || echo '?') nodes at $(state_get "$id" rate || echo '?'), subnet $(state_get "$id" subnet || echo '?'), $st"
    done ;;
  cleanup)
    need_tools
    mkdir -p "$STATE_ROOT"
    sweep_stale
    "$FABRIC_EMU" cleanup ;;
  -h|--help|help) usage ;;
  *) echo "emu-cluster: unknown command '$cmd'" >&2; usage ;;
esac
