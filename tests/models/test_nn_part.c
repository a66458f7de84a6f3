/* Fully connected networks (mlp:..., fc6) and partitioned training (nn_part.h) on the oneDNN engine:
 * the names and tables; an MLP's forward and backward, each part's, and the left part's squared-error
 * step against double-precision references written here; the synthetic intermediate labels; the
 * joined network against the parts run in sequence; a few steps of each part's training loop. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn_impl.h"

#define TOL 1e-4

/* |got - ref| <= TOL (|ref| + rms(ref)) everywhere. */
static void check(const char *what, const float *got, const double *ref, size_t n) {
  double ss = 0, worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < n; i++) ss += ref[i] * ref[i];
  double rms = n ? sqrt(ss / n) : 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(got[i] - ref[i]) / (fabs(ref[i]) + rms + 1e-30);
    if (!(e <= worst)) {
      worst = e;
      wi = i;
    }
  }
  if (!(worst <= TOL))
    fail_msg("%s: element %zu of %zu: got %.8g, reference %.8g (relative error %.3g)", what, wi, n,
             (double)got[wi], ref[wi], worst);
}

static void fill(float *v, size_t n, uint64_t *s, float lo, float hi) {
  for (size_t i = 0; i < n; i++) v[i] = nn_rand_uniform(s, lo, hi);
}

/* ---- a double-precision MLP: layer i maps w[i] to w[i+1] inputs; weights [out][in] then bias at
   poff[i] of the arena; ReLU after every layer where relu_last or i < nl - 1 ---- */
typedef struct {
  int nl, w[16], relu_last;
  size_t poff[16];
} ref_mlp;

static void ref_from_table(ref_mlp *m, const nn_table *t) {
  size_t boff[16], pc[16], np, nb;
  memset(m, 0, sizeof *m);
  m->nl = t->nlayers;
  nn_arena_layout(t, m->poff, boff, pc, NULL, &np, &nb);
  nn_shape s = t->shapes[0];
  m->w[0] = s.c * s.h * s.w;
  for (int i = 0; i < t->nlayers; i++) m->w[i + 1] = t->layers[i].cout;
  m->relu_last = t->layers[t->nlayers - 1].relu;
}

/* Forward of n rows of x (w[0] each) into y (w[nl] each); with dy, backward into dx (may be NULL)
   and the arena's gradients g (np doubles). */
static void ref_run(const ref_mlp *m, const float *p, const float *x, int n, double *y, const double *dy,
                    double *dx, double *g) {
  double *act[17] = {0};
  for (int i = 0; i <= m->nl; i++) act[i] = calloc((size_t)n * m->w[i], sizeof(double));
  for (size_t k = 0; k < (size_t)n * m->w[0]; k++) act[0][k] = x[k];
  for (int i = 0; i < m->nl; i++) {
    int a = m->w[i], b = m->w[i + 1], relu = m->relu_last || i < m->nl - 1;
    const float *W = p + m->poff[i], *B = W + (size_t)a * b;
    for (int r = 0; r < n; r++)
      for (int o = 0; o < b; o++) {
        double s = B[o];
        for (int k = 0; k < a; k++) s += (double)W[(size_t)o * a + k] * act[i][(size_t)r * a + k];
        act[i + 1][(size_t)r * b + o] = relu && s < 0 ? 0 : s;
      }
  }
  memcpy(y, act[m->nl], (size_t)n * m->w[m->nl] * sizeof(double));
  if (dy) {
    double *d = calloc((size_t)n * m->w[m->nl], sizeof(double));
    memcpy(d, dy, (size_t)n * m->w[m->nl] * sizeof(double));
    for (int i = m->nl - 1; i >= 0; i--) {
      int a = m->w[i], b = m->w[i + 1], relu = m->relu_last || i < m->nl - 1;
      const float *W = p + m->poff[i];
      double *gw = g + m->poff[i], *gb = gw + (size_t)a * b, *din = calloc((size_t)n * a, sizeof(double));
      for (int r = 0; r < n; r++)
        for (int o = 0; o < b; o++) {
          double go = d[(size_t)r * b + o];
          if (relu && act[i + 1][(size_t)r * b + o] <= 0) go = 0;
          gb[o] += go;
          for (int k = 0; k < a; k++) {
            gw[(size_t)o * a + k] += go * act[i][(size_t)r * a + k];
            din[(size_t)r * a + k] += go * W[(size_t)o * a + k];
          }
        }
      free(d);
      d = din;
    }
    if (dx) memcpy(dx, d, (size_t)n * m->w[0] * sizeof(double));
    free(d);
  }
  for (int i = 0; i <= m->nl; i++) free(act[i]);
}

