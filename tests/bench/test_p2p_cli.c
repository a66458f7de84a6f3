/* `fabench p2p` as a user meets it: bad flags (exit 2 with the usage), a 2-rank run over tcp and
 * over ucx (the CSV's columns in order, one row per test and size, sane figures, the JSONL and
 * run.json), a 3-rank --pairs all run (every ordered pair, the N x N matrices), a receiver that
 * finds damaged data (the run fails), and a rank killed mid-run (an error, no hang). */
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

static void tmpdir(char *out, size_t cap, const char *tag) {
  char top[128];
  assert_non_null(tu_tmpdir(top, sizeof top, tag));
  snprintf(out, cap, "%s/run", top);
}

static void rmtree(const char *run_dir) {
  char top[600];
  snprintf(top, sizeof top, "%.*s", (int)(strrchr(run_dir, '/') - run_dir), run_dir);
  assert_int_equal(tu_rmtree(top), 0);
}

/* ---- a small CSV reader: header names and rows of fields ---- */
#define MAXF 64
typedef struct {
  char *text;
  char *hdr[MAXF];
  int nhdr;
  char *(*rows)[MAXF];
  int nrows;
} csv_file;

static int split(char *line, char **f) {
  int n = 0;
  for (char *p = line;; p++) {
    f[n++] = p;
    p = strchr(p, ',');
    if (!p || n == MAXF) break;
    *p = '\0';
  }
  return n;
}

