/* Learning-rate schedules against their textbook definitions, and the linear scaling rule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nn_data.h"

static void test_warmup_then_cosine(void **state) {
  (void)state;
  nn_lr_sched s = {.kind = NN_LR_COSINE, .base = 0.4, .warmup_steps = 7, .total_steps = 53};
  for (int64_t t = 0; t < 70; t++) {
    double want;
    if (t < 7) want = 0.4 * (t + 1) / 7.0;
    else if (t >= 53) want = 0.0;
    else want = 0.2 * (1 + cos(3.14159265358979323846 * (t - 7) / 46.0));
    assert_float_equal(nn_lr_at(&s, t), want, 1e-12);
  }
  assert_float_equal(nn_lr_at(&s, 6), 0.4, 1e-12);  /* warm-up ends at the base rate */
  assert_float_equal(nn_lr_at(&s, 7), 0.4, 1e-12);  /* and the cosine starts there */
  assert_float_equal(nn_lr_at(&s, 30), 0.2, 1e-12); /* half-way: half the rate */
  for (int64_t t = 8; t < 60; t++) assert_true(nn_lr_at(&s, t) <= nn_lr_at(&s, t - 1));
  nn_lr_sched nowarm = {.kind = NN_LR_COSINE, .base = 1.0, .total_steps = 10};
  assert_float_equal(nn_lr_at(&nowarm, 0), 1.0, 1e-12);
  assert_float_equal(nn_lr_at(&nowarm, 5), 0.5, 1e-12);
}

static void test_step_and_const(void **state) {
  (void)state;
  nn_lr_sched s = {.kind = NN_LR_STEP, .base = 0.1, .warmup_steps = 3, .gamma = 0.1,
                   .milestones = {10, 25}, .nmilestones = 2};
  for (int64_t t = 0; t < 40; t++) {
    double want = t < 3 ? 0.1 * (t + 1) / 3.0 : t < 10 ? 0.1 : t < 25 ? 0.01 : 0.001;
    assert_float_equal(nn_lr_at(&s, t), want, 1e-15);
  }
  nn_lr_sched c = {.kind = NN_LR_CONST, .base = 0.05};
  assert_float_equal(nn_lr_at(&c, 0), 0.05, 0);
  assert_float_equal(nn_lr_at(&c, 123456), 0.05, 0);
}

static void test_scaling_rule(void **state) {
  (void)state;
  assert_float_equal(nn_lr_scaled(0.1, 1024, 256), 0.4, 1e-15);
  assert_float_equal(nn_lr_scaled(0.1, 64, 256), 0.025, 1e-15);
  assert_float_equal(nn_lr_scaled(0.1, 64, 0), 0.1, 0); /* no reference batch: unchanged */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_warmup_then_cosine),
      cmocka_unit_test(test_step_and_const),
      cmocka_unit_test(test_scaling_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
