/* The collectives' descriptors (bench/cmd_<collective>.c) checked without a network: every rank's
 * inputs (fill) go through a naive reference of the collective written here, and the
 * descriptor's check must pass the reference's result and catch one wrong element in it, at
 * many rank counts, awkward counts and several types. all-to-allv's counts keep every sender's
 * total and are the same on every rank. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collbench.h"

/* The descriptors' files call the harness only from their commands, which this test never runs. */
int bench_coll_main(const bench_coll *d, int argc, char **argv) {
  (void)d, (void)argc, (void)argv;
  return 2;
}

static void put(void *buf, size_t i, coll_dtype dt, double v) {
  switch (dt) {
  case COLL_F32: ((float *)buf)[i] = (float)v; break;
  case COLL_F64: ((double *)buf)[i] = v; break;
  case COLL_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case COLL_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
  default: fail_msg("type %d not used here", (int)dt);
  }
}

static double reduce2(double a, double b, coll_op op) {
  return op == COLL_SUM ? a + b : op == COLL_PROD ? a * b : op == COLL_MIN ? (b < a ? b : a) : (b > a ? b : a);
}

/* What rank r must hold after the collective, from every rank's send buffer (send[p]). */
static void reference(const bench_coll *d, bench_coll_shape *sh, void **send, int r, void *out) {
  size_t es = coll_dtype_size(sh->dt);
  int n = sh->size;
  if (d == &bench_coll_allreduce || d == &bench_coll_reducescatter) {
    size_t len = d == &bench_coll_allreduce ? sh->count : sh->block;
    size_t off = d == &bench_coll_allreduce ? 0 : (size_t)r * sh->block;
    for (size_t j = 0; j < len; j++) {
      double v = coll_elem_get(send[0], off + j, sh->dt);
      for (int p = 1; p < n; p++) v = reduce2(v, coll_elem_get(send[p], off + j, sh->dt), sh->op);
      put(out, j, sh->dt, v);
    }
  } else if (d == &bench_coll_allgather) {
    for (int p = 0; p < n; p++) memcpy((char *)out + (size_t)p * sh->block * es, send[p], sh->block * es);
  } else if (d == &bench_coll_bcast) {
    memcpy(out, send[sh->root], sh->count * es);
  } else { /* all-to-all(v): from p, what p put for r, placed after what earlier senders sent r */
    size_t at = 0;
    for (int p = 0; p < n; p++) {
      size_t from = 0, len = sh->matrix[(size_t)p * n + r];
      for (int q = 0; q < r; q++) from += sh->matrix[(size_t)p * n + q];
      memcpy((char *)out + at * es, (char *)send[p] + from * es, len * es);
      at += len;
    }
  }
}

static void shape_for(const bench_coll *d, bench_coll_shape *sh, int n, int r, size_t count, coll_dtype dt,
                      coll_op op, double imb) {
  sh->count = count;
  sh->block = d->blocks ? count / (size_t)n : count;
  sh->dt = dt, sh->op = op;
  sh->rank = r, sh->size = n, sh->root = n - 1;
  sh->seed = 12345 + count;
  assert_int_equal(d->shape(sh, imb), 0);
}

