# Reduce-scatter, all-gather, broadcast and all-to-all(v) (test_colls.c): every algorithm over
# tcp at 1, 2, 3, 5 and 8 ranks, over mpi (its own too) and over ucx where they are built.
add_executable(test_colls ${CMAKE_CURRENT_SOURCE_DIR}/test_colls.c)
target_link_libraries(test_colls PRIVATE fabench_collectives PkgConfig::CMOCKA fabench_config m)
function(fabench_colls_test transport coll algo)
  set(_name coll_${coll}_${transport}_${algo})
  add_test(NAME ${_name} COMMAND test_colls --transport ${transport} --coll ${coll} --algo ${algo} ${ARGN})
  set_tests_properties(${_name} PROPERTIES TIMEOUT 600 LABELS coll)
endfunction()
foreach(_c rs:ring rs:rhd rs:auto ag:ring ag:rd ag:bruck ag:auto bcast:tree bcast:chain bcast:vdg
        bcast:linear bcast:auto a2a:pairwise a2a:linear a2a:bruck a2a:auto)
  string(REPLACE ":" ";" _p ${_c})
  list(GET _p 0 _coll)
  list(GET _p 1 _algo)
  fabench_colls_test(tcp ${_coll} ${_algo})
endforeach()
# linear with more partners than its window (COLL_LINEAR_WINDOW) holds: steps (the root's sends)
# posted as the oldest complete, into their slots
foreach(_coll bcast a2a)
  add_test(NAME coll_${_coll}_tcp_linear_window COMMAND test_colls --transport tcp --coll ${_coll} --algo linear
           --ranks 11,13 --big 517)
  set_tests_properties(coll_${_coll}_tcp_linear_window PROPERTIES TIMEOUT 600 LABELS coll)
endforeach()
# hier on groups whose ranks report hosts by letter: even hosts (two levels), uneven (the ring)
foreach(_coll rs ag)
  fabench_colls_test(tcp ${_coll} hier --layouts AABB,AAABBB,ABAB,ABCABC,AABBB,AAAA --big 1031)
  set_tests_properties(coll_${_coll}_tcp_hier PROPERTIES TIMEOUT 600)
endforeach()
# hier of broadcast (every root) and all-to-allv on nodes of 1x1, 2x2, 3x2, 2x3 and 4x1 ranks,
# interleaved (ABAB) and uneven (AABBB, ABBBC, AAABBBCC)
foreach(_coll bcast a2a)
  fabench_colls_test(tcp ${_coll} hier --layouts A,AABB,AABBCC,AAABBB,ABCD,ABAB,AABBB,ABBBC,AAABBBCC --big 1031)
  # long enough that the broadcast's levels among 3 run vdg (scatter + all-gather), not the tree
  add_test(NAME coll_${_coll}_tcp_hier_big COMMAND test_colls --transport tcp --coll ${_coll} --algo hier
           --layouts AABBCC,AAABBB --big 70001)
  set_tests_properties(coll_${_coll}_tcp_hier_big PROPERTIES TIMEOUT 600 LABELS coll)
endforeach()
# auto's broadcast across hosts: hier where some host has several ranks (AABB, ABAB, AABBB), a
# one-level algorithm where each has one (ABCD)
add_test(NAME coll_bcast_tcp_auto_hosts COMMAND test_colls --transport tcp --coll bcast --algo auto
         --layouts AABB,ABCD,ABAB,AABBB --big 1031)
set_tests_properties(coll_bcast_tcp_auto_hosts PROPERTIES TIMEOUT 600 LABELS coll)
# direct over tcp: no rank maps another's memory, so the ring (the tree, pairwise) runs instead
foreach(_coll rs ag bcast a2a)
  fabench_colls_test(tcp ${_coll} direct --mapped no)
