/* Test support for the multi-process collectives tests: a free loopback port, the environment
 * rendezvous variables of one rank, and a bounded wait for a group of forked ranks. */
#ifndef FABENCH_TEST_RANKS_H
#define FABENCH_TEST_RANKS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A port the kernel just handed out on 127.0.0.1 (0 on failure). */
static inline int test_free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0), port = 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(s, (struct sockaddr *)&a, &l) == 0)
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

/* FABENCH_RANK/WORLD_SIZE/ROOT/TOKEN for one rank of a loopback rendezvous at port. */
static inline void test_rank_env(int rank, int size, int port, const char *token) {
  char v[64];
  snprintf(v, sizeof v, "%d", rank);
  setenv("FABENCH_RANK", v, 1);
  snprintf(v, sizeof v, "%d", size);
  setenv("FABENCH_WORLD_SIZE", v, 1);
  snprintf(v, sizeof v, "127.0.0.1:%d", port);
  setenv("FABENCH_ROOT", v, 1);
  setenv("FABENCH_TOKEN", token, 1);
}

/* Waits for the n children in pids; returns how many failed. A group still running after
 * timeout_s is killed and its unfinished ranks count as failed. */
static inline int test_wait_ranks(const pid_t *pids, int n, int timeout_s) {
  int failed = 0;
  time_t deadline = time(NULL) + timeout_s;
  for (int left = n; left > 0;) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      left--;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
      continue;
    }
    if (p < 0 && errno == ECHILD) break;
    if (time(NULL) > deadline) {
      fprintf(stderr, "%d rank(s) still running after %d s: killed\n", left, timeout_s);
      for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
      while (waitpid(-1, &st, 0) > 0) {
      }
      return failed + left;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return failed;
}

#endif
