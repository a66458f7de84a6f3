/* oneDNN's reference code, which takes the shapes its JIT kernels for this CPU's ISA refuse and
 * runs them hundreds of times slower. The test caps oneDNN's ISA (ONEDNN_MAX_CPU_ISA, set before
 * its first call) to the argument:
 *   native (no cap: AVX-512 where the CPU has it) and avx2 (an AVX2-only EPYC or Core): every
 *         model fabench ships (the names `fabench train --help` gives), the CIFAR ResNet-20 at base
 *         widths 4, 8, 12 and 16, and the narrow ones the tests use, on 1x28x28 and 3x32x32, at a
 *         full batch on 1 and 2 threads and at a small one through a training step, build no
 *         primitive on it. Narrow channel counts are where oneDNN's own layout choice fell back
 *         (nn_dnnl.c, conv_fwd_layout), and the weight gradients its AVX2 JIT refuses (256 channels
 *         at 2x2, a one-channel stem) run by GEMM. Skipped, with one line, on a CPU without AVX2.
 *   sse41 (the control): some primitives do fall back there, and nn_net_slow_primitives counts
 *         them and names the first (its layer, shape and implementation), so the check above can
 *         fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn.h"

static const char *isa; /* the argument */

static const char *const models[] = {
    "resnet18",     "resnet34",    "resnet50",    "resnet20",   "resnet32", "resnet56",    /* shipped */
    "resnet20-w4",  "resnet20-w8", "resnet20-w12", "resnet20-w16",                          /* narrow */
    "resnet8-w2",   "resnet8-w4",  "resnet8-w8",  "resnet18-w4", "resnet50-w2",             /* the tests' */
};
static const int shapes[][3] = {{1, 28, 28}, {3, 32, 32}};

/* Primitives on the reference code once a net of `batch` is built on `threads` threads (and, with
   step, has trained a step: a net builds the plans of other batch sizes on first use). */
static int slow_prims(const char *model, const int *shape, int batch, int threads, int step, char *first,
                      size_t cap) {
  nn_net_opts o = {.model = model, .in_c = shape[0], .in_h = shape[1], .in_w = shape[2], .classes = 10,
                   .batch = batch, .threads = threads, .seed = 1};
  nn_net *net = NULL;
  char err[512];
  if (nn_net_create(&net, &o, err, sizeof err)) fail_msg("%s", err);
  if (step) {
    int n = batch - 1 > 0 ? batch - 1 : 1;
    size_t count = (size_t)n * shape[0] * shape[1] * shape[2];
    float *x = calloc(count, sizeof *x);
    int32_t *labels = calloc((size_t)n, sizeof *labels);
    assert_non_null(x);
    assert_non_null(labels);
    for (size_t i = 0; i < count; i++) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < n; i++) labels[i] = (i * 7) % 10;
    float loss;
    int correct;
    if (nn_net_train_step(net, x, labels, n, &loss, &correct, NULL, err, sizeof err)) fail_msg("%s", err);
    free(x);
    free(labels);
  }
  const char *f;
  int k = nn_net_slow_primitives(net, &f);
  snprintf(first, cap, "%s", f);
  nn_net_destroy(net);
  return k;
}

static void test_reference_code(void **state) {
  (void)state;
  char first[128];
  if (!strcmp(isa, "sse41")) {
    int k = slow_prims("resnet18-w4", shapes[1], 2, 1, 1, first, sizeof first);
    if (k == 0) fail_msg("under SSE4.1 no primitive of resnet18-w4 was counted on the reference code");
    assert_non_null(strstr(first, "ref")); /* the implementation and the layer, with its shape */
    assert_non_null(strstr(first, "layer "));
    assert_non_null(strstr(first, " on "));
    return;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) {
    print_message("[  SKIPPED ] this CPU has no AVX2: oneDNN's JIT kernels cover less, no check\n");
    skip();
  }
  int bad = 0;
  for (size_t m = 0; m < sizeof models / sizeof *models; m++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
      /* the full batch on 1 and 2 threads (some kernels are chosen by the thread count), and a
         partial batch of a small net after a step */
      static const int runs[][3] = {{32, 1, 0}, {32, 2, 0}, {3, 1, 1}};
      for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        int k = slow_prims(models[m], shapes[s], runs[r][0], runs[r][1], runs[r][2], first, sizeof first);
        if (k) {
          print_error("%s on %dx%dx%d, batch %d, %d thread(s), under %s: %d primitive(s) on oneDNN's "
                      "reference code (the first: %s)\n",
                      models[m], shapes[s][0], shapes[s][1], shapes[s][2], runs[r][0], runs[r][1], isa, k, first);
          bad++;
        }
      }
    }
  if (bad) fail_msg("%d net(s) with primitives on the reference code", bad);
}

int main(int argc, char **argv) {
  isa = argc > 1 ? argv[1] : "native";
  if (strcmp(isa, "native") && strcmp(isa, "avx2") && strcmp(isa, "sse41")) {
    fprintf(stderr, "usage: test_nn_isa native|avx2|sse41\n");
    return 2;
  }
  if (strcmp(isa, "native")) setenv("ONEDNN_MAX_CPU_ISA", strcmp(isa, "sse41") ? "AVX2" : "SSE41", 1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reference_code)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