endforeach()
# MPI's own (native) beside its transport's messages under fabench's algorithms
if(FABENCH_HAVE_MPI)
  foreach(_c rs:native ag:native bcast:native a2a:native rs:ring bcast:vdg bcast:linear a2a:linear)
    string(REPLACE ":" ";" _p ${_c})
    list(GET _p 0 _coll)
    list(GET _p 1 _algo)
    fabench_colls_test(mpi ${_coll} ${_algo} --ranks 1,2,3,5)
    set_tests_properties(coll_${_coll}_mpi_${_algo} PROPERTIES ENVIRONMENT
      "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
  endforeach()
endif()
if(FABENCH_BUILD_UCX)
  # direct: on shared memory with buffers the peers map, every rank reads in place; over UCX's
  # tcp they cannot map them and it falls back to messages
  foreach(_coll rs ag bcast a2a)
    fabench_colls_test(ucx ${_coll} direct --ranks 2,3,5 --mem comm --mapped yes)
    set_tests_properties(coll_${_coll}_ucx_direct PROPERTIES ENVIRONMENT "UCX_TLS=sm,self")
  endforeach()
  # hier on faked hosts: the broadcast inside a host reads the leader's mapped copy (--mem comm
  # on shared memory), the all-to-all goes by messages; over ucx alone, and tcp across hosts
  # with ucx inside them, as the commands run it
  foreach(_coll bcast a2a)
    fabench_colls_test(ucx ${_coll} hier --layouts AABB,AAABBB,ABBBC --mem comm --big 1031)
    set_tests_properties(coll_${_coll}_ucx_hier PROPERTIES ENVIRONMENT "UCX_TLS=sm,self")
    add_test(NAME coll_${_coll}_tcp_hier_intra COMMAND test_colls --transport tcp --intra ucx --coll ${_coll}
             --algo hier --layouts AABB,AABBCC,ABBBC --mem comm --big 1031)
    set_tests_properties(coll_${_coll}_tcp_hier_intra PROPERTIES TIMEOUT 600 LABELS coll ENVIRONMENT "UCX_TLS=sm,self")
  endforeach()
  foreach(_c rs:ring ag:bruck bcast:vdg bcast:linear a2a:pairwise a2a:linear a2a:bruck)
    string(REPLACE ":" ";" _p ${_c})
    list(GET _p 0 _coll)
    list(GET _p 1 _algo)
    fabench_colls_test(ucx ${_coll} ${_algo} --ranks 2,3,5)
  endforeach()
endif()
# On GPU buffers (nccl): every algorithm, the values through host memory that is poisoned in
# between. One GPU: one rank goes through NCCL (native is NCCL's own), 2 and 3 ranks share the
# device through CUDA IPC (messages staged in host memory; no native there); with a GPU per rank
# the same ranks go through NCCL's send and receive. direct reads only host memory the peers map,
# so it runs its fallback; hier is one host's. Without a CUDA device each prints one SKIP line
# and exits 77.
if(FABENCH_BUILD_NCCL)
  foreach(_c rs:native ag:native bcast:native a2a:native)
    string(REPLACE ":" ";" _p ${_c})
    list(GET _p 0 _coll)
    list(GET _p 1 _algo)
    fabench_colls_test(nccl ${_coll} ${_algo} --ranks 1)
  endforeach()
  foreach(_c rs:ring rs:rhd rs:hier rs:direct rs:auto ag:ring ag:rd ag:bruck ag:hier ag:direct ag:auto
          bcast:tree bcast:chain bcast:vdg bcast:linear bcast:hier bcast:direct bcast:auto a2a:pairwise a2a:linear
          a2a:bruck a2a:hier a2a:direct a2a:auto)
    string(REPLACE ":" ";" _p ${_c})
    list(GET _p 0 _coll)
    list(GET _p 1 _algo)
    fabench_colls_test(nccl ${_coll} ${_algo} --ranks 1,2,3,4)
  endforeach()
  get_property(_colls_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _colls_tests)
    if(_t MATCHES "^coll_(rs|ag|bcast|a2a)_nccl_")
      set_tests_properties(${_t} PROPERTIES SKIP_RETURN_CODE 77 LABELS "coll;gpu")
    endif()
  endforeach()
endif()
# The same device paths without a GPU (devemu.h): tcp given an emulated device whose memory the
# host cannot touch outside the device's copies and reductions (a host access is a SIGSEGV),
# its messages grouped as NCCL's (launched together at a wait that waits for the whole group)
# or staged one by one as CUDA IPC's; hier on hosts by letter too.
foreach(_mode grouped staged)
  foreach(_c rs:ring rs:rhd rs:hier rs:direct ag:ring ag:rd ag:bruck ag:hier ag:direct bcast:tree bcast:chain
          bcast:vdg bcast:linear bcast:hier bcast:direct a2a:pairwise a2a:linear a2a:bruck a2a:hier a2a:direct)
    string(REPLACE ":" ";" _p ${_c})
    list(GET _p 0 _coll)
    list(GET _p 1 _algo)
    set(_name coll_${_coll}_devemu_${_mode}_${_algo})
    add_test(NAME ${_name} COMMAND test_colls --transport tcp --devemu ${_mode} --coll ${_coll} --algo ${_algo}
             --ranks 1,2,3,4,5 --big 1031)
    set_tests_properties(${_name} PROPERTIES TIMEOUT 300 LABELS coll)
  endforeach()
  foreach(_coll rs ag bcast a2a)
    add_test(NAME coll_${_coll}_devemu_${_mode}_hier_hosts COMMAND test_colls --transport tcp --devemu ${_mode}
             --coll ${_coll} --algo hier --layouts AABB,ABAB,AABBB --big 1031)
    set_tests_properties(coll_${_coll}_devemu_${_mode}_hier_hosts PROPERTIES TIMEOUT 300 LABELS coll)
  endforeach()
endforeach()