static void one(const bench_coll *d, int n, size_t count, coll_dtype dt, coll_op op, double imb) {
  size_t es = coll_dtype_size(dt);
  bench_coll_shape sh[8];
  void *send[8], *recv[8];
  memset(sh, 0, sizeof sh);
  for (int r = 0; r < n; r++) {
    if (d->varies) {
      sh[r].matrix = calloc((size_t)n * n, sizeof(size_t));
      sh[r].sc = calloc(n, sizeof(size_t)), sh[r].sd = calloc(n, sizeof(size_t));
      sh[r].rc = calloc(n, sizeof(size_t)), sh[r].rd = calloc(n, sizeof(size_t));
    }
    shape_for(d, &sh[r], n, r, count, dt, op, imb);
    send[r] = calloc(sh[r].send_elems + 1, es);
    recv[r] = d->in_place ? send[r] : calloc(sh[r].recv_elems + 1, es);
    d->fill(&sh[r], send[r], recv[r]);
  }
  if (d->varies) { /* every rank the same matrix; every sender's total n x block */
    for (int r = 1; r < n; r++) assert_memory_equal(sh[r].matrix, sh[0].matrix, (size_t)n * n * sizeof(size_t));
    for (int p = 0; p < n; p++) {
      size_t tot = 0;
      for (int q = 0; q < n; q++) tot += sh[0].matrix[(size_t)p * n + q];
      assert_int_equal(tot, (size_t)n * sh[0].block);
    }
  }
  for (int r = 0; r < n; r++) {
    size_t len = sh[r].recv_elems, first = 0;
    void *out = calloc(len + 1, es);
    reference(d, &sh[r], send, r, out);
    size_t bad = d->check(&sh[r], out, &first);
    if (bad)
      fail_msg("%s n=%d count=%zu %s rank %d: %zu wrong at %zu on the reference's result", d->name, n, count,
               coll_dtype_name(dt), r, bad, first);
    if (len) { /* one wrong element is caught, where it is */
      size_t at = len / 2;
      put(out, at, dt, coll_elem_get(out, at, dt) + 1);
      assert_int_equal(d->check(&sh[r], out, &first), 1);
      assert_int_equal(first, at);
    }
    free(out);
  }
  for (int r = 0; r < n; r++) {
    if (recv[r] != send[r]) free(recv[r]);
    free(send[r]);
    free(sh[r].matrix), free(sh[r].sc), free(sh[r].sd), free(sh[r].rc), free(sh[r].rd);
  }
}

static void test_every_collective(void **st) {
  (void)st;
  const bench_coll *ds[] = {&bench_coll_allreduce, &bench_coll_reducescatter, &bench_coll_allgather,
                            &bench_coll_bcast, &bench_coll_alltoall};
  const int ranks[] = {1, 2, 3, 5, 8};
  const size_t blocks[] = {1, 7, 1000};
  const coll_dtype dts[] = {COLL_F32, COLL_I64, COLL_F64};
  for (size_t di = 0; di < 5; di++)
    for (size_t ri = 0; ri < 5; ri++)
      for (size_t bi = 0; bi < 3; bi++)
        for (size_t ti = 0; ti < 3; ti++) {
          const bench_coll *d = ds[di];
          size_t count = d->blocks ? blocks[bi] * (size_t)ranks[ri] : blocks[bi] + 3;
          one(d, ranks[ri], count, dts[ti], ti == 2 ? COLL_MAX : COLL_SUM, 0);
          if (d->varies) one(d, ranks[ri], count, dts[ti], COLL_SUM, 1.0);
        }
}

/* Skewed counts are skewed: with imbalance 1 some pair gets well over its even share, and some
 * count may be zero; the seed makes another matrix. */
static void test_imbalance_skews(void **st) {
  (void)st;
  int n = 8;
  bench_coll_shape a = {0}, b = {0};
  size_t *m[2];
  for (int k = 0; k < 2; k++) {
    bench_coll_shape *s = k ? &b : &a;
    s->matrix = m[k] = calloc((size_t)n * n, sizeof(size_t));
    s->sc = calloc(n, sizeof(size_t)), s->sd = calloc(n, sizeof(size_t));
    s->rc = calloc(n, sizeof(size_t)), s->rd = calloc(n, sizeof(size_t));
    s->size = n, s->rank = 3, s->block = 1000, s->count = 8000, s->seed = 7 + (uint64_t)k;
    assert_int_equal(bench_coll_alltoall.shape(s, 1.0), 0);
  }
  size_t most = 0;
  for (int i = 0; i < n * n; i++) most = m[0][i] > most ? m[0][i] : most;
  assert_true(most > 2000); /* over twice the even 1000 */
  assert_memory_not_equal(m[0], m[1], (size_t)n * n * sizeof(size_t));
  bench_coll_shape *ss[2] = {&a, &b};
  for (int k = 0; k < 2; k++)
    free(ss[k]->matrix), free(ss[k]->sc), free(ss[k]->sd), free(ss[k]->rc), free(ss[k]->rd);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_collective), cmocka_unit_test(test_imbalance_skews)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
