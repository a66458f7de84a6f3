/* Records that survive: every record carries its schema version and a newer one is refused;
 * run.json's environment keeps no secret; a write that fails (file too large, disk full)
 * is reported and leaves the rows before it whole, in both files; a stop signal in the middle
 * of run.json's replacement leaves no temporary file; a JSON file is read back with clear errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "res.h"
#include "test_util.h"
#include "util.h"

#define R_SCHEMA_FN_(rec, COLS) res_schema_##rec,
static const res_schema *(*const all_records[])(void) = {RES_RECORDS(R_SCHEMA_FN_)};
#define NRECORDS (sizeof all_records / sizeof *all_records)

static int field_index(const res_schema *s, const char *name) {
  for (size_t i = 0; i < s->nfields; i++)
    if (!strcmp(s->fields[i].name, name)) return (int)i;
  return -1;
}

/* Every record has a schema column, and res_table_put writes the record's version there
 * whatever the row says, in CSV and JSONL. */
static void test_every_record_carries_its_version(void **state) {
  (void)state;
  char dir[64], err[256], path[600], want[64];
  for (size_t k = 0; k < NRECORDS; k++) {
    const res_schema *s = all_records[k]();
    int col = field_index(s, "schema");
    if (col < 0) fail_msg("record %s has no schema column", s->base);
    assert_int_equal(s->version, RES_SCHEMA_VERSION);
    assert_non_null(tu_tmpdir(dir, sizeof dir, "resh"));
    res_table *t;
    if (res_table_open_schema(&t, dir, s, err, sizeof err)) fail_msg("%s", err);
    char row[8192] = {0};
    assert_true(s->row_size <= sizeof row);
    res_row_init(s, row); /* the schema field stays 0: the writer fills it */
    if (res_table_put(t, row, err, sizeof err)) fail_msg("%s", err);
    res_table_close(t);
    /* CSV: the col-th field of line 2 */
    snprintf(path, sizeof path, "%s/%s.csv", dir, s->base);
    char *csv = tu_slurp(path, NULL);
    assert_non_null(csv);
    const char *p = strchr(csv, '\n');
    assert_non_null(p);
    p++;
    for (int i = 0; i < col; i++) {
      p = strchr(p, ',');
      assert_non_null(p);
      p++;
    }
    assert_int_equal(atoi(p), RES_SCHEMA_VERSION);
    free(csv);
    snprintf(path, sizeof path, "%s/%s.jsonl", dir, s->base);
    char *jl = tu_slurp(path, NULL);
    assert_non_null(jl);
    snprintf(want, sizeof want, "\"schema\":%d", RES_SCHEMA_VERSION);
    if (!strstr(jl, want)) fail_msg("%s.jsonl lacks %s: %s", s->base, want, jl);
    free(jl);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* A file of a newer schema is refused with an error that says so, for every record, from CSV
 * and from JSONL, with no run.json beside it. */
static void test_newer_schema_refused_everywhere(void **state) {
  (void)state;
  char dir[64], path[600], text[256], err[512];
  for (size_t k = 0; k < NRECORDS; k++) {
    const res_schema *s = all_records[k]();
    assert_non_null(tu_tmpdir(dir, sizeof dir, "resh"));
    snprintf(path, sizeof path, "%s/%s.csv", dir, s->base);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "run_id,schema\nx,%d\n", RES_SCHEMA_VERSION + 1);
    fclose(f);
    res_rows got;
    err[0] = '\0';
    if (res_table_read(&got, s, path, err, sizeof err) == 0) {
      res_rows_free(&got);
      fail_msg("%s: a schema %d CSV was read", s->base, RES_SCHEMA_VERSION + 1);
    }
    snprintf(text, sizeof text, "schema version %d is newer", RES_SCHEMA_VERSION + 1);
    if (!strstr(err, text)) fail_msg("%s: error '%s' lacks '%s'", s->base, err, text);
    snprintf(path, sizeof path, "%s/%s.jsonl", dir, s->base);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"run_id\":\"x\",\"schema\":%d}\n", RES_SCHEMA_VERSION + 1);
    fclose(f);
    err[0] = '\0';
    if (res_table_read(&got, s, path, err, sizeof err) == 0) {
      res_rows_free(&got);
      fail_msg("%s: a schema %d JSONL was read", s->base, RES_SCHEMA_VERSION + 1);
    }
    if (!strstr(err, text)) fail_msg("%s: error '%s' lacks '%s'", s->base, err, text);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* ---- run.json's environment ---- */
static const char *const secret_vars[][2] = {
    {"FABENCH_TOKEN", "tok-0123456789abcdef"},
    {"FABENCH_SECRET_SAUCE", "s1"},
    {"UCX_API_KEY", "k1"},
    {"NCCL_PASSWORD", "p1"},
    {"SLURM_JOB_TOKEN", "t2"},
    {"OMPI_MCA_orte_precondition_transports", "0123456789abcdef-fedcba9876543210"},
    {"OMPI_MCA_some_passwd", "p2"},
    {"SLURM_Key_lowercase", "k2"},
    {"FABENCH_ROOT_ALIAS", "host:1-tok-0123456789abcdef"}, /* holds the token's value */
};
static const char *const kept_vars[][2] = {
    {"FABENCH_RANK", "3"},
    {"OMPI_COMM_WORLD_SIZE", "8"},
    {"UCX_TLS", "sm,tcp"},
    {"NCCL_DEBUG", "INFO"},
};

static void test_meta_environment_filtered(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof secret_vars / sizeof *secret_vars; i++)
    setenv(secret_vars[i][0], secret_vars[i][1], 1);
  for (size_t i = 0; i < sizeof kept_vars / sizeof *kept_vars; i++)
    setenv(kept_vars[i][0], kept_vars[i][1], 1);
  setenv("HOME_UNRELATED_FOR_TEST", "x", 1); /* not a recorded prefix */
  char *argv[] = {"fabench", "allreduce", "--note=tok-0123456789abcdef", "-n", "2"};
  cJSON *m = res_meta_new("id", "allreduce", 5, argv);
  assert_non_null(m);
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(m, "environment");
  assert_true(cJSON_IsObject(env));
  for (size_t i = 0; i < sizeof secret_vars / sizeof *secret_vars; i++)
    if (cJSON_GetObjectItemCaseSensitive(env, secret_vars[i][0]))
      fail_msg("run.json records %s", secret_vars[i][0]);
  for (size_t i = 0; i < sizeof kept_vars / sizeof *kept_vars; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, kept_vars[i][0]);
    if (!cJSON_IsString(v)) fail_msg("run.json lost %s", kept_vars[i][0]);
    assert_string_equal(v->valuestring, kept_vars[i][1]);
  }
  assert_null(cJSON_GetObjectItemCaseSensitive(env, "HOME_UNRELATED_FOR_TEST"));
  /* nowhere in the whole document: not the token, not the PSM key */
  char *txt = cJSON_PrintUnformatted(m);
  assert_null(strstr(txt, "tok-0123456789abcdef"));
  assert_null(strstr(txt, "0123456789abcdef-fedcba9876543210"));
  assert_non_null(strstr(txt, "\"-n\",\"2\"")); /* the rest of argv is kept */
  free(txt);
  cJSON_Delete(m);
  for (size_t i = 0; i < sizeof secret_vars / sizeof *secret_vars; i++) unsetenv(secret_vars[i][0]);
  for (size_t i = 0; i < sizeof kept_vars / sizeof *kept_vars; i++) unsetenv(kept_vars[i][0]);
  unsetenv("HOME_UNRELATED_FOR_TEST");
}

