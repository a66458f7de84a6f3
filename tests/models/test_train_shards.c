/* `fabench train --dp sharded|sharded3 --save-format sharded`: per-rank checkpoints end to end,
 * over tcp on loopback.
 * - a run stopped after N steps with a sharded checkpoint and resumed to the end holds the
 *   weights and momentum of the run never stopped, bit for bit (stage 2 at 2 ranks; stage 3 at 3
 *   ranks through two resumes, each saving over the set it resumed from, sharded then gathered;
 *   stage 3 at 2 ranks and stage 2 at 3 resumed once); each save leaves only its own set's files
 *   beside the manifest;
 * - a sharded set is refused, before any step, naming the file and why: at another rank count,
 *   another --dp, a replicated run, a truncated or a flipped shard; --save-format sharded without
 *   --dp sharded is a usage error.
 * (A sharded run's gathered checkpoint against a replicated run's: test_train_dp's test_sharded.) */
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

#include "../bench/cli_run.h"
#include "nn_data.h"
#include "test_util.h"

static char dir[256];

static void run(run_result *r, int timeout_s, const char *fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char *args[64];
  int n = 0;
  for (char *t = strtok(line, " "); t && n < 63; t = strtok(NULL, " ")) args[n++] = t;
  args[n] = NULL;
  cli_run(r, timeout_s, "train", NULL, -1, NULL, args);
}