/* ---- names and tables ---- */

static void test_mlp_names(void **state) {
  (void)state;
  char err[512];
  const char *good[] = {"fc6", "mlp:784,10", "mlp:784,32,16,10", "mlp:3,65536,2"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    if (nn_model_check(good[i], err, sizeof err)) fail_msg("%s: %s", good[i], err);
    assert_true(nn_model_is_mlp(good[i]));
  }
  const char *bad[] = {"mlp:", "mlp:784", "mlp:784,0,10", "mlp:784,a,10", "mlp:784,,10", "mlp:784,10,",
                       "mlp:784,65537,10", "mlp:784,-3,10", "mlp:784 ,10", "mlp:784,1234567,10", "mlp",
                       "fc7"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    if (!nn_model_check(bad[i], err, sizeof err)) fail_msg("'%s' accepted", bad[i]);
    assert_non_null(strstr(err, bad[i]));
  }
  assert_false(nn_model_is_mlp("resnet20"));
  nn_table t;
  /* the widths must meet the data: inputs C*H*W, outputs the classes */
  assert_int_equal(nn_table_mlp(&t, "mlp:700,10", 1, 28, 28, 10, err, sizeof err), -1);
  assert_non_null(strstr(err, "784"));
  assert_int_equal(nn_table_mlp(&t, "mlp:784,9", 1, 28, 28, 10, err, sizeof err), -1);
  assert_non_null(strstr(err, "10 classes"));
  /* fc6: six layers, the hidden widths docs/training.md gives, ReLU on all but the last */
  assert_int_equal(nn_table_model(&t, "fc6", 3, 32, 32, 10, err, sizeof err), 0);
  const int want[] = {1024, 1024, 512, 512, 256, 10};
  assert_int_equal(t.nlayers, 6);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(t.layers[i].op, NN_FC);
    assert_int_equal(t.layers[i].cout, want[i]);
    assert_int_equal(t.layers[i].relu, i < 5);
  }
  nn_table_free(&t);
  size_t np;
  assert_int_equal(nn_model_param_count("mlp:784,32,10", 1, 28, 28, 10, &np, err, sizeof err), 0);
  assert_int_equal(np, 784 * 32 + 32 + 32 * 10 + 10);
}

/* ---- an MLP on the engine ---- */

