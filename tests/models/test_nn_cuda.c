/* The GPU engine against the CPU engine and against itself: the same seed gives the same weights;
 * a checkpoint of either resumes on the other with the same next-step loss; the gradient-ready
 * callback walks the arena in order and, with host gradients, the host copy holds every gradient
 * when it is reported; tf32 and bf16 follow fp32; prefetched batches equal uploaded ones. Without
 * a GPU (or without CUDA in the build) every test but the refusal one skips with one line; a bad
 * batch is refused alike by both; Adam and AdamW on the GPU take the CPU's steps to the bit; an
 * MLP trains as on the CPU. cuBLAS is opened at run time, which needs no GPU to check. */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "nn.h"
#include "nn_impl.h"
#include "test_util.h"

#if FABENCH_HAVE_CUDA && FABENCH_HAVE_CUDNN
#include <cublas_v2.h>

#include "nn_blas.h"
#endif

enum { B = 6, CH = 3, H = 12, W = 11, K = 7 };
#define MODEL "resnet8-w8"

static nn_net_opts opts(int dev, int prec) {
  return (nn_net_opts){.model = MODEL, .in_c = CH, .in_h = H, .in_w = W, .classes = K, .batch = B,
                       .threads = 1, .seed = 7, .device = dev, .precision = prec};
}

/* A process that links the engine does not load cuBLAS (its cuBLASLt's start-up would cost every
 * fabench process 0.3 s) until the table opens it; the table then has every function the engine
 * calls, and they work (the status string needs no GPU). Runs first: a GPU net opens it too. */
static void test_blas_at_run_time(void **state) {
  (void)state;
#if FABENCH_HAVE_CUDA && FABENCH_HAVE_CUDNN
  assert_false(tu_file_has("/proc/self", "maps", "libcublas"));
  nn_blas_api a = {0};
  char err[256];
  if (nn_blas_open(&a, err, sizeof err)) fail_msg("%s", err);
  assert_true(tu_file_has("/proc/self", "maps", "libcublasLt"));
#define HAS(f) assert_non_null(a.f);
  NN_BLAS_FUNCS(HAS)
#undef HAS
  const char *s = a.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
  assert_non_null(s);
  assert_non_null(strstr(s, "not initialized"));
  nn_blas_close(&a);
  assert_null(a.lib);
#else
  print_message("[  SKIPPED ] built without CUDA and cuDNN\n");
#endif
}

/* A GPU net, or NULL after printing why the test skips. */
static nn_net *gpu_net(int prec) {
  nn_net_opts o = opts(NN_DEV_CUDA, prec);
  nn_net *net = NULL;
  char err[256];
  int rc = nn_net_create(&net, &o, err, sizeof err);
  if (rc == NN_ENODEV) {
    print_message("[  SKIPPED ] GPU engine: %s\n", err);
    return NULL;
  }
  if (rc) fail_msg("%s", err);
  return net;
}

/* A CPU net, or NULL after printing why (a build without oneDNN). */
static nn_net *cpu_net(void) {
  nn_net_opts o = opts(NN_DEV_CPU, NN_PREC_FP32);
  nn_net *net = NULL;
  char err[256];
  if (nn_net_create(&net, &o, err, sizeof err)) {
    if (!strstr(err, "without oneDNN")) fail_msg("%s", err);
    print_message("[  SKIPPED ] CPU engine: %s\n", err);
  }
  return net;
}

typedef struct {
  float x[2][B * CH * H * W];
  int32_t y[2][B];
} batches;

static void make_batches(batches *d) {
  uint64_t s = 12345;
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < sizeof d->x[k] / sizeof(float); i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      d->x[k][i] = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
    }
    for (int i = 0; i < B; i++) d->y[k][i] = (i * 3 + k) % K;
  }
}

static float step(nn_net *net, const batches *d, int k, int sgd) {
  char err[256];
  float loss;
  int c;
  if (nn_net_train_step(net, d->x[k], d->y[k], B, &loss, &c, NULL, err, sizeof err)) fail_msg("%s", err);
  nn_sgd_opts o = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
  if (sgd) nn_sgd_step(net, &o);
  return loss;
}

