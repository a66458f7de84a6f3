/* Unit tests of the collectives' pieces: reductions and conversions against references, the
 * pattern checker (it must catch corruption), parsing, and the bootstrap's and transport's
 * failure paths (wrong token, port in use, self-connection, inherited root socket, unreachable
 * root, dead peer, silent peer). */
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll.h"
#include "coll_internal.h" /* the streaming kernels */
#include "sock.h"
#include "test_ranks.h"

static uint64_t rng_state(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void test_reduce_f32_f64_int(void **st) {
  (void)st;
  enum { N = 1037 };
  uint64_t s = 42;
  float a[N], b[N], a0[N];
  double da[N], db[N];
  int64_t ia[N], ib[N];
  for (int op = 0; op < COLL_NOPS; op++) {
    for (int i = 0; i < N; i++) {
      a0[i] = a[i] = (float)((int64_t)(rng_state(&s) % 20001) - 10000) / 64.0f;
      b[i] = (float)((int64_t)(rng_state(&s) % 20001) - 10000) / 64.0f;
      da[i] = a[i];
      db[i] = b[i];
      ia[i] = (int64_t)(rng_state(&s) % 2001) - 1000;
      ib[i] = (int64_t)(rng_state(&s) % 2001) - 1000;
    }
    int64_t ia0[N];
    memcpy(ia0, ia, sizeof ia);
    double da0[N];
    memcpy(da0, da, sizeof da);
    coll_reduce(a, b, N, COLL_F32, (coll_op)op);
    coll_reduce(da, db, N, COLL_F64, (coll_op)op);
    coll_reduce(ia, ib, N, COLL_I64, (coll_op)op);
    for (int i = 0; i < N; i++) {
      double x = a0[i], y = b[i], w;
      int64_t iw;
      switch (op) {
      case COLL_SUM: w = x + y; iw = ia0[i] + ib[i]; break;
      case COLL_PROD: w = x * y; iw = ia0[i] * ib[i]; break;
      case COLL_MIN: w = x < y ? x : y; iw = ia0[i] < ib[i] ? ia0[i] : ib[i]; break;
      default: w = x > y ? x : y; iw = ia0[i] > ib[i] ? ia0[i] : ib[i]; break;
      }
      assert_true(a[i] == (float)w); /* both sides round the exact result once */
      assert_true(da[i] == (op == COLL_SUM ? da0[i] + db[i] : op == COLL_PROD ? da0[i] * db[i] : w));
      assert_true(ia[i] == iw);
    }
  }
}

/* The streaming kernels (non-temporal stores, used by the ring on mapped memory) must give
 * bit for bit what the ordinary ones give, at every alignment and length, every dtype and op,
 * and must not touch a byte outside the destination. */
static void test_stream_kernels(void **st) {
  (void)st;
  enum { N = 70000, PAD = 64 };
  uint64_t s = 7;
  unsigned char *a = malloc(N * 8 + 2 * PAD), *b = malloc(N * 8 + 2 * PAD), *ref = malloc(N * 8 + 2 * PAD);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(ref);
  static const size_t counts[] = {0, 1, 3, 15, 17, 1023, 1025, 4099, 65537};
  for (int dt = 0; dt < COLL_NDTYPES; dt++)
    for (int op = 0; op < COLL_NOPS; op++)
      for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        for (size_t mis = 0; mis < 3; mis++) {
          size_t es = coll_dtype_size((coll_dtype)dt), cnt = counts[k], off = PAD + mis * es;
          for (size_t i = 0; i < N * 8 + 2 * PAD; i++) {
            a[i] = (unsigned char)rng_state(&s);
            b[i] = (unsigned char)rng_state(&s);
          }
          if (dt == COLL_F16 || dt == COLL_BF16) /* keep halves finite: clear the top exponent bit */
            for (size_t i = 1; i < N * 8 + 2 * PAD; i += 2) a[i] &= 0xbf, b[i] &= 0xbf;
          if (dt == COLL_F32 || dt == COLL_F64) /* random bit patterns: avoid NaN payload games */
            for (size_t i = es - 1; i < N * 8 + 2 * PAD; i += es) a[i] &= 0xbf, b[i] &= 0xbf;
          memcpy(ref, a, N * 8 + 2 * PAD);
          coll_reduce(ref + off, b + off + es, cnt, (coll_dtype)dt, (coll_op)op);
          coll_reduce_stream(a + off, b + off + es, cnt, (coll_dtype)dt, (coll_op)op);
          assert_memory_equal(a, ref, N * 8 + 2 * PAD);
        }
  for (size_t mis = 0; mis < 19; mis++)
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
      size_t bytes = counts[k] * 3 + mis;
      for (size_t i = 0; i < N * 8 + 2 * PAD; i++) a[i] = ref[i] = (unsigned char)rng_state(&s);
      memcpy(ref + PAD + mis, b + 5, bytes);
      coll_copy_stream(a + PAD + mis, b + 5, bytes);
      assert_memory_equal(a, ref, N * 8 + 2 * PAD);
    }
  free(a);
  free(b);
  free(ref);
}

/* coll_reduce2 (the mapped ring's last reduce-scatter step): both destinations get what
 * coll_reduce gives, cached and streamed, at every dtype, op, length and alignment, also where
 * the second destination is the input itself (two ranks); no byte outside them changes. */
static void test_reduce2(void **st) {
  (void)st;
  enum { N = 70000, PAD = 64, SZ = N * 8 + 2 * PAD };
  uint64_t s = 11;
  unsigned char *a = malloc(SZ), *b = malloc(SZ), *o = malloc(SZ), *ref = malloc(SZ), *refb = malloc(SZ),
                *refo = malloc(SZ);
  assert_true(a && b && o && ref && refb && refo);
  static const size_t counts[] = {0, 1, 3, 17, 1025, 4099, 65537};
  for (int dt = 0; dt < COLL_NDTYPES; dt++)
    for (int op = 0; op < COLL_NOPS; op++)
      for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        for (int stream = 0; stream < 2; stream++)
          for (int alias = 0; alias < 2; alias++) {
            size_t es = coll_dtype_size((coll_dtype)dt), cnt = counts[k], off = PAD + (size_t)(k % 3) * es;
            for (size_t i = 0; i < SZ; i++) {
              a[i] = (unsigned char)rng_state(&s);
              b[i] = (unsigned char)rng_state(&s);
              o[i] = (unsigned char)rng_state(&s);
            }
            if (dt == COLL_F16 || dt == COLL_BF16) /* finite halves */
              for (size_t i = 1; i < SZ; i += 2) a[i] &= 0xbf, b[i] &= 0xbf;
            if (dt == COLL_F32 || dt == COLL_F64)
              for (size_t i = es - 1; i < SZ; i += es) a[i] &= 0xbf, b[i] &= 0xbf;
            memcpy(ref, a, SZ);
            memcpy(refb, b, SZ);
            memcpy(refo, o, SZ);
            coll_reduce(ref + off, b + off + es, cnt, (coll_dtype)dt, (coll_op)op);
            unsigned char *out2 = alias ? b + off + es : o + off + 2 * es;
            memcpy((alias ? refb + off + es : refo + off + 2 * es), ref + off, cnt * es);
            coll_reduce2(a + off, out2, b + off + es, cnt, (coll_dtype)dt, (coll_op)op, stream);
            assert_memory_equal(a, ref, SZ);
            assert_memory_equal(b, refb, SZ);
            assert_memory_equal(o, refo, SZ);
          }
  free(a), free(b), free(o), free(ref), free(refb), free(refo);
}

