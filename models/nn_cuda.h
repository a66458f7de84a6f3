/* models: private header of the GPU engine. The small CUDA kernels of ours (nn_cuda_kern.cu) that
 * nn_cuda.c launches around cuDNN's convolutions and cuBLAS's classifier. Activations are NHWC,
 * float or bf16 (`bf` = 1); statistics, parameters, gradients and momentum are float. Every kernel
 * runs on the stream it is given; launch errors surface at the engine's next check. */
#ifndef FABENCH_NN_CUDA_H
#define FABENCH_NN_CUDA_H

#include <stddef.h>

#include <cuda_runtime.h>

#include "nn_adam.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[n,h,w,c] = src[n,c,h,w] + beta dst (beta 0 or 1): input images, OIHW weights to OHWI. */
void nnk_nchw_to_nhwc(void *dst, int dbf, const float *src, int n, int c, int h, int w, float beta,
                      cudaStream_t s);
/* dst[n,c,h,w] = src[n,h,w,c] + beta dst: outputs, input gradients, OHWI weight gradients. */
void nnk_nhwc_to_nchw(float *dst, const void *src, int sbf, int n, int c, int h, int w, float beta,
                      cudaStream_t s);

/* Batch normalization over rows x c (NHWC: rows = n h w). acc: 2c doubles, zeroed by the caller. */
void nnk_bn_stats(double *acc, const void *x, int bf, size_t rows, int c, cudaStream_t s);
/* Per channel: a = gamma invstd, b = beta - mean a. train: mean/invstd from acc, running statistics
   updated (PyTorch: momentum, unbiased variance); else from the running statistics. */
void nnk_bn_coef(float *a, float *b, float *mean, float *invstd, float *rmean, float *rvar,
                 const double *acc, const float *gamma, const float *beta, size_t rows, int c,
                 float momentum, float eps, int train, cudaStream_t s);
void nnk_bn_apply(void *y, const void *x, int bf, const float *a, const float *b, size_t rows, int c,
                  int relu, cudaStream_t s);
/* acc (2c, zeroed): sum dy', sum dy' xhat, where dy' is dy masked by y > 0 when relu. */
void nnk_bn_bwd_reduce(double *acc, const void *x, const void *y, const void *dy, int bf,
                       const float *mean, const float *invstd, size_t rows, int c, int relu,
                       cudaStream_t s);
/* dgamma, dbeta into the gradient arena; k (3c) the coefficients of the data gradient. */
void nnk_bn_bwd_coef(float *dgamma, float *dbeta, float *k, const double *acc, const float *gamma,
                     const float *invstd, size_t rows, int c, cudaStream_t s);
void nnk_bn_bwd_apply(void *dx, const void *x, const void *y, const void *dy, int bf, const float *mean,
                      const float *invstd, const float *k, size_t rows, int c, int relu, float beta,
                      cudaStream_t s);

void nnk_add_relu(void *y, const void *a, const void *b, int bf, size_t n, cudaStream_t s);
/* g = y > 0 ? dy : 0; d1 = g + b1 d1; d2 = g + b2 d2 (d1 == d2: 2g + b1 d1). */
void nnk_add_relu_bwd(void *d1, float b1, void *d2, float b2, const void *y, const void *dy, int bf,
                      size_t n, cudaStream_t s);

/* Max pooling k x k, stride, pad (padding never wins); idx: the winner's h*w + w per output. */
void nnk_maxpool(void *y, int *idx, const void *x, int bf, int n, int c, int h, int w, int oh, int ow,
                 int k, int st, int pad, cudaStream_t s);
void nnk_maxpool_bwd(void *dx, float beta, const void *dy, const int *idx, int bf, int n, int c, int h,
                     int w, int oh, int ow, int k, int st, int pad, cudaStream_t s);
/* Global average pooling: y[n,c] = mean over hw of x[n,hw,c]. */
void nnk_avgpool(void *y, const void *x, int bf, int n, int c, int hw, cudaStream_t s);
void nnk_avgpool_bwd(void *dx, float beta, const void *dy, int bf, int n, int c, int hw, cudaStream_t s);

/* y[n, k] += b, then max(y, 0) with relu (a hidden layer of an MLP). */
void nnk_bias_add(float *y, const float *b, int n, int k, int relu, cudaStream_t s);
/* dy = 0 where y <= 0: a fused ReLU's backward, in place. */
void nnk_relu_bwd(float *dy, const float *y, size_t n, cudaStream_t s);
void nnk_bias_grad(float *db, const float *dy, int n, int k, cudaStream_t s);
/* Softmax cross-entropy of rows [n, k]: per-row loss and hit, dlogits = (softmax - onehot) / n. */
void nnk_xent(float *dlogits, float *rowloss, int *hit, const float *logits, const int *labels, int n,
              int k, cudaStream_t s);
/* torch.optim.SGD, as nn_sgd_apply (gs: the gradient scale, 1 for none). */
void nnk_sgd(float *p, const float *g, float *m, size_t n, float lr, float mu, float wd, int nesterov,
             float gs, cudaStream_t s);
/* torch.optim.Adam or AdamW over n floats (v: the second moment), as nn_optim_apply: c from
   nn_adam_coefs. */
void nnk_adam(float *p, const float *g, float *m, float *v, size_t n, const nn_adam_coef *c, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