/* ---- a write that fails ---- */
/* Rows go to a table until a write fails under a file-size limit (EFBIG, as a full disk
 * gives ENOSPC: the same short write). The error names the file and the cause; every row
 * before it reads back whole from CSV and JSONL; the two files hold the same rows; later
 * rows are refused rather than written after a gap. */
static void test_failed_write_keeps_rows(void **state) {
  (void)state;
  char dir[64], err[512], path[600];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "resh"));
  const res_schema *s = res_schema_allreduce();
  res_table *t;
  if (res_table_open_schema(&t, dir, s, err, sizeof err)) fail_msg("%s", err);

  struct rlimit old, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 20000; /* bytes: a few dozen rows */
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);

  res_allreduce_row r;
  int ok = 0, rc = 0;
  for (int i = 0; i < 1000 && rc == 0; i++) {
    res_row_init(s, &r);
    r.run_id = "run";
    r.transport = "tcp";
    r.algo = "ring";
    r.fabric = "tcp:lo, \"quoted\"";
    r.bytes = (int64_t)i * 4;
    r.t_p50_us = 1.5 * i;
    err[0] = '\0';
    rc = res_table_put(t, &r, err, sizeof err);
    if (rc == 0) ok++;
  }
  int rc2 = res_table_put(t, &r, err, sizeof err); /* the next row after the failure */
  char err2[512];
  snprintf(err2, sizeof err2, "%s", err);
  res_table_close(t);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, oldsig);

  if (rc == 0) fail_msg("1000 rows fit under a 20000-byte limit");
  assert_true(ok > 3);
  assert_int_not_equal(rc2, 0);
  assert_non_null(strstr(err2, "allreduce.jsonl")); /* the JSON line is the longer: it hit first */
  assert_non_null(strstr(err2, strerror(EFBIG)));
  assert_non_null(strstr(err2, "intact"));

  /* both files end in a whole line, with the header plus ok rows (CSV) and ok rows (JSONL) */
  size_t n = 0;
  snprintf(path, sizeof path, "%s/allreduce.csv", dir);
  char *csv = tu_slurp(path, &n);
  assert_non_null(csv);
  assert_true(n > 0 && csv[n - 1] == '\n');
  assert_int_equal(tu_count_lines(csv), ok + 1);
  free(csv);
  snprintf(path, sizeof path, "%s/allreduce.jsonl", dir);
  char *jl = tu_slurp(path, &n);
  assert_non_null(jl);
  assert_true(n > 0 && jl[n - 1] == '\n');
  assert_int_equal(tu_count_lines(jl), ok);
  free(jl);
  /* and they parse, row for row */
  const char *files[] = {"allreduce.csv", "allreduce.jsonl"};
  for (int f = 0; f < 2; f++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[f]);
    res_rows got;
    if (res_table_read(&got, s, path, err, sizeof err)) fail_msg("%s: %s", files[f], err);
    assert_int_equal(got.n, (size_t)ok);
    const res_allreduce_row *g = got.rows;
    for (int i = 0; i < ok; i++) {
      assert_int_equal(g[i].bytes, (int64_t)i * 4);
      assert_true(g[i].t_p50_us == 1.5 * i);
      assert_string_equal(g[i].fabric, "tcp:lo, \"quoted\"");
    }
    res_rows_free(&got);
  }
  assert_int_equal(tu_rmtree(dir), 0);
}