static void csv_read(csv_file *c, const char *path) {
  memset(c, 0, sizeof *c);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  c->text = calloc(1, (size_t)n + 1);
  assert_int_equal(fread(c->text, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  int lines = 0;
  for (long i = 0; i < n; i++) lines += c->text[i] == '\n';
  c->rows = calloc((size_t)lines + 1, sizeof *c->rows);
  char *save = NULL, *line = strtok_r(c->text, "\n", &save);
  assert_non_null(line);
  c->nhdr = split(line, c->hdr);
  while ((line = strtok_r(NULL, "\n", &save))) {
    int k = split(line, c->rows[c->nrows]);
    assert_int_equal(k, c->nhdr); /* every row has every column */
    c->nrows++;
  }
}

static void csv_free(csv_file *c) {
  free(c->text);
  free(c->rows);
}

static int col(const csv_file *c, const char *name) {
  for (int i = 0; i < c->nhdr; i++)
    if (!strcmp(c->hdr[i], name)) return i;
  fail_msg("no column '%s'", name);
  return -1;
}

static const char *cell(const csv_file *c, int row, const char *name) {
  return c->rows[row][col(c, name)];
}

static double num(const csv_file *c, int row, const char *name) {
  return atof(cell(c, row, name));
}

static int count_lines(const char *path) {
  char *s = tu_slurp(path, NULL);
  assert_non_null(s);
  int n = tu_count_lines(s);
  free(s);
  return n;
}

static cJSON *json_file(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char *buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  free(buf);
  assert_non_null(j);
  return j;
}

/* The columns the issue names, first and in this order. */
static const char *const head_cols[] = {"run_id", "schema", "ranks", "fabric", "transport", "test",
                                        "src", "dst", "bytes", "iters", "t_min_us", "t_p50_us",
                                        "t_p99_us", "t_max_us", "gbps", "host", "topo_hash"};

/* Checks p2p.csv of a run: columns, every row sane, and rows per (transport, pair) = tests x
 * sizes with exactly the expected sizes. */
static void check_csv(const char *dir, int ranks, const char *transports[], int ntransports,
                      int npairs, const long *sizes, int nsizes) {
  char path[600];
  snprintf(path, sizeof path, "%s/p2p.csv", dir);
  csv_file c;
  csv_read(&c, path);
  for (size_t i = 0; i < sizeof head_cols / sizeof *head_cols; i++)
    assert_string_equal(c.hdr[i], head_cols[i]);
  assert_int_equal(c.nrows, ntransports * npairs * 3 * nsizes);
  for (int r = 0; r < c.nrows; r++) {
    assert_int_equal((int)num(&c, r, "ranks"), ranks);
    assert_int_equal((int)num(&c, r, "schema"), 1);
    assert_int_equal((int)num(&c, r, "errors"), 0);
    const char *test = cell(&c, r, "test");
    assert_true(!strcmp(test, "latency") || !strcmp(test, "bw") || !strcmp(test, "bibw"));
    int s = (int)num(&c, r, "src"), d = (int)num(&c, r, "dst");
    assert_true(s >= 0 && s < ranks && d >= 0 && d < ranks && s != d);
    double mn = num(&c, r, "t_min_us"), p50 = num(&c, r, "t_p50_us"), p99 = num(&c, r, "t_p99_us"),
           mx = num(&c, r, "t_max_us"), gbps = num(&c, r, "gbps");
    assert_true(mn > 0 && mn <= p50 && p50 <= p99 && p99 <= mx);
    /* gbps is bytes per one-way median time (twice that for bibw) */
    double want = (!strcmp(test, "bibw") ? 2 : 1) * num(&c, r, "bytes") / (p50 * 1e3);
    assert_true(gbps > 0 && gbps > 0.999 * want && gbps < 1.001 * want);
    assert_int_equal((int)num(&c, r, "window"), !strcmp(test, "latency") ? 1 : 64);
    const char *tr = cell(&c, r, "transport"), *fab = cell(&c, r, "fabric");
    int known = 0;
    for (int t = 0; t < ntransports; t++) known |= !strcmp(tr, transports[t]);
    assert_true(known);
    /* the fabric names the transport and what it runs on */
    assert_true(!strncmp(fab, tr, strlen(tr)) && fab[strlen(tr)] == ':' && fab[strlen(tr) + 1]);
    assert_true(strlen(cell(&c, r, "run_id")) > 8);
  }
  /* each (transport, pair, test) has exactly the swept sizes, in order */
  for (int r = 0; r < c.nrows; r += nsizes)
    for (int i = 0; i < nsizes; i++) {
      assert_int_equal((long)num(&c, r + i, "bytes"), sizes[i]);
      assert_string_equal(cell(&c, r + i, "test"), cell(&c, r, "test"));
      assert_string_equal(cell(&c, r + i, "src"), cell(&c, r, "src"));
    }
  csv_free(&c);
  snprintf(path, sizeof path, "%s/p2p.jsonl", dir);
  assert_int_equal(count_lines(path), ntransports * npairs * 3 * nsizes);

  snprintf(path, sizeof path, "%s/run.json", dir);
  cJSON *j = json_file(path);
  cJSON *fab = cJSON_GetObjectItem(j, "fabrics");
  for (int t = 0; t < ntransports; t++) {
    cJSON *f = cJSON_GetObjectItem(fab, transports[t]);
    assert_true(cJSON_IsString(f) && !strncmp(f->valuestring, transports[t], strlen(transports[t])));
  }
  cJSON *p2p = cJSON_GetObjectItem(j, "p2p");
  assert_string_equal(cJSON_GetObjectItem(p2p, "status")->valuestring, "ok");
  assert_int_equal(cJSON_GetObjectItem(j, "ranks")->valueint, ranks);
  cJSON_Delete(j);
}

static const long sizes_1_4k[] = {1, 4, 16, 64, 256, 1024, 4096};

static void test_two_ranks_tcp(void **state) {
  (void)state;
  char dir[256];
  tmpdir(dir, sizeof dir, "tcp");
  run_result r;
  char *args[] = {"-n", "2", "--transport", "tcp", "--min-bytes", "1", "--max-bytes", "4K",
                  "--step-factor", "4", "--iters", "20", "--warmup", "2", "--timeout", "20",
                  "--out", dir, NULL};
  cli_run(&r, 60, "p2p", NULL, -1, NULL, args);
  if (r.status) fprintf(stderr, "%s\n%s\n", r.out, r.err);
  assert_int_equal(r.status, 0);
  const char *tr[] = {"tcp"};
  check_csv(dir, 2, tr, 1, 1, sizes_1_4k, 7);
  assert_non_null(strstr(r.out, "latency")); /* the table on stdout */
  char path[600];
  snprintf(path, sizeof path, "%s/p2p_matrix.csv", dir);
  assert_true(access(path, F_OK) != 0); /* one pair: no matrix */
  rmtree(dir);
}

static void test_two_ranks_ucx_tcp(void **state) {
  (void)state;
#ifndef P2P_HAVE_UCX
  skip();
#endif
  char dir[256];
  tmpdir(dir, sizeof dir, "ucx");
  run_result r;
  char *args[] = {"-n", "2", "--transport", "ucx", "--min-bytes", "1", "--max-bytes", "4K",
                  "--step-factor", "4", "--iters", "20", "--warmup", "2", "--timeout", "20",
                  "--pairs", "1,0", "--out", dir, NULL};
  cli_run(&r, 60, "p2p", "UCX_TLS=tcp", -1, NULL, args);
  if (r.status) fprintf(stderr, "%s\n%s\n", r.out, r.err);
  assert_int_equal(r.status, 0);
  const char *tr[] = {"ucx"};
  check_csv(dir, 2, tr, 1, 1, sizes_1_4k, 7);
  char path[600];
  snprintf(path, sizeof path, "%s/p2p.csv", dir);
  csv_file c;
  csv_read(&c, path);
  for (int i = 0; i < c.nrows; i++) {
    assert_string_equal(cell(&c, i, "src"), "1"); /* the pair asked for */
    assert_string_equal(cell(&c, i, "dst"), "0");
    assert_true(!strncmp(cell(&c, i, "fabric"), "ucx:tcp/", 8)); /* what UCX chose: UCX_TLS */
  }
  csv_free(&c);
  rmtree(dir);
}

/* 3 ranks, every ordered pair, over tcp and ucx (shared memory): 6 pairs per transport and an
 * N x N block per transport and metric (latency, bw, bibw) in p2p_matrix.csv. */
static void test_three_ranks_all_pairs(void **state) {
  (void)state;
#ifndef P2P_HAVE_UCX
  skip();
#endif
  char dir[256];
  tmpdir(dir, sizeof dir, "all");
  run_result r;
  char *args[] = {"-n", "3", "--pairs", "all", "--transport", "tcp,ucx", "--min-bytes", "8",
                  "--max-bytes", "8K", "--step-factor", "32", "--iters", "10", "--warmup", "1",
                  "--timeout", "20", "--out", dir, NULL};
  cli_run(&r, 90, "p2p", "UCX_TLS=sm,self", -1, NULL, args);
  if (r.status) fprintf(stderr, "%s\n%s\n", r.out, r.err);
  assert_int_equal(r.status, 0);
  const char *tr[] = {"tcp", "ucx"};
  const long sizes[] = {8, 256, 8192};
  check_csv(dir, 3, tr, 2, 6, sizes, 3);

  char path[600];
  snprintf(path, sizeof path, "%s/p2p.csv", dir);
  csv_file c;
  csv_read(&c, path);
  int seen[2][3][3] = {{{0}}};
  for (int i = 0; i < c.nrows; i++)
    seen[!strcmp(cell(&c, i, "transport"), "ucx")][(int)num(&c, i, "src")][(int)num(&c, i, "dst")]++;
  for (int t = 0; t < 2; t++)
    for (int s = 0; s < 3; s++)
      for (int d = 0; d < 3; d++) assert_int_equal(seen[t][s][d], s == d ? 0 : 9);
  csv_free(&c);

  snprintf(path, sizeof path, "%s/p2p_matrix.csv", dir);
  csv_file m;
  csv_read(&m, path);
  const char *mh[] = {"run_id", "schema", "ranks", "transport", "fabric", "metric", "bytes",
                      "src", "dst", "value", "src_host", "dst_host"};
  assert_int_equal(m.nhdr, 12);
  for (int i = 0; i < 12; i++) assert_string_equal(m.hdr[i], mh[i]);
  assert_int_equal(m.nrows, 2 * 3 * 6); /* transports x metrics x ordered pairs */
  int mseen[2][3][3][3] = {{{{0}}}};
  for (int i = 0; i < m.nrows; i++) {
    const char *metric = cell(&m, i, "metric");
    int t = !strcmp(cell(&m, i, "transport"), "ucx"), lat = !strcmp(metric, "latency_us");
    int k = lat ? 0 : !strcmp(metric, "bw_gbps") ? 1 : 2;
    assert_true(lat || k == 1 || !strcmp(metric, "bibw_gbps"));
    assert_int_equal((long)num(&m, i, "bytes"), lat ? 8 : 8192); /* latency: smallest; bw: largest */
    int s = (int)num(&m, i, "src"), d = (int)num(&m, i, "dst");
    assert_true(s >= 0 && s < 3 && d >= 0 && d < 3 && s != d);
    assert_true(num(&m, i, "value") > 0);
    mseen[t][k][s][d]++;
  }
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < 3; k++)
      for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) assert_int_equal(mseen[t][k][s][d], s != d);
  csv_free(&m);
  rmtree(dir);
}

