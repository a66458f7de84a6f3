/* models: one element of Adam/AdamW, shared by the CPU loop (nn_optim.c) and the GPU kernel
 * (nn_cuda_kern.cu) so both take the same float operations in the same order. The scalars are
 * made once on the host (nn_adam_coefs, nn_impl.h). No operation may fuse a multiply into an add:
 * the device spells each rounding out (__fmul_rn and kin, which nvcc never contracts) and the
 * host file is compiled with -ffp-contract=off, so the two agree to the last bit. */
#ifndef FABENCH_NN_ADAM_H
#define FABENCH_NN_ADAM_H

#include <stddef.h>

struct nn_adam_coef {
  float b1, b2, a1, a2, eps; /* beta1, beta2, 1 - beta1, 1 - beta2, eps */
  float step, bc2;           /* -lr / (1 - beta1^t), sqrt(1 - beta2^t) */
  float wd, shrink, gs;      /* coupled decay (Adam; 0 for AdamW), 1 - lr wd (AdamW), gradient scale */
  int decoupled;             /* AdamW */
};
typedef struct nn_adam_coef nn_adam_coef;

#if defined(__CUDA_ARCH__)
#define NN_ADAM_FN static __device__ __forceinline__
#define NN_MUL(a, b) __fmul_rn((a), (b))
#define NN_ADD(a, b) __fadd_rn((a), (b))
#define NN_DIV(a, b) __fdiv_rn((a), (b))
#define NN_SQRT(a) __fsqrt_rn(a)
#elif defined(__CUDACC__)
#define NN_ADAM_FN static __device__ __forceinline__ /* the host pass of nvcc: declared, not used */
#define NN_MUL(a, b) ((a) * (b))
#define NN_ADD(a, b) ((a) + (b))
#define NN_DIV(a, b) ((a) / (b))
#define NN_SQRT(a) sqrtf(a)
#else
#include <math.h>
#define NN_ADAM_FN static inline
#define NN_MUL(a, b) ((a) * (b))
#define NN_ADD(a, b) ((a) + (b))
#define NN_DIV(a, b) ((a) / (b))
#define NN_SQRT(a) sqrtf(a)
#endif

/* Element i: PyTorch's single-tensor Adam/AdamW (see nn_optim.c for the formulas). */
NN_ADAM_FN void nn_adam_one(float *p, const float *g, float *m, float *v, size_t i, const nn_adam_coef *c) {
  float pi = p[i];
  if (c->decoupled) pi = NN_MUL(pi, c->shrink);
  float gi = NN_MUL(c->gs, g[i]);
  if (c->wd != 0.0f) gi = NN_ADD(gi, NN_MUL(c->wd, pi));
  float mi = NN_ADD(NN_MUL(m[i], c->b1), NN_MUL(c->a1, gi));
  float vi = NN_ADD(NN_MUL(v[i], c->b2), NN_MUL(NN_MUL(c->a2, gi), gi));
  m[i] = mi;
  v[i] = vi;
  float denom = NN_ADD(NN_DIV(NN_SQRT(vi), c->bc2), c->eps);
  p[i] = NN_ADD(pi, NN_DIV(NN_MUL(c->step, mi), denom));
}

#endif
