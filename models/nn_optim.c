/* models: the optimizers beside SGD (nn_ops.c): Adam and AdamW as torch.optim computes them
 * (PyTorch 1.13's single-tensor path, in float32 with the scalars in double as Python has them):
 *   Adam:  g += wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
 *          p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   AdamW: p *= 1 - lr wd first, and no wd in g.
 * The gradient is read times grad_scale (data parallelism's 1/N), as SGD reads it. */
#include <math.h>
#include <string.h>

#include "nn_impl.h"

static const char *const optim_names[] = {"sgd", "adam", "adamw"};

int nn_optim_parse(const char *name) {
  for (int k = 0; k < 3; k++)
    if (!strcmp(name, optim_names[k])) return k;
  return -1;
}

const char *nn_optim_name(int kind) { return kind >= 0 && kind < 3 ? optim_names[kind] : "?"; }

static void adam_apply(float *p, const float *g, float *m, float *v, size_t count, const nn_sgd_opts *o) {
  const int decoupled = o->kind == NN_OPT_ADAMW;
  const double t = (double)(o->t > 0 ? o->t : 1), lr = o->lr;
  /* the scalars as PyTorch hands them to its float kernels: computed in double, then rounded */
  const float b1 = (float)o->beta1, b2 = (float)o->beta2, a1 = (float)(1.0 - o->beta1),
              a2 = (float)(1.0 - o->beta2), eps = (float)o->eps;
  const float step = (float)-(lr / (1.0 - pow(o->beta1, t)));
  const float bc2 = (float)sqrt(1.0 - pow(o->beta2, t));
  const float wd = decoupled ? 0.0f : o->weight_decay;
  const float shrink = (float)(1.0 - lr * (double)o->weight_decay);
  const float gs = o->grad_scale != 0.0f ? o->grad_scale : 1.0f;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < count; i++) {
    float pi = p[i];
    if (decoupled) pi *= shrink;
    float gi = gs * g[i];
    if (wd != 0.0f) gi = gi + wd * pi;
    float mi = m[i] * b1;
    mi = mi + a1 * gi;
    float vi = v[i] * b2;
    vi = vi + a2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / bc2 + eps;
    p[i] = pi + step * mi / denom;
  }
}

void nn_optim_apply(float *p, const float *g, float *m, float *v, size_t count, const nn_sgd_opts *o) {
  if (o->kind == NN_OPT_SGD) nn_sgd_apply(p, g, m, count, o);
  else if (v) adam_apply(p, g, m, v, count, o); /* the callers refuse Adam without its arena */
}
