/* Each layer of the oneDNN engine and of the GPU engine (fp32; where a GPU is present, else skipped
 * with one line), forward and backward, against double-precision references written here, on
 * random data with awkward sizes (channels that do not fill a 16-wide block, odd spatial sizes,
 * strides and padding, partial batches). Also softmax cross-entropy and SGD. */
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

/* |got - ref| <= TOL (|ref| + rms(ref)) everywhere: relative, with the tensor's scale as a floor. */
static int close_enough(const char *what, const float *got, const double *ref, size_t n) {
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += ref[i] * ref[i];
  double rms = n ? sqrt(ss / n) : 0, worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(got[i] - ref[i]) / (fabs(ref[i]) + rms + 1e-30);
    if (!(e <= worst)) { /* also catches NaN */
      worst = e;
      wi = i;
    }
  }
  if (!(worst <= TOL)) {
    print_error("%s: element %zu of %zu: got %.8g, reference %.8g (relative error %.3g)\n", what, wi, n,
                (double)got[wi], ref[wi], worst);
    return 0;
  }
  return 1;
}

static void check(const char *what, const float *got, const double *ref, size_t n) {
  if (!close_enough(what, got, ref, n)) fail();
}

static void fill(float *v, size_t n, uint64_t *s, float lo, float hi) {
  for (size_t i = 0; i < n; i++) v[i] = nn_rand_uniform(s, lo, hi);
}

/* The engine a test runs on (its prestate); -1 after skipping: no GPU here. */
static int device_of(void **state) {
  int dev = *(const int *)*state;
  if (dev == NN_DEV_CUDA) {
    nn_table t;
    nn_net *net = NULL;
    char err[256];
    nn_table_init(&t, 1, 2, 2);
    nn_table_add(&t, (nn_layer){.op = NN_BN}, err, sizeof err);
    nn_engine_opts o = {.batch = 1, .device = NN_DEV_CUDA};
    int rc = nn_net_create_table(&net, &t, &o, err, sizeof err);
    nn_net_destroy(net);
    nn_table_free(&t);
    if (rc == NN_ENODEV) {
      print_message("[  SKIPPED ] GPU engine: %s\n", err);
      return -1;
    }
    if (rc) fail_msg("%s", err);
  }
  return dev;
}

/* A network made of a few layers on a random input, with random parameters. */
typedef struct {
  nn_table t;
  nn_net *net;
  int n;          /* images in this call (<= batch) */
  nn_shape in, out;
  size_t xn, yn, np;
  float *x, *y, *dy, *dx, *params;
  double *ry, *rdx, *rg; /* references */
} lt;

static void lt_make(lt *T, int dev, const nn_layer *ls, int nl, nn_shape in, int batch, int n, uint64_t seed) {
  char err[256];
  memset(T, 0, sizeof(*T));
  assert_int_equal(nn_table_init(&T->t, in.c, in.h, in.w), 0);
  for (int i = 0; i < nl; i++)
    if (nn_table_add(&T->t, ls[i], err, sizeof(err)) < 0) fail_msg("%s", err);
  nn_engine_opts o = {.batch = batch, .threads = 0, .need_dx = 1, .seed = seed, .device = dev};
  if (nn_net_create_table(&T->net, &T->t, &o, err, sizeof(err))) fail_msg("%s", err);
  T->n = n;
  T->in = in;
  T->out = T->t.shapes[T->t.nvalues - 1];
  T->xn = (size_t)n * in.c * in.h * in.w;
  T->yn = (size_t)n * T->out.c * T->out.h * T->out.w;
  T->x = malloc(T->xn * sizeof(float));
  T->dx = calloc(T->xn, sizeof(float));
  T->y = malloc(T->yn * sizeof(float));
  T->dy = malloc(T->yn * sizeof(float));
  T->rdx = calloc(T->xn, sizeof(double));
  T->ry = calloc(T->yn, sizeof(double));
  uint64_t s = seed * 7919 + 1;
  fill(T->x, T->xn, &s, -1, 1);
  fill(T->dy, T->yn, &s, -1, 1);
  T->params = nn_net_params(T->net, &T->np);
  fill(T->params, T->np, &s, -1, 1);
  T->rg = calloc(T->np ? T->np : 1, sizeof(double));
}

