/* The helpers the commands share (bench/common.c): the number parsers take what a user types
 * and nothing that strtoull/strtol/strtod would also take (space, sign, wrap, nan, hex), and
 * the size sweep ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "bench.h"

static void test_parse_size(void **st) {
  (void)st;
  static const struct {
    const char *s;
    uint64_t v;
  } good[] = {{"0", 0}, {"8", 8}, {"64K", 65536}, {"1M", 1u << 20}, {"2G", 2ull << 30},
              {"4KiB", 4096}, {"4KB", 4096}, {"9007199254740992", 1ull << 53}, {"8388608G", 1ull << 53}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    uint64_t v = 1;
    if (bench_parse_size(good[i].s, &v) || v != good[i].v) fail_msg("'%s' -> %llu", good[i].s, (unsigned long long)v);
  }
  /* " -5" and 2^64 - 1 once passed: the sweep's max + 8 wrapped and it never ended */
  static const char *const bad[] = {"", " 8", "\t8", "+8", "-8", " -5", "-0", "18446744073709551615",
                                    "99999999999999999999", "9007199254740993", "8388609G", "17179869184G",
                                    "1.5M", "0x10", "8 ", "8Q", "K"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint64_t v = 7;
    if (!bench_parse_size(bad[i], &v)) fail_msg("'%s' accepted as %llu", bad[i], (unsigned long long)v);
    assert_int_equal(v, 7); /* untouched */
  }
  uint64_t v;
  assert_int_equal(bench_parse_size(NULL, &v), -1);
}

static void test_parse_int(void **st) {
  (void)st;
  long v = 0;
  assert_int_equal(bench_parse_int("42", 0, 100, &v), 0);
  assert_int_equal(v, 42);
  assert_int_equal(bench_parse_int("-3", -10, 10, &v), 0);
  assert_int_equal(v, -3);
  static const char *const bad[] = {"", " 5", "5 ", "+5", " -1", "--1", "-", "0x5", "5.0", "1e3",
                                    "101", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    v = 7;
    if (!bench_parse_int(bad[i], -10, 100, &v)) fail_msg("'%s' accepted as %ld", bad[i], v);
    assert_int_equal(v, 7);
  }
}

static void test_parse_double(void **st) {
  (void)st;
  static const struct {
    const char *s;
    double v;
  } good[] = {{"0.5", 0.5}, {".5", 0.5}, {"2", 2}, {"1e-3", 1e-3}, {"1.5E+2", 150}, {"-2.5", -2.5}};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    double v = 0;
    if (bench_parse_double(good[i].s, -10, 1000, &v) || v != good[i].v) fail_msg("'%s' -> %g", good[i].s, v);
  }
  static const char *const bad[] = {"", " 1", "1 ", "+1", "nan", "-nan", "inf", "-inf", "infinity",
                                    "0x1p3", "1e", ".", "-", "1e999", "2000", "-11"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    double v = 7;
    if (!bench_parse_double(bad[i], -10, 1000, &v)) fail_msg("'%s' accepted as %g", bad[i], v);
    assert_true(v == 7);
  }
}

static void test_sizes(void **st) {
  (void)st;
  uint64_t *v = NULL;
  /* no whole 8-byte element from 1 to 2 bytes: none (allreduce turns that into a usage error) */
  assert_int_equal(bench_sizes(1, 2, 2, 8, &v), 0);
  free(v);
  /* at the largest size the sweep still ends, its last size the largest */
  int n = bench_sizes(1ull << 52, BENCH_SIZE_MAX, 1.01, 8, &v);
  assert_true(n > 1);
  assert_true(v[n - 1] <= BENCH_SIZE_MAX);
  for (int i = 1; i < n; i++) assert_true(v[i] > v[i - 1]);
  free(v);
  n = bench_sizes(BENCH_SIZE_MAX, BENCH_SIZE_MAX, 1024, 4, &v);
  assert_int_equal(n, 1);
  assert_true(v[0] == BENCH_SIZE_MAX);
  free(v);
  v = NULL;
  assert_int_equal(bench_sizes(8, UINT64_MAX, 2, 4, &v), -1);
  assert_null(v);
}

/* A comma list: its items, none for "", and an empty item or one too many refused */
static void test_split_list(void **st) {
  (void)st;
  char *items[3], *store = NULL;
  assert_int_equal(bench_split_list("8,64,512", items, 3, &store), 3);
  assert_string_equal(items[0], "8");
  assert_string_equal(items[2], "512");
  free(store);
  assert_int_equal(bench_split_list("", items, 3, &store), 0);
  free(store);
  static const char *const bad[] = {"8,,64", ",8", "8,", ",", "1,2,3,4"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (bench_split_list(bad[i], items, 3, &store) != -1) fail_msg("'%s' accepted", bad[i]);
    free(store);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_size),
      cmocka_unit_test(test_parse_int),
      cmocka_unit_test(test_parse_double),
      cmocka_unit_test(test_sizes),
      cmocka_unit_test(test_split_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
