# Launcher and emulated-fabric tests (launch/: the launcher needs nothing else of fabench).
fabench_test(test_launch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_launch.c LIBS fabench_launch
             LABELS bench TIMEOUT 120)

# Needs root and iproute2 (skips with a message without them).
fabench_test(test_emulate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_emulate.c LIBS fabench_launch
             LABELS bench TIMEOUT 300)
if(FABENCH_HAVE_MPI)
  add_executable(emu_mpi_rank ${CMAKE_CURRENT_LIST_DIR}/emu_mpi_rank.c)
  target_link_libraries(emu_mpi_rank PRIVATE MPI::MPI_C)
  target_compile_definitions(test_emulate PRIVATE EMU_MPI_RANK="$<TARGET_FILE:emu_mpi_rank>")
  add_dependencies(test_emulate emu_mpi_rank)
endif()
