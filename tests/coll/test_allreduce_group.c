/* coll_allreduce_group: disjoint groups of ranks reduce at once over one communicator (5 tcp
 * ranks on loopback), a rank in no group passing n 0; each member's result against a
 * double-precision reference summed here over the group's own inputs; every flat algorithm, odd
 * counts and a group listed out of rank order; a whole-world all-reduce after the groups still
 * agrees (the calls' tags stayed in step); the library's own and hier refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "coll.h"
#include "test_ranks.h"

#define N 5
static int g_port;

/* rank r's input element i: exact in f64, so the reference is exact too */
static double input(int r, size_t i) { return (double)(r + 1) * 1000.0 + (double)(i % 997); }

static int check(const double *buf, size_t count, const int *grp, int n, int me, char *err, size_t cap) {
  for (size_t i = 0; i < count; i++) {
    double want = 0;
    for (int k = 0; k < n; k++) want += input(grp[k], i);
    if (n == 0) want = input(me, i); /* no group: untouched */
    if (buf[i] != want) return snprintf(err, cap, "rank %d element %zu: %g, want %g", me, i, buf[i], want), 1;
  }
  return 0;
}

static int child(int rank, char *err, size_t cap) {
  test_rank_env(rank, N, g_port, "grp");
  coll_boot *b;
  coll_comm *c;
  coll_err e = {{0}};
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 10000, &e)) return snprintf(err, cap, "%s", e.msg), 1;
  coll_comm_opts o = {.transport = COLL_TCP, .timeout_ms = 10000};
  if (coll_comm_open(&c, b, &o, &e)) return snprintf(err, cap, "%s", e.msg), 1;
  static double buf[5000];
  /* step 1: pairs {0,3} and {1,4}, rank 2 out; step 2: {4,0,2} (not in rank order) and {1,3} */
  static const int s1[N][2] = {{0, 3}, {1, 4}, {-1, -1}, {0, 3}, {1, 4}};
  static const int g3[3] = {4, 0, 2}, g2[2] = {1, 3};
  const coll_algo_kind kinds[] = {COLL_ALGO_RING, COLL_ALGO_RHD, COLL_ALGO_RD, COLL_ALGO_TREE, COLL_ALGO_DTREE,
                                  COLL_ALGO_PS};
  const size_t counts[] = {0, 1, 7, 4999};
  int rc = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds && !rc; k++)
    for (size_t ci = 0; ci < sizeof counts / sizeof *counts && !rc; ci++) {
      size_t count = counts[ci];
      coll_algo a = {kinds[k], kinds[k] == COLL_ALGO_PS ? 2 : 0};
      const int *grp = s1[rank][0] < 0 ? NULL : s1[rank];
      int n = grp ? 2 : 0;
      for (size_t i = 0; i < count; i++) buf[i] = input(rank, i);
      if (coll_allreduce_group(c, grp, n, buf, count, COLL_F64, COLL_SUM, a, &e) ||
          check(buf, count, grp, n, rank, err, cap))
        rc = 1;
      grp = rank == 1 || rank == 3 ? g2 : g3;
      n = rank == 1 || rank == 3 ? 2 : 3;
      for (size_t i = 0; i < count && !rc; i++) buf[i] = input(rank, i);
      if (!rc && (coll_allreduce_group(c, grp, n, buf, count, COLL_F64, COLL_SUM, a, &e) ||
                  check(buf, count, grp, n, rank, err, cap)))
        rc = 1;
    }
  /* the world after the groups: every rank's calls kept the tags in step */
  static const int all[N] = {0, 1, 2, 3, 4};
  for (size_t i = 0; i < 100 && !rc; i++) buf[i] = input(rank, i);
  if (!rc && (coll_allreduce(c, buf, 100, COLL_F64, COLL_SUM, (coll_algo){COLL_ALGO_RING, 0}, NULL, &e) ||
              check(buf, 100, all, N, rank, err, cap)))
    rc = 1;
  if (rc && !err[0]) snprintf(err, cap, "rank %d: %.300s", rank, e.msg);
  /* refused: algorithms that cannot run on a group, a group without this rank */
  coll_err e2 = {{0}};
  if (!rc && (!coll_allreduce_group(c, g2, 2, buf, 4, COLL_F64, COLL_SUM, (coll_algo){COLL_ALGO_NATIVE, 0}, &e2) ||
              !strstr(e2.msg, "flat algorithms only")))
    rc = 1, snprintf(err, cap, "native accepted: '%.300s'", e2.msg);
  static const int other[2] = {(N + 1) % N, (N + 2) % N};
  if (!rc && rank == 0 &&
      (!coll_allreduce_group(c, other, 2, buf, 4, COLL_F64, COLL_SUM, (coll_algo){COLL_ALGO_RING, 0}, &e2) ||
       !strstr(e2.msg, "not in its own group")))
    rc = 1, snprintf(err, cap, "a group without rank 0 accepted: '%.300s'", e2.msg);
  coll_comm_close(c);
  coll_boot_close(b);
  return rc;
}

static void test_groups(void **st) {
  (void)st;
  g_port = test_free_port();
  assert_int_not_equal(g_port, 0);
  pid_t pid[N];
  int fd[N];
  for (int r = 0; r < N; r++) pid[r] = test_child_spawn(child, r, &fd[r]);
  int bad = 0;
  for (int r = 0; r < N; r++) {
    char err[1024];
    if (test_child_finish(pid[r], fd[r], err, sizeof err, 60)) bad = 1, print_error("rank %d: %s\n", r, err);
  }
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_groups)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