/* --pairs rounds: every ordered pair measured once per test and size, at odd and even rank
 * counts (an odd one sits a rank out of each round), the matrices full, run.json's pairs. */
static void test_rounds_pairs(void **state) {
  (void)state;
  for (int n = 4; n <= 5; n++) {
    char dir[256], ns[8];
    tmpdir(dir, sizeof dir, "rounds");
    snprintf(ns, sizeof ns, "%d", n);
    run_result r;
    char *args[] = {"-n", ns, "--pairs", "rounds", "--tests", "latency,bw", "--min-bytes", "8", "--max-bytes", "4K",
                    "--step-factor", "512", "--iters", "5", "--warmup", "1", "--timeout", "20", "--out", dir, NULL};
    cli_run(&r, 90, "p2p", NULL, -1, NULL, args);
    if (r.status) fprintf(stderr, "%s\n%s\n", r.out, r.err);
    assert_int_equal(r.status, 0);
    char path[600];
    snprintf(path, sizeof path, "%s/p2p.csv", dir);
    csv_file c;
    csv_read(&c, path);
    int seen[2][2][5][5] = {{{{0}}}};
    assert_int_equal(c.nrows, 2 * 2 * n * (n - 1)); /* tests x sizes x ordered pairs */
    for (int i = 0; i < c.nrows; i++) {
      int t = !strcmp(cell(&c, i, "test"), "bw"), z = (long)num(&c, i, "bytes") == 4096;
      int s = (int)num(&c, i, "src"), d = (int)num(&c, i, "dst");
      assert_true(s >= 0 && s < n && d >= 0 && d < n);
      assert_int_equal((long)num(&c, i, "errors"), 0);
      seen[t][z][s][d]++;
    }
    for (int t = 0; t < 2; t++)
      for (int z = 0; z < 2; z++)
        for (int s = 0; s < n; s++)
          for (int d = 0; d < n; d++) assert_int_equal(seen[t][z][s][d], s != d);
    csv_free(&c);
    snprintf(path, sizeof path, "%s/p2p_matrix.csv", dir);
    csv_read(&c, path);
    assert_int_equal(c.nrows, 2 * n * (n - 1)); /* bw and latency, every ordered pair */
    for (int i = 0; i < c.nrows; i++) assert_true(num(&c, i, "value") > 0);
    csv_free(&c);
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *j = tu_slurp(path, NULL);
    assert_non_null(j);
    cJSON *o = cJSON_Parse(j);
    free(j);
    const cJSON *pairs = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "p2p"), "pairs");
    assert_true(cJSON_IsString(pairs) && !strcmp(pairs->valuestring, "rounds"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "p2p"), "src"));
    cJSON_Delete(o);
    rmtree(dir);
  }
}

