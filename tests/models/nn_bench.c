/* Not a test: images/s of nn_net_train_step (+ SGD) on synthetic data, for tuning the engines.
 * usage: nn_bench MODEL CxHxW CLASSES BATCH THREADS [STEPS] [WARMUP] [cpu|fp32|tf32|bf16] [search]
 * fp32/tf32/bf16 run on the GPU (device 0); "search" times cuDNN's algorithms instead of taking its
 * heuristics' first choice. On the GPU the batches lie in page-locked memory and the next one is
 * prefetched while the current step runs (two buffers taking turns, as a loader would fill them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: nn_bench MODEL CxHxW CLASSES BATCH THREADS [STEPS] [WARMUP] [cpu|fp32|tf32|bf16] [search]\n");
    return 2;
  }
  nn_net_opts o = {.model = argv[1], .classes = atoi(argv[3]), .batch = atoi(argv[4]), .threads = atoi(argv[5]), .seed = 1};
  if (sscanf(argv[2], "%dx%dx%d", &o.in_c, &o.in_h, &o.in_w) != 3) return 2;
  int steps = argc > 6 ? atoi(argv[6]) : 20, warm = argc > 7 ? atoi(argv[7]) : 3;
  const char *dev = argc > 8 ? argv[8] : "cpu";
  if (strcmp(dev, "cpu")) {
    o.device = NN_DEV_CUDA;
    if (!strcmp(dev, "fp32"))
      o.precision = NN_PREC_FP32;
    else if (!strcmp(dev, "tf32"))
      o.precision = NN_PREC_TF32;
    else if (!strcmp(dev, "bf16"))
      o.precision = NN_PREC_BF16;
    else {
      fprintf(stderr, "nn_bench: unknown device/precision '%s'\n", dev);
      return 2;
    }
  }
  o.cudnn_search = argc > 9 && !strcmp(argv[9], "search");
  char err[256];
  nn_net *net;
  double t0 = now_s();
  int rc = nn_net_create(&net, &o, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "nn_bench: %s\n", err);
    return rc == NN_ENODEV ? 3 : 1;
  }
  double tc = now_s() - t0;
  size_t n = (size_t)o.batch * o.in_c * o.in_h * o.in_w, np;
  float *x[2];
  for (int k = 0; k < 2; k++) {
    if (!(x[k] = nn_host_alloc(net, n * sizeof(float)))) {
      fprintf(stderr, "nn_bench: out of memory\n");
      return 1;
    }
  }
  int32_t *y = malloc((size_t)o.batch * sizeof(int32_t));
  uint64_t s = 42;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[0][i] = x[1][i] = (float)((s >> 40) & 0xffff) / 65536.0f - 0.5f;
  }
  for (int i = 0; i < o.batch; i++) y[i] = i % o.classes;
  nn_net_params(net, &np);
  nn_sgd_opts sgd = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f};
  double fwd = 0, bwd = 0, opt = 0, tstart = 0;
  float loss = 0;
  for (int i = 0; i < warm + steps; i++) {
    if (i == warm) {
      tstart = now_s();
      fwd = bwd = opt = 0;
    }
    nn_step_times t;
    int correct;
    if (nn_net_prefetch(net, x[(i + 1) & 1], o.batch, err, sizeof err) ||
        nn_net_train_step(net, x[i & 1], y, o.batch, &loss, &correct, &t, err, sizeof(err))) {
      fprintf(stderr, "nn_bench: %s\n", err);
      return 1;
    }
    double a = now_s();
    nn_sgd_step(net, &sgd);
    opt += now_s() - a;
    fwd += t.fwd_s;
    bwd += t.bwd_s;
  }
  double el = now_s() - tstart;
  printf("%s %s b%d %s params %zu create %.2fs: %.1f images/s  step %.1f ms (fwd %.1f bwd %.1f opt %.1f) loss %.4f  %s\n",
         o.model, argv[2], o.batch, dev, np, tc, steps * o.batch / el, 1e3 * el / steps, 1e3 * fwd / steps,
         1e3 * bwd / steps, 1e3 * opt / steps, loss, nn_net_backend(net));
  for (int k = 0; k < 2; k++) nn_host_free(net, x[k]);
  nn_net_destroy(net);
  free(y);
  return 0;
}
