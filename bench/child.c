/* Child commands: `fabench <command> ...` run as a process of its own with its output in a log,
 * waited for while the signals meant for it are forwarded (suite's steps, accept's measurements). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "util.h"

#define CHILD_GRACE_S 10.0 /* a forwarded signal to SIGKILL: a -n launcher stops its ranks in 3 */

int bench_child_run(const char *self, char *const *args, const char *log, double timeout_s, const sigset_t *sigs,
                    const sigset_t *old_mask, int *interrupted) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return bench_error("cannot write %s: %s", log, strerror(errno)), -1;
  char *argv[BENCH_CHILD_MAX_ARGS + 2];
  int n = 0;
  argv[n++] = (char *)self;
  for (int i = 0; args[i] && n < BENCH_CHILD_MAX_ARGS + 1; i++) argv[n++] = args[i];
  argv[n] = NULL;
  fflush(stdout);
  pid_t parent = getpid();
  pid_t p = fork();
  if (p == 0) {
    /* the child ends with its parent even when that is SIGKILLed (it forwards the rest) */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(self, argv);
    _exit(127);
  }
  close(fd);
  if (p < 0) return bench_error("cannot start %s: %s", args[0], strerror(errno)), -1;
  int st = 0;
  double kill_at = 0, end = timeout_s > 0 ? util_now() + timeout_s : 0;
  for (;;) {
    pid_t w = waitpid(p, &st, WNOHANG);
    if (w == p) break;
    if (w < 0 && errno != EINTR) { /* not ours any more (SIGCHLD ignored above us): lost */
      st = 0x7f00;
      break;
    }
    struct timespec ts = {0, 200 * 1000 * 1000};
    int sig = sigtimedwait(sigs, NULL, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (*interrupted) {
        kill(p, SIGKILL);
      } else {
        *interrupted = sig;
        kill(p, sig == SIGHUP ? SIGTERM : sig);
        kill_at = util_now() + CHILD_GRACE_S;
      }
    }
    if (end > 0 && kill_at == 0 && util_now() >= end) { /* past its time: stopped as Ctrl-C would */
      bench_error("%s: still running after %.0f s: stopped (see %s)", args[0], timeout_s, log);
      kill(p, SIGTERM);
      kill_at = util_now() + CHILD_GRACE_S;
    }
    if (kill_at > 0 && util_now() >= kill_at) {
      kill(p, SIGKILL);
      kill_at = util_now() + 3600; /* SIGKILL is final; just reap */
    }
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void bench_child_log_tail(const char *log) {
  char line[512], ring[6][512], errs[3][512];
  int errat[3], nerr = 0, n = 0;
  FILE *f = fopen(log, "r");
  while (f && fgets(line, sizeof line, f)) {
    if (nerr < 3 && !strncmp(line, "fabench:", 8))
      errat[nerr] = n, snprintf(errs[nerr++], sizeof errs[0], "%s", line);
    snprintf(ring[n++ % 6], sizeof ring[0], "%s", line);
  }
  if (f) fclose(f);
  int from = n > 6 ? n - 6 : 0, shown = 0;
  for (int i = 0; i < nerr; i++)
    if (errat[i] < from) fprintf(stderr, "    %s", errs[i]), shown = 1; /* the tail shows the rest */
  if (shown) fprintf(stderr, "    ...\n");
  for (int i = from; i < n; i++) fprintf(stderr, "    %s", ring[i % 6]);
}
