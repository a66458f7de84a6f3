# Launchers across emulated hosts (scripts/emu-cluster.sh): fabench started by a torchrun-style
# per-node script and by Open MPI's mpirun over a hostfile, as on a cluster, plus the set-up
# script itself and the bootstrap's errors. Root, iproute2 and util-linux (mpirun for its test),
# else each skips with a one-line reason (exit 77).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  foreach(t script torchrun mpirun errors)
    add_test(NAME test_emu_cluster_${t}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/emu_cluster_test.py $<TARGET_FILE:fabench> ${t})
    # one at a time: each holds a set of namespaces and several ranks on few cores
    set_tests_properties(test_emu_cluster_${t} PROPERTIES TIMEOUT 180 LABELS "bench;emu" SKIP_RETURN_CODE 77
                         RESOURCE_LOCK emu_cluster
                         ENVIRONMENT "EMU_HAVE_UCX=$<BOOL:${FABENCH_HAVE_UCX}>;EMU_HAVE_MPI=$<BOOL:${FABENCH_HAVE_MPI}>;EMU_HAVE_DNNL=$<BOOL:${FABENCH_HAVE_DNNL}>")
  endforeach()
endif()
