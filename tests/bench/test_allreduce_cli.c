/* `fabench allreduce` as a user meets it: bad flags, the files a run leaves (CSV columns and
 * order, JSONL, run.json), a rank killed mid-run (an error naming it, no hang, rows kept). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "cli_run.h"
#include "test_util.h"

static void expect_usage_error(char *const args[], const char *needle) {
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 30, NULL, NULL, -1, NULL, args);
  if (r->status != 2 || !strstr(r->err, needle) || !strstr(r->err, "usage: fabench allreduce"))
    fail_msg("args '%s': status %d, stderr:\n%s", args[1] ? args[1] : args[0], r->status, r->err);
  /* one line of error before the usage */
  assert_true(strncmp(r->err, "fabench: ", 9) == 0);
  assert_ptr_equal(strchr(r->err, '\n') + 1, strstr(r->err, "usage:"));
  free(r);
}

static void test_bad_flags_exit_2(void **st) {
  (void)st;
  expect_usage_error((char *[]){"allreduce", "--bogus", NULL}, "unknown option '--bogus'");
  expect_usage_error((char *[]){"allreduce", "--max-bytes", "12Q", NULL}, "--max-bytes: '12Q'");
  expect_usage_error((char *[]){"allreduce", "--algo", "ring,nope", NULL}, "unknown algorithm 'nope'");
  expect_usage_error((char *[]){"allreduce", "--transport", "ib", NULL}, "unknown transport 'ib'");
  expect_usage_error((char *[]){"allreduce", "--transport", "tcp,tcp", NULL}, "transport 'tcp' given twice");
  expect_usage_error((char *[]){"allreduce", "-n", "0", NULL}, "-n: '0'");
  expect_usage_error((char *[]){"allreduce", "--dtype", "f8", NULL}, "unknown type 'f8'");
  expect_usage_error((char *[]){"allreduce", "--op", "avg", NULL}, "unknown reduction 'avg'");
  expect_usage_error((char *[]){"allreduce", "--min-bytes", "1M", "--max-bytes", "1K", NULL}, "larger than");
  expect_usage_error((char *[]){"allreduce", "--timeout", NULL}, "needs a value");
  expect_usage_error((char *[]){"allreduce", "--emulate", "1gbit", NULL}, "--emulate needs -n");
  expect_usage_error((char *[]){"allreduce", "--timing", "wall", NULL}, "--timing");
  expect_usage_error((char *[]){"allreduce", "--tcp-cc", "Bad!", NULL}, "--tcp-cc: 'Bad!'");
  expect_usage_error((char *[]){"allreduce", "--rounds", "0", NULL}, "--rounds: '0'");
  expect_usage_error((char *[]){"allreduce", "--ucx-map", "maybe", NULL}, "--ucx-map: 'maybe'");
  expect_usage_error((char *[]){"allreduce", "--peer", "mpi", NULL}, "--peer: 'mpi'");
  expect_usage_error((char *[]){"allreduce", "--transport", "tcp", "--peer", "mpi/native", NULL},
                     "not among the --transport");
  /* strtoull took " -5" as 2^64 - 5 and 2^64 - 1 as a size: max + 8 wrapped and the size
   * sweep never ended */
  expect_usage_error((char *[]){"allreduce", "--max-bytes", " -5", NULL}, "--max-bytes: ' -5'");
  expect_usage_error((char *[]){"allreduce", "--max-bytes", "18446744073709551615", NULL}, "--max-bytes: '1844");
  expect_usage_error((char *[]){"allreduce", "--max-bytes", "8388609G", NULL}, "--max-bytes: '8388609G'");
  expect_usage_error((char *[]){"allreduce", "--min-bytes", "+8", NULL}, "--min-bytes: '+8'");
  expect_usage_error((char *[]){"allreduce", "--seed", " -1", NULL}, "--seed: ' -1'");
  expect_usage_error((char *[]){"allreduce", "--step-factor", "nan", NULL}, "--step-factor: 'nan'");
  /* a type with no whole element between the bounds measured nothing and said "verified" */
  expect_usage_error((char *[]){"allreduce", "--transport", "tcp", "--min-bytes", "1", "--max-bytes", "2",
                                "--dtype", "f64", NULL},
                     "--dtype f64: no size from --min-bytes 1 to --max-bytes 2");
}

