#!/usr/bin/env bash
# fabric-emu.sh: set up, list and tear down fabench's emulated fabric by hand (for debugging).
# The same scheme as `fabench ... --emulate RATE` (launch/emulate.c):
#   set id        a number; fabench uses its launcher's pid, this script its caller's ($PPID)
#   namespaces    fb<id>n<r>        one per rank, loopback up
#   links         fb<id>h<r> (root namespace, on the bridge) <-> fb<id>e<r> (in fb<id>n<r>)
#   bridge        fb<id>br, address 198.18.S.254/24
#   addresses     198.18.S.(r+1)/24 for rank r, S a free /24 of 198.18.0.0/15 (RFC 2544)
#   shaping       tc tbf on both ends of every veth: rate RATE, burst max(rate x 1 ms, 64 KiB),
#                 limit (the queue tbf holds before dropping) max(rate x 5 ms + burst, 8 MiB)
#   MTU           $FABENCH_EMU_MTU, default 9000 (jumbo frames, as on cluster fabrics)
#   congestion    each namespace's default tcp congestion control $FABENCH_EMU_CC, default reno
#                 (fabench's tcp transport's; 'system' keeps the host's)
# A set whose owner pid is gone is stale: `cleanup` (and every fabench --emulate run) removes it.
# scripts/emu-cluster.sh builds emulated hosts (hostname, IPC namespace) on this scheme, for
# launchers that fabench does not start itself (torchrun-style scripts, mpirun's hostfiles).
set -euo pipefail

usage() {
  cat >&2 <<'EOF'
usage: fabric-emu.sh setup N RATE [ID]   N namespaces on a bridge, links shaped to RATE
                                         (e.g. 1gbit, 500mbit); ID defaults to the caller's pid
       fabric-emu.sh exec ID RANK CMD... run CMD in rank RANK's namespace
       fabric-emu.sh teardown ID         remove set ID
       fabric-emu.sh list                show every set, its owner and whether it is stale
       fabric-emu.sh cleanup             remove every stale set
EOF
  exit 2
}

die() { echo "fabric-emu: $*" >&2; exit 1; }

need_tools() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tc)"
  command -v ip >/dev/null && command -v tc >/dev/null || die "needs iproute2 (ip, tc)"
}

# rate_bits RATE -> bits per second; accepts <integer>(kbit|mbit|gbit), like fabench.
rate_bits() {
  local r=$1 num unit
  [[ $r =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || { echo "fabric-emu: bad rate '$r' (use e.g. 500mbit, 1gbit, 10gbit)" >&2; exit 2; }
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case $unit in
    kbit) echo $((num * 1000)) ;;
    mbit) echo $((num * 1000000)) ;;
    gbit) echo $((num * 1000000000)) ;;
  esac
}

# Every set id present (from namespaces, links and bridges).
set_ids() {
  { ip netns list 2>/dev/null | awk '{print $1}'; ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'; } |
    sed -nE 's/^fb([0-9]+)(n[0-9]+|h[0-9]+|br)$/\1/p' | sort -un
}

owner_alive() { kill -0 "$1" 2>/dev/null; }

teardown() {
  local id=$1 ns dev
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^fb${id}n[0-9]+$" || true); do
    for p in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$p" 2>/dev/null || true; done
  done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
               grep -E "^fb${id}(h[0-9]+|br)$" || true); do
    ip link del "$dev" 2>/dev/null || true
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^fb${id}n[0-9]+$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

disable_v6() { # disable_v6 [netns] dev-or-default...: no IPv6 link-local chatter on our links
  local ns=$1; shift
  for d in "$@"; do
    if [ -n "$ns" ]; then
      ip netns exec "$ns" sh -c 'echo 1 > "/proc/sys/net/ipv6/conf/$1/disable_ipv6"' sh "$d" 2>/dev/null || true
    else
      [ -w "/proc/sys/net/ipv6/conf/$d/disable_ipv6" ] && echo 1 > "/proc/sys/net/ipv6/conf/$d/disable_ipv6" || true
    fi
  done
}

setup() {
  local n=$1 rate=$2 id=${3:-$PPID} mtu=${FABENCH_EMU_MTU:-9000} cc=${FABENCH_EMU_CC:-reno}
  local bits burst limit s base br r
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 250 ] || { echo "fabric-emu: N must be 1..250" >&2; exit 2; }
  [[ $id =~ ^[0-9]+$ ]] || die "ID must be a number"
  bits=$(rate_bits "$rate")
  burst=$((bits / 8 / 1000)); [ "$burst" -ge 65536 ] || burst=65536
  limit=$((bits / 8 / 200 + burst)); [ "$limit" -ge 8388608 ] || limit=8388608
  [ -z "$(set_ids | grep -x "$id" || true)" ] || die "set $id exists (teardown $id first)"
  br="fb${id}br"
  exec 9>/run/lock/fabench-emu.lock
  flock 9
  # A /24 of 198.18.0.0/15 that no interface uses yet.
  local used; used=$(ip -o -4 addr show | awk '{print $4}')
  for ((k = 0; k < 512; k++)); do
    s=$(((id + k) % 512))
    base="198.$((18 + s / 256)).$((s % 256))"
    grep -q "^${base//./\\.}\." <<<"$used" || break
  done
  trap 'teardown "$id"' ERR
  ip link add "$br" mtu "$mtu" type bridge
  disable_v6 "" "$br"
  ip addr add "$base.254/24" dev "$br"
  ip link set "$br" up
  flock -u 9
  for ((r = 0; r < n; r++)); do
    local ns="fb${id}n$r" h="fb${id}h$r" e="fb${id}e$r"
    ip netns add "$ns"
    disable_v6 "$ns" default all
    [ "$cc" = system ] || ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc"
    ip -n "$ns" link set lo up
    ip link add "$h" mtu "$mtu" type veth peer name "$e" mtu "$mtu" netns "$ns"
    disable_v6 "" "$h"
    ip link set "$h" master "$br" up
    ip -n "$ns" addr add "$base.$((r + 1))/24" dev "$e"
    ip -n "$ns" link set "$e" up
    tc qdisc add dev "$h" root tbf rate "$rate" burst "$burst" limit "$limit"
    tc -n "$ns" qdisc add dev "$e" root tbf rate "$rate" burst "$burst" limit "$limit"
    echo "rank $r: netns $ns dev $e addr $base.$((r + 1)) (host side $h)"
  done
  trap - ERR
  echo "set $id: bridge $br $base.254/24, $n ranks, mtu $mtu, tbf rate $rate burst $burst limit $limit, tcp cc $cc"
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
case $cmd in
  setup)
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    need_tools; setup "$@" ;;
  exec)
    [ $# -ge 3 ] || usage
    need_tools; ns="fb${1}n$2"; shift 2; exec ip netns exec "$ns" "$@" ;;
  teardown)
    [ $# -eq 1 ] && [[ $1 =~ ^[0-9]+$ ]] || usage
    need_tools; teardown "$1" ;;
  list)
    need_tools
    for id in $(set_ids); do
      if owner_alive "$id"; then st="owner $id alive"; else st="stale"; fi
      nns=$(ip netns list | awk '{print $1}' | grep -cE "^fb${id}n[0-9]+$" || true)
      echo "set $id: $nns namespaces, $st"
    done ;;
  cleanup)
    need_tools
    for id in $(set_ids); do
      owner_alive "$id" || { teardown "$id"; echo "removed stale set $id"; }
    done ;;
  -h|--help|help) usage ;;
  *) echo "fabric-emu: unknown command '$cmd'" >&2; usage ;;
esac
