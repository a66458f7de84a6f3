# `fabench p2p` end to end (runs the fabench binary, FABENCH_BIN): flags, files, all pairs.
fabench_test(test_p2p_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_p2p_cli.c
             LIBS PkgConfig::CJSON LABELS bench TIMEOUT 300)
add_dependencies(test_p2p_cli fabench)
if(FABENCH_BUILD_UCX OR (FABENCH_HAVE_UCX AND EXISTS ${PROJECT_SOURCE_DIR}/collectives/transport_ucx.c))
  target_compile_definitions(test_p2p_cli PRIVATE P2P_HAVE_UCX=1)
endif()