/* What the flags ask for but no rank can run (tcp has no native all-reduce) is found once the
 * communicators are open: every rank stops before measuring, exit 2, one error, run.json
 * "failed"; once such runs passed as "ok" with no rows. */
static void expect_nothing_runs(const char *what, char *const extra[], const char *needle) {
  char dir[] = "/tmp/fbtestnoneXXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[300];
  snprintf(out, sizeof out, "%s/r", dir);
  char *args[32] = {"allreduce", "-n", "2", "--transport", "tcp", "--max-bytes", "64", "--iters", "2", "--out", out};
  int n = 11;
  for (int i = 0; extra[i]; i++) args[n++] = extra[i];
  args[n] = NULL;
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, NULL, NULL, -1, NULL, args);
  if (r->status != 2 || !strstr(r->err, needle))
    fail_msg("%s: status %d\nstdout:\n%s\nstderr:\n%s", what, r->status, r->out, r->err);
  assert_null(strstr(r->out, "verified"));
  assert_null(strstr(strstr(r->err, needle) + 1, needle)); /* said once, not once a rank */
  assert_true(tu_file_has(out, "run.json", "\"failed\""));
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

static void test_nothing_runs(void **st) {
  (void)st;
  expect_nothing_runs("no pair", (char *[]){"--algo", "native", NULL}, "nothing to measure");
  expect_nothing_runs("skipped peer", (char *[]){"--peer", "tcp/native", NULL}, "--peer: tcp/native was skipped");
}

/* -n comes out of the ranks' arguments, a value of another option that looks like it does not:
 * "--mpirun-args '-npernode 2'" once lost its value and the ranks failed on a stray '1K'. */
static void test_option_values_kept(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestargXXXXXX";
  assert_non_null(mkdtemp(dir));
  run_result *r = calloc(1, sizeof *r);
#if FABENCH_HAVE_MPI /* --mpirun-args goes with an mpirun launch */
  /* Open MPI's plugin allocations escape LeakSanitizer's attribution (test_tcp_and_mpi_same_run) */
  char *asan = getenv("ASAN_OPTIONS") ? strdup(getenv("ASAN_OPTIONS")) : NULL;
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  cli_run(r, 60, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp,mpi", "--algo", "ring", "--mpirun-args", "-npernode 2",
                 "--max-bytes", "1K", "--min-bytes", "1K", "--iters", "2", "--out", dir, NULL});
  if (asan) setenv("ASAN_OPTIONS", asan, 1);
  else unsetenv("ASAN_OPTIONS");
  free(asan);
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "2 rank(s)"));
  assert_non_null(strstr(r->out, "all results verified"));
#endif
  /* without mpirun to take them they were accepted and dropped: now said */
  cli_run(r, 60, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--mpirun-args", "--bogus", "--max-bytes", "1K", NULL});
  assert_int_equal(r->status, 2);
  assert_non_null(strstr(r->err, "--mpirun-args: -n starts these ranks without mpirun"));
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* --tcp-cc: the congestion control asked for is the one the sockets use (read back into the
 * fabric); one the kernel does not have fails with its name, naming the rank. */
static void test_tcp_cc(void **st) {
  (void)st;
  run_result *r = calloc(1, sizeof *r);
  char dir[] = "/tmp/fbtestccXXXXXX";
  assert_non_null(mkdtemp(dir));
  cli_run(r, 60, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--algo", "ring", "--max-bytes", "1K",
                 "--iters", "2", "--tcp-cc", "reno", "--out", dir, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "tcp:lo/reno"));
  memset(r, 0, sizeof *r);
  cli_run(r, 60, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--algo", "ring", "--max-bytes", "1K",
                 "--iters", "2", "--tcp-cc", "nosuchcc", "--out", dir, NULL});
  if (r->status == 0 || !strstr(r->err, "congestion control 'nosuchcc'") || !strstr(r->err, "rank "))
    fail_msg("status %d\nstderr:\n%s", r->status, r->err);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* --ucx-map: on (the default) the ucx ranks map each other's buffer and every row says so
 * (fabric "+rkey_ptr", also in run.json) and is verified, at sizes on both sides of the ring's
 * small-message threshold, its stores cached or (FABENCH_RING_STREAM_BYTES, "+nt<size>")
 * streamed from a size between them; off, the fabric is UCX's own. */