/* A table that cannot even be created says which file and why. */
static void test_open_failure_named(void **state) {
  (void)state;
  res_table *t = NULL;
  char err[512] = "";
  assert_int_equal(res_table_open_schema(&t, "/nonexistent-dir-fabench", res_schema_p2p(), err,
                                         sizeof err),
                   -1);
  assert_null(t);
  assert_non_null(strstr(err, "/nonexistent-dir-fabench/p2p.csv"));
  assert_non_null(strstr(err, strerror(ENOENT)));
}

/* A JSON file read back is the value written; a missing file, a file that is not JSON (with
 * the line and column where it stops) and one past the size limit each get their own error. */
static void test_json_read_file(void **state) {
  (void)state;
  char dir[64], path[600], err[700];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "jsonread"));
  snprintf(path, sizeof path, "%s/v.json", dir);
  cJSON *v = cJSON_Parse("{\"a\": [1, 2.5, \"x\"], \"b\": {\"c\": null, \"d\": true}}");
  assert_non_null(v);
  assert_int_equal(util_json_write_file(path, v, err, sizeof err), 0);
  cJSON *back = NULL;
  if (util_json_read_file(path, &back, err, sizeof err)) fail_msg("%s", err);
  assert_true(cJSON_Compare(v, back, 1));
  cJSON_Delete(back);
  cJSON_Delete(v);

  char missing[700];
  snprintf(missing, sizeof missing, "%s/none.json", dir);
  assert_int_equal(util_json_read_file(missing, &back, err, sizeof err), -2);
  assert_null(back);
  assert_non_null(strstr(err, missing));
  assert_non_null(strstr(err, strerror(ENOENT)));

  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\n  \"a\": 1,\n  \"b\": ]\n}\n", f); /* the ']' is line 3, column 8 */
  fclose(f);
  assert_int_equal(util_json_read_file(path, &back, err, sizeof err), -1);
  assert_null(back);
  char want[700];
  snprintf(want, sizeof want, "%s:3:8: not JSON", path);
  if (strcmp(err, want)) fail_msg("got '%s', want '%s'", err, want);

  /* a sparse file one byte past the limit: no disk, and the reader stops at the limit */
  int fd = open(path, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)UTIL_JSON_MAX_BYTES + 1), 0);
  close(fd);
  assert_int_equal(util_json_read_file(path, &back, err, sizeof err), -1);
  assert_null(back);
  assert_non_null(strstr(err, "too large"));
  assert_int_equal(tu_rmtree(dir), 0);
}

#define STOP_NSTR 8
#define STOP_STR_LEN (1 << 20)

static void *idle_thread(void *arg) {
  (void)arg;
  for (;;) pause(); /* masks nothing: the kernel may hand the process's SIGTERM to this thread */
  return NULL;
}