/* coll_reduce_rev(x, y) leaves y op x in x, the operands in that order, at every dtype, op,
 * length and alignment: against coll_reduce(copy of y, x). Signed zeros and NaNs of both signs
 * in the floats make min, max and sum depend on the order, and the test counts that some cases
 * did (else it could not tell the order). */
static void test_reduce_rev(void **st) {
  (void)st;
  enum { N = 70000, PAD = 64, SZ = N * 8 + 2 * PAD };
  uint64_t s = 12;
  unsigned char *a = malloc(SZ), *b = malloc(SZ), *ref = malloc(SZ), *refb = malloc(SZ), *fwd = malloc(SZ);
  assert_true(a && b && ref && refb && fwd);
  static const size_t counts[] = {0, 1, 3, 17, 1025, 4099, 65537};
  int ordered = 0;
  for (int dt = 0; dt < COLL_NDTYPES; dt++)
    for (int op = 0; op < COLL_NOPS; op++)
      for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        size_t es = coll_dtype_size((coll_dtype)dt), cnt = counts[k], off = PAD + (size_t)(k % 3) * es;
        for (size_t i = 0; i < SZ; i++) a[i] = (unsigned char)rng_state(&s), b[i] = (unsigned char)rng_state(&s);
        if (dt == COLL_F32 || dt == COLL_F64)
          for (size_t i = 0; i + es <= SZ; i += es) {
            unsigned r = (unsigned)(rng_state(&s) % 8);
            unsigned char *x = (r & 1) ? a + i : b + i;
            if (r < 4) memset(x, 0, es - 1), x[es - 1] = r & 2 ? 0x80 : 0; /* +-0 */
            else if (r < 6) memset(x, 0xff, es), x[es - 1] = r & 2 ? 0xff : 0x7f; /* NaNs */
            else x[es - 1] &= 0xbf;
          }
        if (dt == COLL_F16 || dt == COLL_BF16) /* finite halves */
          for (size_t i = 1; i < SZ; i += 2) a[i] &= 0xbf, b[i] &= 0xbf;
        memcpy(ref, a, SZ);
        memcpy(refb, b, SZ);
        memcpy(fwd, a, SZ);
        memcpy(ref + off, b + off + es, cnt * es);
        coll_reduce(ref + off, a + off, cnt, (coll_dtype)dt, (coll_op)op);
        coll_reduce(fwd + off, b + off + es, cnt, (coll_dtype)dt, (coll_op)op);
        ordered += memcmp(ref, fwd, SZ) != 0;
        coll_reduce_rev(a + off, b + off + es, cnt, (coll_dtype)dt, (coll_op)op);
        assert_memory_equal(a, ref, SZ);
        assert_memory_equal(b, refb, SZ);
      }
  assert_true(ordered > 0);
  free(a), free(b), free(ref), free(refb), free(fwd);
}

