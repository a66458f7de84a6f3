/* `fabench suite`: a small suite runs every step into its directory and prints the per-fabric
 * summary; --resume runs only the steps that are not done; bad flags give the usage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cli_run.h"
#include "test_util.h"

static char dir[256];

#define SMALL "-n 2 --transport tcp --algo ring --emulate none --model resnet8-w2 --data synthetic:1x8x8:4:64 --batch 8 --steps 4 --timeout 20"

static void run(run_result *r, const char *fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char *args[64];
  int n = 0;
  for (char *t = strtok(line, " "); t && n < 63; t = strtok(NULL, " ")) args[n++] = t;
  args[n] = NULL;
  cli_run(r, 600, "suite", NULL, -1, NULL, args);
}

static int exists(const char *rel) {
  char p[600];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  return stat(p, &st) == 0;
}

static void test_small_suite_and_resume(void **st) {
  (void)st;
  run_result r;
  run(&r, SMALL " --out %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s\n%s", r.status, r.out, r.err);
  const char *must[] = {"s/suite.json", "s/topo/topo.json", "s/p2p-loopback/p2p.csv",
                        "s/allreduce-loopback/allreduce.csv", "s/train-loopback/train.csv",
                        "s/train-loopback.log"};
  for (size_t i = 0; i < sizeof must / sizeof *must; i++)
    if (!exists(must[i])) fail_msg("the suite did not write %s", must[i]);
  /* the sentence says how fast against no communication, or that noise hid the difference */
  if (!strstr(r.out, "loopback tcp/ring") || (!strstr(r.out, "of its no-communication speed") &&
                                               !strstr(r.out, "as fast as with no communication")))
    fail_msg("no per-fabric summary:\n%s", r.out);
  /* a resumed suite measures nothing again: every step says so */
  run(&r, "--resume %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s", r.status, r.err);
  if (!strstr(r.err, "train-loopback: done before")) fail_msg("resume re-ran a step:\n%s", r.err);
  /* one step undone: only it runs again */
  char p[600];
  snprintf(p, sizeof p, "%s/s/suite.json", dir);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *k = strstr(buf, "\"train-loopback\":\t\"ok\"");
  assert_non_null(k);
  memcpy(strstr(k, "\"ok\""), "\"no\"", 4);
  f = fopen(p, "w");
  fputs(buf, f);
  fclose(f);
  run(&r, "--resume %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s", r.status, r.err);
  if (!strstr(r.err, "allreduce-loopback: done before") || strstr(r.err, "train-loopback: done before"))
    fail_msg("resume did not run just the undone step:\n%s", r.err);
}

static void test_bad_flags(void **st) {
  (void)st;
  run_result r;
  const char *cases[][2] = {{"-n 1", "-n"}, {"--emulate fast", "--emulate"},
                            {"--model vgg", "--model"}, {"--frob", "unknown option"},
                            {"--resume /nonexistent-suite", "no suite.json"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run(&r, "%s", cases[i][0]);
    int want = strstr(cases[i][0], "--resume") ? 1 : 2;
    if (r.status != want || !strstr(r.err, cases[i][1]))
      fail_msg("%s: exit %d, stderr:\n%s", cases[i][0], r.status, r.err);
  }
  /* a suite.json cut short is named, with where it stops being JSON */
  char sub[300];
  snprintf(sub, sizeof sub, "%s/cut", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(tu_write(sub, "suite.json", "{\"steps\": {\"topo\": \"ok\""), 0);
  run(&r, "--resume %s", sub);
  if (r.status != 1 || !strstr(r.err, "suite.json:1:") || !strstr(r.err, "not JSON"))
    fail_msg("a cut suite.json: exit %d, stderr:\n%s", r.status, r.err);
}

static int setup(void **st) {
  (void)st;
  snprintf(dir, sizeof dir, "/tmp/fabench-test-suite-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
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
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bad_flags),
                                     cmocka_unit_test(test_small_suite_and_resume)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
