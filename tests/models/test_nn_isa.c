/* oneDNN's reference code, on CPUs whose ISA its JIT kernels do not cover for a shape. The test
 * caps oneDNN's ISA (ONEDNN_MAX_CPU_ISA, set before its first call) to the argument:
 *   avx2  (an AVX2-only EPYC, whatever this CPU has): ResNet-18 on 3x32x32 and ResNet-20 on
 *         1x28x28 train a step with no primitive on it. The weight gradients that oneDNN's AVX2
 *         JIT refuses (256 channels at 2x2, a one-channel stem) run by GEMM (nn_dnnl.c), not
 *         on its reference code, which is hundreds of times slower.
 *   sse41 (the control): some primitives do fall back there, and nn_net_slow_primitives counts
 *         them and names the first, so the check above can fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn.h"

static int want_slow; /* the sse41 control */

static int slow_after_a_step(const char *model, int c, int hw, const char **first) {
  nn_net_opts o = {.model = model, .in_c = c, .in_h = hw, .in_w = hw, .classes = 10, .batch = 2, .threads = 1,
                   .seed = 1};
  nn_net *net = NULL;
  char err[512];
  if (nn_net_create(&net, &o, err, sizeof err)) fail_msg("%s", err);
  size_t n = (size_t)2 * c * hw * hw;
  float *x = calloc(n, sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
  int32_t labels[2] = {3, 7};
  float loss;
  int correct;
  if (nn_net_train_step(net, x, labels, 2, &loss, &correct, NULL, err, sizeof err)) fail_msg("%s", err);
  static char name[128];
  const char *f;
  int k = nn_net_slow_primitives(net, &f);
  snprintf(name, sizeof name, "%s", f);
  *first = name;
  nn_net_destroy(net);
  free(x);
  return k;
}

static void test_reference_code(void **state) {
  (void)state;
  const char *first;
  if (want_slow) {
    int k = slow_after_a_step("resnet18-w4", 3, 32, &first);
    if (k == 0) fail_msg("under SSE4.1 no primitive of resnet18-w4 was counted on the reference code");
    assert_non_null(strstr(first, "ref"));
    return;
  }
  int k = slow_after_a_step("resnet18", 3, 32, &first);
  if (k) fail_msg("resnet18 on 3x32x32 under AVX2: %d primitive(s) on oneDNN's reference code (the first: %s)", k, first);
  k = slow_after_a_step("resnet20", 1, 28, &first);
  if (k) fail_msg("resnet20 on 1x28x28 under AVX2: %d primitive(s) on oneDNN's reference code (the first: %s)", k, first);
}

int main(int argc, char **argv) {
  const char *isa = argc > 1 ? argv[1] : "avx2";
  if (strcmp(isa, "avx2") && strcmp(isa, "sse41")) {
    fprintf(stderr, "usage: test_nn_isa avx2|sse41\n");
    return 2;
  }
  want_slow = !strcmp(isa, "sse41");
  setenv("ONEDNN_MAX_CPU_ISA", want_slow ? "SSE41" : "AVX2", 1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reference_code)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