static void lt_free(lt *T) {
  nn_net_destroy(T->net);
  nn_table_free(&T->t);
  free(T->x);
  free(T->dx);
  free(T->y);
  free(T->dy);
  free(T->rdx);
  free(T->ry);
  free(T->rg);
}

static void lt_run(lt *T, int train) {
  char err[256];
  if (nn_net_forward(T->net, T->x, T->n, train, T->y, err, sizeof(err))) fail_msg("%s", err);
  if (train && nn_net_backward(T->net, T->dy, T->dx, err, sizeof(err))) fail_msg("%s", err);
}

/* ---- references (NCHW, double) ---- */

static void ref_conv_g(int batch, nn_shape a, nn_shape b, const nn_layer *l, const double *x, const float *w,
                       const double *dy, double *y, double *dx, double *dw);

/* The convolution of the test's own operands: ref_conv_g on them in double, y written afresh. */
static void ref_conv(const lt *T, const nn_layer *l, const float *w, double *y, double *dx, double *dw) {
  double *x = malloc(T->xn * sizeof *x), *dy = malloc(T->yn * sizeof *dy);
  assert_non_null(x);
  assert_non_null(dy);
  for (size_t i = 0; i < T->xn; i++) x[i] = T->x[i];
  for (size_t i = 0; i < T->yn; i++) dy[i] = T->dy[i], y[i] = 0;
  ref_conv_g(T->n, T->in, T->out, l, x, w, dy, y, dx, dw);
  free(x);
  free(dy);
}

static void conv_case(int dev, nn_shape in, int cout, int k, int stride, int pad, int batch, int n) {
  nn_layer l = {.op = NN_CONV, .cout = cout, .k = k, .stride = stride, .pad = pad};
  lt T;
  lt_make(&T, dev, &l, 1, in, batch, n, (uint64_t)(in.c * 131 + cout * 7 + k + stride + n));
  lt_run(&T, 1);
  ref_conv(&T, &l, T.params, T.ry, T.rdx, T.rg);
  check("conv forward", T.y, T.ry, T.yn);
  check("conv backward data", T.dx, T.rdx, T.xn);
  check("conv backward weights", nn_net_grads(T.net, NULL), T.rg, T.np);
  lt_free(&T);
}

static void test_conv(void **state) {
  int dev = device_of(state);
  if (dev < 0) return;
  conv_case(dev, (nn_shape){5, 9, 7}, 17, 3, 1, 1, 3, 3);   /* partial blocks, odd sizes */
  conv_case(dev, (nn_shape){16, 8, 8}, 32, 3, 2, 1, 4, 4);  /* a stage's first conv */
  conv_case(dev, (nn_shape){16, 8, 8}, 32, 1, 2, 0, 2, 2);  /* projection shortcut */
  conv_case(dev, (nn_shape){3, 23, 21}, 8, 7, 2, 3, 2, 2);  /* torchvision stem */
  conv_case(dev, (nn_shape){1, 12, 12}, 6, 3, 1, 1, 5, 3);  /* 1 channel, partial batch (3 of 5) */
  conv_case(dev, (nn_shape){32, 1, 1}, 24, 3, 1, 1, 3, 3);  /* 1x1 input: only the centre tap (ResNet-18 on 28x28) */
  conv_case(dev, (nn_shape){7, 1, 1}, 9, 5, 2, 2, 2, 2);    /* the same, strided, 5x5 */
  conv_case(dev, (nn_shape){19, 2, 2}, 21, 3, 2, 1, 3, 3);  /* 2x2 input to 1x1 output: 4 taps of 9 */
  conv_case(dev, (nn_shape){16, 2, 2}, 16, 3, 2, 1, 16, 16); /* the same in ResNet-50-w2 on 32x32 */
  conv_case(dev, (nn_shape){32, 2, 2}, 32, 3, 1, 1, 4, 4);  /* ResNet-18's last stage on 32x32: 2x2, 3x3 pad 1 (on
                                                               AVX2 the weights' gradient by GEMM, nn_dnnl.c) */
  conv_case(dev, (nn_shape){4, 2, 3}, 5, 5, 1, 2, 2, 2);    /* 2x3 input, 5x5 with pad 2: not 1x1 out */
  conv_case(dev, (nn_shape){4, 2, 3}, 5, 5, 3, 2, 2, 2);    /* 2x3 input to 1x1 output: 6 taps of 25 */
}

