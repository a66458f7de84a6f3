/* Adam and AdamW (models/nn_optim.c) against torch.optim: the fixture (scripts/torch_optim_fixture.py,
 * PyTorch in float32) holds a start tensor, a gradient per step, and after every step the
 * parameters and both moments. Each step is compared element by element, within float32
 * rounding of the step's own arithmetic; a formula that differs (bias correction, eps inside the
 * root, coupled decay) misses by orders of magnitude more, which the last test checks. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn_impl.h"

#define MAXN 128
#define MAXSTEPS 8
#define MAXCASES 8

typedef struct {
  char kind[8];
  nn_sgd_opts o;
  int steps, n;
  float p0[MAXN], g[MAXSTEPS][MAXN], p[MAXSTEPS][MAXN], m[MAXSTEPS][MAXN], v[MAXSTEPS][MAXN];
} optim_case;

static optim_case cases[MAXCASES];
static int ncases;

/* "NAME v1 v2 ..." into dst (n values); 0, or -1 where the line is not that. */
static int read_vec(FILE *fp, const char *name, float *dst, int n) {
  char got[16];
  if (fscanf(fp, "%15s", got) != 1 || strcmp(got, name)) return -1;
  for (int i = 0; i < n; i++) {
    char tok[64];
    if (fscanf(fp, "%63s", tok) != 1) return -1;
    char *end;
    dst[i] = strtof(tok, &end);
    if (*end) return -1;
  }
  return 0;
}

static int load_cases(void **state) {
  (void)state;
  char path[1024];
  const char *src = getenv("FABENCH_SRC");
  snprintf(path, sizeof path, "%s/tests/models/fixtures/nn_optim.txt", src ? src : ".");
  FILE *fp = fopen(path, "r");
  if (!fp) {
    fprintf(stderr, "cannot read %s (regenerate: /usr/bin/python3 scripts/torch_optim_fixture.py)\n", path);
    return -1;
  }
  char word[16], lr[64];
  double b1, b2, eps, wd;
  while (ncases < MAXCASES && fscanf(fp, "%15s", word) == 1) {
    optim_case *c = &cases[ncases];
    if (strcmp(word, "case") ||
        fscanf(fp, "%7s %63s %lf %lf %lf %lf %d %d", c->kind, lr, &b1, &b2, &eps, &wd, &c->steps, &c->n) != 8 ||
        c->steps < 1 || c->steps > MAXSTEPS || c->n < 1 || c->n > MAXN)
      break;
    c->o = (nn_sgd_opts){.lr = strtof(lr, NULL), .weight_decay = (float)wd, .kind = nn_optim_parse(c->kind),
                         .beta1 = b1, .beta2 = b2, .eps = eps};
    char name[16];
    int ok = c->o.kind > 0 && !read_vec(fp, "p0", c->p0, c->n);
    for (int s = 0; ok && s < c->steps; s++) snprintf(name, sizeof name, "g%d", s + 1), ok = !read_vec(fp, name, c->g[s], c->n);
    for (int s = 0; ok && s < c->steps; s++) {
      snprintf(name, sizeof name, "p%d", s + 1);
      ok = !read_vec(fp, name, c->p[s], c->n);
      snprintf(name, sizeof name, "m%d", s + 1);
      ok = ok && !read_vec(fp, name, c->m[s], c->n);
      snprintf(name, sizeof name, "v%d", s + 1);
      ok = ok && !read_vec(fp, name, c->v[s], c->n);
    }
    if (!ok) break;
    ncases++;
  }
  int eof = feof(fp);
  fclose(fp);
  if (!eof || ncases < 4) {
    fprintf(stderr, "%s: malformed at case %d\n", path, ncases + 1);
    return -1;
  }
  return 0;
}

/* The worst element's error in units of its bound; bound: a few float32 roundings of the
 * magnitudes the step's arithmetic went through (scale, per element). */
static double worst(const float *got, const float *ref, const float *scale, int n, int *at) {
  double w = 0;
  for (int i = 0; i < n; i++) {
    double bound = 8 * FLT_EPSILON * (fabs((double)ref[i]) + fabs((double)scale[i])) + 1e-37;
    double e = fabs((double)got[i] - (double)ref[i]) / bound;
    if (!(e <= w)) w = e, *at = i;
  }
  return w;
}

/* Runs case c with options o from the fixture's start, comparing each step; the largest error
 * over every step and tensor, in units of the bound (<= 1 passes). */