static void test_ucx_map(void **st) {
  (void)st;
#if !FABENCH_HAVE_UCX
  skip();
#endif
  char dir[] = "/tmp/fbtestmapXXXXXX";
  assert_non_null(mkdtemp(dir));
  run_result *r = calloc(1, sizeof *r);
  setenv("UCX_TLS", "sm,self", 1);
  cli_run(r, 120, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "3", "--transport", "ucx", "--algo", "ring", "--min-bytes", "4K",
                 "--max-bytes", "16M", "--step-factor", "64", "--iters", "2", "--out", dir, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "all results verified"));
  int rows = 0;
  for (const char *p = r->out; (p = strstr(p, " ring ")); p++) rows++;
  assert_int_equal(rows, 3); /* 4K 256K 16M */
  for (const char *p = r->out; (p = strstr(p, "ucx:")); p++) assert_true(strstr(p, "+rkey_ptr") < strchr(p, ' '));
  assert_true(tu_file_has(dir, "run.json", "+rkey_ptr"));
  assert_null(strstr(r->out, "+nt")); /* its stores cached unless asked */
  /* streamed from 256K on where FABENCH_RING_STREAM_BYTES asks, the rows say so, verified */
  memset(r, 0, sizeof *r);
  cli_run(r, 120, NULL, "FABENCH_RING_STREAM_BYTES=256K", -1, NULL,
      (char *[]){"allreduce", "-n", "3", "--transport", "ucx", "--algo", "ring", "--min-bytes", "4K",
                 "--max-bytes", "16M", "--step-factor", "64", "--iters", "2", "--out", dir, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "all results verified"));
  rows = 0;
  for (const char *p = r->out; (p = strstr(p, "ucx:")); p++, rows++) assert_true(strstr(p, "+rkey_ptr+nt256K ") == strchr(p, ' ') - 16);
  assert_int_equal(rows, 3);
  assert_true(tu_file_has(dir, "allreduce.csv", "+rkey_ptr+nt256K,"));
  /* a value that is not a byte count: one line naming it, no rows */
  memset(r, 0, sizeof *r);
  cli_run(r, 60, NULL, "FABENCH_RING_STREAM_BYTES=8Q", -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "ucx", "--algo", "ring", "--max-bytes", "1M",
                 "--iters", "2", "--out", dir, NULL});
  if (r->status == 0 || !strstr(r->err, "FABENCH_RING_STREAM_BYTES='8Q' is not a byte count"))
    fail_msg("status %d\nstderr:\n%s", r->status, r->err);
  memset(r, 0, sizeof *r);
  cli_run(r, 120, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "ucx", "--algo", "ring", "--min-bytes", "1M",
                 "--max-bytes", "1M", "--iters", "2", "--ucx-map", "off", "--out", dir, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "all results verified"));
  assert_non_null(strstr(r->out, "ucx:"));
  assert_null(strstr(r->out, "rkey_ptr"));
  unsetenv("UCX_TLS");
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

static const char *const issue_cols[] = {
    "run_id", "schema", "host_count", "ranks", "fabric", "transport", "algo", "dtype", "op", "bytes",
    "count", "iters", "timing", "t_min_us", "t_p50_us", "t_p90_us", "t_p99_us", "t_max_us",
    "t_mean_us", "t_std_us", "algbw_gbps", "busbw_gbps", "errors"};

