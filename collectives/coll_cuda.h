/* collectives: the CUDA kernels (reduce_cuda.cu: reductions and a copy), callable from C. Private. The numbers are
 * coll_dtype's and coll_op's (checked in transport_nccl.c), kept here so nvcc needs no coll.h. */
#ifndef FABENCH_COLL_CUDA_H
#define FABENCH_COLL_CUDA_H

#include <stddef.h>

enum { COLL_CUDA_F32, COLL_CUDA_F64, COLL_CUDA_F16, COLL_CUDA_BF16, COLL_CUDA_I32, COLL_CUDA_I64 };
enum { COLL_CUDA_SUM, COLL_CUDA_PROD, COLL_CUDA_MIN, COLL_CUDA_MAX };

#ifdef __cplusplus
extern "C" {
#endif
/* inout[i] = inout[i] (op) in[i] on device memory, enqueued on `stream` (a cudaStream_t).
 * Returns a cudaError_t (0: launched). */
int coll_cuda_reduce(void *inout, const void *in, size_t count, int dtype, int op, void *stream);
/* The same, the result also written to out2 (which may be `in`). */
int coll_cuda_reduce2(void *inout, void *out2, const void *in, size_t count, int dtype, int op, void *stream);
/* dst = src, bytes of them, by a kernel (either may be pinned host memory); as above. */
int coll_cuda_copy(void *dst, const void *src, size_t bytes, void *stream);
#ifdef __cplusplus
}
#endif

#endif
