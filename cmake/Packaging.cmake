# Install rules and the Debian package (CPack): `cmake --install build --prefix P` or
# `cpack -G DEB` in the build directory. Included last from the top-level CMakeLists.txt.
include(GNUInstallDirs)

install(TARGETS fabench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        USE_SOURCE_PERMISSIONS)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# README's links point into docs/: the pages go beside it
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# The man page: help2man over `fabench --help`, every command's --help and cmake/fabench.h2m,
# built with the binary (cmake/FabenchMan.cmake). Without help2man there is no man page.
find_program(FABENCH_HELP2MAN help2man)
if(FABENCH_HELP2MAN)
  set(_man ${PROJECT_BINARY_DIR}/man/fabench.1.gz)
  add_custom_command(
    OUTPUT ${_man}
    COMMAND ${CMAKE_COMMAND} -DFABENCH=$<TARGET_FILE:fabench> -DHELP2MAN=${FABENCH_HELP2MAN}
            -DVERSION=${PROJECT_VERSION} -DSTATIC=${PROJECT_SOURCE_DIR}/cmake/fabench.h2m
            -DOUT=${_man} -P ${PROJECT_SOURCE_DIR}/cmake/FabenchMan.cmake
    DEPENDS fabench ${PROJECT_SOURCE_DIR}/cmake/FabenchMan.cmake ${PROJECT_SOURCE_DIR}/cmake/fabench.h2m
    COMMENT "Generating the fabench(1) man page"
    VERBATIM)
  add_custom_target(fabench_man ALL DEPENDS ${_man})
  install(FILES ${_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man page (scripts/install-deps.sh installs it)")
endif()

# What the package needs at run time besides the libraries (ip and tc for --emulate, mpirun
# for -n with the mpi transport, gnuplot for report's plots, the default training data).
set(_recommends "iproute2, gnuplot-nox, dataset-fashion-mnist")
if(FABENCH_HAVE_MPI)
  string(PREPEND _recommends "openmpi-bin, ")
endif()

set(CPACK_PACKAGE_NAME fabench)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "fabench")
set(CPACK_PACKAGE_CONTACT "fabench maintainers <maintainers@users.noreply.a-seed-5a4c12ff.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "network-fabric benchmarks for data-parallel training")
# the long description; CPack puts the summary above it
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "fabench measures what an interconnect gives a data-parallel training job:
all-reduce and point-to-point sweeps over TCP, UCX and MPI, ResNet training
on the CPU (oneDNN), the machine's topology, a cost model and a report.
It runs under mpirun, srun or torchrun, or starts its own local ranks.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
# Depends: the runtime libraries' packages, from dpkg-shlibdeps (dpkg-dev)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "${_recommends}")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)

# A build that found CUDA links NCCL, cuDNN and the CUDA runtime from CUDA's own directory,
# which no Debian package owns: dpkg-shlibdeps is told they are private, the binary finds
# them there through its RUNPATH, and the version and description say that every node needs
# that CUDA. A package for nodes without it: configure with
# -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON.
if(FABENCH_BUILD_NCCL OR (FABENCH_HAVE_CUDA AND FABENCH_HAVE_CUDNN))
  set(_cuda_dirs ${CUDAToolkit_LIBRARY_DIR})
  set(_cuda_libs "the CUDA runtime")
  if(FABENCH_BUILD_NCCL)
    get_filename_component(_d ${NCCL_LIBRARY} DIRECTORY)
    list(APPEND _cuda_dirs ${_d})
    string(APPEND _cuda_libs ", NCCL")
  endif()
  if(FABENCH_HAVE_CUDA AND FABENCH_HAVE_CUDNN)
    get_filename_component(_d ${CUDNN_LIBRARY} DIRECTORY)
    list(APPEND _cuda_dirs ${_d})
    string(APPEND _cuda_libs ", cuDNN")
  endif()
  list(REMOVE_DUPLICATES _cuda_dirs)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_cuda_dirs})
  set_target_properties(fabench PROPERTIES INSTALL_RPATH "${_cuda_dirs}")
  set(CPACK_DEBIAN_PACKAGE_VERSION
      "${PROJECT_VERSION}+cuda${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  list(JOIN _cuda_dirs " " _cuda_list)
  string(APPEND CPACK_DEBIAN_PACKAGE_DESCRIPTION "

Built with CUDA ${CUDAToolkit_VERSION}: every node needs ${_cuda_libs}
in ${_cuda_list}.")
endif()

include(CPack)
