/* Not a test: images/s of nn_net_train_step (+ SGD) on synthetic data, for tuning the engine.
 * usage: nn_bench MODEL CxHxW CLASSES BATCH THREADS [STEPS] [WARMUP] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nn.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: nn_bench MODEL CxHxW CLASSES BATCH THREADS [STEPS] [WARMUP]\n");
    return 2;
  }
  nn_net_opts o = {.model = argv[1], .classes = atoi(argv[3]), .batch = atoi(argv[4]), .threads = atoi(argv[5]), .seed = 1};
  if (sscanf(argv[2], "%dx%dx%d", &o.in_c, &o.in_h, &o.in_w) != 3) return 2;
  int steps = argc > 6 ? atoi(argv[6]) : 20, warm = argc > 7 ? atoi(argv[7]) : 3;
  char err[256];
  nn_net *net;
  double t0 = now_s();
  if (nn_net_create(&net, &o, err, sizeof(err))) {
    fprintf(stderr, "nn_bench: %s\n", err);
    return 1;
  }
  double tc = now_s() - t0;
  size_t n = (size_t)o.batch * o.in_c * o.in_h * o.in_w, np;
  float *x = malloc(n * sizeof(float));
  int32_t *y = malloc((size_t)o.batch * sizeof(int32_t));
  uint64_t s = 42;
  for (size_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((s >> 40) & 0xffff) / 65536.0f - 0.5f;
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
    if (nn_net_train_step(net, x, y, o.batch, &loss, &correct, &t, err, sizeof(err))) {
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
  printf("%s %s b%d t%d params %zu create %.2fs: %.1f images/s  step %.1f ms (fwd %.1f bwd %.1f opt %.1f) loss %.4f  %s\n",
         o.model, argv[2], o.batch, o.threads, np, tc, steps * o.batch / el, 1e3 * el / steps, 1e3 * fwd / steps,
         1e3 * bwd / steps, 1e3 * opt / steps, loss, nn_backend_version());
  nn_net_destroy(net);
  free(x);
  free(y);
  return 0;
}
