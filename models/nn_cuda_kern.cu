/* models: the GPU engine's own kernels (see nn_cuda.h). They are bandwidth-bound, so they are
 * plain: one thread per element, fp32 arithmetic whatever the storage type, channel reductions in
 * double (the batch statistics of a large batch lose nothing to cancellation). Each function is
 * instantiated for float and bf16 storage only, which keeps the nvcc compile small. */
#include <cuda_bf16.h>

#include "nn_cuda.h"

typedef __nv_bfloat16 bf16;

static __device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float ld(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
static __device__ __forceinline__ void st(float *p, size_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void st(bf16 *p, size_t i, float v) { p[i] = __float2bfloat16(v); }

static unsigned blocks(size_t n, unsigned t) {
  size_t b = (n + t - 1) / t;
  return (unsigned)(b > 1048576 ? 1048576 : (b ? b : 1)); /* grid-stride loops cover the rest */
}

#define GRID_LOOP(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Both storage types from one launcher body. */
#define DISPATCH(bf, KERNEL, grid, block, s, ...)                                                 \
  do {                                                                                            \
    if (bf) {                                                                                     \
      typedef bf16 T_;                                                                            \
      KERNEL<T_><<<grid, block, 0, s>>>(__VA_ARGS__);                                             \
    } else {                                                                                      \
      typedef float T_;                                                                           \
      KERNEL<T_><<<grid, block, 0, s>>>(__VA_ARGS__);                                             \
    }                                                                                             \
  } while (0)

/* ---- layout changes ---- */

template <typename T>
__global__ void k_nchw_to_nhwc(T *dst, const float *src, int n, int c, int hw, float beta) {
  size_t total = (size_t)n * c * hw;
  GRID_LOOP(i, total) {
    int ch = (int)(i % c);
    size_t r = i / c, img = r / hw, p = r % hw;
    float v = src[(img * c + ch) * hw + p];
    if (beta != 0.0f) v += ld(dst, i);
    st(dst, i, v);
  }
}

template <typename T>
__global__ void k_nhwc_to_nchw(float *dst, const T *src, int n, int c, int hw, float beta) {
  size_t total = (size_t)n * c * hw;
  GRID_LOOP(i, total) {
    size_t p = i % hw, r = i / hw;
    int ch = (int)(r % c);
    size_t img = r / c;
    float v = ld(src, (img * hw + p) * c + ch);
    dst[i] = beta != 0.0f ? dst[i] + v : v;
  }
}

extern "C" void nnk_nchw_to_nhwc(void *dst, int dbf, const float *src, int n, int c, int h, int w,
                                 float beta, cudaStream_t s) {
  size_t tot = (size_t)n * c * h * w;
  if (dbf)
    k_nchw_to_nhwc<bf16><<<blocks(tot, 256), 256, 0, s>>>((bf16 *)dst, src, n, c, h * w, beta);
  else
    k_nchw_to_nhwc<float><<<blocks(tot, 256), 256, 0, s>>>((float *)dst, src, n, c, h * w, beta);
}

extern "C" void nnk_nhwc_to_nchw(float *dst, const void *src, int sbf, int n, int c, int h, int w,
                                 float beta, cudaStream_t s) {
  size_t tot = (size_t)n * c * h * w;
  if (sbf)
    k_nhwc_to_nchw<bf16><<<blocks(tot, 256), 256, 0, s>>>(dst, (const bf16 *)src, n, c, h * w, beta);
  else
    k_nhwc_to_nchw<float><<<blocks(tot, 256), 256, 0, s>>>(dst, (const float *)src, n, c, h * w, beta);
}

/* ---- batch normalization ---- */

/* A block is 32 channels x 8 row lanes; warps read 32 adjacent channels of a row (coalesced in
   NHWC). Partial sums meet in shared memory, then one double atomic per channel and block. */
#define BN_TX 32
#define BN_TY 8

static dim3 bn_grid(size_t rows, int c) {
  size_t g = rows / (BN_TY * 32);
  if (g < 1) g = 1;
  if (g > 256) g = 256;
  return dim3((unsigned)((c + BN_TX - 1) / BN_TX), (unsigned)g);
}

static __device__ void bn_flush(double *acc, int c, int ch, double v0, double v1) {
  __shared__ double sh[2][BN_TY][BN_TX];
  sh[0][threadIdx.y][threadIdx.x] = v0;
  sh[1][threadIdx.y][threadIdx.x] = v1;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    double a = 0, b = 0;
    for (int j = 0; j < BN_TY; j++) {
      a += sh[0][j][threadIdx.x];
      b += sh[1][j][threadIdx.x];
    }
    atomicAdd(&acc[ch], a);
    atomicAdd(&acc[c + ch], b);
  }
}

template <typename T>
__global__ void k_bn_stats(double *acc, const T *x, size_t rows, int c) {
  int ch = blockIdx.x * BN_TX + threadIdx.x;
  double s = 0, ss = 0;
  if (ch < c)
    for (size_t r = blockIdx.y * (size_t)BN_TY + threadIdx.y; r < rows; r += (size_t)gridDim.y * BN_TY) {
      double v = ld(x, r * c + ch);
      s += v;
      ss += v * v;
    }
  bn_flush(acc, c, ch, s, ss);
}

extern "C" void nnk_bn_stats(double *acc, const void *x, int bf, size_t rows, int c, cudaStream_t s) {
  DISPATCH(bf, k_bn_stats, bn_grid(rows, c), dim3(BN_TX, BN_TY), s, acc, (const T_ *)x, rows, c);
}

__global__ void k_bn_coef(float *a, float *b, float *mean, float *invstd, float *rmean, float *rvar,
                          const double *acc, const float *gamma, const float *beta, size_t rows, int c,
                          float momentum, float eps, int train) {
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  double mu, var;
  if (train) {
    double m = (double)rows;
    mu = acc[ch] / m;
    var = acc[c + ch] / m - mu * mu;
    if (var < 0) var = 0;
    double unb = m > 1 ? var * m / (m - 1) : var;
    rmean[ch] = (float)((1.0 - momentum) * rmean[ch] + momentum * mu);
    rvar[ch] = (float)((1.0 - momentum) * rvar[ch] + momentum * unb);
  } else {
    mu = rmean[ch];
    var = rvar[ch];
  }
  double is = 1.0 / sqrt(var + (double)eps);
  if (mean) mean[ch] = (float)mu;
  if (invstd) invstd[ch] = (float)is;
  a[ch] = (float)(gamma[ch] * is);
  b[ch] = (float)(beta[ch] - mu * gamma[ch] * is);
}

extern "C" void nnk_bn_coef(float *a, float *b, float *mean, float *invstd, float *rmean, float *rvar,
                            const double *acc, const float *gamma, const float *beta, size_t rows, int c,
                            float momentum, float eps, int train, cudaStream_t s) {
  k_bn_coef<<<(c + 127) / 128, 128, 0, s>>>(a, b, mean, invstd, rmean, rvar, acc, gamma, beta, rows, c,
                                            momentum, eps, train);
}

template <typename T>
__global__ void k_bn_apply(T *y, const T *x, const float *a, const float *b, size_t n, int c, int relu) {
  GRID_LOOP(i, n) {
    int ch = (int)(i % c);
    float v = a[ch] * ld(x, i) + b[ch];
    st(y, i, relu && v < 0.0f ? 0.0f : v);
  }
}

extern "C" void nnk_bn_apply(void *y, const void *x, int bf, const float *a, const float *b, size_t rows,
                             int c, int relu, cudaStream_t s) {
  size_t n = rows * c;
  DISPATCH(bf, k_bn_apply, blocks(n, 256), 256, s, (T_ *)y, (const T_ *)x, a, b, n, c, relu);
}

template <typename T>
__global__ void k_bn_bwd_reduce(double *acc, const T *x, const T *y, const T *dy, const float *mean,
                                const float *invstd, size_t rows, int c, int relu) {
  int ch = blockIdx.x * BN_TX + threadIdx.x;
  double s = 0, sx = 0;
  if (ch < c) {
    float mu = mean[ch], is = invstd[ch];
    for (size_t r = blockIdx.y * (size_t)BN_TY + threadIdx.y; r < rows; r += (size_t)gridDim.y * BN_TY) {
      size_t i = r * c + ch;
      float d = ld(dy, i);
      if (relu && !(ld(y, i) > 0.0f)) d = 0.0f;
      s += d;
      sx += (double)d * ((ld(x, i) - mu) * is);
    }
  }
  bn_flush(acc, c, ch, s, sx);
}

extern "C" void nnk_bn_bwd_reduce(double *acc, const void *x, const void *y, const void *dy, int bf,
                                  const float *mean, const float *invstd, size_t rows, int c, int relu,
                                  cudaStream_t s) {
  DISPATCH(bf, k_bn_bwd_reduce, bn_grid(rows, c), dim3(BN_TX, BN_TY), s, acc, (const T_ *)x,
           (const T_ *)y, (const T_ *)dy, mean, invstd, rows, c, relu);
}

__global__ void k_bn_bwd_coef(float *dgamma, float *dbeta, float *k, const double *acc, const float *gamma,
                              const float *invstd, size_t rows, int c) {
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  double m = (double)rows;
  dbeta[ch] = (float)acc[ch];
  dgamma[ch] = (float)acc[c + ch];
  k[ch] = gamma[ch] * invstd[ch];
  k[c + ch] = (float)(acc[ch] / m);
  k[2 * c + ch] = (float)(acc[c + ch] / m);
}

extern "C" void nnk_bn_bwd_coef(float *dgamma, float *dbeta, float *k, const double *acc, const float *gamma,
                                const float *invstd, size_t rows, int c, cudaStream_t s) {
  k_bn_bwd_coef<<<(c + 127) / 128, 128, 0, s>>>(dgamma, dbeta, k, acc, gamma, invstd, rows, c);
}

template <typename T>
__global__ void k_bn_bwd_apply(T *dx, const T *x, const T *y, const T *dy, const float *mean,
                               const float *invstd, const float *k, size_t n, int c, int relu, float beta) {
  GRID_LOOP(i, n) {
    int ch = (int)(i % c);
    float d = ld(dy, i);
    if (relu && !(ld(y, i) > 0.0f)) d = 0.0f;
    float xh = (ld(x, i) - mean[ch]) * invstd[ch];
    float v = k[ch] * (d - k[c + ch] - xh * k[2 * c + ch]);
    if (beta != 0.0f) v += ld(dx, i);
    st(dx, i, v);
  }
}

extern "C" void nnk_bn_bwd_apply(void *dx, const void *x, const void *y, const void *dy, int bf,
                                 const float *mean, const float *invstd, const float *k, size_t rows, int c,
                                 int relu, float beta, cudaStream_t s) {
  size_t n = rows * c;
  DISPATCH(bf, k_bn_bwd_apply, blocks(n, 256), 256, s, (T_ *)dx, (const T_ *)x, (const T_ *)y,
           (const T_ *)dy, mean, invstd, k, n, c, relu, beta);
}

/* ---- residual add + ReLU ---- */

template <typename T>
__global__ void k_add_relu(T *y, const T *a, const T *b, size_t n) {
  GRID_LOOP(i, n) {
    float v = ld(a, i) + ld(b, i);
    st(y, i, v > 0.0f ? v : 0.0f);
  }
}

extern "C" void nnk_add_relu(void *y, const void *a, const void *b, int bf, size_t n, cudaStream_t s) {
  DISPATCH(bf, k_add_relu, blocks(n, 256), 256, s, (T_ *)y, (const T_ *)a, (const T_ *)b, n);
}

template <typename T>
__global__ void k_add_relu_bwd(T *d1, float b1, T *d2, float b2, const T *y, const T *dy, size_t n) {
  GRID_LOOP(i, n) {
    float g = ld(y, i) > 0.0f ? ld(dy, i) : 0.0f;
    if (d1 == d2) {
      st(d1, i, 2.0f * g + (b1 != 0.0f ? ld(d1, i) : 0.0f));
    } else {
      st(d1, i, g + (b1 != 0.0f ? ld(d1, i) : 0.0f));
      st(d2, i, g + (b2 != 0.0f ? ld(d2, i) : 0.0f));
    }
  }
}

extern "C" void nnk_add_relu_bwd(void *d1, float b1, void *d2, float b2, const void *y, const void *dy, int bf,
                                 size_t n, cudaStream_t s) {
  DISPATCH(bf, k_add_relu_bwd, blocks(n, 256), 256, s, (T_ *)d1, b1, (T_ *)d2, b2, (const T_ *)y,
           (const T_ *)dy, n);
}

/* ---- pooling ---- */

template <typename T>
__global__ void k_maxpool(T *y, int *idx, const T *x, int n, int c, int h, int w, int oh, int ow, int k,
                          int st_, int pad) {
  size_t total = (size_t)n * oh * ow * c;
  GRID_LOOP(i, total) {
    int ch = (int)(i % c);
    size_t r = i / c;
    int ox = (int)(r % ow), oy = (int)((r / ow) % oh);
    size_t img = r / ((size_t)ow * oh);
    float best = -INFINITY;
    int bi = 0;
    for (int ky = 0; ky < k; ky++) {
      int iy = oy * st_ - pad + ky;
      if (iy < 0 || iy >= h) continue;
      for (int kx = 0; kx < k; kx++) {
        int ix = ox * st_ - pad + kx;
        if (ix < 0 || ix >= w) continue;
        float v = ld(x, ((img * h + iy) * w + ix) * c + ch);
        if (v > best) {
          best = v;
          bi = iy * w + ix;
        }
      }
    }
    st(y, i, best);
    idx[i] = bi;
  }
}

extern "C" void nnk_maxpool(void *y, int *idx, const void *x, int bf, int n, int c, int h, int w, int oh,
                            int ow, int k, int st_, int pad, cudaStream_t s) {
  size_t tot = (size_t)n * oh * ow * c;
  DISPATCH(bf, k_maxpool, blocks(tot, 256), 256, s, (T_ *)y, idx, (const T_ *)x, n, c, h, w, oh, ow, k, st_,
           pad);
}

/* Gathered, not scattered: each input sums the outputs whose window chose it (no atomics). */
template <typename T>
__global__ void k_maxpool_bwd(T *dx, float beta, const T *dy, const int *idx, int n, int c, int h, int w,
                              int oh, int ow, int k, int st_, int pad) {
  size_t total = (size_t)n * h * w * c;
  GRID_LOOP(i, total) {
    int ch = (int)(i % c);
    size_t r = i / c;
    int ix = (int)(r % w), iy = (int)((r / w) % h);
    size_t img = r / ((size_t)w * h);
    int me = iy * w + ix;
    int y0 = (iy + pad - k + st_) / st_, y1 = (iy + pad) / st_; /* ceil((iy+pad-k+1)/st) for >= 0 */
    int x0 = (ix + pad - k + st_) / st_, x1 = (ix + pad) / st_;
    if (iy + pad - k + 1 < 0) y0 = 0;
    if (ix + pad - k + 1 < 0) x0 = 0;
    if (y1 >= oh) y1 = oh - 1;
    if (x1 >= ow) x1 = ow - 1;
    float g = 0.0f;
    for (int oy = y0; oy <= y1; oy++)
      for (int ox = x0; ox <= x1; ox++) {
        size_t o = ((img * oh + oy) * ow + ox) * c + ch;
        if (idx[o] == me) g += ld(dy, o);
      }
    if (beta != 0.0f) g += ld(dx, i);
    st(dx, i, g);
  }
}

extern "C" void nnk_maxpool_bwd(void *dx, float beta, const void *dy, const int *idx, int bf, int n, int c,
                                int h, int w, int oh, int ow, int k, int st_, int pad, cudaStream_t s) {
  size_t tot = (size_t)n * h * w * c;
  DISPATCH(bf, k_maxpool_bwd, blocks(tot, 256), 256, s, (T_ *)dx, beta, (const T_ *)dy, idx, n, c, h, w, oh,
           ow, k, st_, pad);
}

template <typename T>
__global__ void k_avgpool(T *y, const T *x, int n, int c, int hw) {
  size_t total = (size_t)n * c;
  GRID_LOOP(i, total) {
    int ch = (int)(i % c);
    size_t img = i / c;
    float s = 0.0f;
    for (int p = 0; p < hw; p++) s += ld(x, (img * hw + p) * c + ch);
    st(y, i, s / hw);
  }
}

extern "C" void nnk_avgpool(void *y, const void *x, int bf, int n, int c, int hw, cudaStream_t s) {
  size_t tot = (size_t)n * c;
  DISPATCH(bf, k_avgpool, blocks(tot, 256), 256, s, (T_ *)y, (const T_ *)x, n, c, hw);
}

template <typename T>
__global__ void k_avgpool_bwd(T *dx, float beta, const T *dy, int n, int c, int hw) {
  size_t total = (size_t)n * hw * c;
  GRID_LOOP(i, total) {
    int ch = (int)(i % c);
    size_t img = i / ((size_t)c * hw);
    float v = ld(dy, img * c + ch) / hw;
    if (beta != 0.0f) v += ld(dx, i);
    st(dx, i, v);
  }
}

extern "C" void nnk_avgpool_bwd(void *dx, float beta, const void *dy, int bf, int n, int c, int hw,
                                cudaStream_t s) {
  size_t tot = (size_t)n * c * hw;
  DISPATCH(bf, k_avgpool_bwd, blocks(tot, 256), 256, s, (T_ *)dx, beta, (const T_ *)dy, n, c, hw);
}

/* ---- classifier, loss, optimizer ---- */

__global__ void k_bias_add(float *y, const float *b, int n, int k, int relu) {
  GRID_LOOP(i, (size_t)n * k) {
    float v = y[i] + b[i % k];
    y[i] = relu && !(v > 0.0f) ? 0.0f : v;
  }
}
extern "C" void nnk_bias_add(float *y, const float *b, int n, int k, int relu, cudaStream_t s) {
  k_bias_add<<<blocks((size_t)n * k, 256), 256, 0, s>>>(y, b, n, k, relu);
}

__global__ void k_relu_bwd(float *dy, const float *y, size_t n) {
  GRID_LOOP(i, n) if (!(y[i] > 0.0f)) dy[i] = 0.0f;
}
extern "C" void nnk_relu_bwd(float *dy, const float *y, size_t n, cudaStream_t s) {
  k_relu_bwd<<<blocks(n, 256), 256, 0, s>>>(dy, y, n);
}

__global__ void k_bias_grad(float *db, const float *dy, int n, int k) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= k) return;
  double s = 0;
  for (int i = 0; i < n; i++) s += dy[(size_t)i * k + j];
  db[j] = (float)s;
}
extern "C" void nnk_bias_grad(float *db, const float *dy, int n, int k, cudaStream_t s) {
  k_bias_grad<<<(k + 127) / 128, 128, 0, s>>>(db, dy, n, k);
}

