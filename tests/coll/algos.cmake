# The all-reduce harness (CMakeLists.txt here) over tcp for each algorithm of algo_*.c, and the
# algorithms' own tests: pure planning logic, and bit-identical results across ranks.
# rhd, rd, tree, dtree and ps run every rank count 1..8 (folds and tree shapes differ per size);
# ps:4 (fewer, equal and more ranks than servers) and auto (it runs the others) run a subset.
foreach(algo rhd rd tree dtree ps)
  fabench_allreduce_test(tcp ${algo})
endforeach()
fabench_allreduce_test(tcp ps:4 ARGS --ranks 2,3,4,5,8)
fabench_allreduce_test(tcp auto ARGS --ranks 1,3,4,8)
# Several hosts, emulated (FABENCH_HOST per rank, a letter a rank): hier on 2 hosts x 2 ranks,
# 3x2, 2x3, 4x1, 1x4, hosts of 3,1,2 ranks (contiguous, and with one host's ranks spread out),
# 4 + 1 (the lone rank owns every block) and round-robin, with each algorithm across hosts, at a
# smaller large count (it is most of a group's time; the uneven layouts also at the full one);
# the flat algorithms in node-aware order where hosts interleave; auto picks hier where it should.
set(_layouts AABB,AABBCC,AAABBB,ABCD,AAAA,AAABCC,ABACCA,AAAAB,ABAB)
fabench_allreduce_test(tcp hier NAME coll_allreduce_tcp_hier_uneven_big ARGS --layouts ABACCA,AAAAB)
foreach(algo ring rhd tree)
  fabench_allreduce_test(tcp hier:${algo} NAME coll_allreduce_tcp_hier_${algo}_layouts
                         ARGS --layouts ${_layouts} --big 65537)
endforeach()
foreach(algo rd dtree)
  fabench_allreduce_test(tcp hier:${algo} NAME coll_allreduce_tcp_hier_${algo}_layouts
                         ARGS --layouts ABACCA,AAAAB --big 65537)
endforeach()
foreach(algo ring rhd tree)
  fabench_allreduce_test(tcp ${algo} NAME coll_allreduce_tcp_${algo}_layouts ARGS --layouts ABAB,ABACCA --big 65537)
endforeach()
fabench_allreduce_test(tcp auto NAME coll_allreduce_tcp_auto_layouts ARGS --layouts ABACCA,ABCD,AAAA --big 65537)
fabench_test(test_algo_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_algo_plan.c
             LIBS fabench_collectives LABELS coll TIMEOUT 60)
fabench_test(test_algo_identical SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_algo_identical.c
             LIBS fabench_collectives LABELS coll TIMEOUT 300)
