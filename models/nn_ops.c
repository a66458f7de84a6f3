/* models: the parts that are ours rather than oneDNN's: softmax cross-entropy, SGD, the RNG. */
#include <math.h>
#include <stdlib.h>

#include "nn_impl.h"

void nn_softmax_xent(const float *logits, const int32_t *labels, int n, int classes, double *loss_sum,
                     int *correct, float *dlogits) {
  double sum = 0;
  int hits = 0;
  for (int i = 0; i < n; i++) {
    const float *z = logits + (size_t)i * classes;
    int arg = 0;
    for (int j = 1; j < classes; j++)
      if (z[j] > z[arg]) arg = j;
    double mx = z[arg], se = 0;
    for (int j = 0; j < classes; j++) se += exp((double)z[j] - mx);
    double lse = mx + log(se);
    sum += lse - z[labels[i]];
    hits += arg == labels[i];
    if (dlogits) {
      float *d = dlogits + (size_t)i * classes;
      for (int j = 0; j < classes; j++)
        d[j] = (float)((exp((double)z[j] - lse) - (j == labels[i])) / n);
    }
  }
  *loss_sum = sum;
  *correct = hits;
}

/* One pass over the arena: torch.optim.SGD's d = gs g + wd p; m = mu m + d; d = nesterov ? d + mu m : m. */
void nn_sgd_apply(float *p, const float *g, float *m, size_t count, const nn_sgd_opts *o) {
  const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
  const float gs = o->grad_scale != 0.0f ? o->grad_scale : 1.0f; /* x 1 is exact */
  const int nest = o->nesterov;
  if (mu == 0.0f) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < count; i++) p[i] -= lr * (gs * g[i] + wd * p[i]);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < count; i++) {
    float d = gs * g[i] + wd * p[i];
    float b = mu * m[i] + d;
    m[i] = b;
    p[i] -= lr * (nest ? d + mu * b : b);
  }
}

static const char *param_kind(enum nn_op op, int second) {
  if (op == NN_CONV) return "conv.weight";
  if (op == NN_BN) return second ? "bn.bias" : "bn.weight";
  return second ? "fc.bias" : "fc.weight";
}

int nn_arena_layout(const nn_table *t, size_t *poff, size_t *boff, size_t *pcount, nn_param_info *pinfo,
                    size_t *np, size_t *nb) {
  int k = 0;
  *np = *nb = 0;
  for (int i = t->nlayers - 1; i >= 0; i--) {
    const nn_layer *l = &t->layers[i];
    size_t c = nn_layer_param_count(t, i);
    poff[i] = *np;
    pcount[i] = c;
    boff[i] = 0;
    if (c && pinfo) {
      size_t first = l->op == NN_BN ? c / 2 : l->op == NN_FC ? c - (size_t)l->cout : c;
      pinfo[k++] = (nn_param_info){param_kind(l->op, 0), i, *np, first};
      if (first < c) pinfo[k++] = (nn_param_info){param_kind(l->op, 1), i, *np + first, c - first};
    }
    *np += c;
    if (l->op == NN_BN) {
      boff[i] = *nb;
      *nb += 2 * (size_t)t->shapes[l->in].c;
    }
  }
  return k;
}

/* kaiming-uniform(a=sqrt 5) for conv and linear, i.e. U(-1/sqrt(fan_in), +), the linear bias the
   same bound; BN weight 1, bias 0, running mean 0, variance 1. Layers draw in forward order. */
int nn_params_init(const nn_table *t, uint64_t seed, float *params, float *bufs) {
  size_t nl = (size_t)t->nlayers, np, nb;
  size_t *off = malloc(3 * nl * sizeof *off);
  if (!off) return -1;
  const size_t *poff = off, *boff = off + nl;
  nn_arena_layout(t, off, off + nl, off + 2 * nl, NULL, &np, &nb);
  uint64_t st = seed;
  for (int i = 0; i < t->nlayers; i++) {
    const nn_layer *l = &t->layers[i];
    nn_shape s = t->shapes[l->in];
    float *w = params + poff[i];
    size_t cnt = nn_layer_param_count(t, i);
    if (l->op == NN_CONV || l->op == NN_FC) {
      size_t fan_in = (size_t)s.c * (l->op == NN_CONV ? (size_t)l->k * l->k : (size_t)s.h * s.w);
      float bound = (float)(1.0 / sqrt((double)fan_in));
      for (size_t j = 0; j < cnt; j++) w[j] = nn_rand_uniform(&st, -bound, bound);
    } else if (l->op == NN_BN) {
      for (int c = 0; c < s.c; c++) {
        w[c] = 1.0f;
        w[s.c + c] = 0.0f;
        bufs[boff[i] + c] = 0.0f;
        bufs[boff[i] + s.c + c] = 1.0f;
      }
    }
  }
  free(off);
  return 0;
}

float nn_rand_uniform(uint64_t *s, float lo, float hi) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return lo + (hi - lo) * (float)((double)(z >> 40) / (double)(1ull << 24));
}
