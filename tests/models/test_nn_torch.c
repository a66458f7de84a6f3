/* Whole networks, on the oneDNN engine and on the GPU engine in fp32 (skipped with one line where
 * no GPU is present), against PyTorch: fixtures written by scripts/torch_fixture.py (PyTorch in float64)
 * hold the weights, one batch, the logits, the loss, every gradient, the BN running statistics
 * after the step, and a 10-step SGD loss trajectory. Every tensor is compared, per arena tensor. */
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

/* Tolerances come with each fixture: 1e-4 relative (per element, against |ref| + the tensor's rms),
   or 4x PyTorch's own float32-vs-float64 error where the network is worse conditioned than that
   (scripts/torch_fixture.py explains); the first is for tensors, the second for the trajectory. */
#define TOL 1e-4

typedef struct {
  char name[32];
  uint32_t dtype, ndim, dims[8];
  size_t count;
  void *data;
} rec;

typedef struct {
  rec r[32];
  int n;
  unsigned char *buf;
} fixture;

static int load(fixture *f, const char *path) {
  memset(f, 0, sizeof(*f));
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  fseek(fp, 0, SEEK_END);
  long sz = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  f->buf = malloc((size_t)sz);
  if (!f->buf || fread(f->buf, 1, (size_t)sz, fp) != (size_t)sz) {
    fclose(fp);
    return -1;
  }
  fclose(fp);
  unsigned char *p = f->buf, *end = f->buf + sz;
  uint32_t cnt;
  if (sz < 12 || memcmp(p, "FBNNFIX1", 8)) return -1;
  memcpy(&cnt, p + 8, 4);
  p += 12;
  for (uint32_t i = 0; i < cnt && i < 32; i++) {
    rec *r = &f->r[f->n++];
    uint32_t len;
    if (end - p < 4) return -1;
    memcpy(&len, p, 4);
    if (len >= sizeof(r->name) || end - p < 12 + (long)len) return -1;
    memcpy(r->name, p + 4, len);
    p += 4 + len;
    memcpy(&r->dtype, p, 4);
    memcpy(&r->ndim, p + 4, 4);
    p += 8;
    if (r->ndim > 8 || end - p < 4 * (long)r->ndim) return -1;
    r->count = 1;
    for (uint32_t d = 0; d < r->ndim; d++) {
      memcpy(&r->dims[d], p, 4);
      r->count *= r->dims[d];
      p += 4;
    }
    size_t bytes = r->count * (r->dtype == 2 ? 1 : 4);
    if ((size_t)(end - p) < bytes || !(r->data = malloc(bytes ? bytes : 1))) return -1;
    memcpy(r->data, p, bytes); /* records are packed: copy to aligned memory */
    p += bytes;
  }
  return f->n == (int)cnt ? 0 : -1;
}

static void unload(fixture *f) {
  for (int i = 0; i < f->n; i++) free(f->r[i].data);
  free(f->buf);
}

static const rec *get(const fixture *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->r[i].name, name)) return &f->r[i];
  fail_msg("fixture has no '%s'", name);
  return NULL;
}

static const float *getf(const fixture *f, const char *name, size_t count) {
  const rec *r = get(f, name);
  if (r->dtype != 0 || r->count != count) fail_msg("fixture '%s': %zu floats, expected %zu", name, r->count, count);
  return r->data;
}

static int close_enough(const char *what, const float *got, const float *ref, size_t n, double tol) {
  double ss = 0, worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < n; i++) ss += (double)ref[i] * ref[i];
  double rms = n ? sqrt(ss / n) : 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + rms + 1e-30);
    if (!(e <= worst)) {
      worst = e;
      wi = i;
    }
  }
  if (!(worst <= tol)) {
    print_error("%s: element %zu of %zu: got %.8g, PyTorch %.8g (relative error %.3g)\n", what, wi, n,
                (double)got[wi], (double)ref[wi], worst);
    return 0;
  }
  return 1;
}