static void near(const char *what, double got, double ref, double tol) {
  if (!(fabs(got - ref) <= tol * (fabs(ref) + 1e-6))) fail_msg("%s: %.8g against %.8g (tolerance %g)", what, got, ref, tol);
}

/* Without a GPU or CUDA, a GPU net is refused with NN_ENODEV and a reason (exit status 3 in bench);
   with one, it is made. A CPU net in bf16 is refused as a plain error. */
static void test_refusal(void **state) {
  (void)state;
  nn_net_opts o = opts(NN_DEV_CUDA, NN_PREC_FP32);
  nn_net *net = NULL;
  char err[256] = "";
  int rc = nn_net_create(&net, &o, err, sizeof err);
  if (rc == NN_ENODEV) {
    assert_null(net);
    assert_true(strlen(err) > 10);
  } else {
    assert_int_equal(rc, 0);
    assert_int_equal(nn_net_device(net), NN_DEV_CUDA);
    assert_non_null(strstr(nn_net_backend(net), "cuDNN"));
    nn_net_destroy(net);
  }
  o = opts(NN_DEV_CPU, NN_PREC_BF16);
  assert_int_equal(nn_net_create(&net, &o, err, sizeof err), -1);
  assert_true(strstr(err, "fp32") || strstr(err, "without oneDNN"));
}

static void save(nn_net *net, const char *path) {
  char err[256];
  size_t np, nm, nb;
  float *p = nn_net_params(net, &np), *m = nn_net_momentum(net, &nm), *b = nn_net_buffers(net, &nb);
  nn_ckpt_info ci = {.in_c = CH, .in_h = H, .in_w = W, .classes = K, .batch = B, .world = 1, .seed = 7,
                     .n_params = np, .n_momentum = nm, .n_buffers = nb};
  snprintf(ci.model, sizeof ci.model, MODEL);
  snprintf(ci.data, sizeof ci.data, "test");
  if (nn_ckpt_save(path, &ci, p, m, b, err, sizeof err)) fail_msg("%s", err);
}

static void load(nn_net *net, const char *path) {
  char err[256];
  size_t np, nm, nb;
  float *p = nn_net_params(net, &np), *m = nn_net_momentum(net, &nm), *b = nn_net_buffers(net, &nb);
  nn_ckpt_info have, want = {.in_c = CH, .in_h = H, .in_w = W, .classes = K, .batch = B, .world = 1, .seed = 7,
                             .n_params = np, .n_momentum = nm, .n_buffers = nb};
  snprintf(want.model, sizeof want.model, MODEL);
  snprintf(want.data, sizeof want.data, "test");
  if (nn_ckpt_load(path, &have, p, m, b, &want, err, sizeof err)) fail_msg("%s", err);
}

/* Same seed, same weights; the same steps give the same losses; a checkpoint written by one engine
   resumes on the other with the next step's loss agreeing, both ways. */
static void test_checkpoint_across(void **state) {
  (void)state;
  nn_net *g = gpu_net(NN_PREC_FP32);
  if (!g) return;
  nn_net *c = cpu_net();
  if (!c) {
    nn_net_destroy(g);
    return;
  }
  batches *d = malloc(sizeof *d);
  make_batches(d);
  size_t np, np2;
  const float *pc = nn_net_params(c, &np), *pg = nn_net_params(g, &np2);
  assert_int_equal(np, np2);
  assert_memory_equal(pc, pg, np * sizeof(float));
  for (int s = 0; s < 3; s++) near("loss, CPU against GPU", step(g, d, s & 1, 1), step(c, d, s & 1, 1), 1e-4);

  char pa[64], pb[64];
  snprintf(pa, sizeof pa, "/tmp/fabench-nncuda-%d-a.ckpt", (int)getpid());
  snprintf(pb, sizeof pb, "/tmp/fabench-nncuda-%d-b.ckpt", (int)getpid());
  /* GPU -> CPU: a fresh CPU net from the GPU's checkpoint */
  save(g, pa);
  nn_net *c2 = cpu_net();
  load(c2, pa);
  near("next loss, GPU checkpoint resumed on the CPU", step(c2, d, 1, 1), step(g, d, 1, 1), 1e-4);
  /* CPU -> GPU: a fresh GPU net from the CPU's checkpoint */
  save(c2, pb);
  nn_net *g2 = gpu_net(NN_PREC_FP32);
  load(g2, pb);
  near("next loss, CPU checkpoint resumed on the GPU", step(g2, d, 0, 1), step(c2, d, 0, 1), 1e-4);
  unlink(pa);
  unlink(pb);
  nn_net_destroy(c);
  nn_net_destroy(c2);
  nn_net_destroy(g);
  nn_net_destroy(g2);
  free(d);
}

