/* The data-parallel reducer: averaged gradients against a reference computed here in double
 * (each rank's gradients summed), for 1 to 4 ranks, every algorithm, f32 and 16-bit wires,
 * overlap on and off, the 1/N left to the optimizer, plans in arena order and with a front
 * (the rest in forward order, each range checked as soon as its wait returns, with every bucket
 * the reducer then says done), and bucket sizes that cut the arena at awkward places. Ranks are forked processes on a loopback rendezvous.
 * The plans themselves are checked against the rule of nn_reducer.h without a communicator.
 * Sharded with the parameters given (stage 2, and stage 3 which drops them between steps): the
 * parameters each layer reads in a simulated forward and backward equal every rank's, the
 * reduce-scattered blocks the sums, the bytes and the floats held what the plan makes, and a
 * gather after the steps gives the whole arena back. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../coll/test_ranks.h"
#include "nn_reducer.h"

/* Rank r's gradient i at step s: non-integer values of both signs and several magnitudes. */
static float grad_value(int r, size_t i, int s) {
  double v = sin(0.37 * (double)i + 1.3 * r + 0.7 * s) * (1.0 + (double)((i * 7 + (size_t)r) % 5));
  return (float)v;
}

typedef struct {
  coll_transport_kind tk;
  const char *algo;
  coll_dtype wire;
  int overlap;
  size_t count, first_bytes, bucket_bytes;
  int scale_in_sgd;
  long front; /* < 0: the default plan */
} red_case;

/* Checks g[lo, hi) against the reference average of step s, times the reducer's scale. */
static int check_range(const float *g, size_t lo, size_t hi, int rank, int n, const red_case *k,
                       int s, double tol, double gscale, const char *when) {
  int bad = 0;
  for (size_t i = lo; i < hi; i++) {
    double ref = 0;
    for (int q = 0; q < n; q++) ref += (double)grad_value(q, i, s);
    ref /= n;
    double scale = fabs(ref) > 1 ? fabs(ref) : 1;
    if (fabs((double)g[i] * gscale - ref) > tol * scale * 6) {
      if (bad < 3)
        fprintf(stderr, "rank %d/%d %s %s step %d %s: element %zu is %.9g, reference %.9g\n", rank,
                n, k->algo, coll_dtype_name(k->wire), s, when, i, (double)g[i] * gscale, ref);
      bad++;
    }
  }
  return bad;
}

/* One rank: two steps, backward simulated by ready() calls in uneven strides; 0 when every
 * averaged element matches the reference. */