static void mlp_case(const char *model, int c, int h, int w, int classes, int batch, int n, uint64_t seed) {
  char err[512];
  nn_table t;
  if (nn_table_mlp(&t, model, c, h, w, classes, err, sizeof err)) fail_msg("%s", err);
  ref_mlp m;
  ref_from_table(&m, &t);
  nn_engine_opts o = {.batch = batch, .need_dx = 1, .seed = seed};
  nn_net *net;
  if (nn_net_create_table(&net, &t, &o, err, sizeof err)) fail_msg("%s", err);
  size_t np, xn = (size_t)n * m.w[0], yn = (size_t)n * classes;
  float *p = nn_net_params(net, &np);
  uint64_t s = seed + 17;
  fill(p, np, &s, -0.5f, 0.5f); /* about half the units below zero: the ReLUs matter */
  nn_net_params(net, NULL);
  float *x = malloc(xn * sizeof *x), *y = malloc(yn * sizeof *y), *dy = malloc(yn * sizeof *dy);
  float *dx = malloc(xn * sizeof *dx);
  double *ry = calloc(yn, sizeof *ry), *rdy = calloc(yn, sizeof *rdy), *rdx = calloc(xn, sizeof *rdx);
  double *rg = calloc(np, sizeof *rg);
  fill(x, xn, &s, -1, 1);
  fill(dy, yn, &s, -1, 1);
  for (size_t i = 0; i < yn; i++) rdy[i] = dy[i];
  if (nn_net_forward(net, x, n, 1, y, err, sizeof err) || nn_net_backward(net, dy, dx, err, sizeof err))
    fail_msg("%s", err);
  ref_run(&m, p, x, n, ry, rdy, rdx, rg);
  char what[160];
  snprintf(what, sizeof what, "%s forward", model);
  check(what, y, ry, yn);
  snprintf(what, sizeof what, "%s backward data", model);
  check(what, dx, rdx, xn);
  snprintf(what, sizeof what, "%s weight and bias gradients", model);
  check(what, nn_net_grads(net, NULL), rg, np);
  /* inference: the same forward */
  if (nn_net_forward(net, x, n, 0, y, err, sizeof err)) fail_msg("%s", err);
  snprintf(what, sizeof what, "%s inference", model);
  check(what, y, ry, yn);
  nn_net_destroy(net);
  nn_table_free(&t);
  free(x), free(y), free(dy), free(dx), free(ry), free(rdy), free(rdx), free(rg);
}

static void test_mlp_layers(void **state) {
  (void)state;
  mlp_case("mlp:15,9,7,5", 1, 3, 5, 5, 4, 4, 1);          /* odd widths */
  mlp_case("mlp:15,9,7,5", 1, 3, 5, 5, 6, 3, 2);          /* partial batch */
  mlp_case("mlp:48,40,33,24,17,3", 3, 4, 4, 3, 5, 5, 3); /* a deeper chain, 3-channel input */
  mlp_case("mlp:20,6", 1, 4, 5, 6, 3, 3, 4);              /* one layer, no ReLU */
}

/* ---- the labels ---- */

static void test_sil(void **state) {
  (void)state;
  int classes = 10, width = 33;
  size_t sz = (size_t)classes * width;
  float *a = malloc(sz * sizeof *a), *b = malloc(sz * sizeof *b), *c = malloc(sz * sizeof *c);
  assert_int_equal(nn_sil_make(a, classes, width, 42), 0);
  assert_int_equal(nn_sil_make(b, classes, width, 42), 0);
  assert_int_equal(nn_sil_make(c, classes, width, 43), 0);
  assert_memory_equal(a, b, sz * sizeof *a);     /* a function of the seed */
  assert_memory_not_equal(a, c, sz * sizeof *a); /* and of the seed only */
  double lo = 1, hi = 0;
  for (size_t i = 0; i < sz; i++) lo = a[i] < lo ? a[i] : lo, hi = a[i] > hi ? a[i] : hi;
  assert_true(lo >= 0 && hi < 1 && hi - lo > 0.5);
  for (int i = 0; i < classes; i++)
    for (int j = 0; j < i; j++) {
      double d = 0;
      for (int k = 0; k < width; k++) d += fabs((double)a[i * width + k] - a[j * width + k]);
      assert_true(d > 1.0); /* distinct rows, far apart */
    }
  assert_int_equal(nn_sil_make(a, 0, width, 1), -1);
  assert_int_equal(nn_sil_make(a, classes, 0, 1), -1);
  free(a), free(b), free(c);
}

/* ---- the parts ---- */

typedef struct {
  nn_net *part[2], *joined;
  nn_table tl, tr;
  int cut, width, in, classes;
} parts;