/* The same on any shapes and operands (double), for chains of layers: y = conv(x), and from dy the
   gradients dx and dw (either may be NULL); y, dx and dw are accumulated into. */
static void ref_conv_g(int batch, nn_shape a, nn_shape b, const nn_layer *l, const double *x, const float *w,
                       const double *dy, double *y, double *dx, double *dw) {
  for (int n = 0; n < batch; n++)
    for (int co = 0; co < b.c; co++)
      for (int oh = 0; oh < b.h; oh++)
        for (int ow = 0; ow < b.w; ow++) {
          size_t yi = (((size_t)n * b.c + co) * b.h + oh) * b.w + ow;
          double acc = 0, g = dy ? dy[yi] : 0;
          for (int ci = 0; ci < a.c; ci++)
            for (int kh = 0; kh < l->k; kh++)
              for (int kw = 0; kw < l->k; kw++) {
                int ih = oh * l->stride - l->pad + kh, iw = ow * l->stride - l->pad + kw;
                if (ih < 0 || ih >= a.h || iw < 0 || iw >= a.w) continue;
                size_t xi = (((size_t)n * a.c + ci) * a.h + ih) * a.w + iw;
                size_t wi = (((size_t)co * a.c + ci) * l->k + kh) * l->k + kw;
                acc += x[xi] * w[wi];
                if (dx) dx[xi] += g * w[wi];
                if (dw) dw[wi] += g * x[xi];
              }
          y[yi] += acc;
        }
}

/* Two convolutions in a row: the second reads the first's output in the blocked layout the engine
   chose for it, as every convolution inside a network does (the first reads the plain input). Narrow
   channel counts there (fewer than an ISA's 8- or 16-channel block) are where oneDNN's own layout
   choice led to its reference code; the engine's own choice (nn_dnnl.c, conv_fwd_layout) is
   checked here, the padding of its weights included. Full blocks of 16 channels at 3x3, stride 1,
   are where the engine takes oneDNN's Winograd kernels (AVX-512; conv_wino_fits). */
static void chain_case(nn_shape in, int c1, int c2, int k, int stride, int pad, int batch, int n) {
  nn_layer ls[] = {{.op = NN_CONV, .in = 0, .cout = c1, .k = 3, .stride = 1, .pad = 1},
                   {.op = NN_CONV, .in = 1, .cout = c2, .k = k, .stride = stride, .pad = pad}};
  lt T;
  lt_make(&T, NN_DEV_CPU, ls, 2, in, batch, n, (uint64_t)(c1 * 97 + c2 * 13 + k + stride));
  lt_run(&T, 1);
  nn_shape mid = T.t.shapes[1];
  size_t mn = (size_t)n * mid.c * mid.h * mid.w, w2n = nn_layer_param_count(&T.t, 1);
  double *x = calloc(T.xn, sizeof(double)), *y1 = calloc(mn, sizeof(double)), *dy1 = calloc(mn, sizeof(double));
  double *dy = calloc(T.yn, sizeof(double));
  for (size_t i = 0; i < T.xn; i++) x[i] = T.x[i];
  for (size_t i = 0; i < T.yn; i++) dy[i] = T.dy[i];
  /* the arena holds the second layer's weights first */
  const float *w1 = T.params + w2n, *w2 = T.params;
  ref_conv_g(n, in, mid, &ls[0], x, w1, NULL, y1, NULL, NULL);
  ref_conv_g(n, mid, T.out, &ls[1], y1, w2, dy, T.ry, dy1, T.rg);
  double *scratch = calloc(mn, sizeof(double));
  ref_conv_g(n, in, mid, &ls[0], x, w1, dy1, scratch, T.rdx, T.rg + w2n);
  char what[96];
  snprintf(what, sizeof what, "chain %d->%d->%d k%d s%d: forward", in.c, c1, c2, k, stride);
  check(what, T.y, T.ry, T.yn);
  snprintf(what, sizeof what, "chain %d->%d->%d k%d s%d: backward data", in.c, c1, c2, k, stride);
  check(what, T.dx, T.rdx, T.xn);
  snprintf(what, sizeof what, "chain %d->%d->%d k%d s%d: weight gradients", in.c, c1, c2, k, stride);
  check(what, nn_net_grads(T.net, NULL), T.rg, T.np);
  free(x);
  free(y1);
  free(dy1);
  free(dy);
  free(scratch);
  lt_free(&T);
}