static void compare_model(const char *model, int threads, int dev) {
  char path[512], err[256];
  const char *src = getenv("FABENCH_SRC");
  snprintf(path, sizeof(path), "%s/tests/models/fixtures/nn_%s.bin", src ? src : ".", model);
  fixture f;
  if (load(&f, path)) fail_msg("cannot read fixture %s (regenerate: /usr/bin/python3 scripts/torch_fixture.py)", path);
  const rec *mr = get(&f, "model"), *cr = get(&f, "config");
  assert_int_equal(mr->count, strlen(model));
  assert_memory_equal(mr->data, model, mr->count);
  const int32_t *cfg = cr->data;
  int batch = cfg[4], steps = cfg[5], classes = cfg[3];
  nn_net_opts o = {.model = model, .in_c = cfg[0], .in_h = cfg[1], .in_w = cfg[2], .classes = classes,
                   .batch = batch, .threads = threads, .seed = 1, .device = dev};
  nn_net *net;
  int rc = nn_net_create(&net, &o, err, sizeof(err));
  if (rc == NN_ENODEV && dev == NN_DEV_CUDA) {
    print_message("[  SKIPPED ] GPU engine: %s\n", err);
    unload(&f);
    return;
  }
  if (rc) fail_msg("%s", err);
  size_t np, nb;
  float *params = nn_net_params(net, &np);
  nn_net_buffers(net, &nb);
  memcpy(params, getf(&f, "params", np), np * sizeof(float));
  const float *x = getf(&f, "x", (size_t)batch * cfg[0] * cfg[1] * cfg[2]);
  const int32_t *labels = get(&f, "labels")->data;
  const float *sgdv = getf(&f, "sgd", 4);
  nn_sgd_opts sgd = {.lr = sgdv[0], .momentum = sgdv[1], .weight_decay = sgdv[2], .nesterov = sgdv[3] != 0.0f, .grad_scale = 1.0f};
  const float *tolv = getf(&f, "tol", 2);
  double tol = tolv[0], traj_tol = tolv[1];
  assert_true(tol >= TOL * 0.999 && traj_tol >= TOL * 0.999); /* 1e-4 at the tightest */

  float loss;
  int correct, ok = 1;
  if (nn_net_train_step(net, x, labels, batch, &loss, &correct, NULL, err, sizeof(err))) fail_msg("%s", err);
  int ln, lc;
  const float *logits = nn_net_logits(net, &ln, &lc);
  assert_int_equal(ln, batch);
  assert_int_equal(lc, classes);
  char what[128];
  snprintf(what, sizeof(what), "%s logits", model);
  ok &= close_enough(what, logits, getf(&f, "logits", (size_t)batch * classes), (size_t)batch * classes, tol);
  snprintf(what, sizeof(what), "%s loss", model);
  ok &= close_enough(what, &loss, getf(&f, "loss", 1), 1, tol);
  const nn_param_info *pi;
  int nt = nn_net_param_tensors(net, &pi);
  const float *g = nn_net_grads(net, NULL), *rg = getf(&f, "grads", np);
  for (int i = 0; i < nt; i++) {
    snprintf(what, sizeof(what), "%s gradient of tensor %d (%s, layer %d)", model, i, pi[i].kind, pi[i].layer);
    ok &= close_enough(what, g + pi[i].offset, rg + pi[i].offset, pi[i].count, tol);
  }
  snprintf(what, sizeof(what), "%s BN running statistics", model);
  ok &= close_enough(what, nn_net_buffers(net, NULL), getf(&f, "buffers", nb), nb, tol);

  /* the loss trajectory of `steps` SGD steps on the same batch */
  const float *ref = getf(&f, "losses", (size_t)steps);
  float traj[64];
  traj[0] = loss;
  nn_sgd_step(net, &sgd);
  for (int s = 1; s < steps && s < 64; s++) {
    if (nn_net_train_step(net, x, labels, batch, &traj[s], &correct, NULL, err, sizeof(err))) fail_msg("%s", err);
    nn_sgd_step(net, &sgd);
  }
  assert_true(steps <= 64);
  snprintf(what, sizeof(what), "%s loss trajectory", model);
  ok &= close_enough(what, traj, ref, (size_t)steps, traj_tol);

  /* inference is per image (running statistics): the batch in two uneven parts, each through a
     plan of its own size, gives the same summed loss and hits as the whole batch */
  double whole = 0, parts = 0;
  int cw = 0, cp = 0, k = batch / 3 + 1;
  if (nn_net_eval(net, x, labels, batch, &whole, &cw, err, sizeof(err)) ||
      nn_net_eval(net, x, labels, k, &parts, &cp, err, sizeof(err)) ||
      nn_net_eval(net, x + (size_t)k * cfg[0] * cfg[1] * cfg[2], labels + k, batch - k, &parts, &cp, err, sizeof(err)))
    fail_msg("%s", err);
  float fw = (float)whole, fp = (float)parts;
  snprintf(what, sizeof(what), "%s eval of a batch in two parts", model);
  ok &= close_enough(what, &fp, &fw, 1, 1e-5);
  assert_int_equal(cw, cp);
  nn_net_destroy(net);
  unload(&f);
  if (!ok) fail();
}