typedef struct {
  nn_net *net;
  const float *host;       /* the host gradient arena */
  int check;               /* look at each reported prefix of the host arena */
  size_t last, calls, bad; /* bad: a reported prefix not yet in the host arena */
  int decreasing;
} ready_log;

static void on_ready(void *ctx, int layer, size_t ready) {
  ready_log *r = ctx;
  if (layer < -1) r->decreasing = 1;
  if (ready < r->last) r->decreasing = 1;
  r->last = ready;
  r->calls++;
  if (r->check)
    for (size_t i = 0; i < ready; i++)
      if (isnan(r->host[i])) { /* still the fill: not copied yet */
        r->bad++;
        break;
      }
}

/* Backward reports a growing prefix ending at the whole arena; with host gradients each reported
   prefix is already in the host arena (filled with NaN before the step, checked when reported). */
static void test_grad_ready(void **state) {
  (void)state;
  nn_net *g = gpu_net(NN_PREC_FP32);
  if (!g) return;
  batches *d = malloc(sizeof *d);
  make_batches(d);
  size_t np;
  const float *host = nn_net_grads(g, &np); /* host gradients from here on */
  ready_log r = {.net = g, .host = host};
  nn_net_on_grad_ready(g, on_ready, &r);
  step(g, d, 0, 0);
  assert_false(r.decreasing);
  assert_int_equal(r.last, np);
  assert_true(r.calls >= 2);
  float *h = nn_net_grads(g, NULL);
  memset(h, 0xff, np * sizeof(float)); /* NaNs until backward copies them */
  r = (ready_log){.net = g, .host = h, .check = 1};
  step(g, d, 0, 0);
  assert_int_equal(r.last, np);
  assert_int_equal(r.bad, 0);
  nn_net_on_grad_ready(g, NULL, NULL);
  /* a reducer of host memory rewrites them: SGD uses what is in the host arena */
  size_t npar;
  float *p0 = malloc(np * sizeof(float));
  memcpy(p0, nn_net_params(g, &npar), np * sizeof(float));
  h = nn_net_grads(g, NULL);
  for (size_t i = 0; i < np; i++) h[i] = 1.0f;
  nn_sgd_opts o = {.lr = 0.5f};
  nn_sgd_step(g, &o);
  const float *p1 = nn_net_params(g, NULL);
  for (size_t i = 0; i < np; i += np / 17 + 1) near("SGD from host gradients", p1[i], p0[i] - 0.5f, 1e-6);
  free(p0);
  free(d);
  nn_net_destroy(g);
}

/* tf32 and bf16 follow fp32 closely on one step and still learn (the loss falls on a fixed batch),
   also across an evaluation of another batch size (which once broke bf16: a shared descriptor). */
static void test_precisions(void **state) {
  (void)state;
  nn_net *f = gpu_net(NN_PREC_FP32);
  if (!f) return;
  batches *d = malloc(sizeof *d);
  make_batches(d);
  float ref = step(f, d, 0, 0);
  const int prec[] = {NN_PREC_TF32, NN_PREC_BF16};
  const double tol[] = {1e-2, 5e-2};
  for (int k = 0; k < 2; k++) {
    nn_net *g = gpu_net(prec[k]);
    float first = step(g, d, 0, 1), last = first;
    near(prec[k] == NN_PREC_BF16 ? "bf16 loss against fp32" : "tf32 loss against fp32", first, ref, tol[k]);
    for (int s = 0; s < 15; s++) {
      last = step(g, d, 0, 1);
      if (s == 7) { /* an eval of a partial batch between steps: a second plan of other algorithms */
        double ls = 0;
        int c = 0;
        char err[256];
        if (nn_net_eval(g, d->x[1], d->y[1], B - 1, &ls, &c, err, sizeof err)) fail_msg("%s", err);
      }
    }
    if (!(last < 0.5f * first)) fail_msg("precision %d: loss %g after 16 steps on one batch, from %g", prec[k], last, first);
    nn_net_destroy(g);
  }
  nn_net_destroy(f);
  free(d);
}