static void test_conv_narrow(void **state) {
  (void)state;
  chain_case((nn_shape){3, 9, 9}, 8, 8, 3, 1, 1, 3, 3);    /* ResNet-20-w8's first stage */
  chain_case((nn_shape){1, 10, 10}, 8, 16, 3, 2, 1, 2, 2); /* its first strided block */
  chain_case((nn_shape){1, 10, 10}, 8, 16, 1, 2, 0, 2, 2); /* and its projection */
  chain_case((nn_shape){1, 7, 7}, 4, 4, 3, 1, 1, 3, 2);    /* -w4: 4 of 8 or 16, partial batch */
  chain_case((nn_shape){3, 8, 8}, 4, 8, 3, 2, 1, 2, 2);
  chain_case((nn_shape){3, 8, 8}, 2, 4, 3, 2, 1, 2, 2);    /* resnet8-w2 */
  chain_case((nn_shape){3, 6, 6}, 2, 2, 1, 1, 0, 2, 2);
  chain_case((nn_shape){1, 9, 9}, 12, 12, 3, 1, 1, 2, 2);  /* -w12 */
  chain_case((nn_shape){1, 9, 9}, 12, 24, 3, 2, 1, 2, 2);
  chain_case((nn_shape){3, 7, 5}, 20, 20, 3, 1, 1, 2, 2);  /* 20 of 24 or 32 */
  chain_case((nn_shape){3, 1, 1}, 4, 6, 3, 1, 1, 3, 3);    /* 1x1 input: the centre tap of padded weights */
  chain_case((nn_shape){3, 2, 2}, 5, 7, 3, 2, 1, 2, 2);    /* 2x2 to 1x1: 4 taps of 9 */
  chain_case((nn_shape){3, 6, 6}, 16, 16, 3, 1, 1, 2, 2);  /* full blocks: oneDNN's own choice */
  chain_case((nn_shape){3, 9, 7}, 32, 48, 3, 1, 1, 3, 2);  /* Winograd: partial tiles, partial batch */
  chain_case((nn_shape){1, 8, 8}, 16, 64, 3, 1, 1, 2, 2);  /* whole 4x4 tiles */
  chain_case((nn_shape){3, 2, 2}, 32, 32, 3, 1, 1, 2, 2);  /* 2x2: direct (tiles three quarters empty) */
}

