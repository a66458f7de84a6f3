/* `fabench suite`: a small suite runs every step into its directory and prints the per-fabric
 * summary; --resume runs only the steps that are not done; bad flags give the usage; a failed
 * step's error is shown; a killed suite leaves no step running. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"
#include "res.h"
#include "test_util.h"

static char dir[256];

#define SMALL "-n 2 --transport tcp --algo ring --emulate none --model resnet8-w2 --data synthetic:1x8x8:4:64 --batch 8 --steps 4 --timeout 20"

/* `fabench suite` with the arguments (split at spaces) and extra environment env (or NULL). */
static void run_venv(run_result *r, const char *env, const char *fmt, va_list ap) {
  char line[4096];
  vsnprintf(line, sizeof line, fmt, ap);
  char *args[64];
  int n = 0;
  for (char *t = strtok(line, " "); t && n < 63; t = strtok(NULL, " ")) args[n++] = t;
  args[n] = NULL;
  cli_run(r, 600, "suite", env, -1, NULL, args);
}

static void run(run_result *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  run_venv(r, NULL, fmt, ap);
  va_end(ap);
}

static void run_env(run_result *r, const char *env, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  run_venv(r, env, fmt, ap);
  va_end(ap);
}

static int exists(const char *rel) {
  char p[600];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  return stat(p, &st) == 0;
}

/* Rewrites a step's state in s/suite.json. */
static void set_state(const char *step, const char *from, const char *to) {
  char p[600], key[128];
  snprintf(p, sizeof p, "%s/s/suite.json", dir);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  snprintf(key, sizeof key, "\"%s\":\t%s", step, from);
  char *k = strstr(buf, key);
  assert_non_null(k);
  f = fopen(p, "w");
  assert_non_null(f);
  fprintf(f, "%.*s%s%s", (int)(k + strlen(key) - strlen(from) - buf), buf, to, k + strlen(key));
  fclose(f);
}

static void test_small_suite_and_resume(void **st) {
  (void)st;
  run_result r;
  run(&r, SMALL " --out %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s\n%s", r.status, r.out, r.err);
  const char *must[] = {"s/suite.json", "s/topo/topo.json", "s/p2p-loopback/p2p.csv",
                        "s/allreduce-loopback/allreduce.csv", "s/train-loopback/train.csv",
                        "s/train-loopback.log", "s/busy-loopback/allreduce.csv"};
  for (size_t i = 0; i < sizeof must / sizeof *must; i++)
    if (!exists(must[i])) fail_msg("the suite did not write %s", must[i]);
  /* the all-reduce is measured as training's communication thread waits, asleep: so the
   * host's CPU per call is measured, which the prediction of training takes its share from */
  char p[600], err[512];
  res_rows rows = {0};
  snprintf(p, sizeof p, "%s/s/allreduce-loopback/allreduce.csv", dir);
  if (res_table_read(&rows, res_schema_allreduce(), p, err, sizeof err)) fail_msg("%s", err);
  const res_allreduce_row *ar = rows.rows;
  if (!rows.n) fail_msg("no loopback all-reduce rows");
  for (size_t i = 0; i < rows.n; i++)
    if (!isfinite(ar[i].host_cpu_us)) fail_msg("the loopback all-reduce rows have no host_cpu_us");
  res_rows_free(&rows);
  /* the ring beside a load: its losses in the model, for the training step's share */
  snprintf(p, sizeof p, "%s/s/model.json", dir);
  char *mj = tu_slurp(p, NULL);
  if (!mj || !strstr(mj, "\"compute_loss\"")) fail_msg("the suite's model.json has no compute_loss");
  free(mj);
  /* the sentence says how fast against no communication, or that noise hid the difference */
  if (!strstr(r.out, "loopback tcp/ring") || (!strstr(r.out, "of its no-communication speed") &&
                                               !strstr(r.out, "as fast as with no communication")))
    fail_msg("no per-fabric summary:\n%s", r.out);
  /* nothing emulated: no held-out check, and the suite says so */
  if (!strstr(r.out, "held-out check: skipped (the suite emulates no links"))
    fail_msg("no line for the skipped held-out check:\n%s", r.out);
  /* a resumed suite measures nothing again: every step says so */
  run(&r, "--resume %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s", r.status, r.err);
  if (!strstr(r.err, "train-loopback: done before")) fail_msg("resume re-ran a step:\n%s", r.err);
  /* one step undone: only it runs again */
  set_state("train-loopback", "\"ok\"", "\"no\"");
  run(&r, "--resume %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s", r.status, r.err);
  /* and what reads it: the predictions from its profile, the report (stale otherwise) */
  if (!strstr(r.err, "allreduce-loopback: done before") || !strstr(r.err, "fit: done before") ||
      strstr(r.err, "train-loopback: done before") || strstr(r.err, "predict: done before") ||
      strstr(r.err, "report: done before"))
    fail_msg("resume did not run just the undone step and what reads it:\n%s", r.err);
  /* a fit that failed and now succeeds: the training done without it runs again, predicted */
  set_state("fit", "\"ok\"", "\"failed\"");
  run(&r, "--resume %s/s", dir);
  if (r.status != 0) fail_msg("exit %d\n%s", r.status, r.err);
  if (!strstr(r.err, "allreduce-loopback: done before") || strstr(r.err, "fit: done before") ||
      strstr(r.err, "train-loopback: done before") || strstr(r.err, "report: done before"))
    fail_msg("a fit run again left the training unpredicted:\n%s", r.err);
  /* flags given with --resume would be ignored: refused; --help still answers */
  run(&r, "--resume %s/s --steps 3", dir);
  if (r.status != 2 || !strstr(r.err, "suite's own flags"))
    fail_msg("--resume with --steps: exit %d, stderr:\n%s", r.status, r.err);
  run(&r, "--resume %s/s --help", dir);
  if (r.status != 0 || !strstr(r.out, "usage: fabench suite")) fail_msg("--resume --help: exit %d", r.status);
}