/* One block per row: max, log-sum-exp, loss, argmax hit, gradient. */
__global__ void k_xent(float *dz, float *rowloss, int *hit, const float *z, const int *labels, int n, int k) {
  __shared__ float smax[256];
  __shared__ int sarg[256];
  __shared__ double ssum[256];
  int row = blockIdx.x, t = threadIdx.x;
  const float *zr = z + (size_t)row * k;
  float m = -INFINITY;
  int am = 0;
  for (int j = t; j < k; j += blockDim.x)
    if (zr[j] > m) {
      m = zr[j];
      am = j;
    }
  smax[t] = m;
  sarg[t] = am;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s && (smax[t + s] > smax[t] || (smax[t + s] == smax[t] && sarg[t + s] < sarg[t]))) {
      smax[t] = smax[t + s];
      sarg[t] = sarg[t + s];
    }
    __syncthreads();
  }
  float mx = smax[0];
  double se = 0;
  for (int j = t; j < k; j += blockDim.x) se += exp((double)zr[j] - mx);
  ssum[t] = se;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) ssum[t] += ssum[t + s];
    __syncthreads();
  }
  double lse = mx + log(ssum[0]);
  int lab = labels[row];
  for (int j = t; j < k; j += blockDim.x)
    dz[(size_t)row * k + j] = (float)((exp((double)zr[j] - lse) - (j == lab)) / n);
  if (t == 0) {
    rowloss[row] = (float)(lse - zr[lab]);
    hit[row] = sarg[0] == lab;
  }
}
extern "C" void nnk_xent(float *dlogits, float *rowloss, int *hit, const float *logits, const int *labels, int n,
                         int k, cudaStream_t s) {
  k_xent<<<n, 256, 0, s>>>(dlogits, rowloss, hit, logits, labels, n, k);
}