static void ref_bn(const lt *T, int relu, const float *gb, double *y, double *dx, double *dg, double *mean,
                   double *var) {
  nn_shape a = T->in;
  size_t m = (size_t)T->n * a.h * a.w, hw = (size_t)a.h * a.w;
  for (int c = 0; c < a.c; c++) {
    double s = 0, ss = 0;
    for (int n = 0; n < T->n; n++)
      for (size_t i = 0; i < hw; i++) s += T->x[((size_t)n * a.c + c) * hw + i];
    double mu = s / m;
    for (int n = 0; n < T->n; n++)
      for (size_t i = 0; i < hw; i++) {
        double d = T->x[((size_t)n * a.c + c) * hw + i] - mu;
        ss += d * d;
      }
    double v = ss / m, is = 1 / sqrt(v + 1e-5), g = gb[c], bt = gb[a.c + c];
    double sd = 0, sdx = 0;
    for (int n = 0; n < T->n; n++)
      for (size_t i = 0; i < hw; i++) {
        size_t j = ((size_t)n * a.c + c) * hw + i;
        double xh = (T->x[j] - mu) * is, o = g * xh + bt;
        if (relu && o < 0) o = 0;
        y[j] = o;
        double d = (relu && o <= 0) ? 0 : T->dy[j];
        sd += d;
        sdx += d * xh;
      }
    dg[c] = sdx;
    dg[a.c + c] = sd;
    for (int n = 0; n < T->n; n++)
      for (size_t i = 0; i < hw; i++) {
        size_t j = ((size_t)n * a.c + c) * hw + i;
        double xh = (T->x[j] - mu) * is, d = (relu && y[j] <= 0) ? 0 : T->dy[j];
        dx[j] = g * is * (d - sd / m - xh * sdx / m);
      }
    mean[c] = mu;
    var[c] = v;
  }
}

static void bn_case(int dev, nn_shape in, int relu, int batch, int n) {
  nn_layer l = {.op = NN_BN, .relu = relu};
  lt T;
  lt_make(&T, dev, &l, 1, in, batch, n, (uint64_t)(in.c * 31 + relu + n));
  uint64_t s = 99;
  for (int c = 0; c < in.c; c++) T.params[c] = nn_rand_uniform(&s, 0.5f, 1.5f);
  /* inputs with a channel offset, so the mean matters */
  for (size_t i = 0; i < T.xn; i++) T.x[i] = T.x[i] * 2 + (float)((i / (in.h * in.w)) % in.c) * 0.3f;
  size_t nb;
  float *bufs = nn_net_buffers(T.net, &nb);
  assert_int_equal(nb, 2 * (size_t)in.c);
  double *mean = calloc((size_t)in.c, sizeof(double)), *var = calloc((size_t)in.c, sizeof(double));
  lt_run(&T, 1);
  ref_bn(&T, relu, T.params, T.ry, T.rdx, T.rg, mean, var);
  check("bn forward", T.y, T.ry, T.yn);
  check("bn backward data", T.dx, T.rdx, T.xn);
  check("bn backward scale/shift", nn_net_grads(T.net, NULL), T.rg, T.np);
  bufs = nn_net_buffers(T.net, NULL); /* a GPU net's host copy is brought up to date by the call */
  /* running statistics: PyTorch's momentum 0.1 and unbiased variance */
  double *rs = calloc(nb, sizeof(double));
  double m = (double)n * in.h * in.w;
  for (int c = 0; c < in.c; c++) {
    rs[c] = 0.1 * mean[c];
    rs[in.c + c] = 0.9 + 0.1 * var[c] * m / (m - 1);
  }
  check("bn running statistics", bufs, rs, nb);
  /* inference uses them */
  lt_run(&T, 0);
  bufs = nn_net_buffers(T.net, NULL);
  size_t hw = (size_t)in.h * in.w;
  for (size_t j = 0; j < T.yn; j++) {
    int c = (int)((j / hw) % in.c);
    double o = T.params[c] * (T.x[j] - bufs[c]) / sqrt((double)bufs[in.c + c] + 1e-5) + T.params[in.c + c];
    T.ry[j] = relu && o < 0 ? 0 : o;
  }
  check("bn inference", T.y, T.ry, T.yn);
  free(rs);
  free(mean);
  free(var);
  lt_free(&T);
}

static void test_bn(void **state) {
  int dev = device_of(state);
  if (dev < 0) return;
  bn_case(dev, (nn_shape){5, 7, 9}, 0, 3, 3);
  bn_case(dev, (nn_shape){5, 7, 9}, 1, 3, 3);
  bn_case(dev, (nn_shape){20, 4, 3}, 1, 6, 4); /* partial batch */
}

