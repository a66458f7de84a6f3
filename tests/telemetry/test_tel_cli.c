/* --telemetry-hz through the fabench binary: a short p2p run (and a train run, where oneDNN is
 * built) writes telemetry.csv into its run directory and names its bound; 0 writes none; a bad
 * rate is a usage error naming it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"
#include "test_util.h"

static run_result res;

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) n++;
  return n;
}

/* The CSV's rows: six fields each, some labelled `label`, cpu and loopback rows among them, and
 * more readings than the marks' (marks of them): the thread's. */
static void check_csv(const char *dir, const char *label, int marks) {
  char path[600];
  snprintf(path, sizeof path, "%s/telemetry.csv", dir);
  char *t = tu_slurp(path, NULL);
  assert_non_null(t);
  assert_true(!strncmp(t, "time_s,host,label,source,counter,value\n", 39));
  char want[128];
  snprintf(want, sizeof want, ",%s,cpu,user_ms,", label);
  assert_true(count(t, want) >= 2); /* the marks' readings at least */
  assert_true(count(t, ",cpu,idle_ms,") > marks);
  assert_int_equal(count(t, ",net:lo,tx_bytes,"), count(t, ",cpu,idle_ms,"));
  int lines = 0;
  for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n"), lines++) assert_int_equal(count(line, ","), 5);
  assert_true(lines > 20);
  free(t);
}

static void no_csv(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/telemetry.csv", dir);
  assert_int_not_equal(access(path, F_OK), 0);
  assert_int_equal(access(dir, F_OK), 0); /* the run itself is there */
}

static void test_p2p_telemetry(void **state) {
  (void)state;
  char top[128], dir[256];
  assert_non_null(tu_tmpdir(top, sizeof top, "telcli"));
  snprintf(dir, sizeof dir, "%s/on", top);
  cli_run(&res, 120, "p2p", NULL, -1, NULL,
          (char *[]){"-n", "2", "--max-bytes", "64K", "--time-per-size", "0.05", "--telemetry-hz", "20", "--out", dir,
                     NULL});
  if (res.status) fprintf(stderr, "%s\n%s\n", res.out, res.err);
  assert_int_equal(res.status, 0);
  check_csv(dir, "tcp", 2);
  assert_non_null(strstr(res.out, "# telemetry, tcp: "));
  snprintf(dir, sizeof dir, "%s/off", top);
  cli_run(&res, 120, "p2p", NULL, -1, NULL,
          (char *[]){"-n", "2", "--max-bytes", "1K", "--time-per-size", "0.02", "--telemetry-hz", "0", "--out", dir,
                     NULL});
  assert_int_equal(res.status, 0);
  no_csv(dir);
  assert_null(strstr(res.out, "# telemetry"));
  assert_int_equal(tu_rmtree(top), 0);
}

/* An emulated cluster of two hosts whose second is slowed (as root, with iproute2): each host
 * writes its own file, and the bound named is the slowed host's link. */
static void test_emulated_slow_host_named(void **state) {
  (void)state;
  if (geteuid() != 0 || (access("/usr/sbin/ip", X_OK) && access("/sbin/ip", X_OK) && access("/usr/bin/ip", X_OK))) {
    fprintf(stderr, "SKIP: emulated hosts need root and iproute2\n");
    skip();
  }
  char top[128], dir[256], path[400];
  assert_non_null(tu_tmpdir(top, sizeof top, "telcli"));
  snprintf(dir, sizeof dir, "%s/emu", top);
  cli_run(&res, 120, "p2p", NULL, -1, NULL,
          (char *[]){"-n", "2", "--emulate", "2x1:1gbit", "--emulate-slow", "1=100mbit", "--tests", "bw", "--min-bytes",
                     "1M", "--max-bytes", "1M", "--window", "4", "--time-per-size", "0.3", "--telemetry-hz", "10", "--out",
                     dir, NULL});
  if (res.status) fprintf(stderr, "%s\n%s\n", res.out, res.err);
  assert_int_equal(res.status, 0);
  if (!strstr(res.out, "# telemetry, tcp: link-bound on node1 ")) fail_msg("%s", res.out);
  check_csv(dir, "tcp", 2);
  snprintf(path, sizeof path, "%s/telemetry-node1.csv", dir);
  char *t = tu_slurp(path, NULL);
  assert_non_null(t);
  assert_true(count(t, ",node1,tcp,cpu,user_ms,") >= 2);
  assert_int_equal(count(t, ",node0,"), 0);
  free(t);
  assert_int_equal(tu_rmtree(top), 0);
}