/* f16: every finite half converts to f32 and back unchanged; rounding is to nearest even. */
static void test_half_conversions(void **st) {
  (void)st;
  for (uint32_t h = 0; h < 65536; h++) {
    uint16_t x = (uint16_t)h;
    if (((x >> 10) & 31) == 31) continue; /* inf/nan */
    float f = coll_f16_to_f32(x);
    assert_int_equal(coll_f32_to_f16(f), x);
  }
  assert_int_equal(coll_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(coll_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(coll_f32_to_f16(1e6f), 0x7c00);                /* overflow to inf */
  assert_int_equal(coll_f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00); /* tie to even */
  assert_int_equal(coll_f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02); /* tie to even, up */
  assert_int_equal(coll_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(coll_f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80); /* tie to even */
  assert_int_equal(coll_f32_to_bf16(1.0f + 3.0f / 256.0f), 0x3f82);
  assert_true(coll_bf16_to_f32(0xc040) == -3.0f);
  /* half sums through f32 */
  uint16_t a[300], b[300];
  for (int i = 0; i < 300; i++) a[i] = coll_f32_to_f16((float)i), b[i] = coll_f32_to_f16(0.5f);
  coll_reduce(a, b, 300, COLL_F16, COLL_SUM);
  for (int i = 0; i < 300; i++) assert_true(coll_f16_to_f32(a[i]) == (float)i + 0.5f);

  /* the array forms (vectorized) equal the scalar ones bit for bit: awkward lengths and start
   * offsets, nan, infinities, subnormals, ties and a scale that rounds */
  enum { N = 4099 };
  float *f = malloc((N + 1) * sizeof *f), *back = malloc((N + 1) * sizeof *back);
  uint16_t *h = malloc((N + 1) * sizeof *h);
  assert_non_null(f);
  assert_non_null(h);
  assert_non_null(back);
  uint32_t seed = 12345;
  for (int i = 0; i <= N; i++) {
    seed = seed * 1664525u + 1013904223u;
    uint32_t bits = seed;
    memcpy(&f[i], &bits, sizeof bits);
  }
  f[1] = NAN, f[2] = INFINITY, f[3] = -INFINITY, f[4] = 1e-41f, f[5] = 1.0f + 1.0f / 256.0f;
  f[6] = 65504.0f, f[7] = -0.0f, f[8] = 1.0f + 1.0f / 2048.0f;
  const coll_dtype dts[] = {COLL_BF16, COLL_F16};
  const float scales[] = {1.0f, 0.5f, 1.0f / 3.0f};
  const size_t lens[] = {0, 1, 7, 33, 1000, N};
  for (int d = 0; d < 2; d++)
    for (int s = 0; s < 3; s++)
      for (size_t l = 0; l < sizeof lens / sizeof *lens; l++)
        for (int off = 0; off < 2; off++) {
          size_t n = lens[l] - (lens[l] && off ? 1 : 0);
          memset(h, 0xab, (N + 1) * sizeof *h);
          coll_f32_to_half_n(h + off, f + off, n, scales[s], dts[d]);
          for (size_t i = 0; i < n; i++) {
            float v = f[off + i] * scales[s];
            uint16_t want = dts[d] == COLL_BF16 ? coll_f32_to_bf16(v) : coll_f32_to_f16(v);
            if (h[off + i] != want)
              fail_msg("%s x %g, n %zu, element %zu (%a): 0x%04x, scalar 0x%04x",
                       coll_dtype_name(dts[d]), (double)scales[s], n, i, (double)v, h[off + i], want);
          }
          if (n < (size_t)N + 1 - off) assert_int_equal(h[off + n], 0xabab); /* no further */
          coll_half_to_f32_n(back + off, h + off, n, dts[d]);
          for (size_t i = 0; i < n; i++) {
            float want = dts[d] == COLL_BF16 ? coll_bf16_to_f32(h[off + i]) : coll_f16_to_f32(h[off + i]);
            assert_memory_equal(&back[off + i], &want, sizeof want);
          }
        }
  free(f);
  free(h);
  free(back);
}

/* The checker passes an exact reduction and counts every corrupted element. */
static void test_pattern_checker_catches_corruption(void **st) {
  (void)st;
  enum { N = 4099, R = 5 };
  for (int dt = 0; dt < COLL_NDTYPES; dt++)
    for (int op = 0; op < COLL_NOPS; op++) {
      char acc[N * 8], tmp[N * 8];
      coll_pattern_fill(acc, N, (coll_dtype)dt, (coll_op)op, 0, 7);
      for (int r = 1; r < R; r++) {
        coll_pattern_fill(tmp, N, (coll_dtype)dt, (coll_op)op, r, 7);
        coll_reduce(acc, tmp, N, (coll_dtype)dt, (coll_op)op);
      }
      size_t first = 99;
      assert_int_equal(coll_pattern_check(acc, N, (coll_dtype)dt, (coll_op)op, R, 7, &first), 0);
      /* one element off by a value the data never produce */
      size_t es = coll_dtype_size((coll_dtype)dt);
      char save[8];
      memcpy(save, acc + 1234 * es, es);
      coll_pattern_fill(acc + 1234 * es, 1, (coll_dtype)dt, COLL_SUM, 99, 1); /* some other value */
      double v = coll_elem_get(acc, 1234, (coll_dtype)dt);
      double ok = 0;
      memcpy(tmp, save, es);
      ok = coll_elem_get(tmp, 0, (coll_dtype)dt);
      if (v == ok) { /* the replacement happened to be right: force a different bit pattern */
        acc[1234 * es] ^= 0x40;
      }
      assert_int_equal(coll_pattern_check(acc, N, (coll_dtype)dt, (coll_op)op, R, 7, &first), 1);
      assert_int_equal(first, 1234);
      /* wrong rank count also fails */
      memcpy(acc + 1234 * es, save, es);
      assert_true(coll_pattern_check(acc, N, (coll_dtype)dt, (coll_op)op, R - 1, 7, NULL) > 0);
    }
}

/* The other collectives' formulas, worked by hand (algo_colls_model.c), and auto's pick by them. */
static void test_colls_model(void **st) {
  (void)st;
  coll_model m = {.alpha = 1e-6, .beta = 1e-9, .gamma = 0.5e-9};
  double n = 4e6;
  static const struct {
    coll_kind k;
    coll_algo_kind a;
    int p;
    double want;
  } cases[] = {
      {COLL_REDUCE_SCATTER, COLL_ALGO_RING, 4, 3e-6 + 0.75 * 4e6 * 1.5e-9},
      {COLL_REDUCE_SCATTER, COLL_ALGO_RHD, 4, 2e-6 + 0.75 * 4e6 * 1.5e-9},
      {COLL_REDUCE_SCATTER, COLL_ALGO_RHD, 3, 2e-6 + (2.0 / 3) * 4e6 * 1.5e-9}, /* the ring runs */
      {COLL_ALLGATHER, COLL_ALGO_RING, 4, 3e-6 + 3e-3},
      {COLL_ALLGATHER, COLL_ALGO_RD, 4, 2e-6 + 3e-3},
      {COLL_ALLGATHER, COLL_ALGO_BRUCK, 5, 3e-6 + 0.8 * 4e6 * 1e-9},
      {COLL_BCAST, COLL_ALGO_TREE, 4, 2 * (1e-6 + 4e-3)},
      {COLL_BCAST, COLL_ALGO_VDG, 4, 5e-6 + 6e-3},
      {COLL_BCAST, COLL_ALGO_CHAIN, 4, 6 * (1e-6 + 1e-3)}, /* 4 chunks of 1e6 */
      {COLL_ALLTOALL, COLL_ALGO_PAIRWISE, 4, 3e-6 + 3e-3},
      {COLL_ALLTOALL, COLL_ALGO_BRUCK, 4, 2e-6 + 4e-3}, /* lg 4 steps of half the blocks each */
      {COLL_ALLTOALL, COLL_ALGO_LINEAR, 4, 3e-6 + 3e-3}, /* pairwise's messages, all posted at once */
      {COLL_BCAST, COLL_ALGO_LINEAR, 4, 3 * (1e-6 + 4e-3)}, /* the root sends 3 copies */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    double t = coll_colls_time(&m, cases[i].k, (coll_algo){cases[i].a, 0}, cases[i].p, (size_t)n, 1000000);
    if (fabs(t - cases[i].want) > 1e-12) fail_msg("case %zu: %.9g s, want %.9g", i, t, cases[i].want);
  }
  assert_true(isinf(coll_colls_time(&m, COLL_BCAST, (coll_algo){COLL_ALGO_NATIVE, 0}, 4, 1000, 0)));
  assert_true(isinf(coll_colls_time(&m, COLL_BCAST, (coll_algo){COLL_ALGO_RING, 0}, 4, 1000, 0)));
  /* auto: the tree for a short broadcast, vdg for a long one (chain is 1 us behind), rd for a
   * short all-gather on a power of two, bruck off it */
  assert_int_equal(coll_colls_pick(&m, COLL_BCAST, 4, 1000, 1000000).kind, COLL_ALGO_TREE);
  assert_int_equal(coll_colls_pick(&m, COLL_BCAST, 4, (size_t)n, 1000000).kind, COLL_ALGO_VDG);
  assert_int_equal(coll_colls_pick(&m, COLL_ALLGATHER, 8, 1000, 0).kind, COLL_ALGO_RD);
  assert_int_equal(coll_colls_pick(&m, COLL_ALLGATHER, 6, 1000, 0).kind, COLL_ALGO_BRUCK);
  /* all-to-all: Bruck's fewer steps for short blocks, pairwise's fewer bytes for long ones */
  assert_int_equal(coll_colls_pick(&m, COLL_ALLTOALL, 6, 1000, 0).kind, COLL_ALGO_BRUCK);
  assert_int_equal(coll_colls_pick(&m, COLL_ALLTOALL, 6, (size_t)n, 0).kind, COLL_ALGO_PAIRWISE);
  /* linear: the broadcast's never below the tree's, the all-to-all's ties pairwise at every rank
   * count and size; auto takes neither */
  for (int p = 2; p <= 16; p++)
    for (double b = 8; b < 1e8; b *= 16) {
      coll_algo tr = {COLL_ALGO_TREE, 0}, pw = {COLL_ALGO_PAIRWISE, 0}, li = {COLL_ALGO_LINEAR, 0};
      assert_true(coll_colls_time(&m, COLL_BCAST, li, p, (size_t)b, 0) >=
                  coll_colls_time(&m, COLL_BCAST, tr, p, (size_t)b, 0));
      assert_true(coll_colls_time(&m, COLL_ALLTOALL, li, p, (size_t)b, 0) ==
                  coll_colls_time(&m, COLL_ALLTOALL, pw, p, (size_t)b, 0));
      assert_int_not_equal(coll_colls_pick(&m, COLL_BCAST, p, (size_t)b, 0).kind, COLL_ALGO_LINEAR);
      assert_int_not_equal(coll_colls_pick(&m, COLL_ALLTOALL, p, (size_t)b, 0).kind, COLL_ALGO_LINEAR);
    }
}

/* hier's formulas by level (algo_colls_model.c), worked by hand: H hosts of L ranks, the
 * broadcast the cheapest one-level one at each level, the all-to-all through the leaders. */
static void test_colls_model_hier(void **st) {
  (void)st;
  coll_model m = {.alpha = 1e-6, .beta = 1e-9, .gamma = 0.5e-9, .hosts = 2};
  double n = 4e6;
  static const struct {
    coll_kind k;
    int p, hosts;
    double want;
  } cases[] = {
      /* 2 hosts of 2: the tree at both levels (1 us + 4 ms each) */
      {COLL_BCAST, 4, 2, 2 * (1e-6 + 4e-3)},
      /* 2 hosts of 4: the tree across, vdg inside ((2 + 3) us + 2 x 3/4 x 4 ms) */
      {COLL_BCAST, 8, 2, (1e-6 + 4e-3) + (5e-6 + 6e-3)},
      /* one host: the one-level broadcast's (vdg) */
      {COLL_BCAST, 4, 0, 5e-6 + 6e-3},
      /* 2 hosts of 2, 1 MB to each peer: gather (1 message of the 2 MB for the other host),
       * inside (1 of 1 MB), leaders (1 of 4 MB), hand out (1 of 2 MB): 4 us + 9 ms */
      {COLL_ALLTOALL, 4, 2, 4e-6 + 9e-3},
      /* 3 hosts of 2, 2/3 MB to each peer: 1 + 1 + 2 + 1 messages; 4 + 1 + 8 + 4 = 17 parts */
      {COLL_ALLTOALL, 6, 3, 5e-6 + 17 * 4e6 / 6 * 1e-9},
      /* more hosts than ranks: a rank a host, the leaders' pairwise alone */
      {COLL_ALLTOALL, 2, 5, 1e-6 + 0.5 * 4e-3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    m.hosts = cases[i].hosts;
    double t = coll_colls_time(&m, cases[i].k, (coll_algo){COLL_ALGO_HIER, 0}, cases[i].p, (size_t)n, 1000000);
    if (fabs(t - cases[i].want) > 1e-12) fail_msg("case %zu: %.9g s, want %.9g", i, t, cases[i].want);
  }
  m.hosts = 2;
  /* reduce-scatter's and all-gather's hier have no formula here; one rank costs nothing */
  assert_true(isinf(coll_colls_time(&m, COLL_REDUCE_SCATTER, (coll_algo){COLL_ALGO_HIER, 0}, 4, 1000, 0)));
  assert_true(coll_colls_time(&m, COLL_BCAST, (coll_algo){COLL_ALGO_HIER, 0}, 1, 1000, 0) == 0);
  /* auto: with alpha and beta alike on both levels the leaders' extra copies never pay, and
   * the broadcast's levels only tie the flat one: the one-level algorithms win */
  for (int p = 2; p <= 16; p++)
    for (double b = 8; b < 1e8; b *= 16) {
      assert_int_not_equal(coll_colls_pick(&m, COLL_ALLTOALL, p, (size_t)b, 0).kind, COLL_ALGO_HIER);
      assert_int_not_equal(coll_colls_pick(&m, COLL_BCAST, p, (size_t)b, 0).kind, COLL_ALGO_HIER);
    }
  /* a fabric whose start-up dwarfs its bytes and whose ranks per host are many: the all-to-all's
   * 2 (L-1) + H - 1 start-ups against pairwise's p - 1 are still more than Bruck's lg p */
  m.alpha = 1e-3;
  assert_int_equal(coll_colls_pick(&m, COLL_ALLTOALL, 16, 64, 0).kind, COLL_ALGO_BRUCK);
}

static void test_parsing(void **st) {
  (void)st;
  coll_algo a;
  assert_int_equal(coll_algo_parse("ring", &a), 0);
  assert_int_equal(a.kind, COLL_ALGO_RING);
  assert_int_equal(coll_algo_parse("ps:4", &a), 0);
  assert_int_equal(a.kind, COLL_ALGO_PS);
  assert_int_equal(a.param, 4);
  char buf[32];
  coll_algo_format(buf, sizeof buf, a);
  assert_string_equal(buf, "ps:4");
  assert_int_equal(coll_algo_parse("ps:0", &a), -1);
  assert_int_equal(coll_algo_parse("ring:2", &a), -1);
  assert_int_equal(coll_algo_parse("bogus", &a), -1);
  assert_int_equal(coll_algo_parse("", &a), -1);
  /* hier names its algorithm across hosts; plain hier is hier:ring, and says so */
  static const struct {
    const char *in, *out;
    int across;
  } hier[] = {{"hier", "hier:ring", COLL_ALGO_RING}, {"hier:ring", "hier:ring", COLL_ALGO_RING},
              {"hier:rhd", "hier:rhd", COLL_ALGO_RHD}, {"hier:rd", "hier:rd", COLL_ALGO_RD},
              {"hier:tree", "hier:tree", COLL_ALGO_TREE}, {"hier:dtree", "hier:dtree", COLL_ALGO_DTREE}};
  for (size_t i = 0; i < sizeof hier / sizeof hier[0]; i++) {
    assert_int_equal(coll_algo_parse(hier[i].in, &a), 0);
    assert_int_equal(a.kind, COLL_ALGO_HIER);
    assert_int_equal(a.param, hier[i].across);
    coll_algo_format(buf, sizeof buf, a);
    assert_string_equal(buf, hier[i].out);
  }
  static const char *const bad_hier[] = {"hier:", "hier:ps", "hier:ps:2", "hier:hier", "hier:auto",
                                         "hier:native", "hier:bogus", "hier:ring:2"};
  for (size_t i = 0; i < sizeof bad_hier / sizeof bad_hier[0]; i++)
    if (coll_algo_parse(bad_hier[i], &a) != -1) fail_msg("'%s' was accepted", bad_hier[i]);
  /* the other collectives' algorithms are theirs: all-reduce refuses them, each collective takes
   * its own only */
  static const char *const others[] = {"bruck", "chain", "vdg", "pairwise", "linear", "hier:bruck"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
    if (coll_algo_parse(others[i], &a) != -1) fail_msg("all-reduce accepted '%s'", others[i]);
  static const struct {
    coll_kind k;
    const char *name;
    int ok;
  } per[] = {{COLL_REDUCE_SCATTER, "ring", 1}, {COLL_REDUCE_SCATTER, "rhd", 1}, {COLL_REDUCE_SCATTER, "bruck", 0},
             {COLL_ALLGATHER, "rd", 1},        {COLL_ALLGATHER, "bruck", 1},    {COLL_ALLGATHER, "rhd", 0},
             {COLL_BCAST, "tree", 1},          {COLL_BCAST, "chain", 1},        {COLL_BCAST, "vdg", 1},
             {COLL_BCAST, "ring", 0},          {COLL_ALLTOALL, "pairwise", 1},  {COLL_ALLTOALL, "ring", 0},
             {COLL_ALLTOALL, "auto", 1},       {COLL_ALLGATHER, "ps:2", 0},     {COLL_BCAST, "bogus", 0},
             {COLL_BCAST, "hier", 1},          {COLL_ALLTOALL, "hier", 1},      {COLL_BCAST, "hier:ring", 1},
             {COLL_ALLTOALL, "hier:tree", 0},  {COLL_BCAST, "hier:", 0},      {COLL_ALLTOALL, "linear", 1},
             {COLL_BCAST, "linear", 1},        {COLL_REDUCE_SCATTER, "linear", 0}};
  for (size_t i = 0; i < sizeof per / sizeof per[0]; i++)
    if ((coll_colls_algo_parse(per[i].k, per[i].name, &a) == 0) != per[i].ok)
      fail_msg("collective %d: '%s' %s", (int)per[i].k, per[i].name, per[i].ok ? "refused" : "accepted");
  coll_dtype d;
  assert_int_equal(coll_dtype_parse("bf16", &d), 0);
  assert_int_equal(d, COLL_BF16);
  assert_int_equal(coll_dtype_parse("f8", &d), -1);
  coll_op o;
  assert_int_equal(coll_op_parse("max", &o), 0);
  assert_int_equal(coll_op_parse("avg", &o), -1);
  coll_transport_kind k;
  assert_int_equal(coll_transport_parse("tcp", &k), 0);
  assert_int_equal(coll_transport_parse("ib", &k), -1);
}

/* ---- multi-process failure paths ---- */

static pid_t spawn(test_child_fn fn, int arg, int *rfd) {
  pid_t pid = test_child_spawn(fn, arg, rfd);
  assert_true(pid > 0);
  return pid;
}

static int finish(pid_t pid, int rfd, char *out, size_t cap) { return test_child_finish(pid, rfd, out, cap, 30); }

static int g_port;                 /* per test, set before forking */
static int g_boot_ms = 1500;       /* the rendezvous timeout of child_boot */

static int child_boot(int arg, char *err, size_t cap) {
  /* arg: rank*100 + size*10 + token id */
  int rank = arg / 100, size = (arg / 10) % 10;
  test_rank_env(rank, size, g_port, arg % 10 ? "other-job" : "job");
  coll_boot *b;
  coll_err e = {{0}};
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, g_boot_ms, &e) != 0) {
    snprintf(err, cap, "%s", e.msg);
    return 1;
  }
  coll_boot_close(b);
  return 0;
}

static int child_boot_tok(int rank, char *err, size_t cap) {
  char tok[64];
  memset(tok, 'a', 63);
  tok[63] = '\0';
  if (rank == 1) tok[62] = 'b';
  test_rank_env(rank, 2, g_port, tok);
  coll_boot *b;
  coll_err e = {{0}};
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 1500, &e) != 0) {
    snprintf(err, cap, "%s", e.msg);
    return 1;
  }
  coll_boot_close(b);
  return 0;
}

/* A connection to the rendezvous port on loopback, retried while rank 0 starts listening. */
static int stranger_connect(int port) {
  for (int tries = 0; tries < 400; tries++) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) return s;
    close(s);
    usleep(10000);
  }
  fail_msg("rank 0 never listened on port %d", port);
  return -1;
}