/* Max pooling 3x3/2 with padding (torchvision's), odd sizes so the last window is clipped. */
static void test_maxpool(void **state) {
  int dev = device_of(state);
  if (dev < 0) return;
  nn_shape in = {6, 11, 10};
  nn_layer l = {.op = NN_MAXPOOL, .k = 3, .stride = 2, .pad = 1};
  lt T;
  lt_make(&T, dev, &l, 1, in, 3, 3, 5);
  lt_run(&T, 1);
  nn_shape o = T.out;
  for (int n = 0; n < T.n; n++)
    for (int c = 0; c < in.c; c++)
      for (int oh = 0; oh < o.h; oh++)
        for (int ow = 0; ow < o.w; ow++) {
          double best = -INFINITY;
          size_t bi = 0;
          for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++) {
              int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
              if (ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
              size_t xi = (((size_t)n * in.c + c) * in.h + ih) * in.w + iw;
              if (T.x[xi] > best) {
                best = T.x[xi];
                bi = xi;
              }
            }
          size_t yi = (((size_t)n * in.c + c) * o.h + oh) * o.w + ow;
          T.ry[yi] = best;
          T.rdx[bi] += T.dy[yi];
        }
  check("maxpool forward", T.y, T.ry, T.yn);
  check("maxpool backward", T.dx, T.rdx, T.xn);
  lt_free(&T);
}

static void test_avgpool_fc(void **state) {
  int dev = device_of(state);
  if (dev < 0) return;
  nn_shape in = {21, 3, 5};
  nn_layer ls[] = {{.op = NN_AVGPOOL, .in = 0}, {.op = NN_FC, .in = 1, .cout = 7}};
  lt T;
  lt_make(&T, dev, ls, 2, in, 4, 4, 11);
  lt_run(&T, 1);
  int C = in.c, K = 7, hw = in.h * in.w;
  const float *W = T.params, *bias = T.params + (size_t)K * C;
  double *g = T.rg;
  for (int n = 0; n < T.n; n++) {
    double a[64];
    for (int c = 0; c < C; c++) {
      a[c] = 0;
      for (int i = 0; i < hw; i++) a[c] += T.x[((size_t)n * C + c) * hw + i];
      a[c] /= hw;
    }
    for (int k = 0; k < K; k++) {
      double acc = bias[k], d = T.dy[n * K + k];
      for (int c = 0; c < C; c++) {
        acc += W[k * C + c] * a[c];
        g[k * C + c] += d * a[c];
      }
      g[K * C + k] += d;
      T.ry[n * K + k] = acc;
    }
    for (int c = 0; c < C; c++) {
      double da = 0;
      for (int k = 0; k < K; k++) da += T.dy[n * K + k] * W[k * C + c];
      for (int i = 0; i < hw; i++) T.rdx[((size_t)n * C + c) * hw + i] = da / hw;
    }
  }
  check("avgpool+fc forward", T.y, T.ry, T.yn);
  check("avgpool+fc backward data", T.dx, T.rdx, T.xn);
  check("fc backward weights and bias", nn_net_grads(T.net, NULL), T.rg, T.np);
  const nn_param_info *pi;
  assert_int_equal(nn_net_param_tensors(T.net, &pi), 2);
  assert_string_equal(pi[0].kind, "fc.weight");
  assert_int_equal(pi[1].offset, (size_t)K * C);
  lt_free(&T);
}

/* Residual add + ReLU where the input feeds both the BN branch and the identity, so its gradient is
   the sum of two consumers' (the accumulation path of every ResNet block input). */
