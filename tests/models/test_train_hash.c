/* The ranks' parameter hash (nn_params_hash): a changed bit of any weight, at any place of the
 * arena (each lane, and the words after the last whole block), changes it; so do two weights
 * swapped between lanes and a longer arena of the same words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn.h"

static void test_every_bit(void **st) {
  (void)st;
  /* counts around the 8-float block: none, part of one, whole ones, whole ones and a tail */
  const size_t counts[] = {1, 7, 8, 16, 21, 1003};
  for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
    size_t n = counts[c];
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = (float)i * 0.37f - 5.0f;
    uint64_t h = nn_params_hash(p, n);
    assert_true(nn_params_hash(p, n) == h); /* a function of the bytes alone */
    /* every bit of every float for the small ones; every bit of a spread of floats for 1003 */
    for (size_t i = 0; i < n; i += n > 64 ? 17 : 1)
      for (int b = 0; b < 32; b++) {
        uint32_t w;
        memcpy(&w, &p[i], 4);
        uint32_t flipped = w ^ (1u << b);
        memcpy(&p[i], &flipped, 4);
        if (nn_params_hash(p, n) == h) fail_msg("count %zu: bit %d of float %zu unnoticed", n, b, i);
        memcpy(&p[i], &w, 4);
      }
    if (n >= 2) { /* two floats swapped: in different lanes where there is a whole block */
      size_t j = n >= 8 ? 2 : 1;
      float t = p[0];
      p[0] = p[j];
      p[j] = t;
      assert_true(nn_params_hash(p, n) != h);
    }
    if (n > 1) assert_true(nn_params_hash(p, n - 1) != h);
    free(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_bit)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