static int rank_main(int rank, int n, const red_case *k) {
  coll_err e = {{0}};
  coll_boot *b = NULL;
  coll_comm *c = NULL;
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 20000, &e)) {
    fprintf(stderr, "rank %d: %s\n", rank, e.msg);
    return 2;
  }
  coll_comm_opts co = {.transport = k->tk, .timeout_ms = 20000, .no_spin = 1};
  if (coll_comm_open(&c, b, &co, &e)) {
    fprintf(stderr, "rank %d: %s\n", rank, e.msg);
    return 2;
  }
  nn_arena_alloc al = nn_arena_from_comm(c);
  float *g = al.alloc(al.ctx, k->count * sizeof(float));
  coll_algo a;
  if (!g || coll_algo_parse(k->algo, &a)) return 2;
  nn_reducer_opts ro = {.comm = c, .algo = a, .wire = k->wire, .bucket_bytes = k->bucket_bytes,
                        .first_bucket_bytes = k->first_bytes, .overlap = k->overlap,
                        .scale_in_sgd = k->scale_in_sgd, .wire_alloc = &al};
  nn_reducer *r = NULL;
  char err[1024];
  if (nn_reducer_create(&r, &ro, g, k->count, err, sizeof err)) {
    fprintf(stderr, "rank %d: %s\n", rank, err);
    return 2;
  }
  if (k->front >= 0 && nn_reducer_set_front(r, (size_t)k->front)) return 2;
  double gscale = nn_reducer_grad_scale(r);
  /* the optimizer's scale: 1/N exactly when asked on f32 with several ranks, else 1 */
  int bad = gscale != (k->scale_in_sgd && k->wire == COLL_F32 && n > 1 ? 1.0f / (float)n : 1.0f);
  /* 16-bit wires: each rank's value rounded once (1/N first), then a sum of n such values in
   * the narrow type, then widened: a few units of the last place of bf16 (2^-8) or f16 (2^-11) */
  double tol = k->wire == COLL_F32 ? 4e-7 : k->wire == COLL_BF16 ? 3.0 * n / 256.0 : 3.0 * n / 2048.0;
  int nb = nn_reducer_nbuckets(r);
  nn_bucket *plan = calloc((size_t)nb, sizeof *plan);
  if (!plan) return 2;
  nn_reducer_last(r, plan, nb, NULL); /* the ranges, in call order */
  for (int s = 0; s < 2 && !bad; s++) {
    nn_reducer_begin(r, 0);
    if (nn_reducer_ndone(r) != 0) {
      fprintf(stderr, "rank %d: %d buckets done before backward began\n", rank, nn_reducer_ndone(r));
      bad++;
    }
    for (size_t i = 0; i < k->count; i++) g[i] = grad_value(rank, i, s);
    /* backward's layers: uneven prefixes, one of them repeated (no progress) */
    size_t done = 0, stride = 3;
    while (done < k->count) {
      done = done + stride > k->count ? k->count : done + stride;
      nn_reducer_ready(r, done);
      nn_reducer_ready(r, done);
      stride = stride * 3 / 2 + 1;
    }
    nn_reducer_stats st;
    if (k->front >= 0) {
      /* the next forward's order: front layers (the arena's end) first, each range final as
       * soon as its wait returns, while later buckets may still be in flight */
      nn_reducer_end_backward(r);
      size_t step = k->count / 5 + 1;
      for (size_t hi = k->count; hi > 0 && !bad;) {
        size_t lo = hi > step ? hi - step : 0;
        if (nn_reducer_wait_range(r, lo, hi - lo, NULL, err, sizeof err)) {
          fprintf(stderr, "rank %d: %s\n", rank, err);
          return 2;
        }
        bad += check_range(g, lo, hi, rank, n, k, s, tol, gscale, "after its range's wait");
        /* the buckets said done are a prefix of the plan, final, and hold the range */
        int nd = nn_reducer_ndone(r);
        for (int q = 0; q < nb; q++) {
          int holds = plan[q].offset < hi && lo < plan[q].offset + plan[q].count;
          if (q < nd)
            bad += check_range(g, plan[q].offset, plan[q].offset + plan[q].count, rank, n, k, s,
                               tol, gscale, "in a bucket said done");
          else if (holds) {
            fprintf(stderr, "rank %d: bucket %d of [%zu, %zu) not said done after its wait\n",
                    rank, q, lo, hi);
            bad++;
          }
        }
        hi = lo;
      }
      if (nn_reducer_drain(r, &st, err, sizeof err)) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 2;
      }
    } else if (nn_reducer_finish(r, &st, err, sizeof err)) {
      fprintf(stderr, "rank %d: %s\n", rank, err);
      return 2;
    }
    if (st.wire_bytes != k->count * coll_dtype_size(k->wire) || nn_reducer_ndone(r) != nb) bad++;
    /* the thread's CPU time: some with a peer to exchange with or a wire type to convert to,
     * never more than the wall time it spent, give or take 5 ms of skew between the two clocks
     * (a virtual machine's kvm-clock); the last step's copy says the same */
    nn_reducer_stats ls;
    nn_reducer_last(r, NULL, 0, &ls);
    if (!(st.comm_cpu_s >= 0 && st.comm_cpu_s <= st.comm_s + 5e-3) ||
        ((n > 1 || k->wire != COLL_F32) && !(st.comm_cpu_s > 0)) ||
        ls.comm_cpu_s != st.comm_cpu_s || ls.comm_s != st.comm_s) {
      fprintf(stderr, "rank %d/%d step %d: comm %.6f s, CPU %.6f s (last step: %.6f, %.6f)\n",
              rank, n, s, st.comm_s, st.comm_cpu_s, ls.comm_s, ls.comm_cpu_s);
      bad++;
    }
    bad += check_range(g, 0, k->count, rank, n, k, s, tol, gscale, "drained");
  }
  free(plan);
  nn_reducer_destroy(r);
  al.free(al.ctx, g);
  coll_comm_close(c);
  coll_boot_close(b);
  return bad ? 1 : 0;
}

static int run_case(int n, const red_case *k) {
  int port = test_free_port();
  pid_t pids[8];
  for (int rk = 0; rk < n; rk++) {
    pids[rk] = fork();
    if (pids[rk] == 0) {
      test_rank_env(rk, n, port, "reducer-test");
      _exit(rank_main(rk, n, k));
    }
  }
  return test_wait_ranks(pids, n, 120);
}

