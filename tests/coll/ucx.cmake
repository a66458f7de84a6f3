# The all-reduce harness over the ucx transport, once on UCX's tcp and once on shared memory
# (UCX reads UCX_TLS / UCX_NET_DEVICES itself).
if(FABENCH_BUILD_UCX OR (FABENCH_HAVE_UCX AND EXISTS ${PROJECT_SOURCE_DIR}/collectives/transport_ucx.c))
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_tcp_ring TIMEOUT 600
                         ENV "UCX_TLS=tcp" "UCX_NET_DEVICES=lo")
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_sm_ring TIMEOUT 600
                         ENV "UCX_TLS=sm,self")
  # buffers from coll_mem_alloc: on shared memory the ring reads its neighbour's copy in place
  # (every rank count; then with streaming stores at every size); over UCX's tcp the peers
  # cannot map it and the ring must fall back to messages
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_sm_ring_mapped TIMEOUT 600
                         ENV "UCX_TLS=sm,self" ARGS --mem comm --mapped yes)
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_sm_ring_mapped_stream TIMEOUT 600
                         ENV "UCX_TLS=sm,self" "FABENCH_RING_STREAM_BYTES=0"
                         ARGS --mem comm --mapped yes --ranks 2,3,5)
  # each step in pieces (the GPU's default on large blocks), with empty pieces at small sizes
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_sm_ring_mapped_pieces TIMEOUT 600
                         ENV "UCX_TLS=sm,self" "FABENCH_RING_PIECES=3"
                         ARGS --mem comm --mapped yes --ranks 2,3,5)
  fabench_allreduce_test(ucx ring NAME coll_allreduce_ucx_tcp_ring_mem TIMEOUT 600
                         ENV "UCX_TLS=tcp" "UCX_NET_DEVICES=lo" ARGS --mem comm --mapped no --ranks 2,3)
  fabench_allreduce_test(ucx ring NAME coll_idle_wait_ucx TIMEOUT 120 ARGS --ranks 2 --idle yes)
  # Tests across emulated hosts (FABENCH_HOST) keep UCX's tcp on loopback: an interface another
  # test's emulation adds and removes meanwhile would otherwise be advertised and then refuse.
  # hier with its phases inside the hosts over ucx (shared memory, all ranks on one machine) and
  # tcp between them (emulated hosts, FABENCH_HOST): a second communicator exactly where there
  # are two levels (each rank checks), and the other way round
  fabench_allreduce_test(tcp hier NAME coll_allreduce_tcp_hier_intra_ucx TIMEOUT 300 ENV "UCX_NET_DEVICES=lo"
                         ARGS --layouts AABB,AAABCC,ABACCA,ABCD,AAAA --intra ucx --big 65537)
  fabench_allreduce_test(ucx hier:rhd NAME coll_allreduce_ucx_hier_intra_tcp TIMEOUT 300 ENV "UCX_NET_DEVICES=lo"
                         ARGS --layouts AABB,ABACCA --intra tcp --big 65537)
  # hier on memory the ranks of a host map (coll_mem_alloc): its phases inside hosts read their
  # peers' copies, on ucx alone and on ucx inside hosts beside tcp between them; uneven hosts,
  # a lone rank owning every block, interleaved hosts, one host
  fabench_allreduce_test(ucx hier NAME coll_allreduce_ucx_hier_mapped TIMEOUT 300 ENV "UCX_NET_DEVICES=lo"
                         ARGS --layouts AABB,AAABCC,ABACCA,AAAAB,ABAB,AAAA --mem comm --mapped yes --big 65537)
  fabench_allreduce_test(tcp hier:rhd NAME coll_allreduce_tcp_hier_intra_ucx_mapped TIMEOUT 300 ENV "UCX_NET_DEVICES=lo"
                         ARGS --layouts AABB,AAABBB,ABACCA --intra ucx --mem comm --mapped yes --big 65537)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/test_ucx_transport.c)
  fabench_test(test_ucx_transport SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ucx_transport.c
               LIBS fabench_collectives LABELS coll TIMEOUT 120)
  endif()
endif()