/* Many strangers at the rendezvous (silent, garbage, a hello cut short, then silent) do not
 * hold up the real ranks behind them: with a 4 s timeout, shorter than the 5 s a stranger is
 * given to say hello, the job only starts if rank 0 reads every connection at once. */
static void test_strangers_do_not_delay(void **st) {
  (void)st;
  g_port = test_free_port();
  g_boot_ms = 4000;
  int f0, f1, f2;
  pid_t p0 = spawn(child_boot, 0 * 100 + 3 * 10, &f0);
  enum { NSTRANGE = 48 };
  int strangers[NSTRANGE];
  unsigned char junk[300];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 131 + 7);
  for (int i = 0; i < NSTRANGE; i++) {
    strangers[i] = stranger_connect(g_port);
    if (i % 3 == 1) { /* garbage */
      assert_int_equal(send(strangers[i], junk, sizeof junk, MSG_NOSIGNAL), (ssize_t)sizeof junk);
    } else if (i % 3 == 2) { /* the magic, then nothing more */
      uint32_t magic = 0x46424231u;
      assert_int_equal(send(strangers[i], &magic, sizeof magic, MSG_NOSIGNAL), (ssize_t)sizeof magic);
    }
  }
  pid_t p1 = spawn(child_boot, 1 * 100 + 3 * 10, &f1);
  pid_t p2 = spawn(child_boot, 2 * 100 + 3 * 10, &f2);
  char e0[1024], e1[1024], e2[1024];
  int s1 = finish(p1, f1, e1, sizeof e1), s2 = finish(p2, f2, e2, sizeof e2);
  int s0 = finish(p0, f0, e0, sizeof e0);
  for (int i = 0; i < NSTRANGE; i++) close(strangers[i]);
  g_boot_ms = 1500;
  if (s0 || s1 || s2) fail_msg("rendezvous failed: rank 0 %d '%s', rank 1 %d '%s', rank 2 %d '%s'", s0, e0, s1, e1, s2, e2);
}