/* The receivers' check is live: a flipped byte fails the run and shows in the errors column. */
static void test_damaged_data_fails(void **state) {
  (void)state;
  char dir[256];
  tmpdir(dir, sizeof dir, "bad");
  run_result r;
  char *args[] = {"-n", "2", "--tests", "bw", "--min-bytes", "64", "--max-bytes", "64",
                  "--iters", "3", "--warmup", "0", "--timeout", "20", "--out", dir, NULL};
  cli_run(&r, 60, "p2p", "FABENCH_TEST_CORRUPT=1", -1, NULL, args);
  assert_int_equal(r.status, 1);
  assert_non_null(strstr(r.err, "arrived wrong"));
  char path[600];
  snprintf(path, sizeof path, "%s/p2p.csv", dir);
  csv_file c;
  csv_read(&c, path);
  assert_int_equal(c.nrows, 1);
  assert_int_equal((int)num(&c, 0, "errors"), 1);
  csv_free(&c);
  rmtree(dir);
}

/* A rank killed mid-run: fabench says so and exits non-zero, promptly; rows so far are kept. */
static void test_killed_rank(void **state) {
  (void)state;
  char dir[256], csv[600];
  tmpdir(dir, sizeof dir, "kill");
  snprintf(csv, sizeof csv, "%s/p2p.csv", dir);
  run_result r;
  char *args[] = {"-n", "2", "--tests", "latency", "--max-bytes", "1M", "--time-per-size", "0.3",
                  "--timeout", "5", "--out", dir, NULL};
  double t0 = now_s();
  cli_run(&r, 60, "p2p", NULL, 1, csv, args);
  assert_true(now_s() - t0 < 30);
  assert_true(r.status != 0);
  assert_non_null(strstr(r.err, "rank 1"));
  assert_true(count_lines(csv) >= 2);
  rmtree(dir);
}