static void parts_make(parts *P, const char *model, int c, int h, int w, int classes, int batch) {
  char err[512];
  memset(P, 0, sizeof *P);
  nn_net_opts o = {.model = model, .in_c = c, .in_h = h, .in_w = w, .classes = classes, .batch = batch, .seed = 5};
  if (nn_part_cut(model, c, h, w, classes, 2, &P->cut, &P->width, err, sizeof err)) fail_msg("%s", err);
  for (int i = 0; i < 2; i++)
    if (nn_part_net_create(&P->part[i], &o, i, 2, err, sizeof err)) fail_msg("part %d: %s", i, err);
  if (nn_net_create(&P->joined, &o, err, sizeof err)) fail_msg("%s", err);
  P->in = c * h * w;
  P->classes = classes;
  /* the parts' tables, for the references */
  nn_table full;
  assert_int_equal(nn_table_mlp(&full, model, c, h, w, classes, err, sizeof err), 0);
  nn_table_init(&P->tl, c, h, w);
  nn_table_init(&P->tr, P->width, 1, 1);
  for (int i = 0; i < full.nlayers; i++) {
    nn_table *t = i < P->cut ? &P->tl : &P->tr;
    nn_layer l = full.layers[i];
    l.in = t->nvalues - 1;
    assert_true(nn_table_add(t, l, err, sizeof err) > 0);
  }
  nn_table_free(&full);
}

static void parts_free(parts *P) {
  for (int i = 0; i < 2; i++) nn_net_destroy(P->part[i]);
  nn_net_destroy(P->joined);
  nn_table_free(&P->tl);
  nn_table_free(&P->tr);
}

static void test_part_cut(void **state) {
  (void)state;
  char err[512];
  int cut, width;
  assert_int_equal(nn_part_cut("fc6", 1, 28, 28, 10, 2, &cut, &width, err, sizeof err), 0);
  assert_int_equal(cut, 3);
  assert_int_equal(width, 512);
  assert_int_equal(nn_part_cut("mlp:20,8,7,3", 1, 4, 5, 3, 2, &cut, &width, err, sizeof err), 0);
  assert_int_equal(cut, 1);
  assert_int_equal(width, 8);
  assert_int_equal(nn_part_cut("fc6", 1, 28, 28, 10, 3, &cut, &width, err, sizeof err), -1);
  assert_non_null(strstr(err, "3 parts"));
  assert_int_equal(nn_part_cut("resnet20", 1, 28, 28, 10, 2, &cut, &width, err, sizeof err), -1);
  assert_non_null(strstr(err, "not fully connected"));
  assert_int_equal(nn_part_cut("mlp:784,10", 1, 28, 28, 10, 2, &cut, &width, err, sizeof err), -1);
  assert_non_null(strstr(err, "one layer"));
}

/* Each part against the reference: the left's squared-error step (its loss and every gradient),
   the right's cross-entropy step on SIL inputs. */
