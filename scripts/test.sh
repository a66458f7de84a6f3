#!/usr/bin/env bash
# Builds fabench with warnings as errors and runs the test suite (ctest). Installs missing
# Debian packages first.
#   scripts/test.sh                  RelWithDebInfo build in build/, every test
#   scripts/test.sh --type T         build type T (Debug, Release, RelWithDebInfo, MinSizeRel)
#                                    in build-<t>/ (build/ for RelWithDebInfo), every test
#   scripts/test.sh --sanitize       AddressSanitizer + UndefinedBehaviorSanitizer build in
#                                    build-asan/, every test (the fault matrix's killed, stopped
#                                    and cut-off ranks take the error paths under the sanitizers;
#                                    a report in any rank's stderr fails its case)
#   scripts/test.sh --clang          clang build (Release unless --type) in build-clang/
#                                    (build-clang-<t>/ when --type names another type); every
#                                    test but the fault matrix (two minutes of waiting for
#                                    timeouts, the same code the gcc and sanitizer runs cover),
#                                    the multi-rank all-reduce matrix as small as the sanitizer
#                                    run's
# Anything after `--` goes to ctest (e.g. -- -R test_res).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

mode=gcc type="" ctest_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) mode=asan ;;
    --clang) mode=clang ;;
    --type) type="${2:?--type needs a build type}"; shift ;;
    --) shift; ctest_extra=("$@"); break ;;
    *) echo "usage: $0 [--sanitize | --clang] [--type BUILD_TYPE] [-- ctest args]" >&2; exit 2 ;;
  esac
  shift
done

jobs=$(nproc 2>/dev/null || echo 2)
cfg=(-DFABENCH_WERROR=ON)
case "$mode" in
  asan)
    dir=build-asan
    cfg+=(-DCMAKE_BUILD_TYPE="${type:-Debug}" -DFABENCH_SANITIZE=ON)
    # MPI, UCX and hwloc keep allocations until exit by design: only our leaks count.
    export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_odr_violation=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    # the sanitizers slow everything several times: the multi-rank all-reduce tests use a
    # smaller large count and a subset of the rank counts (the release run covers 1..8)
    export FABENCH_TEST_BIG=${FABENCH_TEST_BIG:-65537}
    export TEST_AR_RANKS=${TEST_AR_RANKS:-1,2,3,5,8}
    ;;
  clang)
    # one build dir per type, so several clang types can sit side by side; CI's plain
    # --clang keeps build-clang/
    type=${type:-Release}
    if [ "$type" = Release ]; then dir=build-clang; else dir="build-clang-$(echo "$type" | tr A-Z a-z)"; fi
    export CC=clang CXX=clang++
    cfg+=(-DCMAKE_BUILD_TYPE="$type")
    export FABENCH_TEST_BIG=${FABENCH_TEST_BIG:-65537}
    export TEST_AR_RANKS=${TEST_AR_RANKS:-1,2,3,5,8}
    [ ${#ctest_extra[@]} -gt 0 ] || ctest_extra=(-E '^test_fault_matrix$')
    ;;
  *)
    type=${type:-RelWithDebInfo}
    if [ "$type" = RelWithDebInfo ]; then dir=build; else dir="build-$(echo "$type" | tr A-Z a-z)"; fi
    cfg+=(-DCMAKE_BUILD_TYPE="$type")
    ;;
esac
cmake -S . -B "$dir" "${cfg[@]}" >/dev/null
cmake --build "$dir" -j"$jobs"
ctest --test-dir "$dir" --output-on-failure --timeout 1200 ${ctest_extra[@]+"${ctest_extra[@]}"}
