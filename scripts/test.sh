#!/usr/bin/env bash
# Builds fabench and runs the whole test suite (ctest). Installs missing Debian packages first.
#   scripts/test.sh              release build in build/, every test
#   scripts/test.sh --sanitize   AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DFABENCH_SANITIZE=ON >/dev/null
  # MPI, UCX and hwloc keep allocations until exit by design: only our leaks count.
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:detect_odr_violation=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # the sanitizers slow everything several times: the multi-rank all-reduce tests use a
  # smaller large count and a subset of the rank counts (the release run covers 1..8)
  export FABENCH_TEST_BIG=${FABENCH_TEST_BIG:-65537}
  export TEST_AR_RANKS=${TEST_AR_RANKS:-1,2,3,5,8}
else
  dir=build
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$dir" -j"$jobs"
ctest --test-dir "$dir" --output-on-failure --timeout 1200