static void test_part_steps(void **state) {
  (void)state;
  char err[512];
  parts P;
  int n = 6, batch = 8;
  parts_make(&P, "mlp:30,19,11,9,4", 1, 5, 6, 4, batch);
  float *sil = malloc((size_t)P.classes * P.width * sizeof *sil);
  nn_sil_make(sil, P.classes, P.width, 9);
  uint64_t s = 77;
  float *x = malloc((size_t)n * P.in * sizeof *x), *scratch = malloc(2 * (size_t)n * P.width * sizeof(float));
  fill(x, (size_t)n * P.in, &s, -1, 1);
  int32_t lab[6] = {0, 3, 1, 1, 2, 3};
  size_t nl, nr;
  float *pl = nn_net_params(P.part[0], &nl), *pr = nn_net_params(P.part[1], &nr);
  fill(pl, nl, &s, -0.5f, 0.5f);
  fill(pr, nr, &s, -0.5f, 0.5f);
  nn_net_params(P.part[0], NULL);
  nn_net_params(P.part[1], NULL);

  /* left: loss = mean over images and the width of (y - sil[label])^2, dy = 2 (y - t) / (n width) */
  float loss;
  if (nn_part_left_step(P.part[0], x, lab, n, sil, P.classes, P.width, scratch, &loss, NULL, err, sizeof err))
    fail_msg("%s", err);
  ref_mlp m;
  ref_from_table(&m, &P.tl);
  assert_true(m.relu_last); /* the cut follows a ReLU, as in the joined network */
  size_t yn = (size_t)n * P.width;
  double *ry = calloc(yn, sizeof *ry), *rdy = calloc(yn, sizeof *rdy), *rg = calloc(nl, sizeof *rg);
  ref_run(&m, pl, x, n, ry, NULL, NULL, NULL);
  double rl = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < P.width; j++) {
      double d = ry[(size_t)i * P.width + j] - sil[(size_t)lab[i] * P.width + j];
      rl += d * d;
      rdy[(size_t)i * P.width + j] = 2 * d / ((double)n * P.width);
    }
  rl /= (double)n * P.width;
  ref_run(&m, pl, x, n, ry, rdy, NULL, rg);
  assert_true(fabs(loss - rl) <= 1e-4 * rl);
  check("left part forward", scratch, ry, yn);
  check("left part gradients", nn_net_grads(P.part[0], NULL), rg, nl);
  int32_t badlab[6] = {0, 4, 0, 0, 0, 0};
  assert_int_equal(nn_part_left_step(P.part[0], x, badlab, n, sil, P.classes, P.width, scratch, &loss, NULL, err,
                                     sizeof err), -1);

  /* right: the SIL rows in, softmax cross-entropy out */
  float *xr = malloc(yn * sizeof *xr);
  nn_part_sil_rows(xr, lab, n, sil, P.width);
  for (int i = 0; i < n; i++) assert_memory_equal(xr + (size_t)i * P.width, sil + (size_t)lab[i] * P.width, P.width * sizeof(float));
  if (nn_net_train_step(P.part[1], xr, lab, n, &loss, NULL, NULL, err, sizeof err)) fail_msg("%s", err);
  ref_from_table(&m, &P.tr);
  assert_false(m.relu_last);
  size_t on = (size_t)n * P.classes;
  double *lg = calloc(on, sizeof *lg), *dl = calloc(on, sizeof *dl), *rgr = calloc(nr, sizeof *rgr);
  ref_run(&m, pr, xr, n, lg, NULL, NULL, NULL);
  rl = 0;
  for (int i = 0; i < n; i++) {
    double mx = -1e300, z = 0;
    for (int k = 0; k < P.classes; k++) mx = fmax(mx, lg[i * P.classes + k]);
    for (int k = 0; k < P.classes; k++) z += exp(lg[i * P.classes + k] - mx);
    rl += log(z) + mx - lg[i * P.classes + lab[i]];
    for (int k = 0; k < P.classes; k++)
      dl[i * P.classes + k] = (exp(lg[i * P.classes + k] - mx) / z - (k == lab[i])) / n;
  }
  ref_run(&m, pr, xr, n, lg, dl, NULL, rgr);
  assert_true(fabs(loss - rl / n) <= 1e-4 * (rl / n));
  check("right part gradients", nn_net_grads(P.part[1], NULL), rgr, nr);
  free(sil), free(x), free(scratch), free(ry), free(rdy), free(rg), free(xr), free(lg), free(dl), free(rgr);
  parts_free(&P);
}

/* The joined network (the model itself, its arena the right's then the left's) gives what the parts
   give in sequence, element by element and bit for bit (the same primitives on the same operands);
   split takes the arena apart again. */