/* The busbw column is the training's algorithm's, also where --algo leaves out ring. */
static void test_busbw_of_the_algorithm_trained(void **st) {
  (void)st;
  run_result r;
  run(&r, SMALL " --algo rhd --out %s/rhd", dir);
  if (r.status != 0) fail_msg("exit %d\n%s\n%s", r.status, r.out, r.err);
  const char *row = strstr(r.out, "\n  loopback tcp/rhd");
  double busbw = NAN;
  if (!strstr(r.out, "rhd GB/s") || !row || sscanf(row + 3 + 22, "%lf", &busbw) != 1 || !isfinite(busbw))
    fail_msg("no rhd busbw in the summary:\n%s", r.out);
}

/* A failing step: its error line is shown. (Steps under a launcher of their own refuse -n; the
 * suite passes them -n, and the environment on.) */
static void test_failed_step_says_why(void **st) {
  (void)st;
  run_result r;
  run_env(&r, "FABENCH_LAUNCHER=1", SMALL " --out %s/f", dir);
  if (r.status != 1 || !strstr(r.err, "p2p-loopback: FAILED") ||
      !strstr(r.err, "    fabench: -n given to a rank that a launcher started"))
    fail_msg("exit %d, stderr:\n%s", r.status, r.err);
}

/* The processes whose command line holds s: the suite's steps and their ranks (their --out). */
static int procs_with(const char *s, int kill_them) {
  DIR *d = opendir("/proc");
  struct dirent *de;
  int n = 0;
  while (d && (de = readdir(d))) {
    pid_t pid = atoi(de->d_name);
    char p[64], cmd[8192];
    if (pid <= 0 || pid == getpid()) continue;
    snprintf(p, sizeof p, "/proc/%d/cmdline", (int)pid);
    int fd = open(p, O_RDONLY);
    if (fd < 0) continue;
    ssize_t k = read(fd, cmd, sizeof cmd - 1);
    close(fd);
    for (ssize_t i = 0; i < k; i++)
      if (!cmd[i]) cmd[i] = ' ';
    cmd[k > 0 ? k : 0] = 0;
    if (strstr(cmd, s)) {
      n++;
      if (kill_them) kill(pid, SIGKILL);
    }
  }
  if (d) closedir(d);
  return n;
}

/* SIGTERM to the suite during a step: the step and its ranks stop with it (left running they
 * would write into the suite directory, and a --resume would run the step twice). */