static void expect_usage_error(char *const args[], const char *needle) {
  run_result r;
  cli_run(&r, 20, "p2p", NULL, -1, NULL, args);
  assert_int_equal(r.status, 2);
  assert_true(!strncmp(r.err, "fabench: ", 9));
  assert_non_null(strstr(r.err, "usage: fabench p2p"));
  char *nl = strchr(r.err, '\n'); /* one line of error before the usage */
  assert_non_null(nl);
  assert_true(!strncmp(nl + 1, "usage:", 6));
  if (needle) assert_non_null(strstr(r.err, needle));
}

static void test_bad_flags(void **state) {
  (void)state;
  expect_usage_error((char *[]){"--bogus", NULL}, "--bogus");
  expect_usage_error((char *[]){"--window", NULL}, "--window");
  expect_usage_error((char *[]){"--window", "0", NULL}, "--window");
  expect_usage_error((char *[]){"--pairs", "1,1", NULL}, "--pairs");
  expect_usage_error((char *[]){"--pairs", "0,x", NULL}, "--pairs");
  expect_usage_error((char *[]){"--pairs", "0", NULL}, "--pairs");
  expect_usage_error((char *[]){"--transport", "carrier-pigeon", NULL}, "carrier-pigeon");
  expect_usage_error((char *[]){"--transport", "tcp,tcp", NULL}, "twice");
  expect_usage_error((char *[]){"--tests", "latency,jitter", NULL}, "jitter");
  expect_usage_error((char *[]){"--tcp-cc", "no/such", NULL}, "--tcp-cc");
  expect_usage_error((char *[]){"--min-bytes", "0", NULL}, "--min-bytes");
  expect_usage_error((char *[]){"--max-bytes", "1.5M", NULL}, "--max-bytes");
  /* messages to 1G, the GPU copies to 4G */
  expect_usage_error((char *[]){"--max-bytes", "2G", NULL}, "messages of 1G at most");
  expect_usage_error((char *[]){"--transport", "nccl", "--tests", "d2d", "--max-bytes", "5G", NULL}, "copy tests to 4G");
  expect_usage_error((char *[]){"--min-bytes", "8K", "--max-bytes", "1K", NULL}, "larger");
  expect_usage_error((char *[]){"--step-factor", "1", NULL}, "--step-factor");
  expect_usage_error((char *[]){"--step-factor", "1.001", NULL}, "1.01 to 1024");
  /* the copy tests run on a GPU's buffers only: over tcp they would measure nothing */
  expect_usage_error((char *[]){"--tests", "d2d,h2d", NULL}, "nothing to measure");
  expect_usage_error((char *[]){"--iters", "-3", NULL}, "--iters");
  expect_usage_error((char *[]){"--timeout", "soon", NULL}, "--timeout");
  expect_usage_error((char *[]){"-n", "0", NULL}, "-n");
  expect_usage_error((char *[]){"-n", "2", "--pairs", "0,2", NULL}, "3 ranks");
  expect_usage_error((char *[]){"--emulate", "1gbit", NULL}, "-n");
  expect_usage_error((char *[]){"-n", "2", "--emulate", "fast", NULL}, "--emulate");
  expect_usage_error((char *[]){"stray", NULL}, "stray");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_flags),
      cmocka_unit_test(test_two_ranks_tcp),
      cmocka_unit_test(test_two_ranks_ucx_tcp),
      cmocka_unit_test(test_three_ranks_all_pairs),
      cmocka_unit_test(test_rounds_pairs),
      cmocka_unit_test(test_damaged_data_fails),
      cmocka_unit_test(test_killed_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