static void test_resnet8_cifar(void **state) {
  (void)state;
  compare_model("resnet8-w8", 1, NN_DEV_CPU);
}
static void test_resnet18_narrow(void **state) {
  (void)state;
  compare_model("resnet18-w4", 2, NN_DEV_CPU); /* also the threaded paths */
}
static void test_resnet50_narrow(void **state) {
  (void)state;
  compare_model("resnet50-w2", 1, NN_DEV_CPU);
}

static void test_resnet8_cifar_gpu(void **state) {
  (void)state;
  compare_model("resnet8-w8", 1, NN_DEV_CUDA);
}
static void test_resnet18_narrow_gpu(void **state) {
  (void)state;
  compare_model("resnet18-w4", 1, NN_DEV_CUDA);
}
static void test_resnet50_narrow_gpu(void **state) {
  (void)state;
  compare_model("resnet50-w2", 1, NN_DEV_CUDA);
}

/* Bad calls get an error, not a crash. */
static void test_bad_input(void **state) {
  (void)state;
  nn_net_opts o = {.model = "resnet8-w8", .in_c = 3, .in_h = 11, .in_w = 13, .classes = 7, .batch = 4, .threads = 1, .seed = 1};
  nn_net *net;
  char err[256];
  if (nn_net_create(&net, &o, err, sizeof(err))) fail_msg("%s", err);
  float x[5 * 3 * 11 * 13] = {0}, loss;
  int32_t labels[5] = {0, 1, 2, 3, 4};
  int correct;
  double ls = 0;
  assert_int_equal(nn_net_train_step(net, x, labels, 5, &loss, &correct, NULL, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "batch"));
  assert_int_equal(nn_net_train_step(net, x, labels, 0, &loss, &correct, NULL, err, sizeof(err)), -1);
  labels[2] = 7;
  assert_int_equal(nn_net_train_step(net, x, labels, 4, &loss, &correct, NULL, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "label 7"));
  labels[2] = -1;
  assert_int_equal(nn_net_eval(net, x, labels, 4, &ls, &correct, err, sizeof(err)), -1);
  labels[2] = 2;
  assert_int_equal(nn_net_eval(net, x, labels, 4, &ls, &correct, err, sizeof(err)), 0);
  nn_net_destroy(net);
  o.model = "resnet18";
  o.in_h = 0;
  assert_int_equal(nn_net_create(&net, &o, err, sizeof(err)), -1);
  assert_null(net);
}

/* The comparison must notice a wrong gradient: corrupt one and check it is caught. */
static void test_detects_corruption(void **state) {
  (void)state;
  float a[4] = {1, -2, 3, 0.5f}, b[4] = {1, -2, 3, 0.5f};
  assert_true(close_enough("same", a, b, 4, TOL));
  a[3] = 0.5005f;
  assert_false(close_enough("one element off by 1e-3 (expected to fail)", a, b, 4, TOL));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_resnet8_cifar), cmocka_unit_test(test_resnet18_narrow),
                                     cmocka_unit_test(test_resnet50_narrow), cmocka_unit_test(test_resnet8_cifar_gpu),
                                     cmocka_unit_test(test_resnet18_narrow_gpu),
                                     cmocka_unit_test(test_resnet50_narrow_gpu), cmocka_unit_test(test_bad_input),
                                     cmocka_unit_test(test_detects_corruption)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
