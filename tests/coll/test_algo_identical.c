/* Every rank must end an all-reduce with bit-identical results, also for floats whose sums are
 * not exact (real-valued random data, where the order of the reduction shows in the last bits).
 * The harness test_allreduce uses exact integer data and so cannot see this. For 3, 4 and 5
 * ranks over tcp, small chunks (so the pipelined algorithms run many steps), every floating
 * dtype and every algorithm: each rank hashes its result, the hashes are all-gathered and must
 * agree; the result must also be close to a reference sum computed here in double. A last case
 * flips one bit on one rank and must be caught, so the comparison itself is tested. Then the
 * same on emulated hosts (FABENCH_HOST, a letter a rank: ABACCA is hosts of 3, 1 and 2 ranks,
 * A's spread out), where hier runs all three phases and the flat algorithms go in node order. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll.h"
#include "test_ranks.h"

#define COUNT 30011

static const char *const algos[] = {"ring", "rhd",  "rd",       "tree",      "dtree",    "ps",
                                    "ps:2", "auto", "hier:ring", "hier:rhd", "hier:tree"};

static double value(int rank, size_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(rank + 7) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (double)(x % 2000003) / 1000.0 - 1000.0 + 1.0 / 3.0;
}

static void put(void *b, size_t i, coll_dtype dt, double v) {
  switch (dt) {
  case COLL_F32: ((float *)b)[i] = (float)v; break;
  case COLL_F64: ((double *)b)[i] = v; break;
  case COLL_F16: ((uint16_t *)b)[i] = coll_f32_to_f16((float)v); break;
  default: ((uint16_t *)b)[i] = coll_f32_to_bf16((float)v); break;
  }
}

static double get(const void *b, size_t i, coll_dtype dt) {
  switch (dt) {
  case COLL_F32: return ((const float *)b)[i];
  case COLL_F64: return ((const double *)b)[i];
  case COLL_F16: return coll_f16_to_f32(((const uint16_t *)b)[i]);
  default: return coll_bf16_to_f32(((const uint16_t *)b)[i]);
  }
}

static uint64_t hash(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* 1 when every rank's hash equals rank 0's. */
static int all_same(coll_boot *b, uint64_t h, int n, coll_err *e, int *err) {
  uint64_t all[16];
  if (coll_boot_allgather(b, all, &h, sizeof h, e) != 0) {
    *err = 1;
    return 0;
  }
  for (int r = 1; r < n; r++)
    if (all[r] != all[0]) return 0;
  return 1;
}

static int rank_main(void) {
  coll_err e = {{0}};
  coll_boot *b;
  coll_comm *c;
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 60000, &e) != 0) {
    fprintf(stderr, "boot: %s\n", e.msg);
    return 1;
  }
  coll_comm_opts o = {.transport = COLL_TCP, .timeout_ms = 60000, .chunk_bytes = 4096};
  if (coll_comm_open(&c, b, &o, &e) != 0) {
    fprintf(stderr, "comm: %s\n", e.msg);
    coll_boot_close(b);
    return 1;
  }
  int n = coll_comm_size(c), me = coll_comm_rank(c), fails = 0, err = 0;
  unsigned char *buf = malloc(COUNT * 8);
  coll_dtype dts[] = {COLL_F32, COLL_F64, COLL_F16, COLL_BF16};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0] && !err; a++) {
    coll_algo algo;
    if (coll_algo_parse(algos[a], &algo) != 0) {
      fprintf(stderr, "cannot parse algorithm %s\n", algos[a]);
      err = 1;
      break;
    }
    for (int d = 0; d < 4 && !err; d++) {
      coll_dtype dt = dts[d];
      for (size_t i = 0; i < COUNT; i++) put(buf, i, dt, value(me, i));
      if (coll_allreduce(c, buf, COUNT, dt, COLL_SUM, algo, NULL, &e) != 0) {
        fprintf(stderr, "rank %d: %s %s: %s\n", me, algos[a], coll_dtype_name(dt), e.msg);
        err = 1;
        break;
      }
      /* close to the exact sum: each of the n-1 additions rounds once */
      double eps = dt == COLL_F64 ? 1e-15 : dt == COLL_F32 ? 1e-7 : dt == COLL_F16 ? 1e-3 : 8e-3;
      for (size_t i = 0; i < COUNT; i++) {
        double want = 0, mag = 0;
        for (int r = 0; r < n; r++) want += value(r, i), mag += fabs(value(r, i));
        if (fabs(get(buf, i, dt) - want) > 2 * n * eps * mag + 1e-9) {
          fprintf(stderr, "rank %d: %s %s element %zu is %g, want about %g\n", me, algos[a],
                  coll_dtype_name(dt), i, get(buf, i, dt), want);
          fails++;
          break;
        }
      }
      size_t es = coll_dtype_size(dt);
      if (!all_same(b, hash(buf, COUNT * es), n, &e, &err)) {
        if (me == 0)
          fprintf(stderr, "%s %s over %d ranks: results differ between ranks\n", algos[a],
                  coll_dtype_name(dt), n);
        fails++;
      }
    }
  }
  /* the comparison must notice one flipped bit on one rank */
  if (!err && n > 1) {
    if (me == n - 1) buf[17] ^= 1;
    if (all_same(b, hash(buf, COUNT * 2), n, &e, &err)) {
      fprintf(stderr, "rank %d: a flipped bit went unnoticed\n", me);
      fails++;
    }
  }
  if (err) fprintf(stderr, "rank %d: %s\n", me, e.msg);
  free(buf);
  coll_comm_close(c);
  coll_boot_close(b);
  return fails || err ? 1 : 0;
}

/* A port the kernel just handed out, so that tests running at the same time do not collide
 * on a port derived from the pid (it is closed again before rank 0 binds it: a small window). */

typedef struct {
  int n;
  const char *layout; /* each rank's host, a letter a rank, or NULL: one host */
} ident_case;

static void test_ranks(void **state) {
  const ident_case *k = *state;
  int n = k->n;
  char tok[32];
  int pn = test_free_port();
  assert_true(pn > 0);
  snprintf(tok, sizeof tok, "ident%d-%d", (int)getpid(), n);
  pid_t pids[16];
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
      test_rank_env(r, n, pn, tok);
      if (k->layout) {
        char host[16];
        snprintf(host, sizeof host, "host-%c", k->layout[r]);
        setenv("FABENCH_HOST", host, 1);
        setenv("FABENCH_BIND_ADDR", "127.0.0.1", 1);
      }
      _exit(rank_main());
    }
    pids[r] = p;
  }
  int failed = test_wait_ranks(pids, n, 120);
  if (failed) fail_msg("%d of %d ranks failed", failed, n);
}

int main(void) {
  static ident_case cases[] = {{3, NULL}, {4, NULL}, {5, NULL}, {6, "ABACCA"}, {5, "AAAAB"}, {4, "ABAB"}};
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate(test_ranks, &cases[0]), cmocka_unit_test_prestate(test_ranks, &cases[1]),
      cmocka_unit_test_prestate(test_ranks, &cases[2]), cmocka_unit_test_prestate(test_ranks, &cases[3]),
      cmocka_unit_test_prestate(test_ranks, &cases[4]), cmocka_unit_test_prestate(test_ranks, &cases[5]),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