/* A token that differs only in its last byte is still refused (all bytes are compared). */
static void test_token_last_byte(void **st) {
  (void)st;
  g_port = test_free_port();
  int f0, f1;
  pid_t p0 = spawn(child_boot_tok, 0, &f0);
  pid_t p1 = spawn(child_boot_tok, 1, &f1);
  char e0[1024], e1[1024];
  int s1 = finish(p1, f1, e1, sizeof e1), s0 = finish(p0, f0, e0, sizeof e0);
  assert_int_not_equal(s1, 0);
  assert_non_null(strstr(e1, "wrong job token"));
  assert_int_not_equal(s0, 0);
}

static void test_wrong_token_rejected(void **st) {
  (void)st;
  g_port = test_free_port();
  int f0, f1;
  pid_t p0 = spawn(child_boot, 0 * 100 + 2 * 10 + 0, &f0);
  pid_t p1 = spawn(child_boot, 1 * 100 + 2 * 10 + 1, &f1); /* wrong token */
  char e0[1024], e1[1024];
  int s1 = finish(p1, f1, e1, sizeof e1), s0 = finish(p0, f0, e0, sizeof e0);
  assert_int_not_equal(s1, 0);
  assert_non_null(strstr(e1, "rejected"));
  assert_non_null(strstr(e1, "wrong job token"));
  assert_int_not_equal(s0, 0); /* rank 0 never got its peer */
  assert_non_null(strstr(e0, "missing ranks: 1"));
}

/* Both ends of a connection have Nagle's algorithm off: a frame is written in parts (header,
 * payload), and with Nagle the second part waits for an ACK the peer may delay 40 ms. */