static void joined_case(const char *model, int c, int h, int w, int classes, int batch, int n) {
  char err[512];
  parts P;
  parts_make(&P, model, c, h, w, classes, batch);
  size_t nl, nr, nf;
  float *pl = nn_net_params(P.part[0], &nl), *pr = nn_net_params(P.part[1], &nr);
  float *pf = nn_net_params(P.joined, &nf);
  assert_int_equal(nf, nl + nr);
  uint64_t s = 3;
  fill(pl, nl, &s, -0.3f, 0.3f);
  fill(pr, nr, &s, -0.3f, 0.3f);
  nn_net_params(P.part[0], NULL);
  nn_net_params(P.part[1], NULL);
  nn_part_join(pf, pl, nl, pr, nr);
  nn_net_params(P.joined, NULL);
  float *l2 = malloc(nl * sizeof *l2), *r2 = malloc(nr * sizeof *r2);
  nn_part_split(pf, l2, nl, r2, nr);
  assert_memory_equal(l2, pl, nl * sizeof *l2);
  assert_memory_equal(r2, pr, nr * sizeof *r2);
  float *x = malloc((size_t)n * P.in * sizeof *x), *mid = malloc((size_t)n * P.width * sizeof *mid);
  float *y1 = malloc((size_t)n * classes * sizeof *y1), *y2 = malloc((size_t)n * classes * sizeof *y2);
  fill(x, (size_t)n * P.in, &s, 0, 1);
  if (nn_part_left_infer(P.part[0], x, n, mid, err, sizeof err) ||
      nn_net_forward(P.part[1], mid, n, 0, y1, err, sizeof err) ||
      nn_net_forward(P.joined, x, n, 0, y2, err, sizeof err))
    fail_msg("%s", err);
  for (int i = 0; i < n * classes; i++)
    if (!(y1[i] == y2[i]))
      fail_msg("%s: logit %d: parts in sequence %.9g, joined %.9g", model, i, (double)y1[i], (double)y2[i]);
  free(l2), free(r2), free(x), free(mid), free(y1), free(y2);
  parts_free(&P);
}

static void test_joined(void **state) {
  (void)state;
  joined_case("mlp:30,19,11,9,4", 1, 5, 6, 4, 8, 8);
  joined_case("mlp:30,19,11,9,4", 1, 5, 6, 4, 8, 3); /* partial batch */
  joined_case("mlp:48,64,32,16,5", 3, 4, 4, 5, 16, 16);
  joined_case("fc6", 1, 28, 28, 10, 4, 4);
}

/* The training loop of each part on a small synthetic set: whole epochs, the losses fall. */
static void test_part_train(void **state) {
  (void)state;
  char err[512];
  nn_dataset tr, te;
  nn_data_spec sp = {.kind = NN_DATA_SYNTHETIC, .c = 1, .h = 6, .w = 6, .classes = 4, .n = 256};
  if (nn_data_load(&tr, &te, &sp, 1, err, sizeof err)) fail_msg("%s", err);
  parts P;
  parts_make(&P, "mlp:36,32,16,16,4", 1, 6, 6, 4, 32);
  float *sil = malloc((size_t)4 * P.width * sizeof *sil);
  nn_sil_make(sil, 4, P.width, 1);
  for (int part = 0; part < 2; part++) {
    nn_part_train_opts o = {.net = P.part[part], .part = part, .train = &tr, .sil = sil, .width = P.width,
                            .batch = 32, .seed = 1, .epochs = 1, .sched = {.kind = NN_LR_CONST, .base = 0.05},
                            .sgd = {.momentum = 0.9f}};
    nn_part_train_result r1, r2;
    if (nn_part_train(&r1, &o, err, sizeof err)) fail_msg("part %d: %s", part, err);
    assert_int_equal(r1.steps, 8);
    o.epochs = 6;
    if (nn_part_train(&r2, &o, err, sizeof err)) fail_msg("part %d: %s", part, err);
    assert_int_equal(r2.steps, 48);
    if (!(r2.final_loss < r1.final_loss))
      fail_msg("part %d: loss %.4g after 1 epoch, %.4g after 6 more", part, r1.final_loss, r2.final_loss);
  }
  free(sil);
  parts_free(&P);
  nn_data_free(&tr);
  nn_data_free(&te);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_names), cmocka_unit_test(test_mlp_layers), cmocka_unit_test(test_sil),
      cmocka_unit_test(test_part_cut),  cmocka_unit_test(test_part_steps), cmocka_unit_test(test_joined),
      cmocka_unit_test(test_part_train),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
