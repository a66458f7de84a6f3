// The collectives' GPU kernels. Reductions: inout[i] = inout[i] (op) in[i], the device twin of
// reduce.c, optionally written to a second place too (the mapped ring's last reduce-scatter step
// hands its block to the right neighbour that way); and a copy, for the copy ceilings done by
// the SMs (coll_cuda_copy).
// f16 and bf16 are computed in f32 and rounded to nearest even, as on the CPU, so a device
// all-reduce gives the same bits as a host one. One grid-stride kernel per (type, op). The
// reduction is memory-bound (two loads and a store per element): where both buffers are 16-byte
// aligned each thread moves 16 bytes an access, a quarter of the memory instructions of f32's.
// Two or four such loads in flight a thread, or streaming cache hints, were no faster on an
// H200 (the 2- and 4-rank ring within run-to-run noise, hints 2-4% slower).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>

#include "coll_cuda.h"

namespace {

// both 16-byte aligned: the kernels can move 16 bytes an access
bool aligned16(const void *a, const void *b) {
  return ((reinterpret_cast<size_t>(a) | reinterpret_cast<size_t>(b)) & 15) == 0;
}

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

// TWO: the result goes to out2 as well. out2 may be `in` (the ring's two ranks: the neighbour's
// block is read and overwritten by the same thread), so neither is __restrict__.
template <typename T, int OP, bool TWO>
__global__ void reduce_kernel(T *__restrict__ inout, T *out2, const T *in, size_t n) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    T v = down<T>(apply(up(inout[i]), up(in[i]), OP));
    inout[i] = v;
    if (TWO) out2[i] = v;
  }
}

// nvec 16-byte vectors, then the n - nvec*K elements after them one a thread
template <typename T, int OP, bool TWO>
__global__ void reduce_vec_kernel(T *__restrict__ inout, T *out2, const T *in, size_t nvec, size_t n) {
  constexpr int K = 16 / sizeof(T);
  size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  uint4 *vo = reinterpret_cast<uint4 *>(inout), *v2 = reinterpret_cast<uint4 *>(out2);
  const uint4 *vi = reinterpret_cast<const uint4 *>(in);
  for (size_t i = t; i < nvec; i += stride) {
    uint4 a = vo[i], b = vi[i];
    T *pa = reinterpret_cast<T *>(&a);
    const T *pb = reinterpret_cast<const T *>(&b);
#pragma unroll
    for (int k = 0; k < K; k++) pa[k] = down<T>(apply(up(pa[k]), up(pb[k]), OP));
    vo[i] = a;
    if (TWO) v2[i] = a;
  }
  size_t j = nvec * K + t;
  if (j < n) {
    T v = down<T>(apply(up(inout[j]), up(in[j]), OP));
    inout[j] = v;
    if (TWO) out2[j] = v;
  }
}

template <typename T, int OP, bool TWO>
void launch_op(T *o, T *o2, const T *i, size_t n, cudaStream_t s) {
  const int threads = 512;
  // enough blocks to fill the GPU (132 SMs x 4 on an H100), each then loops
  const size_t most = 2048;
  constexpr int K = 16 / sizeof(T);
  if (aligned16(o, i) && (!TWO || aligned16(o2, o))) {
    size_t nvec = n / K, want = (nvec + threads - 1) / threads;
    unsigned blocks = (unsigned)(want < 1 ? 1 : want < most ? want : most); // the tail (< K) needs one
    reduce_vec_kernel<T, OP, TWO><<<blocks, threads, 0, s>>>(o, o2, i, nvec, n);
  } else {
    size_t want = (n + threads - 1) / threads;
    reduce_kernel<T, OP, TWO><<<(unsigned)(want < most ? want : most), threads, 0, s>>>(o, o2, i, n);
  }
}

template <typename T, bool TWO>
cudaError_t launch(void *inout, void *out2, const void *in, size_t n, int op, cudaStream_t s) {
  T *o = static_cast<T *>(inout), *o2 = static_cast<T *>(out2);
  const T *i = static_cast<const T *>(in);
  switch (op) {
  case COLL_CUDA_SUM: launch_op<T, COLL_CUDA_SUM, TWO>(o, o2, i, n, s); break;
  case COLL_CUDA_PROD: launch_op<T, COLL_CUDA_PROD, TWO>(o, o2, i, n, s); break;
  case COLL_CUDA_MIN: launch_op<T, COLL_CUDA_MIN, TWO>(o, o2, i, n, s); break;
  case COLL_CUDA_MAX: launch_op<T, COLL_CUDA_MAX, TWO>(o, o2, i, n, s); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <bool TWO>
cudaError_t launch_type(void *inout, void *out2, const void *in, size_t count, int dtype, int op, cudaStream_t s) {
  switch (dtype) {
  case COLL_CUDA_F32: return launch<float, TWO>(inout, out2, in, count, op, s);
  case COLL_CUDA_F64: return launch<double, TWO>(inout, out2, in, count, op, s);
  case COLL_CUDA_F16: return launch<__half, TWO>(inout, out2, in, count, op, s);
  case COLL_CUDA_BF16: return launch<__nv_bfloat16, TWO>(inout, out2, in, count, op, s);
  case COLL_CUDA_I32: return launch<int, TWO>(inout, out2, in, count, op, s);
  case COLL_CUDA_I64: return launch<long long, TWO>(inout, out2, in, count, op, s);
  default: return cudaErrorInvalidValue;
  }
}

// Four 16-byte loads in flight a thread before their stores: reads over PCIe wait ~1 us, and
// only many outstanding requests fill the link.
__global__ void copy_vec_kernel(uint4 *__restrict__ dst, const uint4 *__restrict__ src, size_t nvec) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < nvec; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < nvec; i += stride) dst[i] = src[i];
}

__global__ void copy_byte_kernel(char *__restrict__ dst, const char *__restrict__ src, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

} // namespace

extern "C" int coll_cuda_copy(void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int threads = 512;
  size_t head = 0;
  if (aligned16(dst, src)) {
    size_t nvec = bytes / 16, want = (nvec + threads - 1) / threads;
    if (nvec) {
      copy_vec_kernel<<<(unsigned)(want < 4096 ? want : 4096), threads, 0, s>>>(
          static_cast<uint4 *>(dst), static_cast<const uint4 *>(src), nvec);
      head = nvec * 16;
    }
  }
  if (head < bytes) { // an unaligned buffer, or the last bytes
    size_t n = bytes - head, want = (n + threads - 1) / threads;
    copy_byte_kernel<<<(unsigned)(want < 4096 ? want : 4096), threads, 0, s>>>(
        static_cast<char *>(dst) + head, static_cast<const char *>(src) + head, n);
  }
  return (int)cudaGetLastError();
}

extern "C" int coll_cuda_reduce(void *inout, const void *in, size_t count, int dtype, int op,
                                void *stream) {
  if (count == 0) return 0;
  return (int)launch_type<false>(inout, nullptr, in, count, dtype, op, static_cast<cudaStream_t>(stream));
}

extern "C" int coll_cuda_reduce2(void *inout, void *out2, const void *in, size_t count, int dtype, int op,
                                 void *stream) {
  if (count == 0) return 0;
  return (int)launch_type<true>(inout, out2, in, count, dtype, op, static_cast<cudaStream_t>(stream));
}