static void test_sockets_no_nagle(void **st) {
  (void)st;
  char err[256];
  int lfd, port, c, a;
  assert_int_equal(coll_sock_listen("127.0.0.1", 0, 1, &lfd, &port, err, sizeof err), 0);
  double dl = coll_sock_now() + 5;
  if (coll_sock_connect("127.0.0.1", port, dl, &c, err, sizeof err)) fail_msg("%s", err);
  if (coll_sock_accept(lfd, dl, &a, err, sizeof err)) fail_msg("%s", err);
  int fds[2] = {c, a};
  for (int i = 0; i < 2; i++) {
    int v = 0;
    socklen_t l = sizeof v;
    assert_int_equal(getsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &v, &l), 0);
    if (!v) fail_msg("the %s end has Nagle on", i ? "accepting" : "connecting");
  }
  close(c);
  close(a);
  close(lfd);
}

static void test_port_in_use(void **st) {
  (void)st;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  listen(s, 1);
  socklen_t l = sizeof a;
  getsockname(s, (struct sockaddr *)&a, &l);
  g_port = ntohs(a.sin_port);
  int f0;
  pid_t p0 = spawn(child_boot, 0 * 100 + 2 * 10, &f0);
  char e0[1024];
  assert_int_not_equal(finish(p0, f0, e0, sizeof e0), 0);
  assert_non_null(strstr(e0, "rank 0"));
  assert_non_null(strstr(e0, "in use"));
  close(s);
}

static void test_unreachable_root(void **st) {
  (void)st;
  g_port = test_free_port(); /* nobody listens there */
  int f1;
  pid_t p1 = spawn(child_boot, 1 * 100 + 2 * 10, &f1);
  char e1[1024];
  time_t t0 = time(NULL);
  assert_int_not_equal(finish(p1, f1, e1, sizeof e1), 0);
  assert_true(time(NULL) - t0 < 10);
  assert_non_null(strstr(e1, "rank 1"));
  assert_non_null(strstr(e1, "cannot reach rank 0"));
}

/* Rank `rank` of `size` through the environment rendezvous, with a tcp communicator whose
 * waits time out after timeout_ms. 0, or 1 with the error in err. */
static int child_open_tcp(int rank, int size, int timeout_ms, coll_boot **b, coll_comm **c, char *err, size_t cap) {
  test_rank_env(rank, size, g_port, "job");
  coll_err e = {{0}};
  if (coll_boot_open(b, COLL_BOOT_ENV, 0, 5000, &e) != 0) {
    snprintf(err, cap, "%s", e.msg);
    return 1;
  }
  coll_comm_opts o = {.transport = COLL_TCP, .timeout_ms = timeout_ms};
  if (coll_comm_open(c, *b, &o, &e) != 0) {
    snprintf(err, cap, "%s", e.msg);
    coll_boot_close(*b);
    return 1;
  }
  return 0;
}

/* arg: rank*10 + behaviour (0: take part, 1: die after connecting, 2: connect then stay silent) */
static int child_collective(int arg, char *err, size_t cap) {
  int rank = arg / 10, how = arg % 10;
  coll_boot *b;
  coll_comm *c;
  coll_err e = {{0}};
  if (child_open_tcp(rank, 2, 1500, &b, &c, err, cap)) return 1;
  if (how == 1) raise(SIGKILL);
  if (how == 2) {
    sleep(4); /* alive but never joins the collective */
    return 0;
  }
  size_t n = 1 << 22;
  float *x = calloc(n, sizeof *x);
  coll_algo ring = {COLL_ALGO_RING, 0};
  int rc = coll_allreduce(c, x, n, COLL_F32, COLL_SUM, ring, NULL, &e);
  if (rc != 0) snprintf(err, cap, "%s", e.msg);
  free(x);
  coll_comm_close(c);
  coll_boot_close(b);
  return rc ? 1 : 0;
}

/* arg: rank*10 + size. Every rank of one host counts all of them: the count decides whether
 * the transports may spin, and a rank that saw only the ranks above it spun on a crowded host. */
static int child_local_size(int arg, char *err, size_t cap) {
  int rank = arg / 10, size = arg % 10;
  coll_boot *b;
  coll_comm *c;
  if (child_open_tcp(rank, size, 5000, &b, &c, err, cap)) return 1;
  int local = coll_comm_local_size(c), rc = local == size ? 0 : 1;
  if (rc) snprintf(err, cap, "rank %d of %d counts %d ranks on its host", rank, size, local);
  coll_comm_close(c);
  coll_boot_close(b);
  return rc;
}

static void test_local_size_every_rank(void **st) {
  (void)st;
  for (int size = 2; size <= 4; size++) {
    g_port = test_free_port();
    pid_t p[4];
    int f[4];
    for (int r = 0; r < size; r++) p[r] = spawn(child_local_size, r * 10 + size, &f[r]);
    for (int r = size - 1; r >= 0; r--) {
      char msg[1024];
      int rc = finish(p[r], f[r], msg, sizeof msg);
      if (rc) fail_msg("%d ranks, rank %d: exit %d: %s", size, r, rc, msg);
    }
  }
}

static void test_dead_peer_reported(void **st) {
  (void)st;
  g_port = test_free_port();
  int f0, f1;
  pid_t p0 = spawn(child_collective, 0 * 10 + 0, &f0);
  pid_t p1 = spawn(child_collective, 1 * 10 + 1, &f1);
  char e0[1024], e1[1024];
  time_t t0 = time(NULL);
  finish(p1, f1, e1, sizeof e1);
  assert_int_not_equal(finish(p0, f0, e0, sizeof e0), 0);
  assert_true(time(NULL) - t0 < 10);
  assert_non_null(strstr(e0, "rank 1"));
  /* a killed peer shows as a close (FIN) or, when rank 0 was sending, a reset (RST)
   * or a broken pipe, depending on when the kernel learns of the death */
  if (!strstr(e0, "closed the connection") && !strstr(e0, "Connection reset by peer") &&
      !strstr(e0, "Broken pipe"))
    fail_msg("rank 0's error does not say rank 1 went away: %s", e0);
}

static void test_silent_peer_times_out(void **st) {
  (void)st;
  g_port = test_free_port();
  int f0, f1;
  pid_t p0 = spawn(child_collective, 0 * 10 + 0, &f0);
  pid_t p1 = spawn(child_collective, 1 * 10 + 2, &f1);
  char e0[1024], e1[1024];
  time_t t0 = time(NULL);
  assert_int_not_equal(finish(p0, f0, e0, sizeof e0), 0);
  assert_true(time(NULL) - t0 < 4);
  finish(p1, f1, e1, sizeof e1);
  assert_non_null(strstr(e0, "timed out"));
  assert_non_null(strstr(e0, "rank 1"));
}

/* Rank 0 takes the launcher's listening socket (FABENCH_ROOT_FD) only if it listens on the
 * rendezvous port; anything else is a clear error, not a rendezvous that never comes. */
