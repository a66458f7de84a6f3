/* Test support for the multi-process collectives tests: a free loopback port, the environment
 * rendezvous variables of one rank, a bounded wait for a group of forked ranks, and one forked
 * child whose error text comes back. */
#ifndef FABENCH_TEST_RANKS_H
#define FABENCH_TEST_RANKS_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coll.h"

/* A free port on 127.0.0.1 for a rendezvous (0 on failure). It lies below the kernel's ephemeral
 * range (net.ipv4.ip_local_port_range): a port probed there and closed again could be handed to
 * any outgoing connection of a test running beside this one before rank 0 listens on it. The
 * candidates start at a place drawn from the pid and the clock, so parallel tests spread out. */
static inline int test_free_port(void) {
  int lo = 32768;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d", &lo) != 1) lo = 32768;
    fclose(f);
  }
  int first = 10000, span = lo - first;
  if (span < 1000) first = 1024, span = lo - first; /* a widened ephemeral range */
  if (span < 100) return 0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  unsigned x = (unsigned)getpid() * 2654435761u ^ (unsigned)t.tv_nsec;
  for (int i = 0; i < 200; i++) {
    x = x * 1103515245u + 12345u;
    int port = first + (int)((x >> 8) % (unsigned)span);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    if (ok) return port;
  }
  return 0;
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

/* A forked child running fn(arg), its error text coming back through a pipe: the child's pid,
 * with the pipe's read end in *rfd (-1 and no child when the pipe or fork fails). */
typedef int (*test_child_fn)(int arg, char *err, size_t cap);
static inline pid_t test_child_spawn(test_child_fn fn, int arg, int *rfd) {
  int p[2];
  *rfd = -1;
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[0]);
    char err[1024] = "";
    int rc = fn(arg, err, sizeof err);
    ssize_t w = write(p[1], err, strlen(err));
    (void)w;
    _exit(rc);
  }
  close(p[1]);
  *rfd = p[0];
  return pid;
}

/* The child's exit status (128 + signal if killed) and its error text in out. A child still
 * running after timeout_s is killed: a test waits, it never hangs. */
static inline int test_child_finish(pid_t pid, int rfd, char *out, size_t cap, int timeout_s) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t got = 0;
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (got + 1 >= cap || t.tv_sec - t0.tv_sec >= timeout_s) break;
    struct pollfd p = {.fd = rfd, .events = POLLIN};
    if (poll(&p, 1, 100) != 1) continue;
    ssize_t r = read(rfd, out + got, cap - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  out[got] = '\0';
  close(rfd);
  kill(pid, SIGKILL); /* gone already, unless it hung */
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Whether transport tk can run here, asked in a child (CUDA does not survive a fork, and the
 * ranks are forked from this process): 0 yes, 77 no (its reason printed as a SKIP line), 1 the
 * child could not say. */
static inline int test_transport_probe(coll_transport_kind tk, const char *name) {
  pid_t probe = fork();
  if (probe == 0) {
    coll_err ue;
    if (coll_transport_usable(tk, &ue) != 0) {
      printf("SKIP: %s\n", ue.msg);
      fflush(stdout);
      _exit(77);
    }
    _exit(0);
  }
  int pst = 0;
  if (probe < 0 || waitpid(probe, &pst, 0) != probe || !WIFEXITED(pst)) {
    printf("cannot probe transport %s\n", name);
    return 1;
  }
  return WEXITSTATUS(pst) == 77 ? 77 : 0;
}

#endif