/* A prefetched batch (page-locked or not) trains exactly as one uploaded in the step. */
static void test_prefetch(void **state) {
  (void)state;
  nn_net *a = gpu_net(NN_PREC_FP32);
  if (!a) return;
  nn_net *b = gpu_net(NN_PREC_FP32);
  batches *d = malloc(sizeof *d);
  make_batches(d);
  float *pinned = nn_host_alloc(b, sizeof d->x[1]);
  assert_non_null(pinned);
  memcpy(pinned, d->x[1], sizeof d->x[1]);
  char err[256];
  float la[3], lb[3];
  la[0] = step(a, d, 0, 1);
  la[1] = step(a, d, 1, 1);
  la[2] = step(a, d, 0, 1);
  if (nn_net_prefetch(b, d->x[0], B, err, sizeof err)) fail_msg("%s", err);
  if (nn_net_prefetch(b, pinned, B, err, sizeof err)) fail_msg("%s", err);
  lb[0] = step(b, d, 0, 1);
  int c;
  if (nn_net_train_step(b, pinned, d->y[1], B, &lb[1], &c, NULL, err, sizeof err)) fail_msg("%s", err);
  nn_sgd_opts o = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
  nn_sgd_step(b, &o);
  lb[2] = step(b, d, 0, 1);
  for (int i = 0; i < 3; i++) near("prefetched against uploaded", lb[i], la[i], 1e-5);
  nn_host_free(b, pinned);
  /* a prefetch never used, its memory freed: memory given again at that address holds another
   * batch, which must be uploaded afresh (the training loop's last prefetch when it stops early) */
  float *p1 = nn_host_alloc(b, sizeof d->x[1]);
  memcpy(p1, d->x[1], sizeof d->x[1]);
  if (nn_net_prefetch(b, p1, B, err, sizeof err)) fail_msg("%s", err);
  nn_host_free(b, p1);
  float *p2 = nn_host_alloc(b, sizeof d->x[0]);
  memcpy(p2, d->x[0], sizeof d->x[0]);
  la[0] = step(a, d, 0, 1);
  if (nn_net_train_step(b, p2, d->y[0], B, &lb[0], &c, NULL, err, sizeof err)) fail_msg("%s", err);
  nn_sgd_step(b, &o);
  near("a fresh batch at a freed prefetch's address", lb[0], la[0], 1e-5);
  nn_host_free(b, p2);
  nn_net_destroy(a);
  nn_net_destroy(b);
  free(d);
}

/* A bad batch is refused with the same words by either engine: a count beyond the net's batch,
 * a label outside the classes (train step and evaluation). */
static void test_bad_batch_same(void **state) {
  (void)state;
  nn_net *nets[2] = {cpu_net(), gpu_net(NN_PREC_FP32)};
  static float x[B * CH * H * W];
  int32_t y[B] = {0};
  y[2] = K; /* one past the last class */
  char want_n[128], want_y[128];
  snprintf(want_n, sizeof want_n, "batch of %d images (this network takes 1..%d)", B + 1, B);
  snprintf(want_y, sizeof want_y, "label %d of image 2 is outside 0..%d", K, K - 1);
  for (int e = 0; e < 2; e++) {
    if (!nets[e]) continue;
    char err[256] = "";
    float loss;
    int correct = 0;
    double sum = 0;
    assert_int_equal(nn_net_train_step(nets[e], x, y, B + 1, &loss, &correct, NULL, err, sizeof err), -1);
    assert_string_equal(err, want_n);
    assert_int_equal(nn_net_train_step(nets[e], x, y, B, &loss, &correct, NULL, err, sizeof err), -1);
    assert_string_equal(err, want_y);
    assert_int_equal(nn_net_eval(nets[e], x, y, B, &sum, &correct, err, sizeof err), -1);
    assert_string_equal(err, want_y);
    nn_net_destroy(nets[e]);
  }
}