static void test_inherited_root_socket(void **st) {
  (void)st;
  char err[256], txt[16];
  int lfd, port, got = -1;
  assert_int_equal(coll_sock_listen("127.0.0.1", 0, 4, &lfd, &port, err, sizeof err), 0);
  fcntl(lfd, F_SETFD, 0); /* as inherited: not close-on-exec */
  snprintf(txt, sizeof txt, "%d", lfd);
  assert_int_equal(coll_sock_adopt_listener(txt, port, &got), 0);
  assert_int_equal(got, lfd);
  assert_true(fcntl(lfd, F_GETFD) & FD_CLOEXEC); /* not passed on to rank 0's own children */
  assert_int_equal(coll_sock_adopt_listener(txt, port == 65535 ? 1 : port + 1, &got), -1);
  const char *junk[] = {"", "x", "3x", "-1", "2", "99999999"};
  for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
    assert_int_equal(coll_sock_adopt_listener(junk[i], port, &got), -1);
  int plain = socket(AF_INET, SOCK_STREAM, 0); /* a socket, but not listening */
  snprintf(txt, sizeof txt, "%d", plain);
  assert_int_equal(coll_sock_adopt_listener(txt, 0, &got), -1);
  /* the bootstrap names the variable */
  char root[64];
  snprintf(root, sizeof root, "127.0.0.1:%d", port);
  setenv("FABENCH_RANK", "0", 1);
  setenv("FABENCH_WORLD_SIZE", "2", 1);
  setenv("FABENCH_ROOT", root, 1);
  setenv("FABENCH_ROOT_FD", txt, 1);
  coll_boot *b = NULL;
  coll_err e = {{0}};
  assert_int_equal(coll_boot_open(&b, COLL_BOOT_ENV, 0, 1000, &e), -1);
  assert_non_null(strstr(e.msg, "FABENCH_ROOT_FD"));
  unsetenv("FABENCH_ROOT_FD");
  unsetenv("FABENCH_ROOT");
  unsetenv("FABENCH_RANK");
  unsetenv("FABENCH_WORLD_SIZE");
  close(plain);
  close(lfd);
}

/* A connection to a local port nobody listens on may pick that port as its own and connect to
 * itself; that is no rendezvous (and it takes the port rank 0 was about to listen on). Forced in
 * a network namespace of our own whose ephemeral range is that one port. Needs root. */
static int child_self_connect(void) {
  if (unshare(CLONE_NEWNET) != 0) return 77;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) return 77;
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return 77;
  close(s);
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "w");
  if (!f || fprintf(f, "40000 40000\n") < 0 || fclose(f) != 0) return 77;
  int fd = -1;
  char err[256] = "";
  /* the one port goes into TIME_WAIT after a refused self-connection: later tries fail to
   * find a local port; what matters is that none succeeds */
  return coll_sock_connect("127.0.0.1", 40000, coll_sock_now() + 0.5, &fd, err, sizeof err) == 0;
}

static void test_no_self_connect(void **st) {
  (void)st;
  if (geteuid() != 0) skip();
  pid_t p = fork();
  if (p == 0) _exit(child_self_connect());
  int status = 0;
  waitpid(p, &status, 0);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) skip(); /* no namespace here (a container) */
  if (WEXITSTATUS(status) == 1) fail_msg("connected to itself on its own port");
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_single_world_refused(void **st) {
  (void)st;
  setenv("SLURM_NTASKS", "4", 1);
  unsetenv("FABENCH_RANK");
  unsetenv("FABENCH_ROOT");
  unsetenv("FABENCH_WORLD_SIZE");
  coll_boot *b = NULL;
  coll_err e = {{0}};
  assert_int_equal(coll_boot_open(&b, COLL_BOOT_ENV, 0, 1000, &e), -1);
  assert_non_null(strstr(e.msg, "world of one"));
  unsetenv("SLURM_NTASKS");
  assert_int_equal(coll_boot_open(&b, COLL_BOOT_ENV, 0, 1000, &e), 0);
  assert_int_equal(coll_boot_size(b), 1);
  coll_boot_close(b);
}

/* Rank 0's rendezvous never asks poll to wait for ever (a negative timeout): a pass delayed
 * past a deadline waits 0 ms, and no wait outlasts the overall deadline. */
static void test_boot_wait_ms(void **st) {
  (void)st;
  assert_int_equal(coll_boot_wait_ms(100.0, 99.0, 160.0), 0);   /* a stranger's, 1 s ago */
  assert_int_equal(coll_boot_wait_ms(100.0, 100.0, 160.0), 0);
  assert_int_equal(coll_boot_wait_ms(100.0, 160.0, 99.5), 0);   /* the rendezvous's, passed */
  int ms = coll_boot_wait_ms(100.0, 101.0, 160.0);
  assert_true(ms >= 1000 && ms <= 1001);
  ms = coll_boot_wait_ms(100.0, 105.0, 100.25);                 /* capped by the deadline */
  assert_true(ms >= 250 && ms <= 251);
  assert_true(coll_boot_wait_ms(0.0, 1e9, 1e9) > 0);            /* no int overflow */
}