/* A 3-rank run: every row verified, CSV columns in the schema's order, JSONL = CSV rows. */
static void test_run_files(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestrunXXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[300];
  snprintf(out, sizeof out, "%s/r", dir);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 120, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "3", "--transport", "tcp", "--algo", "ring,native", "--dtype", "f32,i64",
                 "--min-bytes", "8", "--max-bytes", "300K", "--step-factor", "4", "--iters", "3", "--out", out, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "skipping tcp/native"));
  assert_non_null(strstr(r->out, "all results verified"));
  char path[400];
  snprintf(path, sizeof path, "%s/allreduce.csv", out);
  char *csv = tu_slurp(path, NULL);
  assert_non_null(csv);
  /* header: the issue's columns first, in order */
  char *save = NULL, *line = strtok_r(csv, "\n", &save);
  char *hs = NULL, *tok = strtok_r(line, ",", &hs);
  for (size_t i = 0; i < sizeof issue_cols / sizeof *issue_cols; i++, tok = strtok_r(NULL, ",", &hs)) {
    assert_non_null(tok);
    assert_string_equal(tok, issue_cols[i]);
  }
  int rows = 0;
  /* sizes 8, 32, 128, ..., 131072 (2^3..2^17 by 4x): 8 sizes, 2 dtypes */
  while ((line = strtok_r(NULL, "\n", &save))) {
    rows++;
    int fields = 1;
    for (char *c = line; *c; c++) fields += *c == ',';
    assert_int_equal(fields, 44); /* res_rec.h: RES_ALLREDUCE_COLS */
    assert_non_null(strstr(line, ",3,")); /* ranks */
    char *last_err = NULL, *iters = NULL, *fs = NULL, *f = strtok_r(line, ",", &fs);
    for (int i = 0; f; i++, f = strtok_r(NULL, ",", &fs)) {
      if (i == 11) iters = f;
      if (i == 22) last_err = f;
    }
    assert_non_null(last_err);
    assert_string_equal(last_err, "0");
    /* --iters 3 over 5 rounds is still 3 samples in all */
    assert_non_null(iters);
    assert_string_equal(iters, "3");
  }
  assert_int_equal(rows, 16);
  free(csv);
  snprintf(path, sizeof path, "%s/allreduce.jsonl", out);
  char *jl = tu_slurp(path, NULL);
  assert_non_null(jl);
  assert_int_equal(tu_count_lines(jl), 16);
  char *js = NULL;
  for (char *l = strtok_r(jl, "\n", &js); l; l = strtok_r(NULL, "\n", &js)) {
    cJSON *o = cJSON_Parse(l);
    assert_non_null(o);
    assert_int_equal(cJSON_GetObjectItem(o, "ranks")->valueint, 3);
    assert_int_equal(cJSON_GetObjectItem(o, "errors")->valueint, 0);
    assert_true(cJSON_GetObjectItem(o, "busbw_gbps")->valuedouble >= 0);
    cJSON_Delete(o);
  }
  free(jl);
  snprintf(path, sizeof path, "%s/run.json", out);
  char *rj = tu_slurp(path, NULL);
  cJSON *m = cJSON_Parse(rj);
  assert_non_null(m);
  assert_int_equal(cJSON_GetObjectItem(m, "ranks")->valueint, 3);
  assert_string_equal(cJSON_GetObjectItem(m, "status")->valuestring, "ok");
  assert_non_null(cJSON_GetObjectItem(m, "topology"));
  /* the default binding, auto, each rank's as it got it: a core of its own where the 3 ranks
   * fit the host's cores, else none and why, or the binding ctest's launcher gave */
  const cJSON *bd = cJSON_GetObjectItem(m, "binding");
  assert_int_equal(cJSON_GetArraySize(bd), 3);
  for (int i = 0; i < 3; i++) {
    const char *b = cJSON_GetArrayItem(bd, i)->valuestring;
    assert_non_null(b);
    assert_int_equal(strncmp(b, "auto: ", 6), 0);
  }
  cJSON_Delete(m);
  free(rj);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* A column of one run's rows: how many are numbers (>= 0) and how many are above zero. */
