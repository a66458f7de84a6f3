# The all-reduce harness on GPU buffers (the nccl transport). One GPU: one rank goes through
# NCCL (native is ncclAllReduce), 2-4 ranks share the device through CUDA IPC and the ring
# reads its neighbour's block in place (--mapped yes), its steps ordered by interprocess events
# and its last reduce-scatter step writing into the right's copy; _pieces cuts each step in 3
# (the tests' sizes are below those that the ring cuts itself); _hostwait is the same ring
# where the events are refused (each step waited for on the host); hier on one host is its
# steps within a host, by messages. Without a CUDA device each
# test prints one SKIP line and exits 77.
if(FABENCH_BUILD_NCCL)
  fabench_allreduce_test(nccl native ARGS --ranks 1 TIMEOUT 300)
  fabench_allreduce_test(nccl ring ARGS --ranks 1,2,3,4 --mem comm --mapped yes TIMEOUT 600)
  fabench_allreduce_test(nccl ring NAME coll_allreduce_nccl_ring_pieces ENV "FABENCH_RING_PIECES=3"
                         ARGS --ranks 2,3,4 --mem comm --mapped yes TIMEOUT 600)
  fabench_allreduce_test(nccl ring NAME coll_allreduce_nccl_ring_hostwait ENV "FABENCH_IPC_EVENTS=0"
                         ARGS --ranks 2,3 --mem comm --mapped yes TIMEOUT 600)
  foreach(algo rhd rd tree dtree ps ps:2 auto hier)
    string(REPLACE ":" "_" _n "${algo}")
    fabench_allreduce_test(nccl ${algo} NAME coll_allreduce_nccl_${_n} ARGS --ranks 1,2,3,4 --mem comm TIMEOUT 600)
  endforeach()
  get_property(_nccl_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _nccl_tests)
    if(_t MATCHES "^coll_allreduce_nccl_")
      set_tests_properties(${_t} PROPERTIES SKIP_RETURN_CODE 77 LABELS "coll;gpu")
    endif()
  endforeach()
endif()
# Without a device (or without CUDA in the build), --transport nccl is one line and exit 3, for
# allreduce and p2p alike; with a device the check does not apply (skipped).
set(_nccl_nodev [=[
for cmd in "allreduce --transport tcp,nccl --max-bytes 64" "p2p --transport nccl --tests d2d"; do
  "$0" $cmd --out "$1/nodev" >"$1/nodev.out" 2>"$1/nodev.err"; rc=$?
  if [ $rc -eq 0 ]; then echo "SKIP: a CUDA device is present"; exit 77; fi
  [ $rc -eq 3 ] || { echo "$cmd: exit $rc, want 3"; cat "$1/nodev.err"; exit 1; }
  [ "$(wc -l <"$1/nodev.err")" -eq 1 ] || { echo "$cmd: not one line:"; cat "$1/nodev.err"; exit 1; }
  grep -q "nccl: no CUDA device is present" "$1/nodev.err" || { cat "$1/nodev.err"; exit 1; }
  [ ! -s "$1/nodev.out" ] || { echo "$cmd: wrote to stdout:"; cat "$1/nodev.out"; exit 1; }
done
]=])
add_test(NAME coll_nccl_no_device COMMAND sh -c "${_nccl_nodev}" $<TARGET_FILE:fabench>
         ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(coll_nccl_no_device PROPERTIES SKIP_RETURN_CODE 77 LABELS "coll;gpu")
