# The all-reduce harness over the ucx transport, once on UCX's tcp and once on shared memory
# (UCX reads UCX_TLS / UCX_NET_DEVICES itself).
if(FABENCH_BUILD_UCX OR (FABENCH_HAVE_UCX AND EXISTS ${PROJECT_SOURCE_DIR}/collectives/transport_ucx.c))
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_tcp_ring TIMEOUT 600
                         ENV "UCX_TLS=tcp" "UCX_NET_DEVICES=lo")
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_sm_ring TIMEOUT 600
                         ENV "UCX_TLS=sm,self")
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/test_ucx_transport.c)
  fabench_test(test_ucx_transport SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ucx_transport.c
               LIBS fabench_collectives LABELS coll TIMEOUT 120)
  endif()
endif()