static void test_killed_suite_leaves_no_step(void **st) {
  (void)st;
  char out[300], line[4096];
  snprintf(out, sizeof out, "%s/k", dir);
  snprintf(line, sizeof line, "%s", SMALL);
  char *args[64];
  int n = 0;
  args[n++] = (char *)bin();
  args[n++] = "suite";
  for (char *t = strtok(line, " "); t && n < 60; t = strtok(NULL, " ")) args[n++] = t;
  args[n++] = "--out";
  args[n++] = out;
  args[n] = NULL;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int nul = open("/dev/null", O_WRONLY);
    dup2(nul, 1);
    dup2(nul, 2);
    execv(bin(), args);
    _exit(127);
  }
  /* into p2p, the longest step of the small suite (about 2 s) */
  char p2p[400];
  snprintf(p2p, sizeof p2p, "%s/p2p-loopback", out);
  double t0 = now_s();
  while (now_s() - t0 < 30 && !procs_with(p2p, 0)) usleep(20000);
  usleep(200000);
  kill(pid, SIGTERM);
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  usleep(300000);
  int left = procs_with(out, 1);
  if (left) fail_msg("%d step process(es) outlived the killed suite", left);
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 128 + SIGTERM) fail_msg("the suite's status %#x after SIGTERM", ws);
  char p[400];
  snprintf(p, sizeof p, "%s/suite.json", out);
  FILE *f = fopen(p, "r");
  static char buf[65536];
  size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[k] = 0;
  if (!strstr(buf, "\"topo\":\t\"ok\"") || strstr(buf, "\"p2p-loopback\":\t\"ok\""))
    fail_msg("suite.json after the kill:\n%s", buf);
}

/* An emulated cluster as one of the suite's fabrics: its steps run on 2 hosts of 2 ranks (not
 * the suite's -n), p2p crosses the link, and the summary names the layout. Two rates of it: the
 * faster one is also predicted from the slower one's fit and set beside its measurement, and the
 * held-out check trains at a rate between them on 2 hosts of 1 rank (2x1:3gbit), predicted
 * before it ran (suite.json) against its measurement. Root only. */
