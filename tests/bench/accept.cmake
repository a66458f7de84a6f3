# `fabench accept`: the rules, hostlists and outliers as units, and the command end to end with
# --from on run directories the test writes (runs FABENCH_BIN; python3 reads the JUnit file).
fabench_test(test_accept SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_accept.c ${PROJECT_SOURCE_DIR}/bench/accept_rules.c
             ${PROJECT_SOURCE_DIR}/bench/accept_out.c ${PROJECT_SOURCE_DIR}/bench/accept_name.c
             ${PROJECT_SOURCE_DIR}/bench/accept_judge.c ${PROJECT_SOURCE_DIR}/bench/accept_topo.c
             ${PROJECT_SOURCE_DIR}/bench/common.c
             LIBS fabench_topo fabench_collectives fabench_results fabench_launch fabench_util PkgConfig::YAML
                  PkgConfig::CJSON LABELS bench TIMEOUT 60)
target_include_directories(test_accept PRIVATE ${PROJECT_SOURCE_DIR}/bench)
add_dependencies(test_accept fabench)
# Its straggler test binds two ranks to the two cores and loads one: a test running beside it
# loads the other, and the straggler it names is then that test's.
set_tests_properties(test_accept PROPERTIES RUN_SERIAL TRUE)
# On emulated clusters (root, iproute2; else skipped): a node slowed with --emulate-slow is
# named alone, a uniform cluster names nobody.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_accept_emu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/accept_emu_test.py $<TARGET_FILE:fabench>)
  set_tests_properties(test_accept_emu PROPERTIES TIMEOUT 240 LABELS "bench;emu" SKIP_RETURN_CODE 77
                       RESOURCE_LOCK emu_cluster)
endif()
# allreduce --pairs and --nodes: the groups' rows and refusals on loopback ranks; on emulated
# clusters (root, iproute2; else skipped) accept names a slow node from them, and nobody in a
# uniform cluster.
if(Python3_Interpreter_FOUND)
  add_test(NAME test_allreduce_groups
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/allreduce_groups_test.py $<TARGET_FILE:fabench> loopback)
  set_tests_properties(test_allreduce_groups PROPERTIES TIMEOUT 60 LABELS bench)
  add_test(NAME test_allreduce_groups_emu
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/allreduce_groups_test.py $<TARGET_FILE:fabench> emu)
  set_tests_properties(test_allreduce_groups_emu PROPERTIES TIMEOUT 120 LABELS "bench;emu" SKIP_RETURN_CODE 77
                       RESOURCE_LOCK emu_cluster)
endif()
