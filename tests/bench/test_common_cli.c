/* What every command owes its caller, through the fabench binary (FABENCH_BIN): a value that
 * is no number is a usage error, and output that did not reach its file or stdout makes the
 * run fail, without a summary that passes for the whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "test_util.h"

/* `fabench args...` with stdout to out_path and stderr into err; fsize > 0: no file of the run
 * may grow past fsize bytes (RLIMIT_FSIZE; writes then fail with EFBIG, as on a full disk).
 * Returns the exit status. */
static int run_limited(const char *out_path, long fsize, char *err, size_t cap, char *const args[]) {
  char efile[] = "/tmp/fbcmnerrXXXXXX";
  int efd = mkstemp(efile);
  assert_true(efd >= 0);
  pid_t p = fork();
  if (p == 0) {
    int ofd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (ofd < 0) _exit(126);
    dup2(ofd, 1);
    dup2(efd, 2);
    if (fsize > 0) {
      signal(SIGXFSZ, SIG_IGN);
      struct rlimit rl = {(rlim_t)fsize, (rlim_t)fsize};
      if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(126);
    }
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)bin();
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    execv(bin(), argv);
    _exit(127);
  }
  int st = 0;
  assert_int_equal(waitpid(p, &st, 0), p);
  slurp(efd, err, cap);
  close(efd);
  unlink(efile);
  fputs(err, stderr); /* in the test's log */
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *fixture_run(void) {
  static char path[4096];
  const char *src = getenv("FABENCH_SRC");
  snprintf(path, sizeof path, "%s/tests/results/fixtures/run1", src ? src : ".");
  return path;
}

/* topo's JSON, fit's and predict's tables onto a full disk: once "exit 0" with nothing written. */
static void test_stdout_full(void **st) {
  (void)st;
  char err[4096], dir[] = "/tmp/fbcmnfullXXXXXX";
  assert_non_null(mkdtemp(dir));
  char model[300], pred[300];
  snprintf(model, sizeof model, "%s/model.json", dir);
  snprintf(pred, sizeof pred, "%s/p", dir);
  assert_int_equal(run_limited("/dev/null", 0, err, sizeof err, (char *[]){"topo", "--json", NULL}), 0);
  assert_int_equal(run_limited("/dev/full", 0, err, sizeof err, (char *[]){"topo", "--json", NULL}), 1);
  assert_non_null(strstr(err, "topo: cannot write standard output"));
  assert_int_equal(run_limited("/dev/full", 0, err, sizeof err, (char *[]){"topo", NULL}), 1);
  assert_int_equal(run_limited("/dev/full", 0, err, sizeof err,
                               (char *[]){"fit", "--out", model, (char *)fixture_run(), NULL}),
                   1);
  assert_non_null(strstr(err, "fit: cannot write standard output"));
  assert_int_equal(run_limited("/dev/full", 0, err, sizeof err,
                               (char *[]){"predict", "--ranks", "8", "--no-plot", "--out", pred, NULL}),
                   1);
  assert_non_null(strstr(err, "predict: cannot write standard output"));
  assert_int_equal(tu_rmtree(dir), 0);
}

/* fit --check-out whose table cannot be written whole: once it summarised the rows before the
 * failure as the check and exited 0. */