static void test_cluster_suite(void **st) {
  (void)st;
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: an emulated cluster needs root\n");
    skip();
  }
  run_result r;
  run(&r, "-n 2 --transport tcp --algo ring --emulate 2x2:1gbit,2x2:10gbit --model resnet8-w2 "
          "--data synthetic:1x8x8:4:64 --batch 8 --steps 4 --timeout 20 --out %s/c", dir);
  if (r.status != 0) fail_msg("exit %d\n%s\n%s", r.status, r.out, r.err);
  const char *must[] = {"c/p2p-2x2:1gbit/p2p.csv", "c/allreduce-2x2:1gbit/allreduce.csv",
                        "c/train-2x2:1gbit/train.csv", "c/busy-2x2:1gbit/allreduce.csv"};
  for (size_t i = 0; i < sizeof must / sizeof *must; i++)
    if (!exists(must[i])) fail_msg("the suite did not write %s", must[i]);
  const char *runs[] = {"allreduce", "train", "p2p"};
  for (size_t i = 0; i < 3; i++) {
    char p[600];
    snprintf(p, sizeof p, "%s/c/%s-2x2:1gbit/run.json", dir, runs[i]);
    char *meta = tu_slurp(p, NULL);
    if (!meta || !strstr(meta, "\"host_count\":\t2") || !strstr(meta, "\"ranks\":\t4") ||
        !strstr(meta, "\"emulated_layout\":\t\"2x2\""))
      fail_msg("%s: not 4 ranks on 2 emulated hosts:\n%s", p, meta ? meta : "(none)");
    free(meta);
  }
  if (!strstr(r.out, "2x2 emu-1gbit tcp/ring")) fail_msg("no summary line for the cluster:\n%s", r.out);
  /* predicted without the measurement, beside it */
  if (!strstr(r.out, "held-out (from emu-1gbit, without emu-10gbit's rows)") ||
      !strstr(r.out, "  2x1 emu-3gbit tcp/ring") || !strstr(r.out, "without emu-3gbit's rows"))
    fail_msg("no side-by-side or held-out check line:\n%s", r.out);
  if (!exists("c/heldout-2x1:3gbit/train.csv")) fail_msg("the held-out check did not train");
  char p[600], err[512];
  /* its two hosts share this machine: their ranks bound to two cores, not both to the first */
  snprintf(p, sizeof p, "%s/c/heldout-2x1:3gbit/run.json", dir);
  char *rj = tu_slurp(p, NULL);
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2 && (!rj || !strstr(rj, "auto: core:0") || !strstr(rj, "auto: core:1")))
    fail_msg("the emulated hosts' ranks are not bound to cores 0 and 1:\n%s", rj ? rj : "(none)");
  free(rj);
  snprintf(p, sizeof p, "%s/c/suite.json", dir);
  char *sj = tu_slurp(p, NULL);
  const char *hp = sj ? strstr(sj, "\"heldout\":") : NULL;
  const char *pp = hp ? strstr(hp, "\"pred\":") : NULL;
  double before = pp ? strtod(pp + 7, NULL) : NAN;
  free(sj);
  res_rows rows = {0};
  snprintf(p, sizeof p, "%s/c", dir);
  if (res_table_read(&rows, res_schema_suite_check(), p, err, sizeof err)) fail_msg("%s", err);
  const res_suite_check_row *c = rows.rows;
  int whatif = 0, heldout = 0;
  for (size_t i = 0; i < rows.n; i++) {
    if (!(c[i].images_s_pred > 0) || !(c[i].images_s_meas > 0) || strcmp(c[i].pred_kind, "held-out") ||
        fabs(c[i].err - (c[i].images_s_pred - c[i].images_s_meas) / c[i].images_s_meas) > 1e-4)
      fail_msg("suite_check.csv row %zu: pred %g meas %g err %g kind %s", i, c[i].images_s_pred,
               c[i].images_s_meas, c[i].err, c[i].pred_kind);
    whatif += !strcmp(c[i].check, "whatif") && !strcmp(c[i].fabric, "emu-10gbit") && !strcmp(c[i].from, "emu-1gbit");
    /* the check's prediction is the one made before it ran */
    heldout += !strcmp(c[i].check, "heldout") && !strcmp(c[i].fabric, "emu-3gbit") && c[i].nodes == 2 &&
               fabs(c[i].images_s_pred - before) <= 1e-4 * before;
  }
  res_rows_free(&rows);
  if (whatif != 1 || heldout != 1) fail_msg("suite_check.csv: %d what-if and %d held-out rows", whatif, heldout);
}

static void test_bad_flags(void **st) {
  (void)st;
  run_result r;
  const char *cases[][2] = {{"-n 1", "-n"}, {"--emulate fast", "--emulate"},
                            {SMALL " --algo bogus", "--algo: unknown algorithm 'bogus'"},
                            {SMALL " --transport bogus", "--transport: unknown transport 'bogus'"},
                            {SMALL " --transport tcp,tcp", "transport 'tcp' given twice"},
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
  /* one without its command line: its flags are unknown, not the defaults (every step a default
   * suite could have is marked done, so that without the check nothing runs either) */
  snprintf(sub, sizeof sub, "%s/noargv", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  assert_int_equal(tu_write(sub, "suite.json",
                            "{\"steps\": {\"topo\": \"ok\", \"p2p-loopback\": \"ok\", \"allreduce-loopback\": \"ok\", "
                            "\"p2p-1gbit\": \"ok\", \"allreduce-1gbit\": \"ok\", \"p2p-10gbit\": \"ok\", "
                            "\"allreduce-10gbit\": \"ok\", \"fit\": \"ok\", \"train-loopback\": \"ok\", "
                            "\"train-1gbit\": \"ok\", \"train-10gbit\": \"ok\", \"predict\": \"ok\", \"report\": \"ok\"}}"),
                   0);
  run(&r, "--resume %s", sub);
  if (r.status != 1 || !strstr(r.err, "no \"argv\""))
    fail_msg("a suite.json without argv: exit %d, stderr:\n%s", r.status, r.err);
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
                                     cmocka_unit_test(test_small_suite_and_resume),
                                     cmocka_unit_test(test_busbw_of_the_algorithm_trained),
                                     cmocka_unit_test(test_failed_step_says_why),
                                     cmocka_unit_test(test_killed_suite_leaves_no_step),
                                     cmocka_unit_test(test_cluster_suite)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