static void test_residual(void **state) {
  int dev = device_of(state);
  if (dev < 0) return;
  nn_shape in = {20, 5, 6};
  nn_layer ls[] = {{.op = NN_BN, .in = 0}, {.op = NN_ADD_RELU, .in = 1, .in2 = 0}};
  lt T;
  lt_make(&T, dev, ls, 2, in, 3, 3, 21);
  lt_run(&T, 1);
  double *bny = calloc(T.xn, sizeof(double)), *mean = calloc(64, sizeof(double)), *var = calloc(64, sizeof(double));
  /* gradient through the ReLU, then BN backward with it as dy */
  float *dsum = malloc(T.xn * sizeof(float)), *keep = T.dy;
  double *bdx = calloc(T.xn, sizeof(double));
  ref_bn(&T, 0, T.params, bny, bdx, T.rg, mean, var); /* forward part only is used here */
  for (size_t i = 0; i < T.xn; i++) {
    double o = bny[i] + T.x[i];
    T.ry[i] = o > 0 ? o : 0;
    dsum[i] = o > 0 ? keep[i] : 0;
  }
  T.dy = dsum;
  memset(T.rg, 0, T.np * sizeof(double));
  ref_bn(&T, 0, T.params, bny, bdx, T.rg, mean, var);
  T.dy = keep;
  for (size_t i = 0; i < T.xn; i++) T.rdx[i] = bdx[i] + dsum[i];
  check("residual forward", T.y, T.ry, T.yn);
  check("residual backward data (two consumers)", T.dx, T.rdx, T.xn);
  check("residual bn gradients", nn_net_grads(T.net, NULL), T.rg, T.np);
  free(bny);
  free(mean);
  free(var);
  free(dsum);
  free(bdx);
  lt_free(&T);
}

/* A value read twice by one layer: y = relu(x + x). */
static void test_add_same(void **state) {
  int dev = device_of(state);
  if (dev < 0) return;
  nn_shape in = {3, 4, 4};
  nn_layer l = {.op = NN_ADD_RELU, .in = 0, .in2 = 0};
  lt T;
  lt_make(&T, dev, &l, 1, in, 2, 2, 3);
  lt_run(&T, 1);
  for (size_t i = 0; i < T.xn; i++) {
    T.ry[i] = T.x[i] > 0 ? 2.0 * T.x[i] : 0;
    T.rdx[i] = T.x[i] > 0 ? 2.0 * T.dy[i] : 0;
  }
  check("add same forward", T.y, T.ry, T.yn);
  check("add same backward", T.dx, T.rdx, T.xn);
  lt_free(&T);
}

static void test_xent(void **state) {
  (void)state;
  int n = 5, k = 11;
  float z[55], dz[55];
  int32_t lab[5] = {0, 10, 3, 3, 7};
  uint64_t s = 4;
  fill(z, 55, &s, -20, 20);
  z[3 * k + 3] = 80; /* a confident hit: large logits must not overflow */
  double loss, ref = 0, rdz[55];
  int hits, rh = 0;
  nn_softmax_xent(z, lab, n, k, &loss, &hits, dz);
  for (int i = 0; i < n; i++) {
    double mx = -INFINITY, se = 0;
    int am = 0;
    for (int j = 0; j < k; j++)
      if (z[i * k + j] > mx) mx = z[i * k + j], am = j;
    for (int j = 0; j < k; j++) se += exp(z[i * k + j] - mx);
    ref += mx + log(se) - z[i * k + lab[i]];
    rh += am == lab[i];
    for (int j = 0; j < k; j++) rdz[i * k + j] = (exp(z[i * k + j] - mx) / se - (j == lab[i])) / n;
  }
  assert_true(fabs(loss - ref) <= 1e-9 * fabs(ref));
  assert_int_equal(hits, rh);
  check("softmax cross-entropy gradient", dz, rdz, 55);
}

static void test_sgd(void **state) {
  (void)state;
  enum { N = 37 };
  for (int nest = 0; nest < 2; nest++) {
    float p[N], g[N], m[N] = {0};
    double rp[N], rm[N] = {0};
    uint64_t s = 8 + nest;
    fill(p, N, &s, -1, 1);
    for (int i = 0; i < N; i++) rp[i] = p[i];
    nn_sgd_opts o = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f, .nesterov = nest};
    for (int step = 0; step < 4; step++) {
      fill(g, N, &s, -1, 1);
      nn_sgd_apply(p, g, m, N, &o);
      for (int i = 0; i < N; i++) {
        double d = g[i] + (double)o.weight_decay * rp[i];
        rm[i] = step ? (double)o.momentum * rm[i] + d : d; /* torch: the first buffer is d itself */
        rp[i] -= (double)o.lr * (nest ? d + (double)o.momentum * rm[i] : rm[i]);
      }
    }
    check("sgd parameters", p, rp, N);
    check("sgd momentum", m, rm, N);
  }
}