static void test_fit_check_out_fails(void **st) {
  (void)st;
  char err[4096], dir[] = "/tmp/fbcmnfitXXXXXX";
  assert_non_null(mkdtemp(dir));
  char model[300], out[300], chk[300];
  snprintf(model, sizeof model, "%s/model.json", dir);
  snprintf(out, sizeof out, "%s/out.txt", dir);
  snprintf(chk, sizeof chk, "%s/chk", dir);
  const char *fx = fixture_run();
  assert_int_equal(run_limited("/dev/null", 0, err, sizeof err, (char *[]){"fit", "--out", model, (char *)fx, NULL}), 0);
  char *const check[] = {"fit", "--model", model, "--check", (char *)fx, "--check-out", chk, NULL};
  assert_int_equal(run_limited(out, 0, err, sizeof err, check), 0); /* whole: the summary */
  assert_true(tu_file_has(dir, "out.txt", "per fabric"));
  /* 1 KiB: some rows of model_check.jsonl (about 200 bytes each), not all 28 */
  int rc = run_limited(out, 1024, err, sizeof err, check);
  if (rc != 1 || !strstr(err, "fit --check-out: cannot write"))
    fail_msg("status %d, stderr:\n%s", rc, err);
  assert_false(tu_file_has(dir, "out.txt", "error"));
  assert_false(tu_file_has(dir, "out.txt", "per fabric"));
  /* the rows written are whole */
  char path[400];
  snprintf(path, sizeof path, "%s/model_check.jsonl", chk);
  char *jl = tu_slurp(path, NULL);
  assert_non_null(jl);
  int n = tu_count_lines(jl);
  assert_true(n >= 1 && n < 28);
  assert_true(jl[strlen(jl) - 1] == '\n');
  free(jl);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* predict's fabric specs: alpha may be 0, never nan, inf or negative; the rates must be
 * positive. Once alpha=nan gave rows of nan. An empty item is a slip, once passed over. */
static void test_predict_spec_numbers(void **st) {
  (void)st;
  static const char *const bad[] = {"alpha=nan,gbit=10", "alpha=inf,gbit=10", "alpha=-1,gbit=10",
                                    "alpha=5,reduce=nan,gbit=10", "alpha=5,reduce=inf,gbit=10", "alpha=5,delta=0,gbit=10",
                                    "alpha=5,gbit=nan", "alpha=5,gbit=0", "alpha=5,gbps=inf",
                                    "alpha= 5,gbit=10", "alpha=0x10,gbit=10", "alpha=5,gbps=1e300",
                                    "alpha=5,,gbit=10", "alpha=5,gbit=10,"};
  run_result *r = calloc(1, sizeof *r);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cli_run(r, 30, "predict", NULL, -1, NULL, (char *[]){"--inter", (char *)bad[i], "--no-plot", NULL});
    if (r->status != 2 || !strstr(r->err, "--inter: '") || !strstr(r->err, "usage: fabench predict"))
      fail_msg("--inter %s: status %d, stderr:\n%s", bad[i], r->status, r->err);
  }
  char dir[] = "/tmp/fbcmnpredXXXXXX";
  assert_non_null(mkdtemp(dir));
  cli_run(r, 30, "predict", NULL, -1, NULL,
          (char *[]){"--inter", "alpha=0,gbit=10", "--ranks", "16", "--no-plot", "--out", dir, NULL});
  if (r->status != 0) fail_msg("status %d, stderr:\n%s", r->status, r->err);
  assert_null(strstr(r->out, "nan"));
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* --out naming another command's run directory: refused, the run in it untouched (p2p once
 * replaced an allreduce run's run.json beside its allreduce.csv, and fit read the mix); the
 * same command again may reuse it. */
static void test_out_of_another_command(void **st) {
  (void)st;
  char dir[] = "/tmp/fbcmnoutXXXXXX";
  assert_non_null(mkdtemp(dir));
  run_result *r = calloc(1, sizeof *r);
  char *const ar[] = {"-n", "1", "--transport", "tcp", "--algo", "ring", "--min-bytes", "1K", "--max-bytes", "1K",
                      "--out", dir, NULL};
  cli_run(r, 60, "allreduce", NULL, -1, NULL, ar);
  if (r->status != 0) fail_msg("status %d, stderr:\n%s", r->status, r->err);
  cli_run(r, 60, "p2p", NULL, -1, NULL, (char *[]){"-n", "2", "--transport", "tcp", "--max-bytes", "1K", "--out", dir, NULL});
  if (r->status != 1 || !strstr(r->err, "holds a `allreduce` run"))
    fail_msg("status %d, stderr:\n%s", r->status, r->err);
  assert_true(tu_file_has(dir, "run.json", "\"command\":\t\"allreduce\""));
  char p2p[300];
  snprintf(p2p, sizeof p2p, "%s/p2p.csv", dir);
  assert_int_not_equal(access(p2p, F_OK), 0);
  cli_run(r, 60, "allreduce", NULL, -1, NULL, ar);
  if (r->status != 0) fail_msg("status %d, stderr:\n%s", r->status, r->err);
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stdout_full),
      cmocka_unit_test(test_fit_check_out_fails),
      cmocka_unit_test(test_predict_spec_numbers),
      cmocka_unit_test(test_out_of_another_command),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