__global__ void k_sgd(float *p, const float *g, float *m, size_t n, float lr, float mu, float wd, int nest,
                      float gs) {
  GRID_LOOP(i, n) {
    float d = gs * g[i] + wd * p[i];
    if (mu == 0.0f) {
      p[i] -= lr * d;
    } else {
      float b = mu * m[i] + d;
      m[i] = b;
      p[i] -= lr * (nest ? d + mu * b : b);
    }
  }
}
extern "C" void nnk_sgd(float *p, const float *g, float *m, size_t n, float lr, float mu, float wd, int nest,
                        float gs, cudaStream_t s) {
  k_sgd<<<blocks(n, 256), 256, 0, s>>>(p, g, m, n, lr, mu, wd, nest, gs);
}

/* Adam and AdamW: nn_adam_one, the CPU's element, on every element of the span. */
__global__ void k_adam(float *p, const float *g, float *m, float *v, size_t n, nn_adam_coef c) {
  GRID_LOOP(i, n) nn_adam_one(p, g, m, v, i, &c);
}
extern "C" void nnk_adam(float *p, const float *g, float *m, float *v, size_t n, const nn_adam_coef *c,
                         cudaStream_t s) {
  k_adam<<<blocks(n, 256), 256, 0, s>>>(p, g, m, v, n, *c);
}
