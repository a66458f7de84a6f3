# Launcher and emulated-fabric tests (with bench/launch.c and bench/emulate.c, compiled in
# directly: the launcher needs nothing else of fabench).
set(FABENCH_LAUNCH_SRC ${PROJECT_SOURCE_DIR}/bench/launch.c ${PROJECT_SOURCE_DIR}/bench/emulate.c)

fabench_test(test_launch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_launch.c ${FABENCH_LAUNCH_SRC}
             LABELS bench TIMEOUT 120)
target_include_directories(test_launch PRIVATE ${PROJECT_SOURCE_DIR}/bench)

# Needs root and iproute2 (skips with a message without them).
fabench_test(test_emulate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_emulate.c ${FABENCH_LAUNCH_SRC}
             LABELS bench TIMEOUT 300)
target_include_directories(test_emulate PRIVATE ${PROJECT_SOURCE_DIR}/bench)
if(FABENCH_HAVE_MPI)
  add_executable(emu_mpi_rank ${CMAKE_CURRENT_LIST_DIR}/emu_mpi_rank.c)
  target_link_libraries(emu_mpi_rank PRIVATE MPI::MPI_C)
  target_compile_definitions(test_emulate PRIVATE EMU_MPI_RANK="$<TARGET_FILE:emu_mpi_rank>")
  add_dependencies(test_emulate emu_mpi_rank)
endif()