static void check_transport(coll_transport_kind tk) {
  if (!coll_transport_built(tk)) {
    printf("skipped: transport %s is not built\n", coll_transport_name(tk));
    return;
  }
  static const char *algos[] = {"ring", "rhd", "rd", "tree", "dtree", "ps", "ps:2"};
  /* counts and bucket sizes that cut the arena at odd places: the first bucket 20 floats
   * (rounded to 16), then 37 (rounded to 32) or larger than the arena */
  const red_case base[] = {
      {tk, "ring", COLL_F32, 1, 1001, 80, 148, 0, -1},
      {tk, "ring", COLL_F32, 0, 1001, 80, 148, 0, -1},
      {tk, "ring", COLL_F32, 1, 5, 64, 64, 0, -1},
      {tk, "ring", COLL_BF16, 1, 777, 64, 1024, 0, -1},
      {tk, "ring", COLL_F16, 1, 777, 4096, 100000, 0, -1},
      {tk, "ring", COLL_F32, 1, 1001, 80, 148, 1, -1},   /* 1/N left to the optimizer */
      {tk, "ring", COLL_F32, 1, 1001, 80, 400, 1, 300},  /* a front, the rest in forward order */
      {tk, "ring", COLL_F32, 0, 1001, 80, 400, 0, 0},    /* no front: all in forward order */
      {tk, "ring", COLL_BF16, 1, 2000, 64, 2048, 0, 77}, /* a front inside the first bucket */
  };
  for (int n = 1; n <= 4; n++)
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++)
      for (size_t j = 0; j < sizeof base / sizeof *base; j++) {
        if (i > 0 && j > 0 && j != 3 && j != 6) continue; /* every algorithm on f32, bf16, a front */
        red_case k = base[j];
        k.algo = algos[i];
        int failed = run_case(n, &k);
        if (failed)
          fail_msg("%s %d ranks %s wire %s overlap %d count %zu: %d rank(s) failed",
                   coll_transport_name(tk), n, k.algo, coll_dtype_name(k.wire), k.overlap,
                   k.count, failed);
      }
}

static void test_tcp(void **st) {
  (void)st;
  check_transport(COLL_TCP);
}

static void test_ucx(void **st) {
  (void)st;
  check_transport(COLL_UCX);
}

/* Stage 3's parameter i at step s, the same on every rank (rank 0's weights broadcast). */
static float param_value(size_t i, int s) { return (float)(0.25 * (double)(i % 97) - 3.0 + 0.5 * s); }

enum { S3_COUNT = 1001, S3_LAYER = 70 };

/* One rank of stage 2 or 3 over n ranks: layers of S3_LAYER floats from the arena's start (the
 * backward's order: layer 0 first in backward, last in forward). Stage 2 updates its ranges
 * only, so the others' stay stale until the next forward's gathers. 0 when all checks pass. */
