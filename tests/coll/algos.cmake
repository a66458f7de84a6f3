# The all-reduce harness (CMakeLists.txt here) over tcp for each algorithm of algo_*.c, and the
# algorithms' own tests: pure planning logic, and bit-identical results across ranks.
# rhd, rd, tree, dtree and ps run every rank count 1..8 (folds and tree shapes differ per size);
# ps:4 (fewer, equal and more ranks than servers) and auto (it runs the others) run a subset.
foreach(algo rhd rd tree dtree ps)
  fabench_allreduce_test(tcp ${algo})
endforeach()
fabench_allreduce_test(tcp ps:4 ARGS --ranks 2,3,4,5,8)
fabench_allreduce_test(tcp auto ARGS --ranks 1,3,4,8)
fabench_test(test_algo_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_algo_plan.c
             LIBS fabench_collectives LABELS coll TIMEOUT 60)
fabench_test(test_algo_identical SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_algo_identical.c
             LIBS fabench_collectives LABELS coll TIMEOUT 300)