/* Backward's gradient-ready reports (nn_grad_ready_fn), which the data-parallel reducer starts
   each bucket's all-reduce on: each reported prefix of the arena is final when reported. Each newly
   reported part is copied as it is reported (backward writing over an arena of NaNs) and compared,
   bit for bit, with the arena once backward is done; reporting a layer before its weight gradient
   is written fails it. */
typedef struct {
  const float *grads;
  float *seen;
  size_t last, calls;
  int decreasing;
} ready_copy;

static void copy_ready(void *ctx, int layer, size_t ready) {
  ready_copy *r = ctx;
  (void)layer;
  if (ready < r->last) r->decreasing = 1;
  else memcpy(r->seen + r->last, r->grads + r->last, (ready - r->last) * sizeof(float));
  if (ready > r->last) r->last = ready;
  r->calls++;
}

static void test_grad_ready(void **state) {
  (void)state;
  nn_shape in = {3, 6, 6};
  nn_layer ls[] = {{.op = NN_CONV, .in = 0, .cout = 8, .k = 3, .stride = 1, .pad = 1},
                   {.op = NN_BN, .in = 1},
                   {.op = NN_CONV, .in = 2, .cout = 8, .k = 3, .stride = 2, .pad = 1},
                   {.op = NN_BN, .in = 3},
                   {.op = NN_ADD_RELU, .in = 4, .in2 = 4},
                   {.op = NN_AVGPOOL, .in = 5},
                   {.op = NN_FC, .in = 6, .cout = 5}};
  lt T;
  lt_make(&T, NN_DEV_CPU, ls, 7, in, 4, 4, 5);
  lt_run(&T, 1); /* builds the plan */
  size_t np;
  float *g = nn_net_grads(T.net, &np);
  float *seen = malloc(np * sizeof *seen);
  for (int pass = 0; pass < 2; pass++) {
    memset(g, 0xff, np * sizeof *g); /* NaNs until backward writes them */
    memset(seen, 0, np * sizeof *seen);
    ready_copy r = {.grads = g, .seen = seen};
    nn_net_on_grad_ready(T.net, copy_ready, &r);
    lt_run(&T, 1);
    nn_net_on_grad_ready(T.net, NULL, NULL);
    assert_false(r.decreasing);
    assert_int_equal(r.last, np);
    assert_true(r.calls >= 5); /* one per layer with parameters, and the end */
    for (size_t i = 0; i < np; i++)
      if (memcmp(&seen[i], &g[i], sizeof *g))
        fail_msg("pass %d: gradient %zu reported as final at %g, then became %g", pass, i,
                 (double)seen[i], (double)g[i]);
  }
  free(seen);
  lt_free(&T);
}

/* The checker itself must fail on a wrong value. */
static void test_checker_fails(void **state) {
  (void)state;
  float got[3] = {1.0f, 2.0f, 3.003f};
  double ref[3] = {1, 2, 3};
  assert_false(close_enough("corrupted (expected to fail)", got, ref, 3));
  got[2] = 3.0f;
  assert_true(close_enough("restored", got, ref, 3));
}

int main(void) {
  static const int cpu = NN_DEV_CPU, gpu = NN_DEV_CUDA;
#define BOTH(f) {#f " (cpu)", f, NULL, NULL, (void *)&cpu}, {#f " (gpu)", f, NULL, NULL, (void *)&gpu}
  const struct CMUnitTest tests[] = {
      BOTH(test_conv),     BOTH(test_bn),       BOTH(test_maxpool),
      BOTH(test_avgpool_fc), BOTH(test_residual), BOTH(test_add_same),
      cmocka_unit_test(test_xent),     cmocka_unit_test(test_sgd),      cmocka_unit_test(test_checker_fails),
      cmocka_unit_test(test_grad_ready),  cmocka_unit_test(test_conv_narrow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
