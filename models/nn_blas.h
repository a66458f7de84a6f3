/* models: private header of the GPU engine. cuBLAS is opened with the first GPU net, not linked:
 * its cuBLASLt's static initialisers would cost every fabench process CPU at start, CPU-only
 * commands included (docs/measurements.md, "Start-up"). The engine calls cuBLAS through this
 * table (cublas_v2.h maps the names to the _v2 symbols alike). Include after <cublas_v2.h>.
 * FABENCH_CUBLAS_PATH, the library CMake found, is tried after the soname. Once opened it stays
 * (RTLD_NODELETE): CUDA's libraries are not made to be unloaded. */
#ifndef FABENCH_NN_BLAS_H
#define FABENCH_NN_BLAS_H

#include <dlfcn.h>
#include <stdio.h>

#ifndef FABENCH_CUBLAS_PATH
#define FABENCH_CUBLAS_PATH ""
#endif

#define NN_BLAS_FUNCS(X)                                                                           \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetMathMode) X(cublasSgemm)          \
  X(cublasGetVersion) X(cublasGetStatusString)
#define NN_BLAS_MEMBER(f) __typeof__(f) *f;
typedef struct {
  void *lib;
  NN_BLAS_FUNCS(NN_BLAS_MEMBER)
} nn_blas_api;
#define NN_BLAS_STR_(f) #f
#define NN_BLAS_STR(f) NN_BLAS_STR_(f)

/* Fills a (zeroed by the caller); on failure says why. nn_blas_close frees it either way. */
static inline int nn_blas_open(nn_blas_api *a, char *err, size_t errcap) {
  char so[32];
  snprintf(so, sizeof so, "libcublas.so.%d", CUBLAS_VER_MAJOR);
  const char *names[] = {so, FABENCH_CUBLAS_PATH};
  for (size_t i = 0; i < sizeof names / sizeof *names && !a->lib; i++)
    if (*names[i]) a->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!a->lib) {
    snprintf(err, errcap, "cannot open cuBLAS (%s): %s", so, dlerror());
    return -1;
  }
#define NN_BLAS_SYM(f)                                                                             \
  if (!(*(void **)&a->f = dlsym(a->lib, NN_BLAS_STR(f)))) {                                        \
    snprintf(err, errcap, "cuBLAS (%s) lacks %s", so, NN_BLAS_STR(f));                             \
    return -1;                                                                                     \
  }
  NN_BLAS_FUNCS(NN_BLAS_SYM)
#undef NN_BLAS_SYM
  return 0;
}

static inline void nn_blas_close(nn_blas_api *a) {
  if (a->lib) dlclose(a->lib);
  a->lib = NULL;
}

#endif