/* The child: rewrites run.json (nstr strings of len bytes: at a few MB most of its time is spent
 * inside the write) until a signal ends it, with a second thread that masks nothing, as a rank's
 * helper threads. */
static void stop_child(const char *dir, int ready_fd, int nstr, size_t len) {
  if (util_stop_signals_install() != 0) _exit(3);
  pthread_t th;
  if (pthread_create(&th, NULL, idle_thread, NULL) != 0) _exit(3);
  /* long strings: rendering them is quick next to writing and syncing them */
  cJSON *v = cJSON_CreateArray();
  char *big = malloc(len + 1);
  if (!v || !big) _exit(3);
  memset(big, 'x', len);
  big[len] = '\0';
  for (int i = 0; i < nstr; i++) cJSON_AddItemToArray(v, cJSON_CreateString(big));
  free(big);
  char path[600], err[256];
  snprintf(path, sizeof path, "%s/run.json", dir);
  for (int k = 0;; k++) {
    if (util_json_write_file(path, v, err, sizeof err) != 0) _exit(4);
    if (k == 0 && write(ready_fd, "r", 1) != 1) _exit(5);
  }
}

/* One round: a stop_child of nstr strings of len bytes, rewriting dir/run.json, gets sig at a
 * random moment of its loop's first wait_us, and SIGKILL up to kill_us later where kill_us > 0
 * (as mpirun stops a rank: SIGTERM, then SIGKILL a moment later); its wait status. run.json is
 * then checked whole (the old text or the new). */
static int signal_round_of(const char *dir, int sig, useconds_t wait_us, useconds_t kill_us, int nstr, size_t len,
                           unsigned *seed, int round) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    stop_child(dir, fds[1], nstr, len);
  }
  close(fds[1]);
  char c;
  assert_int_equal(read(fds[0], &c, 1), 1);
  close(fds[0]);
  usleep((useconds_t)rand_r(seed) % wait_us);
  assert_int_equal(kill(pid, sig), 0);
  if (kill_us > 0) {
    usleep((useconds_t)rand_r(seed) % kill_us);
    kill(pid, SIGKILL); /* it may have ended already */
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", dir);
  size_t got = 0;
  char *txt = tu_slurp(path, &got);
  assert_non_null(txt);
  cJSON *v = cJSON_Parse(txt);
  if (!v || cJSON_GetArraySize(v) != nstr) fail_msg("round %d: run.json is not whole", round);
  cJSON_Delete(v);
  free(txt);
  return st;
}

static int signal_round(const char *dir, int sig, unsigned *seed, int round) {
  return signal_round_of(dir, sig, 40000, 0, STOP_NSTR, STOP_STR_LEN, seed, round);
}

/* A SIGTERM at any moment of a JSON file's replacement, in a process with other threads, ends
 * the process by SIGTERM (as the default action would) and leaves the old file or the new one,
 * whole, and no temporary file. */
static void test_stop_signal_waits_for_json_write(void **state) {
  (void)state;
  char dir[64], tmp[600];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "stop"));
  snprintf(tmp, sizeof tmp, "%s/run.json.tmp", dir);
  unsigned seed = (unsigned)time(NULL);
  for (int round = 0; round < 12; round++) {
    int st = signal_round(dir, SIGTERM, &seed, round);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM)
      fail_msg("round %d: the child ended with status 0x%x, not by SIGTERM", round, st);
    if (access(tmp, F_OK) == 0) fail_msg("round %d: %s left behind", round, tmp);
  }
  assert_int_equal(tu_rmtree(dir), 0);
}

/* A writer killed outright (SIGKILL: a stopped rank its launcher kills) at any moment of a JSON
 * file's replacement leaves the old file or the new one, whole, and (but for a kill in the
 * instant between naming the new file and renaming it) no temporary file: the text is written
 * to an unnamed file. Written to a named temporary, most of these kills left one. */
static void test_kill_leaves_no_temporary(void **state) {
  (void)state;
  char dir[64], path[600], tmp[600];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "kill"));
  snprintf(path, sizeof path, "%s/run.json", dir);
  snprintf(tmp, sizeof tmp, "%s/run.json.tmp", dir);
  unsigned seed = (unsigned)time(NULL);
  int left = 0;
  for (int round = 0; round < 12; round++) {
    signal_round(dir, SIGKILL, &seed, round);
    if (access(tmp, F_OK) == 0) left++, unlink(tmp);
  }
  if (left > 1) fail_msg("%d of 12 kills left %s behind", left, tmp);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  mode_t um = umask(0);
  umask(um);
  assert_int_equal(sb.st_mode & 0777, 0666 & ~um); /* as a file fopen made */
  assert_int_equal(tu_rmtree(dir), 0);
}

