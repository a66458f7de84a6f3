/* models: the optimizers beside SGD (nn_ops.c): Adam and AdamW as torch.optim computes them
 * (PyTorch 1.13's single-tensor path, in float32 with the scalars in double as Python has them):
 *   Adam:  g += wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
 *          p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   AdamW: p *= 1 - lr wd first, and no wd in g.
 * The gradient is read times grad_scale (data parallelism's 1/N), as SGD reads it. One element's
 * arithmetic is nn_adam_one (nn_adam.h), which the GPU kernel runs too. */
#include <math.h>
#include <string.h>

#include "nn_adam.h"
#include "nn_impl.h"

static const char *const optim_names[] = {"sgd", "adam", "adamw"};

int nn_optim_parse(const char *name) {
  for (int k = 0; k < 3; k++)
    if (!strcmp(name, optim_names[k])) return k;
  return -1;
}

const char *nn_optim_name(int kind) { return kind >= 0 && kind < 3 ? optim_names[kind] : "?"; }

void nn_adam_coefs(nn_adam_coef *c, const nn_sgd_opts *o) {
  const double t = (double)(o->t > 0 ? o->t : 1), lr = o->lr;
  /* the scalars as PyTorch hands them to its float kernels: computed in double, then rounded */
  c->decoupled = o->kind == NN_OPT_ADAMW;
  c->b1 = (float)o->beta1;
  c->b2 = (float)o->beta2;
  c->a1 = (float)(1.0 - o->beta1);
  c->a2 = (float)(1.0 - o->beta2);
  c->eps = (float)o->eps;
  c->step = (float)-(lr / (1.0 - pow(o->beta1, t)));
  c->bc2 = (float)sqrt(1.0 - pow(o->beta2, t));
  c->wd = c->decoupled ? 0.0f : o->weight_decay;
  c->shrink = (float)(1.0 - lr * (double)o->weight_decay);
  c->gs = o->grad_scale != 0.0f ? o->grad_scale : 1.0f;
}

static void adam_apply(float *p, const float *g, float *m, float *v, size_t count, const nn_sgd_opts *o) {
  nn_adam_coef c;
  nn_adam_coefs(&c, o);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < count; i++) nn_adam_one(p, g, m, v, i, &c);
}

void nn_optim_apply(float *p, const float *g, float *m, float *v, size_t count, const nn_sgd_opts *o) {
  if (o->kind == NN_OPT_SGD) nn_sgd_apply(p, g, m, count, o);
  else if (v) adam_apply(p, g, m, v, count, o); /* the callers refuse Adam without its arena */
}
