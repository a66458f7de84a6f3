/* `fabench reducescatter`, `allgather`, `bcast` and `alltoall` as a user meets them: every row
 * verified element by element on every rank at several rank counts and awkward sizes, colls.csv
 * naming the collective, the flags only some collectives take, and a rank killed mid-run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"
#include "test_util.h"

/* Runs one command; every data row of colls.csv names it, has 0 wrong elements, and there are
 * at least min_rows of them. */
static void run_ok(const char *cmd, const char *ranks, const char *transport, char *const extra[], int min_rows) {
  char dir[] = "/tmp/fbtestcollsXXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[300], csv[400];
  snprintf(out, sizeof out, "%s/r", dir);
  snprintf(csv, sizeof csv, "%s/colls.csv", out);
  char *args[48] = {(char *)cmd, "-n", (char *)ranks, "--transport", (char *)transport, "--min-bytes", "1",
                    "--max-bytes", "70000", "--step-factor", "7", "--dtype", "f32,i64", "--iters", "3",
                    "--warmup", "1", "--rounds", "2", "--peer", "none", "--out", out};
  int n = 23;
  for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  run_result *r = calloc(1, sizeof *r);
  /* Open MPI unloads its plugins before exit, so LeakSanitizer can neither attribute nor
   * suppress their allocations: leak checking is off for MPI ranks (only matters under ASan) */
  cli_run(r, 120, NULL, strstr(transport, "mpi") ? "ASAN_OPTIONS=detect_leaks=0" : NULL, -1, NULL, args);
  if (r->status != 0 || !strstr(r->out, "all results verified"))
    fail_msg("%s -n %s %s: status %d\nstdout:\n%s\nstderr:\n%s", cmd, ranks, transport, r->status, r->out, r->err);
  char *c = tu_slurp(csv, NULL);
  assert_non_null(c);
  assert_true(strncmp(c, "run_id,", 7) == 0);
  /* the columns: allreduce.csv's (errors the 23rd), then coll, root, imbalance */
  assert_non_null(strstr(c, ",coll,root,imbalance\n"));
  int rows = 0;
  for (char *line = strchr(c, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    const char *end = strchr(line + 1, '\n'), *q = end ? end : line + strlen(line);
    for (int commas = 0; q > line + 1 && commas < 3; q--) /* back to the comma before coll */
      if (q[-1] == ',' && ++commas == 3) break;
    char name[32];
    int k = 0;
    while (*q && *q != ',' && k < 31) name[k++] = *q++;
    name[k] = '\0';
    assert_string_equal(name, cmd);
    const char *f = line + 1; /* the 23rd field: errors */
    for (int i = 0; i < 22 && f; i++) f = strchr(f + 1, ',');
    assert_non_null(f);
    if (atoi(f + 1) != 0) fail_msg("%s: a row with wrong elements: %.200s", cmd, line + 1);
    rows++;
  }
  if (rows < min_rows) fail_msg("%s -n %s: %d rows, wanted at least %d\n%s", cmd, ranks, rows, min_rows, r->out);
  free(c);
  /* coll_ranks.csv: a row per rank of every row, each rank's wait behind the fastest (0 for it) */
  snprintf(csv, sizeof csv, "%s/coll_ranks.csv", out);
  c = tu_slurp(csv, NULL);
  assert_non_null(c);
  assert_int_equal(tu_count_lines(c), 1 + rows * atoi(ranks));
  int zeros = 0;
  for (char *line = strchr(c, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    const char *w = strrchr(line + 1, ','); /* the last field: wait_us, up to this row's end */
    char *end = strchr(line + 1, '\n');
    for (const char *q = line + 1; end && q < end; q++)
      if (*q == ',') w = q;
    assert_true(atof(w + 1) >= 0);
    zeros += atof(w + 1) == 0;
  }
  assert_true(zeros >= rows); /* the fastest rank of each row waits 0 */
  free(c);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

static void test_reducescatter(void **st) {
  (void)st;
  run_ok("reducescatter", "3", "tcp", (char *[]){"--op", "sum,max", NULL}, 8);
  run_ok("reducescatter", "4", "tcp", NULL, 6);
  run_ok("reducescatter", "5", "tcp", (char *[]){"--algo", "ring,auto", NULL}, 6);
}

static void test_allgather(void **st) {
  (void)st;
  run_ok("allgather", "3", "tcp", NULL, 9);
  run_ok("allgather", "4", "tcp", NULL, 9);
  run_ok("allgather", "5", "tcp", NULL, 9);
}

static void test_bcast(void **st) {
  (void)st;
  run_ok("bcast", "3", "tcp", (char *[]){"--root", "2", NULL}, 9);
  run_ok("bcast", "5", "tcp", (char *[]){"--root", "3", "--chunk", "4K", NULL}, 9);
}

static void test_alltoall(void **st) {
  (void)st;
  run_ok("alltoall", "3", "tcp", NULL, 3);
  run_ok("alltoall", "5", "tcp", (char *[]){"--imbalance", "1", NULL}, 3);
}

/* MPI's own beside fabench's, the peer the benchmarks compare with. */
static void test_mpi_native(void **st) {
  (void)st;
#if FABENCH_HAVE_MPI
  run_ok("reducescatter", "3", "tcp,mpi", (char *[]){"--algo", "ring,native", NULL}, 6);
  run_ok("alltoall", "3", "mpi", (char *[]){"--imbalance", "0.5", NULL}, 3);
#else
  skip();
#endif
}

/* NCCL's own on the GPU (ncclReduceScatter, ncclAllGather, ncclBroadcast, grouped send/recv),
 * every element checked after copying back; exit 3 (no usable GPU or no NCCL here) skips. */
static void test_nccl_native(void **st) {
  (void)st;
  const char *cmds[] = {"reducescatter", "allgather", "bcast", "alltoall"};
  for (int i = 0; i < 4; i++) {
    run_result *r = calloc(1, sizeof *r);
    char dir[] = "/tmp/fbtestcollgpuXXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[300];
    snprintf(out, sizeof out, "%s/r", dir);
    cli_run(r, 120, NULL, NULL, -1, NULL,
            (char *[]){(char *)cmds[i], "-n", "2", "--transport", "nccl", "--algo", "native", "--min-bytes", "8",
                       "--max-bytes", "1M", "--step-factor", "7", "--iters", "3", "--dtype", "f32,bf16,i64",
                       "--peer", "none", "--out", out, NULL});
    int status = r->status;
    if (status == 3 || (status == 2 && strstr(r->err, "not built"))) {
      fprintf(stderr, "SKIP: %s over nccl: no usable GPU or NCCL here:\n%s", cmds[i], r->err);
      free(r);
      assert_int_equal(tu_rmtree(dir), 0);
      skip();
    }
    if (status != 0 || !strstr(r->out, "all results verified"))
      fail_msg("%s over nccl: status %d\n%s\n%s", cmds[i], status, r->out, r->err);
    free(r);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* --telemetry-hz: telemetry.csv and each row's bound; 0: neither. */
static void test_telemetry(void **st) {
  (void)st;
  for (int on = 0; on < 2; on++) {
    char dir[] = "/tmp/fbtestcolltelXXXXXX";
    assert_non_null(mkdtemp(dir));
    char out[300], p[400];
    snprintf(out, sizeof out, "%s/r", dir);
    run_result *r = calloc(1, sizeof *r);
    cli_run(r, 60, NULL, NULL, -1, NULL,
            (char *[]){"bcast", "-n", "2", "--transport", "tcp", "--max-bytes", "64K", "--step-factor", "16",
                       "--iters", "20", "--telemetry-hz", on ? "20" : "0", "--out", out, NULL});
    if (r->status != 0) fail_msg("status %d\n%s", r->status, r->err);
    snprintf(p, sizeof p, "%s/telemetry.csv", out);
    assert_int_equal(access(p, F_OK) == 0, on);
    snprintf(p, sizeof p, "%s/colls.csv", out);
    char *c = tu_slurp(p, NULL);
    assert_non_null(c);
    int named = strstr(c, ",cpu-bound,") || strstr(c, ",link-bound,") || strstr(c, ",neither,");
    if (named != on) fail_msg("telemetry %s, rows:\n%s", on ? "on" : "off", c);
    free(c);
    free(r);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* fit --check prices the other collectives' rows by their formulas on the all-reduce's fit. */
static void test_fit_check(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestcollfitXXXXXX";
  assert_non_null(mkdtemp(dir));
  char ar[300], ag[300], m[300];
  snprintf(ar, sizeof ar, "%s/ar", dir);
  snprintf(ag, sizeof ag, "%s/ag", dir);
  snprintf(m, sizeof m, "%s/m", dir);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, NULL, NULL, -1, NULL,
          (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1K", "--max-bytes",
                     "1M", "--step-factor", "4", "--iters", "5", "--telemetry-hz", "0", "--out", ar, NULL});
  assert_int_equal(r->status, 0);
  cli_run(r, 60, NULL, NULL, -1, NULL,
          (char *[]){"allgather", "-n", "2", "--transport", "tcp", "--algo", "ring,bruck", "--min-bytes", "1K",
                     "--max-bytes", "1M", "--step-factor", "4", "--iters", "5", "--telemetry-hz", "0", "--out", ag, NULL});
  assert_int_equal(r->status, 0);
  cli_run(r, 60, NULL, NULL, -1, NULL, (char *[]){"fit", ar, "--out", m, NULL});
  if (r->status != 0) fail_msg("fit: %s", r->err);
  cli_run(r, 60, NULL, NULL, -1, NULL, (char *[]){"fit", "--model", m, "--check", ar, "--check", ag, NULL});
  if (r->status != 0 || !strstr(r->out, "# the other collectives") || !strstr(r->out, "  allgather      ring") ||
      !strstr(r->out, "  allgather      bruck"))
    fail_msg("fit --check: status %d\n%s\n%s", r->status, r->out, r->err);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

static void expect_usage_error(const char *cmd, char *const args[], const char *needle) {
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 30, cmd, NULL, -1, NULL, args);
  char want[64];
  snprintf(want, sizeof want, "usage: fabench %s", cmd);
  if (r->status != 2 || !strstr(r->err, needle) || !strstr(r->err, want))
    fail_msg("%s %s: status %d, stderr:\n%s", cmd, args[0] ? args[0] : "", r->status, r->err);
  free(r);
}

static void test_flags(void **st) {
  (void)st;
  expect_usage_error("allgather", (char *[]){"--op", "sum", NULL}, "unknown option '--op'");
  expect_usage_error("allgather", (char *[]){"--algo", "rhd", NULL}, "unknown algorithm 'rhd'");
  expect_usage_error("reducescatter", (char *[]){"--algo", "bruck", NULL}, "unknown algorithm 'bruck'");
  expect_usage_error("reducescatter", (char *[]){"--root", "1", NULL}, "unknown option '--root'");
  expect_usage_error("bcast", (char *[]){"-n", "3", "--root", "3", NULL}, "--root 3: there are 3 ranks");
  expect_usage_error("bcast", (char *[]){"--root", "-1", NULL}, "--root: '-1'");
  expect_usage_error("alltoall", (char *[]){"--imbalance", "-1", NULL}, "--imbalance: '-1'");
  expect_usage_error("alltoall", (char *[]){"--imbalance", "nan", NULL}, "--imbalance: 'nan'");
  expect_usage_error("alltoall", (char *[]){"--peer", "mpi/ring", NULL}, "--peer: 'mpi/ring'");
  /* --help: the table's flags, with the collective's own default */
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 30, "bcast", NULL, -1, NULL, (char *[]){"--help", NULL});
  assert_int_equal(r->status, 0);
  assert_non_null(strstr(r->out, "usage: fabench bcast"));
  assert_non_null(strstr(r->out, "--root R"));
  assert_non_null(strstr(r->out, "tree,chain,vdg,native)")); /* the default, maybe wrapped */
  assert_null(strstr(r->out, "--op"));
  free(r);
}

/* A rank killed during an all-gather: an error naming it within the timeout, rows kept. */
static void test_killed_rank(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestcollkillXXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[300], csv[400];
  snprintf(out, sizeof out, "%s/r", dir);
  snprintf(csv, sizeof csv, "%s/colls.csv", out);
  cli_expect_killed((char *[]){"allgather", "-n", "3", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1K",
                               "--max-bytes", "256M", "--time-per-size", "2", "--timeout", "20", "--out", out, NULL},
                    csv);
  assert_int_equal(tu_rmtree(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reducescatter), cmocka_unit_test(test_allgather), cmocka_unit_test(test_bcast),
      cmocka_unit_test(test_alltoall),      cmocka_unit_test(test_mpi_native), cmocka_unit_test(test_nccl_native),
      cmocka_unit_test(test_flags),         cmocka_unit_test(test_telemetry),
      cmocka_unit_test(test_fit_check),
      cmocka_unit_test(test_killed_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