/* A SIGTERM, then SIGKILL up to 200 us later (mpirun's way with the ranks left when one has
 * died), at any moment of a small JSON file's replacement: the old file or the new, whole, and
 * almost never a temporary file. The signal that comes before the new file is named drops the
 * new text (deferred to the rename instead, the kill that followed it often landed between the
 * name and the rename). A SIGTERM after that check with its SIGKILL during the link still leaves
 * one, rarely (no order of the system calls closes that window), hence up to 6, not none. */
static void test_stop_then_kill_leaves_no_temporary(void **state) {
  (void)state;
  char dir[64], tmp[600];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "termkill"));
  snprintf(tmp, sizeof tmp, "%s/run.json.tmp", dir);
  unsigned seed = (unsigned)time(NULL);
  int left = 0, rounds = 1000;
  for (int round = 0; round < rounds; round++) {
    signal_round_of(dir, SIGTERM, 5000, 200, 1, 4096, &seed, round);
    if (access(tmp, F_OK) == 0) left++, unlink(tmp);
  }
  assert_int_equal(tu_rmtree(dir), 0);
  if (left > 6) fail_msg("%d of %d stops left %s behind", left, rounds, tmp);
}

/* model.json's costs are finite numbers from 0: a negative or infinite one (JSON's 1e999) is
 * refused naming the file, the fabric and the field; they went into predictions as they were.
 * An optional one may be null or absent (0); 0 itself is a cost. */
static void test_model_json_costs_checked(void **state) {
  (void)state;
  static const char *const fields[] = {"alpha_us", "beta_s_per_byte", "gamma_s_per_byte", "beta_cpu_s_per_byte",
                                       "burst_bytes", "cpu_s_per_byte"};
  char dir[64], path[128], text[2048], err[512];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "res"));
  snprintf(path, sizeof path, "%s/model.json", dir);
  res_costmodel m;
  for (size_t f = 0; f <= sizeof fields / sizeof *fields; f++)
    for (int bad = 0; bad < 4; bad++) {
      size_t len = (size_t)snprintf(text, sizeof text, "{\"schema\": 1, \"kind\": \"fabench-cost-model\", \"gamma_kernel_s_per_byte\": %s, "
                                    "\"fabrics\": [{\"fabric\": \"tcp:x\", \"transport\": \"tcp\"",
                                    f == sizeof fields / sizeof *fields ? (bad == 0 ? "-1e-9" : bad == 1 ? "1e999" : bad == 2 ? "null" : "0") : "2e-10");
      for (size_t g = 0; g < sizeof fields / sizeof *fields; g++) {
        const char *v = "0.5";
        if (g == f) v = bad == 0 ? "-1e-9" : bad == 1 ? "1e999" : bad == 2 ? "null" : "0";
        len += (size_t)snprintf(text + len, sizeof text - len, ", \"%s\": %s", fields[g], v);
      }
      snprintf(text + len, sizeof text - len, "}]}\n");
      assert_int_equal(tu_write(dir, "model.json", text), 0);
      int rc = res_costmodel_read(&m, path, err, sizeof err);
      int required = f < 3; /* alpha, beta, gamma */
      const char *name = f < sizeof fields / sizeof *fields ? fields[f] : "gamma_kernel_s_per_byte";
      if (bad == 3 || (bad == 2 && !required)) { /* 0, or an optional one not given */
        if (rc) fail_msg("%s = %s refused: %s", name, bad == 3 ? "0" : "null", err);
        res_costmodel_free(&m);
        continue;
      }
      if (rc == 0) fail_msg("%s = %s accepted", name, bad == 0 ? "-1e-9" : bad == 1 ? "1e999" : "null");
      if (!strstr(err, path) || !strstr(err, name) || (f < sizeof fields / sizeof *fields && !strstr(err, "fabric tcp:x")))
        fail_msg("%s: error '%s' does not name the file, fabric and field", name, err);
    }
  assert_int_equal(tu_rmtree(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_record_carries_its_version),
      cmocka_unit_test(test_newer_schema_refused_everywhere),
      cmocka_unit_test(test_meta_environment_filtered),
      cmocka_unit_test(test_failed_write_keeps_rows),
      cmocka_unit_test(test_kill_leaves_no_temporary),
      cmocka_unit_test(test_stop_then_kill_leaves_no_temporary),
      cmocka_unit_test(test_open_failure_named),
      cmocka_unit_test(test_json_read_file),
      cmocka_unit_test(test_stop_signal_waits_for_json_write),
      cmocka_unit_test(test_model_json_costs_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