static double run_case(const optim_case *c, nn_sgd_opts o, int say) {
  float p[MAXN], g[MAXN], m[MAXN] = {0}, v[MAXN] = {0}, sp[MAXN], sm[MAXN], sv[MAXN];
  memcpy(p, c->p0, sizeof p);
  double all = 0;
  for (int s = 0; s < c->steps; s++) {
    const float *pp = s ? c->p[s - 1] : c->p0, *pm = s ? c->m[s - 1] : m, *pv = s ? c->v[s - 1] : v;
    for (int i = 0; i < c->n; i++) {
      /* what each value was made from: the update's size, the moments' terms */
      sp[i] = fabsf(c->p[s][i] - pp[i]);
      float gi = c->g[s][i] + (o.kind == NN_OPT_ADAM ? o.weight_decay * pp[i] : 0.0f);
      sm[i] = fabsf((float)o.beta1 * pm[i]) + fabsf((float)(1 - o.beta1) * gi);
      sv[i] = (float)o.beta2 * pv[i] + (float)(1 - o.beta2) * gi * gi;
    }
    memcpy(g, c->g[s], sizeof g);
    o.t = s + 1;
    nn_optim_apply(p, g, m, v, (size_t)c->n, &o);
    const char *names[3] = {"p", "exp_avg", "exp_avg_sq"};
    const float *got[3] = {p, m, v}, *ref[3] = {c->p[s], c->m[s], c->v[s]}, *sc[3] = {sp, sm, sv};
    for (int k = 0; k < 3; k++) {
      int at = 0;
      double w = worst(got[k], ref[k], sc[k], c->n, &at);
      if (say && w > 1)
        print_error("%s lr %g wd %g step %d: %s[%d] %.9g, PyTorch %.9g (%.1f x the bound)\n", c->kind, (double)o.lr,
                    (double)o.weight_decay, s + 1, names[k], at, (double)got[k][at], (double)ref[k][at], w);
      all = w > all ? w : all;
    }
    /* from PyTorch's state on: each step is compared alone */
    memcpy(p, c->p[s], sizeof p);
    memcpy(m, c->m[s], sizeof m);
    memcpy(v, c->v[s], sizeof v);
  }
  return all;
}

static void test_adam_like_torch(void **state) {
  (void)state;
  int seen[3] = {0, 0, 0};
  double most = 0;
  for (int k = 0; k < ncases; k++) {
    seen[cases[k].o.kind]++;
    double w = run_case(&cases[k], cases[k].o, 1);
    assert_true(w <= 1.0);
    most = w > most ? w : most;
  }
  print_message("worst element: %.3f of the bound\n", most);
  assert_true(seen[NN_OPT_ADAM] >= 2 && seen[NN_OPT_ADAMW] >= 2);
}

/* The comparison can fail: Adam's coupled decay for AdamW's, no bias correction, or eps under
 * the root each miss the fixture by far more than the bound. */
static void test_wrong_formulas_miss(void **state) {
  (void)state;
  for (int k = 0; k < ncases; k++) {
    const optim_case *c = &cases[k];
    nn_sgd_opts o = c->o;
    o.eps = sqrt(o.eps) * 10; /* a different eps: as large an effect as putting it under the root */
    assert_true(run_case(c, o, 0) > 100);
    if (c->o.weight_decay > 0) {
      o = c->o;
      o.kind = o.kind == NN_OPT_ADAM ? NN_OPT_ADAMW : NN_OPT_ADAM;
      assert_true(run_case(c, o, 0) > 100);
    }
  }
  /* the grad_scale is read as SGD reads it: x 0.5 on doubled gradients is the fixture's step */
  optim_case *c = &cases[0];
  float p[MAXN], g[MAXN], m[MAXN] = {0}, v[MAXN] = {0};
  memcpy(p, c->p0, sizeof p);
  for (int i = 0; i < c->n; i++) g[i] = 2 * c->g[0][i];
  nn_sgd_opts o = c->o;
  o.t = 1;
  o.grad_scale = 0.5f;
  nn_optim_apply(p, g, m, v, (size_t)c->n, &o);
  for (int i = 0; i < c->n; i++) assert_true(fabsf(p[i] - c->p[0][i]) <= 4 * FLT_EPSILON * (fabsf(c->p[0][i]) + fabsf(p[i] - c->p0[i])));
}

static void test_names(void **state) {
  (void)state;
  assert_int_equal(nn_optim_parse("sgd"), NN_OPT_SGD);
  assert_int_equal(nn_optim_parse("adam"), NN_OPT_ADAM);
  assert_int_equal(nn_optim_parse("adamw"), NN_OPT_ADAMW);
  assert_int_equal(nn_optim_parse("Adam"), -1);
  assert_int_equal(nn_optim_parse(""), -1);
  assert_string_equal(nn_optim_name(NN_OPT_ADAMW), "adamw");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_adam_like_torch),
      cmocka_unit_test(test_wrong_formulas_miss),
  };
  return cmocka_run_group_tests(tests, load_cases, NULL);
}