static int stage3_rank(int rank, int n, coll_transport_kind tk, int stage) {
  coll_err e = {{0}};
  coll_boot *b = NULL;
  coll_comm *c = NULL;
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 20000, &e)) return fprintf(stderr, "rank %d: %s\n", rank, e.msg), 2;
  coll_comm_opts co = {.transport = tk, .timeout_ms = 20000, .no_spin = 1};
  if (coll_comm_open(&c, b, &co, &e)) return fprintf(stderr, "rank %d: %s\n", rank, e.msg), 2;
  nn_arena_alloc al = nn_arena_from_comm(c);
  float *g = al.alloc(al.ctx, S3_COUNT * sizeof(float)), *p = NULL;
  if (!g || posix_memalign((void **)&p, 4096, 4 * 4096)) return 2;
  for (size_t i = 0; i < S3_COUNT; i++) p[i] = param_value(i, 0);
  coll_algo a = {COLL_ALGO_RING, 0};
  /* buckets of 16 floats, then 32 (the last 16): odd cuts, tails at 3 ranks */
  nn_reducer_opts ro = {.comm = c, .algo = a, .wire = COLL_F32, .bucket_bytes = 148, .first_bucket_bytes = 80,
                        .overlap = 1, .scale_in_sgd = 1, .sharded = stage, .params = p};
  nn_reducer *r = NULL;
  char err[1024];
  if (nn_reducer_create(&r, &ro, g, S3_COUNT, err, sizeof err)) return fprintf(stderr, "rank %d: %s\n", rank, err), 2;
  int nb = nn_reducer_nbuckets(r), bad = 0;
  nn_bucket *pl = calloc((size_t)nb, sizeof *pl);
  unsigned char *refetch = calloc((size_t)nb, 1);
  int *need = calloc((size_t)nb, sizeof *need);
  if (!pl || !refetch || !need) return 2;
  nn_reducer_last(r, pl, nb, NULL);
  /* the backward's first layer's buckets are kept; before reducing bucket k, the buckets up to
   * the end of the layer holding its last float, and the next */
  for (int k = 0; k < nb; k++) {
    refetch[k] = stage == 3 && pl[k].offset >= S3_LAYER;
    size_t last = pl[k].offset + pl[k].count - 1, hi = (last / S3_LAYER + 1) * S3_LAYER;
    need[k] = k + 1;
    for (int q = k; q < nb; q++)
      if (pl[q].offset < hi && q > need[k]) need[k] = q;
  }
  if (nn_reducer_set_refetch(r, refetch, need) != (stage == 3 ? 0 : -1)) return 2;
  nn_reducer_reshard(r);
  /* this rank's ranges: block rank of each bucket and the tail */
  unsigned char *mine = calloc(S3_COUNT, 1);
  size_t own = 0, others = 0;
  double bytes = 0;
  for (int k = 0; k < nb && mine; k++) {
    size_t blk = pl[k].count / (size_t)n, tail = pl[k].count - blk * (size_t)n;
    for (size_t i = 0; i < pl[k].count; i++)
      mine[pl[k].offset + i] = i >= blk * (size_t)n || (i / blk == (size_t)rank);
    own += blk + tail + (stage == 3 ? 0 : blk * (size_t)(n - 1));
    others += stage == 3 ? blk * (size_t)(n - 1) : 0;
    bytes += ((2.0 + refetch[k]) * (n - 1) * (double)blk + 2.0 * (n - 1) / n * (double)tail) * 4;
  }
  if (!mine) return 2;
  for (size_t i = 0; i < S3_COUNT && stage == 3; i++) /* dropped: NaN or a zero page, never the value */
    if (!mine[i] && p[i] == param_value(i, 0) && p[i] != 0 && !bad++) fprintf(stderr, "rank %d: %zu kept\n", rank, i);
  int nlay = (S3_COUNT + S3_LAYER - 1) / S3_LAYER;
  for (int s = 0; s < 2 && !bad; s++) {
    nn_reducer_begin(r, 0);
    for (int l = nlay - 1; l >= 0; l--) { /* forward: the arena's end first */
      size_t lo = (size_t)l * S3_LAYER, hi = lo + S3_LAYER < S3_COUNT ? lo + S3_LAYER : S3_COUNT;
      for (int k = 0; k < nb; k++)
        if (refetch[k] && pl[k].offset >= hi) nn_reducer_release(r, k);
      if (nn_reducer_wait_params(r, lo, hi - lo, 0, NULL, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
      for (size_t i = lo; i < hi; i++)
        if (p[i] != param_value(i, s) && bad++ < 3) fprintf(stderr, "rank %d step %d forward: %zu is %g\n", rank, s, i, p[i]);
    }
    for (size_t i = 0; i < S3_COUNT; i++) g[i] = grad_value(rank, i, s);
    for (int l = 0; l < nlay; l++) { /* backward */
      size_t lo = (size_t)l * S3_LAYER, hi = lo + S3_LAYER < S3_COUNT ? lo + S3_LAYER : S3_COUNT;
      if (l > 0 && nn_reducer_wait_params(r, lo, hi - lo, 1, NULL, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
      for (size_t i = lo; i < hi; i++)
        if (p[i] != param_value(i, s) && bad++ < 3) fprintf(stderr, "rank %d step %d backward: %zu is %g\n", rank, s, i, p[i]);
      nn_reducer_ready(r, hi);
    }
    nn_reducer_stats st;
    if (nn_reducer_finish(r, &st, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
    for (size_t i = 0; i < S3_COUNT; i++) {
      if (!mine[i]) continue;
      double ref = 0;
      for (int q = 0; q < n; q++) ref += (double)grad_value(q, i, s);
      if (fabs((double)g[i] - ref) > 4e-6 * (fabs(ref) > 1 ? fabs(ref) : 1) && bad++ < 3)
        fprintf(stderr, "rank %d step %d: sum %zu is %g, reference %g\n", rank, s, i, g[i], ref);
      p[i] = param_value(i, s + 1); /* the update of this rank's ranges */
    }
  }
  size_t between, peak;
  nn_reducer_params_held(r, &between, &peak);
  int held_ok = stage == 3 ? peak > own && peak < own + others : peak == own && own == S3_COUNT;
  if (between != own || !held_ok || fabs(nn_reducer_step_bytes(r) - bytes) > 1e-6) {
    fprintf(stderr, "rank %d/%d: held %zu (own %zu), peak %zu of %d, %g bytes (want %g)\n", rank, n, between, own, peak,
            S3_COUNT, nn_reducer_step_bytes(r), bytes);
    bad++;
  }
  if (nn_reducer_gather(r, p, NULL, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
  for (size_t i = 0; i < S3_COUNT; i++)
    if (p[i] != param_value(i, 2) && bad++ < 3) fprintf(stderr, "rank %d gathered: %zu is %g\n", rank, i, p[i]);
  free(pl);
  free(refetch);
  free(need);
  free(mine);
  nn_reducer_destroy(r);
  free(p);
  al.free(al.ctx, g);
  coll_comm_close(c);
  coll_boot_close(b);
  return bad ? 1 : 0;
}

static void test_sharded_params(void **st) {
  (void)st;
  coll_transport_kind tks[] = {COLL_TCP, COLL_UCX};
  for (int t = 0; t < 4; t++) {
    int stage = t % 2 ? 2 : 3;
    if (!coll_transport_built(tks[t / 2])) continue;
    for (int n = 2; n <= 3; n++) {
      int port = test_free_port();
      pid_t pids[3];
      for (int rk = 0; rk < n; rk++) {
        pids[rk] = fork();
        if (pids[rk] == 0) {
          test_rank_env(rk, n, port, "reducer-stage3");
          _exit(stage3_rank(rk, n, tks[t / 2], stage));
        }
      }
      int failed = test_wait_ranks(pids, n, 60);
      if (failed) fail_msg("stage %d over %s, %d ranks: %d rank(s) failed", stage, coll_transport_name(tks[t / 2]), n, failed);
    }
  }
}

/* The reference itself must be able to fail: a reducer without a communicator leaves each
 * rank's own gradients, which differ from the average over two ranks. */
static void test_reference_fails_without_exchange(void **st) {
  (void)st;
  float g[64];
  for (int i = 0; i < 64; i++) g[i] = grad_value(0, (size_t)i, 0);
  nn_reducer_opts ro = {.comm = NULL, .wire = COLL_F32, .overlap = 1};
  nn_reducer *r;
  char err[256];
  assert_int_equal(nn_reducer_create(&r, &ro, g, 64, err, sizeof err), 0);
  nn_reducer_begin(r, 0);
  nn_reducer_ready(r, 64);
  nn_reducer_stats s;
  assert_int_equal(nn_reducer_finish(r, &s, err, sizeof err), 0);
  nn_bucket b[2];
  assert_int_equal(nn_reducer_last(r, b, 2, NULL), 1);
  assert_true(b[0].ready_s > 0);
  assert_int_equal((int)s.wire_bytes, 0);
  nn_reducer_destroy(r);
  int differ = 0;
  for (size_t i = 0; i < 64; i++) {
    double ref = 0.5 * ((double)grad_value(0, i, 0) + grad_value(1, i, 0));
    differ += fabs(g[i] - ref) > 1e-3;
  }
  assert_true(differ > 32);
}

/* The plans against nn_reducer.h's rule, rebuilt here from the sizes: every float in exactly
 * one bucket; arena order with a last bucket of the first bucket's size; with a front, the
 * front in arena order after the first bucket's size of floats held back, then chunks from the
 * arena's end, each part growing from the first bucket's size to the bucket size, then the
 * held-back. */
static void test_plans(void **st) {
  (void)st;
  enum { N = 5000 };
  static float g[N];
  nn_reducer_opts ro = {.comm = NULL, .wire = COLL_F32, .overlap = 1,
                        .first_bucket_bytes = 64 * 4, .bucket_bytes = 1000 * 4};
  nn_reducer *r;
  char err[256];
  assert_int_equal(nn_reducer_create(&r, &ro, g, N, err, sizeof err), 0);
  nn_bucket b[64];
  /* arena order: 64, then 992s (1000 rounded down to 16 floats), the last 64 */
  int nb = nn_reducer_last(r, b, 64, NULL);
  size_t want_a[] = {64, 992, 992, 992, 992, 904, 64};
  assert_int_equal(nb, 7);
  size_t off = 0;
  for (int i = 0; i < nb; i++) {
    assert_int_equal(b[i].offset, off);
    assert_int_equal(b[i].count, want_a[i]);
    off += b[i].count;
  }
  assert_int_equal(off, N);
  /* front 1500 (aligned up to 1504) after the held-back first 64: 64, 128, 256, 512 and the
   * remaining 544 from 64; then from the end about 64 (cut on a 16-float line: 72), 128, 256,
   * 512, 992, 992, and the rest down to 1568; last the held-back 64 at 0 */
  assert_int_equal(nn_reducer_set_front(r, 1500), 0);
  nb = nn_reducer_last(r, b, 64, NULL);
  assert_int_equal(nb, nn_reducer_nbuckets(r));
  size_t want_off[] = {64, 128, 256, 512, 1024, 4928, 4800, 4544, 4032, 3040, 2048, 1568, 0};
  size_t want_cnt[] = {64, 128, 256, 512, 544, 72, 128, 256, 512, 992, 992, 480, 64};
  assert_int_equal(nb, 13);
  for (int i = 0; i < nb; i++) {
    assert_int_equal(b[i].offset, want_off[i]);
    assert_int_equal(b[i].count, want_cnt[i]);
  }
  /* a front as large as what is not held back: all of it in arena order, then the held-back */
  assert_int_equal(nn_reducer_set_front(r, N - 64), 0);
  nb = nn_reducer_last(r, b, 64, NULL);
  assert_int_equal(b[0].offset, 64);
  assert_int_equal(b[nb - 1].offset, 0);
  assert_int_equal(b[nb - 1].count, 64);
  for (int i = 1; i < nb - 1; i++) assert_int_equal(b[i].offset, b[i - 1].offset + b[i - 1].count);
  assert_int_equal(b[nb - 2].offset + b[nb - 2].count, N);
  /* front 0: all in forward order, the first chunk at the very end */
  assert_int_equal(nn_reducer_set_front(r, 0), 0);
  nb = nn_reducer_last(r, b, 64, NULL);
  assert_int_equal(b[0].offset + b[0].count, N);
  assert_int_equal(b[nb - 1].offset, 0);
  size_t total = 0;
  for (int i = 0; i < nb; i++) total += b[i].count;
  assert_int_equal(total, N);
  /* without a communicator range waits return at once */
  assert_int_equal(nn_reducer_wait_range(r, 0, N, NULL, err, sizeof err), 0);
  nn_reducer_destroy(r);
}

/* The front from a profile's least and most: three quarters of the way where the link has time
 * to spare, the least where it has none, never outside the arena. */
static void test_front_choose(void **st) {
  (void)st;
  assert_int_equal(nn_reducer_front_choose(1000, 3000, 10000), 2500);
  assert_int_equal(nn_reducer_front_choose(3000, 1000, 10000), 3000);
  assert_int_equal(nn_reducer_front_choose(3000, 3000, 10000), 3000);
  assert_int_equal(nn_reducer_front_choose(9000, 20000, 10000), 10000);
  assert_int_equal(nn_reducer_front_choose(12000, 5000, 10000), 10000);
  assert_int_equal(nn_reducer_front_choose(-40, 400, 10000), 290);
  assert_int_equal(nn_reducer_front_choose(-40, -10, 10000), 0);
}

/* A bf16 wire on a reducer refuses other element types. */
static void test_bad_wire(void **st) {
  (void)st;
  float g[4];
  nn_reducer_opts ro = {.comm = NULL, .wire = COLL_I32};
  nn_reducer *r;
  char err[256];
  assert_int_equal(nn_reducer_create(&r, &ro, g, 4, err, sizeof err), -1);
  assert_non_null(strstr(err, "f32, bf16 or f16"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_fails_without_exchange),
      cmocka_unit_test(test_bad_wire),
      cmocka_unit_test(test_plans),
      cmocka_unit_test(test_front_choose),
      cmocka_unit_test(test_sharded_params),
      cmocka_unit_test(test_tcp),
      cmocka_unit_test(test_ucx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
