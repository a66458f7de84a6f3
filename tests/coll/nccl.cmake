# The all-reduce harness on GPU buffers (the nccl transport). One GPU: one rank goes through
# NCCL (native is ncclAllReduce), 2-4 ranks share the device through CUDA IPC and the ring
# reads its neighbour's block in place (--mapped yes). Without a CUDA device each test prints
# one SKIP line and exits 77.
if(FABENCH_BUILD_NCCL)
  fabench_allreduce_test(nccl native ARGS --ranks 1 TIMEOUT 300)
  fabench_allreduce_test(nccl ring ARGS --ranks 1,2,3,4 --mem comm --mapped yes TIMEOUT 600)
  foreach(algo rhd rd tree dtree ps ps:2 auto)
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
