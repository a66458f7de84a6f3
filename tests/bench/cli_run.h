/* Test support for the command-line tests: run the fabench binary (FABENCH_BIN) with a
 * timeout, capture its output, and kill one of its ranks mid-run. */
#ifndef FABENCH_TEST_CLI_RUN_H
#define FABENCH_TEST_CLI_RUN_H

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h" /* tu_slurp, tu_count_lines */

typedef struct {
  int status; /* exit status, or 128+signal */
  char out[262144], err[65536];
  double secs;
  double kill_secs; /* from the rank's kill (kill_rank >= 0) to the end; -1: none was killed */
} run_result;

static const char *bin(void) {
  const char *b = getenv("FABENCH_BIN");
  return b ? b : "./fabench";
}

static void slurp(int fd, char *buf, size_t cap) {
  size_t got = 0;
  ssize_t r;
  lseek(fd, 0, SEEK_SET);
  while (got + 1 < cap && (r = read(fd, buf + got, cap - 1 - got)) > 0) got += (size_t)r;
  buf[got] = '\0';
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Kills the process of rank `rank` in process group pg (our run's ranks only). */
static int kill_rank_in(pid_t pg, int rank) {
  char want[32];
  snprintf(want, sizeof want, "FABENCH_RANK=%d", rank);
  DIR *d = opendir("/proc");
  struct dirent *de;
  int killed = 0;
  while (d && (de = readdir(d))) {
    pid_t pid = atoi(de->d_name);
    if (pid <= 0 || getpgid(pid) != pg) continue;
    char path[300], env[32768];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t n = read(fd, env, sizeof env - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(env + i) + 1)
      if (!strcmp(env + i, want)) {
        kill(pid, SIGKILL);
        killed = 1;
      }
  }
  if (d) closedir(d);
  return killed;
}

/* Runs `fabench cmd args...` (args NULL-terminated; cmd NULL when args[0] is the subcommand)
 * with extra environment `env` ("K=V" or NULL), in a process group of its own, killed after
 * timeout_s. kill_rank >= 0: that rank is killed once `csv` has a data row. */
static void cli_run(run_result *r, int timeout_s, const char *cmd, const char *env, int kill_rank,
                    const char *csv, char *const args[]) {
  char ofile[] = "/tmp/fbclioXXXXXX", efile[] = "/tmp/fbclieXXXXXX";
  int ofd = mkstemp(ofile), efd = mkstemp(efile);
  assert_true(ofd >= 0 && efd >= 0);
  pid_t p = fork();
  if (p == 0) {
    dup2(ofd, 1);
    dup2(efd, 2);
    setpgid(0, 0);
    if (env) putenv((char *)env);
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)bin();
    if (cmd) argv[n++] = (char *)cmd;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    execv(bin(), argv);
    _exit(127);
  }
  setpgid(p, p);
  int st = 0, killed = 0;
  double t0 = now_s(), t_kill = -1;
  for (;;) {
    if (waitpid(p, &st, WNOHANG) == p) break;
    if (now_s() - t0 > timeout_s) {
      kill(-p, SIGKILL);
      waitpid(p, &st, 0);
      fprintf(stderr, "fabench %s still running after %d s: killed\n", cmd ? cmd : args[0], timeout_s);
      break;
    }
    if (kill_rank >= 0 && !killed && csv) {
      FILE *f = fopen(csv, "r");
      int lines = 0, ch;
      if (f) {
        while ((ch = fgetc(f)) != EOF) lines += ch == '\n';
        fclose(f);
      }
      if (lines >= 2 && (killed = kill_rank_in(p, kill_rank))) t_kill = now_s();
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(-p, SIGKILL); /* anything left of the run */
  r->secs = now_s() - t0;
  r->kill_secs = t_kill < 0 ? -1 : now_s() - t_kill;
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  slurp(ofd, r->out, sizeof r->out);
  slurp(efd, r->err, sizeof r->err);
  close(ofd);
  close(efd);
  unlink(ofile);
  unlink(efile);
  if (kill_rank >= 0) assert_true(killed);
}

/* A rank killed mid-run (rank 1, once csv has a data row) of `fabench args...` writing into out: the
 * run fails, quickly after the kill (within its --timeout of 20 s, and some), with an error naming
 * the rank, and the rows measured before stay on disk. */
static inline void cli_expect_killed(char *const args[], const char *csv) {
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, NULL, NULL, 1, csv, args);
  assert_int_not_equal(r->status, 0);
  /* from the kill (the start-up before it is the machine's): within the timeout, and some */
  if (r->kill_secs < 0 || r->kill_secs > 20 + 10) fail_msg("%.1f s after the kill (-1: none)", r->kill_secs);
  if (!strstr(r->err, "rank 1")) fail_msg("stderr does not name rank 1:\n%s", r->err);
  char *c = tu_slurp(csv, NULL);
  assert_non_null(c);
  assert_true(tu_count_lines(c) >= 2); /* the header and at least one measured row */
  free(c);
  free(r);
}

#endif
