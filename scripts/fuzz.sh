#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz: builds them with clang in build-fuzz/, replays each
# committed corpus, then fuzzes each target for SECONDS from a scratch copy of its corpus (the
# repository's corpus is not changed; findings go to build-fuzz/findings/). Exit status 1 on a
# finding. CI runs it with 10 s per target (.ci/run).
#   scripts/fuzz.sh [SECONDS] [TARGET...]      targets: idx cifar ckpt tcp boot topo rundir accept
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(idx cifar ckpt tcp boot topo rundir accept)

cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABENCH_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc 2>/dev/null || echo 2)" --target fuzz_all >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/fabench-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work" # a target's scratch files (fuzz_rundir) go with it, also after a crash
mkdir -p build-fuzz/findings
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_odr_violation=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# as the sanitizer test build: only our leaks count (hwloc leaks an object on some malformed XML)
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
status=0
for t in "${targets[@]}"; do
  bin=build-fuzz/tests/fuzz/fuzz_$t
  corpus=tests/fuzz/corpus/$t
  if ! "$bin" -runs=0 "$corpus" >"$work/$t.replay.log" 2>&1; then
    echo "fuzz $t: the committed corpus fails:"; tail -40 "$work/$t.replay.log"; status=1; continue
  fi
  mkdir -p "$work/$t"
  # the rendezvous prints one line per rejected peer; keep libFuzzer's own lines only
  if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
       -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t-" "$work/$t" "$corpus" \
       >"$work/$t.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
    last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
    echo "fuzz $t: ${secs} s, $runs executions, $last, no finding"
  else
    echo "fuzz $t: FINDING (input kept in build-fuzz/findings/):"
    grep -vE '^fabench: rank 0' "$work/$t.log" | tail -60
    status=1
  fi
done
exit $status
