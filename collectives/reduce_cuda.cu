// Reduction kernels on the GPU: inout[i] = inout[i] (op) in[i], the device twin of reduce.c.
// f16 and bf16 are computed in f32 and rounded to nearest even, as on the CPU, so a device
// all-reduce gives the same bits as a host one. One grid-stride kernel per (type, op): the
// reduction is memory-bound (two loads and a store per element), so width comes from the
// grid, not from vector loads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>

#include "coll_cuda.h"

namespace {

template <typename T> struct Acc { typedef T type; };
template <> struct Acc<__half> { typedef float type; };
template <> struct Acc<__nv_bfloat16> { typedef float type; };

template <typename T> __device__ typename Acc<T>::type up(T v) { return v; }
template <> __device__ float up<__half>(__half v) { return __half2float(v); }
template <> __device__ float up<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ T down(typename Acc<T>::type v) { return v; }
template <> __device__ __half down<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 down<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename A> __device__ A apply(A a, A b, int op) {
  switch (op) {
  case COLL_CUDA_SUM: return a + b;
  case COLL_CUDA_PROD: return a * b;
  case COLL_CUDA_MIN: return b < a ? b : a;
  default: return b > a ? b : a;
  }
}

template <typename T, int OP>
__global__ void reduce_kernel(T *__restrict__ inout, const T *__restrict__ in, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) inout[i] = down<T>(apply(up(inout[i]), up(in[i]), OP));
}

template <typename T>
cudaError_t launch(void *inout, const void *in, size_t n, int op, cudaStream_t s) {
  const int threads = 512;
  size_t want = (n + threads - 1) / threads;
  // enough blocks to fill the GPU (132 SMs x 4 on an H100), each then loops
  unsigned blocks = (unsigned)(want < 2048 ? want : 2048);
  T *o = static_cast<T *>(inout);
  const T *i = static_cast<const T *>(in);
  switch (op) {
  case COLL_CUDA_SUM: reduce_kernel<T, COLL_CUDA_SUM><<<blocks, threads, 0, s>>>(o, i, n); break;
  case COLL_CUDA_PROD: reduce_kernel<T, COLL_CUDA_PROD><<<blocks, threads, 0, s>>>(o, i, n); break;
  case COLL_CUDA_MIN: reduce_kernel<T, COLL_CUDA_MIN><<<blocks, threads, 0, s>>>(o, i, n); break;
  case COLL_CUDA_MAX: reduce_kernel<T, COLL_CUDA_MAX><<<blocks, threads, 0, s>>>(o, i, n); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

} // namespace

extern "C" int coll_cuda_reduce(void *inout, const void *in, size_t count, int dtype, int op,
                                void *stream) {
  if (count == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
  case COLL_CUDA_F32: return (int)launch<float>(inout, in, count, op, s);
  case COLL_CUDA_F64: return (int)launch<double>(inout, in, count, op, s);
  case COLL_CUDA_F16: return (int)launch<__half>(inout, in, count, op, s);
  case COLL_CUDA_BF16: return (int)launch<__nv_bfloat16>(inout, in, count, op, s);
  case COLL_CUDA_I32: return (int)launch<int>(inout, in, count, op, s);
  case COLL_CUDA_I64: return (int)launch<long long>(inout, in, count, op, s);
  default: return (int)cudaErrorInvalidValue;
  }
}