static void num_rows(const char *out, const char *col, int *numbers, int *positive) {
  char path[400];
  snprintf(path, sizeof path, "%s/allreduce.jsonl", out);
  char *jl = tu_slurp(path, NULL), *js = NULL;
  assert_non_null(jl);
  *numbers = *positive = 0;
  for (char *l = strtok_r(jl, "\n", &js); l; l = strtok_r(NULL, "\n", &js)) {
    cJSON *o = cJSON_Parse(l);
    assert_non_null(o);
    const cJSON *c = cJSON_GetObjectItem(o, col);
    *numbers += cJSON_IsNumber(c) && c->valuedouble >= 0;
    *positive += cJSON_IsNumber(c) && c->valuedouble > 0;
    cJSON_Delete(o);
  }
  free(jl);
}

/* The host's busy CPU per call is recorded where no rank spins (--no-spin, which wins over the
 * environment's spin time), and left empty where ranks spin while they wait (2 ranks with a core
 * each), where it would be the spinning's and not the call's. */
static void test_host_cpu(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestcpuXXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[300];
  run_result *r = calloc(1, sizeof *r);
  for (int spin = 0; spin < 2; spin++) {
    if (spin && sysconf(_SC_NPROCESSORS_ONLN) < 2) break; /* 2 ranks on 1 core never spin */
    snprintf(out, sizeof out, "%s/r%d", dir, spin);
    cli_run(r, 120, NULL, "FABENCH_TCP_SPIN_US=2000", -1, NULL,
        (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--algo", "ring,rd", "--min-bytes", "4M",
                   "--max-bytes", "16M", "--step-factor", "4", "--iters", "30", "--no-check", "--out", out,
                   spin ? NULL : "--no-spin", NULL});
    if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
    /* nothing was checked, so nothing is said to be verified */
    assert_null(strstr(r->out, "verified"));
    assert_non_null(strstr(r->out, "results not checked (--no-check)"));
    assert_true(tu_file_has(out, "run.json", "\"check\":\tfalse"));
    assert_false(tu_file_has(out, "run.json", "\"check\":\ttrue"));
    int numbers, positive;
    num_rows(out, "host_cpu_us", &numbers, &positive);
    if (spin) {
      assert_int_equal(numbers, 0);
    } else {
      assert_int_equal(numbers, 4);
      assert_int_equal(positive, 4); /* 30 calls of 4 MiB: several jiffies even on a fast host */
    }
    /* 5 rounds (the default): each row says how far its rounds' medians were apart */
    num_rows(out, "round_spread", &numbers, &positive);
    assert_int_equal(numbers, 4);
  }
  /* one round: nothing to compare */
  snprintf(out, sizeof out, "%s/one", dir);
  cli_run(r, 120, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1M",
                 "--max-bytes", "1M", "--iters", "6", "--rounds", "1", "--out", out, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  int numbers, positive;
  num_rows(out, "round_spread", &numbers, &positive);
  assert_int_equal(numbers, 0);
  assert_true(tu_file_has(out, "allreduce.csv", "round_spread"));
  num_rows(out, "compute_loss", &numbers, &positive);
  assert_int_equal(numbers, 0);
  /* beside a load: each row's share of the load's pace lost (a share: at most 1), and no host
   * CPU (the load's would count) */
  snprintf(out, sizeof out, "%s/beside", dir);
  cli_run(r, 120, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1M",
                 "--max-bytes", "4M", "--step-factor", "4", "--iters", "20", "--rounds", "2", "--beside-compute",
                 "--out", out, NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_true(tu_file_has(out, "run.json", "\"beside_compute\":\ttrue"));
  num_rows(out, "host_cpu_us", &numbers, &positive);
  assert_int_equal(numbers, 0);
  char path[400];
  snprintf(path, sizeof path, "%s/allreduce.jsonl", out);
  char *jl = tu_slurp(path, NULL), *js = NULL;
  assert_non_null(jl);
  int nloss = 0;
  for (char *l = strtok_r(jl, "\n", &js); l; l = strtok_r(NULL, "\n", &js)) {
    cJSON *o = cJSON_Parse(l);
    const cJSON *c = cJSON_GetObjectItem(o, "compute_loss");
    if (!cJSON_IsNumber(c) || !(c->valuedouble <= 1 && c->valuedouble > -1)) fail_msg("compute_loss: %s", l);
    nloss++;
    cJSON_Delete(o);
  }
  free(jl);
  assert_int_equal(nloss, 2);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* A rank killed mid-run: the run fails with an error naming that rank, quickly, and the rows
 * measured before stay on disk. */
static void test_killed_rank(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestkillXXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[300], csv[400];
  snprintf(out, sizeof out, "%s/r", dir);
  snprintf(csv, sizeof csv, "%s/allreduce.csv", out);
  cli_expect_killed((char *[]){"allreduce", "-n", "3", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1K",
                               "--max-bytes", "256M", "--time-per-size", "2", "--timeout", "20", "--out", out, NULL},
                    csv);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* Rank 0 cannot make the run directory (--out below a plain file): every rank stops with rank
 * 0's reason, none later on its vanished peer. */
static void test_out_refused(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestoutXXXXXX", out[300];
  assert_non_null(mkdtemp(dir));
  assert_int_equal(tu_write(dir, "file", "x"), 0);
  snprintf(out, sizeof out, "%s/file/run", dir);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "3", "--transport", "tcp", "--algo", "ring", "--max-bytes", "4K", "--out", out, NULL});
  if (r->status != 1 || !strstr(r->err, "cannot create directory") || strstr(r->err, "bootstrap") ||
      strstr(r->err, "reset by peer"))
    fail_msg("status %d, stderr:\n%s", r->status, r->err);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* Without -n and without a launcher: a world of one runs and says so. */
static void test_single_rank(void **st) {
  (void)st;
  char dir[] = "/tmp/fbtestoneXXXXXX";
  assert_non_null(mkdtemp(dir));
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "--transport", "tcp", "--algo", "ring", "--max-bytes", "64", "--iters", "2", "--out", dir, NULL});
  if (r->status != 0) fail_msg("status %d\n%s", r->status, r->err);
  assert_non_null(strstr(r->out, "1 rank(s)"));
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* tcp/ring and mpi/native in one run through mpirun (as the README's all-reduce examples run, small). */
static void test_tcp_and_mpi_same_run(void **st) {
  (void)st;
#if !FABENCH_HAVE_MPI
  skip();
#endif
  /* Open MPI unloads its plugins before exit, so LeakSanitizer can neither attribute nor
   * suppress their allocations: leak checking is off for MPI ranks (only matters under ASan) */
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  char dir[] = "/tmp/fbtestmpiXXXXXX";
  assert_non_null(mkdtemp(dir));
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 120, NULL, NULL, -1, NULL,
      (char *[]){"allreduce", "-n", "2", "--transport", "tcp,mpi", "--algo", "ring,native", "--max-bytes", "64K",
                 "--step-factor", "8", "--iters", "3", "--out", dir,
                 "--mpirun-args", "--mca pml ob1 --mca btl tcp,self", NULL});
  if (r->status != 0) fail_msg("status %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "mpi:ob1/tcp "));
  assert_non_null(strstr(r->out, "native"));
  assert_non_null(strstr(r->out, "tcp:"));
  assert_non_null(strstr(r->out, "vs peer: busbw / mpi/native"));
  free(r);
  /* busbw_vs_peer is mpi/native's median time over the row's, size by size */
  char path[400];
  snprintf(path, sizeof path, "%s/allreduce.csv", dir);
  char *csv = tu_slurp(path, NULL);
  assert_non_null(csv);
  double peer_p50[64] = {0}, p50s[256];
  long bytes_of[256];
  double vs_of[256];
  int nrows = 0;
  char *save = NULL;
  strtok_r(csv, "\n", &save); /* header */
  for (char *line = strtok_r(NULL, "\n", &save); line && nrows < 256; line = strtok_r(NULL, "\n", &save)) {
    /* a quoted fabric holding a comma: split after it (rows without quotes are split from
     * column 0) */
    char *q = strrchr(line, '"');
    char *rest = q ? q + 2 : line;
    char *fs = NULL, *f = strtok_r(rest, ",", &fs);
    int col = q ? 5 : 0;
    char transport[16] = "", algo[16] = "";
    long bytes = 0;
    double p50 = 0, vs = 0;
    for (; f; f = strtok_r(NULL, ",", &fs), col++) {
      if (col == 5) snprintf(transport, sizeof transport, "%s", f);
      if (col == 6) snprintf(algo, sizeof algo, "%s", f);
      if (col == 9) bytes = atol(f);
      if (col == 14) p50 = atof(f);
      if (col == 32) vs = atof(f);
    }
    if (!strcmp(transport, "mpi") && !strcmp(algo, "native")) {
      int b = 0;
      while ((1L << b) < bytes) b++;
      peer_p50[b] = p50;
    }
    bytes_of[nrows] = bytes;
    p50s[nrows] = p50;
    vs_of[nrows++] = vs;
  }
  assert_true(nrows >= 6);
  for (int i = 0; i < nrows; i++) {
    int b = 0;
    while ((1L << b) < bytes_of[i]) b++;
    assert_true(peer_p50[b] > 0);
    double want = peer_p50[b] / p50s[i];
    if (vs_of[i] < want * 0.999 || vs_of[i] > want * 1.001)
      fail_msg("row %d (%ld bytes): busbw_vs_peer %g, expected %g", i, bytes_of[i], vs_of[i], want);
  }
  free(csv);
  unsetenv("ASAN_OPTIONS");
  assert_int_equal(tu_rmtree(dir), 0);
}

/* The mpi fabric is what Open MPI selected, asked of the library, whatever MCA flags were
 * (or were not) given: default and vader,self use shared memory on one host, tcp,self tcp. */
static void test_mpi_fabric_from_library(void **st) {
  (void)st;
#if !FABENCH_HAVE_MPI
  skip();
#endif
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  static const char *const cases[][2] = {{"", "mpi:ob1/vader"},
                                         {"--mca btl vader,self", "mpi:ob1/vader"},
                                         {"--mca btl tcp,self", "mpi:ob1/tcp"}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char dir[] = "/tmp/fbtestmpifXXXXXX";
    assert_non_null(mkdtemp(dir));
    run_result *r = calloc(1, sizeof *r);
    cli_run(r, 120, NULL, NULL, -1, NULL,
            (char *[]){"allreduce", "-n", "2", "--transport", "mpi", "--algo", "native",
                       "--max-bytes", "64", "--iters", "2", "--out", dir, "--mpirun-args",
                       (char *)cases[k][0], NULL});
    if (r->status != 0) fail_msg("[%s] status %d\nstderr:\n%s", cases[k][0], r->status, r->err);
    free(r);
    char path[400], want[64];
    snprintf(path, sizeof path, "%s/allreduce.csv", dir);
    char *csv = tu_slurp(path, NULL);
    assert_non_null(csv);
    snprintf(want, sizeof want, ",%s,mpi,", cases[k][1]);
    if (!strstr(csv, want)) fail_msg("[%s] rows lack %s:\n%s", cases[k][0], want, csv);
    free(csv);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_flags_exit_2),
      cmocka_unit_test(test_nothing_runs),
      cmocka_unit_test(test_option_values_kept),
      cmocka_unit_test(test_run_files),
      cmocka_unit_test(test_host_cpu),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_out_refused),
      cmocka_unit_test(test_single_rank),
      cmocka_unit_test(test_tcp_cc),
      cmocka_unit_test(test_ucx_map),
      cmocka_unit_test(test_tcp_and_mpi_same_run),
      cmocka_unit_test(test_mpi_fabric_from_library),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