static void clear_launch_env(void) {
  static const char *const vars[] = {"FABENCH_RANK", "FABENCH_WORLD_SIZE", "FABENCH_ROOT",
                                     "FABENCH_TOKEN", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                                     "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "PMI_RANK",
                                     "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                     "LOCAL_RANK", "LOCAL_WORLD_SIZE", "FABENCH_HOST"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

/* A launcher's rank without a world it fits in is an error naming the variables, never a
 * silent world of one; each case is "NAME=VALUE ..." and what the message must contain. */
static void test_env_rank_size_checked(void **st) {
  (void)st;
  static const char *const cases[][2] = {
      {"FABENCH_RANK=0 FABENCH_WORLD_SIZE=0 FABENCH_ROOT=127.0.0.1:29811", "FABENCH_WORLD_SIZE='0'"},
      {"FABENCH_RANK=1 FABENCH_ROOT=127.0.0.1:29811", "FABENCH_WORLD_SIZE is not"},
      {"FABENCH_RANK=abc FABENCH_WORLD_SIZE=2", "FABENCH_RANK='abc'"},
      {"FABENCH_RANK=2 FABENCH_WORLD_SIZE=2 FABENCH_ROOT=127.0.0.1:29811", "FABENCH_RANK=2, FABENCH_WORLD_SIZE=2"},
      {"FABENCH_RANK=1 FABENCH_WORLD_SIZE=2", "no rendezvous address"},
      {"FABENCH_RANK=1 FABENCH_WORLD_SIZE=2 FABENCH_ROOT=127.0.0.1", "FABENCH_ROOT='127.0.0.1'"},
      {"RANK=1 WORLD_SIZE=abc MASTER_ADDR=127.0.0.1 MASTER_PORT=29816", "WORLD_SIZE='abc'"},
      {"RANK=1 WORLD_SIZE=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29816", "WORLD_SIZE='0'"},
      {"RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29816", "WORLD_SIZE is not"},
      {"RANK=1", "WORLD_SIZE is not"},
      {"RANK=x WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29816", "RANK='x'"},
      {"RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=abc", "MASTER_PORT='abc'"},
      {"RANK=1 WORLD_SIZE=2 MASTER_PORT=29816", "MASTER_ADDR is not"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    clear_launch_env();
    char env[256], *save = NULL;
    snprintf(env, sizeof env, "%s", cases[i][0]);
    for (char *kv = strtok_r(env, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
      char *eq = strchr(kv, '=');
      *eq = '\0';
      setenv(kv, eq + 1, 1);
    }
    coll_boot *b = NULL;
    coll_err e = {{0}};
    if (coll_boot_open(&b, COLL_BOOT_AUTO, 0, 1000, &e) != -1) {
      int n = b ? coll_boot_size(b) : 0;
      coll_boot_close(b);
      fail_msg("%s: accepted (a world of %d)", cases[i][0], n);
    }
    if (!strstr(e.msg, cases[i][1])) fail_msg("%s: '%s' does not say %s", cases[i][0], e.msg, cases[i][1]);
  }
  clear_launch_env();
  coll_boot *b = NULL; /* no launcher at all: a world of one */
  coll_err e = {{0}};
  assert_int_equal(coll_boot_open(&b, COLL_BOOT_AUTO, 0, 1000, &e), 0);
  assert_int_equal(coll_boot_size(b), 1);
  coll_boot_close(b);
}

/* The launcher's environment set: this rank opens the bootstrap, which must be the environment
 * rendezvous of 2 ranks with it as `rank`, and passes a barrier. 0, or 1 with why in err. */
static int boot_two_env(int rank, char *err, size_t cap) {
  coll_boot *b;
  coll_err e = {{0}};
  if (coll_boot_open(&b, COLL_BOOT_AUTO, 1, 3000, &e) != 0) {
    snprintf(err, cap, "%s", e.msg);
    return 1;
  }
  int ok = coll_boot_rank(b) == rank && coll_boot_size(b) == 2 &&
           !strcmp(coll_boot_kind_name(b), "env") && coll_boot_barrier(b, &e) == 0;
  snprintf(err, cap, "rank %d of %d by %s %s", coll_boot_rank(b), coll_boot_size(b),
           coll_boot_kind_name(b), e.msg);
  coll_boot_close(b);
  return ok ? 0 : 1;
}

/* torchrun inside sbatch (or mpirun): Slurm's and PMI's variables are there too, but the
 * ranks meet at MASTER_ADDR:MASTER_PORT, not in MPI_Init. */
static int child_torchrun_in_slurm(int rank, char *err, size_t cap) {
  char v[32];
  clear_launch_env();
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  setenv("SLURM_PROCID", v, 1);
  setenv("PMI_RANK", v, 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", g_port);
  setenv("MASTER_PORT", v, 1);
  return boot_two_env(rank, err, cap);
}

/* Two ranks of child, forked, each ok. */
static void run_two(int (*child)(int, char *, size_t)) {
  g_port = test_free_port();
  int f0, f1;
  pid_t p0 = spawn(child, 0, &f0);
  pid_t p1 = spawn(child, 1, &f1);
  char e0[1024], e1[1024];
  int r0 = finish(p0, f0, e0, sizeof e0), r1 = finish(p1, f1, e1, sizeof e1);
  if (r0 || r1) fail_msg("rank 0: %d %s; rank 1: %d %s", r0, e0, r1, e1);
}

static void test_torchrun_in_slurm(void **st) {
  (void)st;
  run_two(child_torchrun_in_slurm);
}

/* A plain srun (no PMI plugin): Slurm's variables and a rendezvous address, no MPI_Init (in a
 * build with MPI it aborted there). */
static int child_plain_srun(int rank, char *err, size_t cap) {
  char v[32];
  clear_launch_env();
  snprintf(v, sizeof v, "%d", rank);
  setenv("SLURM_PROCID", v, 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  snprintf(v, sizeof v, "127.0.0.1:%d", g_port);
  setenv("FABENCH_ROOT", v, 1);
  return boot_two_env(rank, err, cap);
}

static void test_plain_srun(void **st) {
  (void)st;
  run_two(child_plain_srun);
}

/* torchrun's LOCAL_WORLD_SIZE and LOCAL_RANK against the hosts the ranks found: rank 1 was
 * told it is alone on its host (LOCAL_WORLD_SIZE=1) and then LOCAL_RANK=0 of 2, but both ranks
 * are on this host, rank 1 its second: each time rank 1 fails naming itself and the host's
 * ranks; rank 0, whose variables are right, joins. */
static int g_wrong;
static int child_wrong_host(int rank, char *err, size_t cap) {
  char v[32];
  clear_launch_env();
  setenv("FABENCH_HOST", "hostA", 1);
  snprintf(v, sizeof v, "%d", rank);
  setenv("RANK", v, 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(v, sizeof v, "%d", g_port);
  setenv("MASTER_PORT", v, 1);
  setenv("LOCAL_WORLD_SIZE", rank == 1 && g_wrong == 0 ? "1" : "2", 1);
  setenv("LOCAL_RANK", rank == 1 && g_wrong == 1 ? "0" : rank ? "1" : "0", 1);
  coll_boot *b = NULL;
  coll_err e = {{0}};
  int rc = coll_boot_open(&b, COLL_BOOT_AUTO, 0, 3000, &e);
  if (b) coll_boot_close(b);
  const char *want = g_wrong == 0 ? "rank 1 (hostA): started as one of LOCAL_WORLD_SIZE=1 ranks on its host, but "
                                    "hostA has 2 (ranks 0 1): a rank started on the wrong host?"
                                  : "rank 1 (hostA): started as LOCAL_RANK=0, but it is local rank 1 of hostA";
  snprintf(err, cap, "%s", rc ? e.msg : "joined");
  return rank == 0 ? rc != 0 : !(rc != 0 && strstr(e.msg, want));
}

static void test_wrong_host(void **st) {
  (void)st;
  for (g_wrong = 0; g_wrong < 2; g_wrong++) run_two(child_wrong_host);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_f32_f64_int),
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_stream_kernels),
      cmocka_unit_test(test_reduce2),
      cmocka_unit_test(test_reduce_rev),
      cmocka_unit_test(test_pattern_checker_catches_corruption),
      cmocka_unit_test(test_parsing), cmocka_unit_test(test_colls_model),
      cmocka_unit_test(test_colls_model_hier),
      cmocka_unit_test(test_wrong_token_rejected),
      cmocka_unit_test(test_port_in_use),
      cmocka_unit_test(test_sockets_no_nagle),
      cmocka_unit_test(test_strangers_do_not_delay),
      cmocka_unit_test(test_token_last_byte),
      cmocka_unit_test(test_unreachable_root),
      cmocka_unit_test(test_dead_peer_reported),
      cmocka_unit_test(test_local_size_every_rank),
      cmocka_unit_test(test_silent_peer_times_out),
      cmocka_unit_test(test_inherited_root_socket),
      cmocka_unit_test(test_no_self_connect),
      cmocka_unit_test(test_single_world_refused),
      cmocka_unit_test(test_boot_wait_ms),
      cmocka_unit_test(test_env_rank_size_checked),
      cmocka_unit_test(test_torchrun_in_slurm),
      cmocka_unit_test(test_plain_srun),
      cmocka_unit_test(test_wrong_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