static void test_bad_rate_refused(void **state) {
  (void)state;
  static const char *const bad[] = {"-1", "abc", "101", "nan", "", "1e9", "10Hz"};
  static const char *const cmds[] = {"p2p", "train"};
  for (size_t c = 0; c < 2; c++)
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
      cli_run(&res, 30, cmds[c], NULL, -1, NULL, (char *[]){"--telemetry-hz", (char *)bad[i], NULL});
      assert_int_equal(res.status, 2);
      char want[64];
      snprintf(want, sizeof want, "--telemetry-hz: '%s'", bad[i]);
      if (!strstr(res.err, want)) fail_msg("%s --telemetry-hz '%s': %s", cmds[c], bad[i], res.err);
    }
}

#if FABENCH_HAVE_DNNL
/* The bound column of each row of train.csv: one of the three words with telemetry, empty without. */
static void check_bound(const char *dir, int on) {
  char path[600];
  snprintf(path, sizeof path, "%s/train.csv", dir);
  char *t = tu_slurp(path, NULL);
  assert_non_null(t);
  char *save = NULL, *line = strtok_r(t, "\n", &save);
  int col = -1, ncol = 0;
  for (char *p = line, *f; (f = strsep(&p, ",")); ncol++)
    if (!strcmp(f, "bound")) col = ncol;
  assert_true(col >= 0);
  int rows = 0;
  while ((line = strtok_r(NULL, "\n", &save))) {
    char *f = NULL;
    int k = 0;
    for (char *p = line; k <= col && (f = strsep(&p, ",")); k++) {
    }
    assert_non_null(f);
    if (on) assert_true(!strcmp(f, "link-bound") || !strcmp(f, "cpu-bound") || !strcmp(f, "neither"));
    else assert_string_equal(f, "");
    rows++;
  }
  assert_true(rows >= 2);
  free(t);
}

static void test_train_telemetry(void **state) {
  (void)state;
  char top[128], dir[256];
  assert_non_null(tu_tmpdir(top, sizeof top, "telcli"));
  for (int on = 0; on < 2; on++) {
    snprintf(dir, sizeof dir, "%s/%s", top, on ? "on" : "off");
    cli_run(&res, 240, "train", NULL, -1, NULL,
            (char *[]){"-n", "2", "--data", "synthetic:1x8x8:4:256", "--model", "resnet20-w4", "--batch", "16",
                       "--steps", "6", "--warmup-steps", "2", "--eval-every", "0", "--transport", "none,tcp",
                       "--telemetry-hz", on ? "20" : "0", "--out", dir, NULL});
    if (res.status) fprintf(stderr, "%s\n%s\n", res.out, res.err);
    assert_int_equal(res.status, 0);
    check_bound(dir, on);
    if (on) check_csv(dir, "dp tcp/ring", 6); /* single, none, tcp */
    else no_csv(dir);
    /* the report's training table names the bound (or - without telemetry) */
    char rep[300], md[400];
    snprintf(rep, sizeof rep, "%s/rep", dir);
    cli_run(&res, 120, "report", NULL, -1, NULL, (char *[]){dir, "--out", rep, NULL});
    assert_int_equal(res.status, 0);
    snprintf(md, sizeof md, "%s/report.md", rep);
    char *text = tu_slurp(md, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "| fabric eff. | bound |"));
    int named = strstr(text, "| cpu-bound") || strstr(text, "| link-bound") || strstr(text, "| neither");
    if (named != on) fail_msg("telemetry %s, the report:\n%s", on ? "on" : "off", text);
    free(text);
  }
  assert_int_equal(tu_rmtree(top), 0);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_p2p_telemetry), cmocka_unit_test(test_emulated_slow_host_named),
      cmocka_unit_test(test_bad_rate_refused),
#if FABENCH_HAVE_DNNL
      cmocka_unit_test(test_train_telemetry),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
