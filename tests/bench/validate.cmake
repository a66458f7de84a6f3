# fabench validate end to end on a tiny grid of emulated links (root and iproute2, else it skips
# with exit 77; oneDNN for its training cells): about 20 s.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND AND FABENCH_HAVE_DNNL)
  add_test(NAME test_validate_quick
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/validate_test.py $<TARGET_FILE:fabench>)
  set_tests_properties(test_validate_quick PROPERTIES TIMEOUT 600 LABELS "bench;emu" SKIP_RETURN_CODE 77
                       RESOURCE_LOCK emu_cluster)
endif()
