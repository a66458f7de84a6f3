/* Runs another fabench command as a child process, its output in a log file, with a wall-clock
 * limit: what validate's cells run (allreduce, train, fit), each a user's command line. */
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

int bench_subrun(const char *self, char *const argv[], const char *log, double limit_s) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return bench_error("cannot write %s: %s", log, strerror(errno)), -1;
  char *av[128];
  int n = 0;
  av[n++] = (char *)self;
  for (int i = 0; argv[i] && n < 127; i++) av[n++] = argv[i];
  av[n] = NULL;
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid(), p = fork();
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* it ends with us, even killed */
    if (getppid() != parent) _exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(self, av);
    _exit(127);
  }
  close(fd);
  if (p < 0) return bench_error("cannot start %s: %s", self, strerror(errno)), -1;
  int st = 0;
  double end = util_now() + limit_s, kill_at = 0;
  for (;;) {
    pid_t w = waitpid(p, &st, WNOHANG);
    if (w == p) break;
    if (w < 0 && errno != EINTR) return -1;
    double now = util_now();
    if (!kill_at && now > end) { /* past its limit: asked to stop, then killed */
      fprintf(stderr, "fabench: %s ran past %.0f s: stopped (its log: %s)\n", argv[0], limit_s, log);
      kill(p, SIGTERM);
      kill_at = now + 10;
    } else if (kill_at && now > kill_at) {
      kill(p, SIGKILL);
      kill_at = now + 3600;
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