static void ok(const run_result *r) {
  if (r->status != 0) fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* A failed run whose errors say each of the two strings. */
static void refused(const run_result *r, const char *a, const char *b) {
  if (r->status == 0 || !strstr(r->err, a) || !strstr(r->err, b))
    fail_msg("exit %d, want a failure saying '%s' and '%s':\n%s", r->status, a, b, r->err);
}

/* A gathered checkpoint's parameters and momentum (one array, 2 n_params floats). */
static float *arenas(const char *name, size_t *n) {
  char p[600], err[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  nn_ckpt_info info, got;
  if (nn_ckpt_read_info(p, &info, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(info.sharded, 0);
  float *w = malloc(2 * info.n_params * 4 + 4), *b = malloc(info.n_buffers * 4 + 4);
  if (nn_ckpt_load(p, &got, w, w + info.n_params, b, &info, err, sizeof err)) fail_msg("%s", err);
  free(b);
  *n = 2 * info.n_params;
  return w;
}

static void same_arenas(const char *a, const char *b, const char *what) {
  size_t na, nb;
  float *x = arenas(a, &na), *y = arenas(b, &nb);
  assert_int_equal(na, nb);
  for (size_t i = 0; i < na; i++)
    if (memcmp(&x[i], &y[i], 4))
      fail_msg("%s: %s and %s differ first at float %zu of %zu (%.9g vs %.9g)", what, a, b, i, na, x[i], y[i]);
  free(x);
  free(y);
}

/* Whether the set's file of rank r of n at global step g is there. */
static int shard_there(const char *manifest, int64_t g, int r, int n) {
  char m[600], p[800];
  snprintf(m, sizeof m, "%s/%s", dir, manifest);
  nn_ckpt_shard_path(p, sizeof p, m, g, r, n);
  return access(p, F_OK) == 0;
}

static void copy_file(const char *from, const char *to) {
  char a[800], b[800];
  snprintf(a, sizeof a, "%s/%s", dir, from);
  snprintf(b, sizeof b, "%s/%s", dir, to);
  FILE *f = fopen(a, "rb"), *g = fopen(b, "wb");
  assert_non_null(f);
  assert_non_null(g);
  char buf[65536];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) assert_int_equal(fwrite(buf, 1, k, g), k);
  fclose(f);
  fclose(g);
}

#define SMALL "--model resnet8-w4 --data synthetic:1x8x8:4:96 --batch 8 --threads 1 --eval-every 0"
/* two epochs, small buckets (several ranges a rank), one pair */
#define SH SMALL " --epochs 2 --lr 0.1 --bucket-mb 0.01 --first-bucket-mb 0.004 --transport tcp --no-single"

/* Stage 2, 2 ranks: 6 steps an epoch; stopped at 8 (a set at 6, then at 8), resumed to 12. */
static void test_resume_stage2(void **st) {
  (void)st;
  run_result r;
  run(&r, 120, SH " -n 2 --dp sharded --save %s/full2.ckpt --out %s/full2", dir, dir);
  ok(&r);
  run(&r, 120, SH " -n 2 --dp sharded --steps 8 --save %s/part2.ckpt --save-format sharded --out %s/part2", dir, dir);
  ok(&r);
  for (int k = 0; k < 2; k++) {
    if (!shard_there("part2.ckpt", 8, k, 2)) fail_msg("rank %d's file of step 8 is missing", k);
    if (shard_there("part2.ckpt", 6, k, 2)) fail_msg("rank %d's file of step 6 outlived the set of step 8", k);
  }
  char m[600], err[1024];
  nn_ckpt_info info;
  snprintf(m, sizeof m, "%s/part2.ckpt", dir);
  if (nn_ckpt_read_info(m, &info, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(info.sharded, 2);
  assert_int_equal(info.world, 2);
  assert_int_equal(info.global_step, 8);
  run(&r, 120, SH " -n 2 --dp sharded --resume %s/part2.ckpt --save %s/res2.ckpt --out %s/res2", dir, dir, dir);
  ok(&r);
  same_arenas("full2.ckpt", "res2.ckpt", "--dp sharded -n 2, resumed at step 8");
}

/* The other pairings, stopped mid-epoch and resumed once: stage 3 at 2 ranks (6 steps an epoch,
 * stopped at 3), stage 2 at 3 ranks (4 steps an epoch, stopped at 6, a set at 4 before). */
static void test_resume_others(void **st) {
  (void)st;
  const struct {
    int ranks, stop;
    const char *dp;
  } cases[] = {{2, 3, "sharded3"}, {3, 6, "sharded"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int n = cases[i].ranks;
    const char *dp = cases[i].dp;
    run_result r;
    run(&r, 120, SH " -n %d --dp %s --save %s/full-o%zu.ckpt --out %s/full-o%zu", n, dp, dir, i, dir, i);
    ok(&r);
    run(&r, 120, SH " -n %d --dp %s --steps %d --save %s/part-o%zu.ckpt --save-format sharded --out %s/part-o%zu", n,
        dp, cases[i].stop, dir, i, dir, i);
    ok(&r);
    char p[64], f[64], what[64];
    snprintf(p, sizeof p, "part-o%zu.ckpt", i);
    for (int k = 0; k < n; k++)
      if (!shard_there(p, cases[i].stop, k, n)) fail_msg("-n %d --dp %s: rank %d's file is missing", n, dp, k);
    run(&r, 120, SH " -n %d --dp %s --resume %s/%s --save %s/res-o%zu.ckpt --out %s/res-o%zu", n, dp, dir, p, dir, i,
        dir, i);
    ok(&r);
    snprintf(f, sizeof f, "full-o%zu.ckpt", i);
    snprintf(p, sizeof p, "res-o%zu.ckpt", i);
    snprintf(what, sizeof what, "--dp %s -n %d, resumed at step %d", dp, n, cases[i].stop);
    same_arenas(f, p, what);
  }
}

/* Stage 3, 3 ranks: 4 steps an epoch; stopped at 5, resumed to 7 saving over the same manifest,
 * resumed again to 8 saving the gathered form there. */
static void test_resume_stage3(void **st) {
  (void)st;
  run_result r;
  run(&r, 120, SH " -n 3 --dp sharded3 --save %s/full3.ckpt --out %s/full3", dir, dir);
  ok(&r);
  run(&r, 120, SH " -n 3 --dp sharded3 --steps 5 --save %s/part3.ckpt --save-format sharded --out %s/part3", dir,
      dir);
  ok(&r);
  run(&r, 120, SH " -n 3 --dp sharded3 --steps 7 --resume %s/part3.ckpt --save %s/part3.ckpt --save-format sharded "
      "--out %s/mid3", dir, dir, dir);
  ok(&r);
  for (int k = 0; k < 3; k++) {
    if (!shard_there("part3.ckpt", 7, k, 3)) fail_msg("rank %d's file of step 7 is missing", k);
    if (shard_there("part3.ckpt", 5, k, 3)) fail_msg("rank %d's file of step 5 outlived the set saved over it", k);
    if (shard_there("part3.ckpt", 4, k, 3)) fail_msg("rank %d's file of step 4 outlived the set of step 5", k);
  }
  /* the end gathered over the set's own manifest: the set's files go */
  run(&r, 120, SH " -n 3 --dp sharded3 --resume %s/part3.ckpt --save %s/part3.ckpt --out %s/res3", dir, dir, dir);
  ok(&r);
  for (int k = 0; k < 3; k++)
    if (shard_there("part3.ckpt", 7, k, 3)) fail_msg("rank %d's file of step 7 outlived the gathered save over it", k);
  same_arenas("full3.ckpt", "part3.ckpt", "--dp sharded3 -n 3, resumed at steps 5 and 7");
}

/* Refused before any step, naming the file and why. */
static void test_refused(void **st) {
  (void)st;
  run_result r;
  run(&r, 60, SH " -n 2 --dp sharded --steps 3 --save %s/set.ckpt --save-format sharded --out %s/set", dir, dir);
  ok(&r);
  run(&r, 60, SH " -n 3 --dp sharded --resume %s/set.ckpt --out %s/r1", dir, dir);
  refused(&r, "set.ckpt", "of 2 ranks; this run has 3");
  run(&r, 60, SH " -n 2 --resume %s/set.ckpt --out %s/r2", dir, dir);
  refused(&r, "set.ckpt", "this run is --dp replicated");
  run(&r, 60, SH " -n 2 --dp sharded3 --resume %s/set.ckpt --out %s/r3", dir, dir);
  refused(&r, "set.ckpt", "--dp sharded; this run is --dp sharded3");
  /* a copy of the set with rank 1's file cut short, then with one byte of rank 0's flipped */
  copy_file("set.ckpt", "bad.ckpt");
  copy_file("set.ckpt.step3.rank0of2", "bad.ckpt.step3.rank0of2");
  char p[800];
  snprintf(p, sizeof p, "%s/set.ckpt.step3.rank1of2", dir);
  unsigned char *buf;
  size_t n = 0;
  buf = (unsigned char *)tu_slurp(p, &n);
  assert_non_null(buf);
  assert_true(n > 600);
  snprintf(p, sizeof p, "%s/bad.ckpt.step3.rank1of2", dir);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, n - 100, f), n - 100);
  fclose(f);
  run(&r, 60, SH " -n 2 --dp sharded --resume %s/bad.ckpt --out %s/r4", dir, dir);
  refused(&r, "bad.ckpt.step3.rank1of2", "truncated");
  snprintf(p, sizeof p, "%s/r4/train_steps.csv", dir);
  char *rows = tu_slurp(p, NULL);
  if (rows && tu_count_lines(rows) > 1) fail_msg("steps ran before the refusal:\n%s", rows);
  free(rows);
  snprintf(p, sizeof p, "%s/bad.ckpt.step3.rank1of2", dir);
  f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, n, f), n);
  fclose(f);
  free(buf);
  snprintf(p, sizeof p, "%s/bad.ckpt.step3.rank0of2", dir);
  buf = (unsigned char *)tu_slurp(p, &n);
  assert_non_null(buf);
  buf[n / 2] ^= 0x01;
  f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, n, f), n);
  fclose(f);
  free(buf);
  run(&r, 60, SH " -n 2 --dp sharded --resume %s/bad.ckpt --out %s/r5", dir, dir);
  refused(&r, "bad.ckpt.step3.rank0of2", "corrupted");
  /* the flag alone */
  run(&r, 30, SH " -n 2 --save %s/x.ckpt --save-format sharded --out %s/r6", dir, dir);
  if (r.status != 2 || !strstr(r.err, "--save-format sharded")) fail_msg("exit %d:\n%s", r.status, r.err);
}

static int setup(void **st) {
  (void)st;
  return tu_tmpdir(dir, sizeof dir, "test-shards") ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  return tu_rmtree(dir);
}

int main(void) {
  if (!getenv("FABENCH_BIN")) {
    fprintf(stderr, "FABENCH_BIN is not set (ctest sets it); skipping\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resume_stage2),
      cmocka_unit_test(test_resume_stage3),
      cmocka_unit_test(test_resume_others),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