/* Units in the last place between two floats of one sign (0 for equal ones, huge across signs). */
static long ulps(float a, float b) {
  int32_t x, y;
  memcpy(&x, &a, sizeof x);
  memcpy(&y, &b, sizeof y);
  if ((x < 0) != (y < 0)) return a == b ? 0 : LONG_MAX;
  return labs((long)x - (long)y);
}

static long worst_ulps(const float *got, const float *ref, size_t n, size_t *at) {
  long w = 0;
  for (size_t i = 0; i < n; i++) {
    long u = ulps(got[i], ref[i]);
    if (u > w) w = u, *at = i;
  }
  return w;
}

/* Adam and AdamW of a net against nn_optim_apply over the whole arena at once, several steps on
   random parameters and gradients, the net's arena updated in three spans (on the GPU one launch
   each, as the reducer's buckets): parameters and first moment agree to the bit where both round
   each operation alike (the kernel runs the CPU's element, nn_adam.h); 2 ulps are allowed. Then a
   training from step 1 again gives the first step's result: the second moment starts from zero
   (the caller's o->v on the CPU, the device's own on the GPU, which ignores o->v). */
static void adam_check(nn_net *g, const char *engine) {
  size_t np, nm;
  nn_net_params(g, &np);
  nn_net_momentum(g, &nm);
  assert_int_equal(nm, np);
  enum { STEPS = 4 };
  float *p0 = malloc(np * sizeof(float)), *p = malloc(np * sizeof(float)), *m = calloc(np, sizeof(float)),
        *v = calloc(np, sizeof(float)), *gr = malloc(np * sizeof(float)), *first = malloc(np * sizeof(float)),
        *vnet = malloc(np * sizeof(float));
  uint64_t s = 99;
  for (size_t i = 0; i < np; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p0[i] = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
  }
  const size_t cut[] = {0, np / 3, np / 3 + 1, np};
  for (int kind = NN_OPT_ADAM; kind <= NN_OPT_ADAMW; kind++) {
    memcpy(p, p0, np * sizeof(float));
    memset(m, 0, np * sizeof(float));
    memset(v, 0, np * sizeof(float));
    for (int round = 0; round < 2; round++) {
      memcpy(nn_net_params(g, NULL), p0, np * sizeof(float));
      memset(nn_net_momentum(g, NULL), 0, np * sizeof(float));
      memset(vnet, 0, np * sizeof(float));
      for (int t = 1; t <= (round ? 1 : STEPS); t++) {
        s = 1000u * (uint64_t)kind + (uint64_t)t; /* the same gradients for step t in either round */
        for (size_t i = 0; i < np; i++) { /* gradients of several magnitudes, some zero */
          s = s * 6364136223846793005ull + 1442695040888963407ull;
          float u = (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
          gr[i] = i % 11 == 0 ? 0.0f : u * (i % 3 == 0 ? 1e-3f : i % 3 == 1 ? 1.0f : 30.0f);
        }
        memcpy(nn_net_grads(g, NULL), gr, np * sizeof(float));
        nn_sgd_opts o = {.lr = 3e-3f, .weight_decay = 0.05f, .grad_scale = 0.5f, .kind = kind, .beta1 = 0.9,
                         .beta2 = 0.999, .eps = 1e-8, .t = t, .v = vnet};
        for (int k = 0; k < 3; k++) nn_sgd_step_range(g, &o, cut[k], k == 2 ? SIZE_MAX : cut[k + 1] - cut[k]);
        if (round) break; /* compared with the first round's first step below */
        nn_optim_apply(p, gr, m, v, np, &o);
        size_t at = 0;
        const float *gp = nn_net_params(g, NULL), *gm = nn_net_momentum(g, NULL);
        long up = worst_ulps(gp, p, np, &at);
        if (up > 2) fail_msg("%s %s step %d: parameter %zu is %.9g, %.9g by nn_optim_apply (%ld ulps)",
                             engine, nn_optim_name(kind), t, at, gp[at], p[at], up);
        long um = worst_ulps(gm, m, np, &at);
        if (um > 2) fail_msg("%s %s step %d: first moment %zu is %.9g, %.9g by nn_optim_apply (%ld ulps)",
                             engine, nn_optim_name(kind), t, at, gm[at], m[at], um);
        if (t == 1) memcpy(first, gp, np * sizeof(float));
        print_message("%s %s step %d: %zu parameters within %ld ulps of nn_optim_apply's (moment %ld)\n", engine,
                      nn_optim_name(kind), t, np, up, um);
      }
      if (round) {
        size_t at = 0;
        long u = worst_ulps(nn_net_params(g, NULL), first, np, &at);
        if (u != 0) fail_msg("%s %s from step 1 again: parameter %zu differs from the first training's (%ld ulps)",
                             engine, nn_optim_name(kind), at, u);
      }
    }
  }
  free(p0);
  free(p);
  free(m);
  free(v);
  free(gr);
  free(first);
  free(vnet);
  nn_net_destroy(g);
}

static void test_adam_as_cpu(void **state) {
  (void)state;
  nn_net *c = cpu_net();
  if (c) adam_check(c, "cpu");
  nn_net *g = gpu_net(NN_PREC_FP32);
  if (g) adam_check(g, "cuda");
}

/* An MLP (fully connected layers, ReLU between: a chain on cuBLAS with our bias+ReLU kernels) on
   the GPU against the CPU engine: the same weights from the seed; each step's loss and every
   gradient agree to fp32 rounding over three SGD steps on two batches; the chain's hidden layers
   see both signs (ReLU masks something). */
static void test_mlp_as_cpu(void **state) {
  (void)state;
  char model[64];
  snprintf(model, sizeof model, "mlp:%d,64,32,%d", CH * H * W, K);
  nn_net *nets[2] = {NULL, NULL};
  for (int e = 0; e < 2; e++) {
    nn_net_opts o = opts(e ? NN_DEV_CUDA : NN_DEV_CPU, NN_PREC_FP32);
    o.model = model;
    char err[256];
    int rc = nn_net_create(&nets[e], &o, err, sizeof err);
    if (rc == NN_ENODEV || (rc && strstr(err, "without oneDNN"))) {
      print_message("[  SKIPPED ] %s engine: %s\n", e ? "GPU" : "CPU", err);
      nn_net_destroy(nets[0]);
      return;
    }
    if (rc) fail_msg("%s", err);
  }
  batches *d = malloc(sizeof *d);
  make_batches(d);
  size_t np, np2;
  nn_net_params(nets[0], &np);
  nn_net_params(nets[1], &np2);
  assert_int_equal(np, np2);
  assert_memory_equal(nn_net_params(nets[0], NULL), nn_net_params(nets[1], NULL), np * sizeof(float));
  for (int s = 0; s < 3; s++) {
    float loss[2];
    for (int e = 0; e < 2; e++) loss[e] = step(nets[e], d, s & 1, 0);
    near("mlp loss, GPU against CPU", loss[1], loss[0], 1e-5);
    const float *gc = nn_net_grads(nets[0], NULL), *gg = nn_net_grads(nets[1], NULL);
    double gmax = 0;
    size_t zero = 0;
    for (size_t i = 0; i < np; i++) {
      gmax = fmax(gmax, fabs(gc[i]));
      zero += gc[i] == 0.0f;
    }
    for (size_t i = 0; i < np; i++)
      if (!(fabs(gg[i] - gc[i]) <= 1e-4 * gmax)) fail_msg("mlp step %d: gradient %zu is %.8g on the GPU, %.8g on the CPU", s, i, gg[i], gc[i]);
    assert_true(gmax > 0);
    assert_true(zero > 0 && zero < np / 2); /* the ReLUs masked some rows of the weights' gradient, not most */
    nn_sgd_opts o = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f};
    for (int e = 0; e < 2; e++) nn_sgd_step(nets[e], &o);
  }
  nn_net_destroy(nets[0]);
  nn_net_destroy(nets[1]);
  free(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_blas_at_run_time), cmocka_unit_test(test_refusal), cmocka_unit_test(test_checkpoint_across),
                                     cmocka_unit_test(test_grad_ready), cmocka_unit_test(test_precisions),
                                     cmocka_unit_test(test_prefetch), cmocka_unit_test(test_bad_batch_same),
                                     cmocka_unit_test(test_adam_as_cpu), cmocka_unit_test(test_mlp_as_cpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
