/* fabench alltoall: the all-to-all (MPI_Alltoall), and with --imbalance the all-to-allv of
 * skewed counts that mixture-of-experts routing makes, on the collective harness
 * (collbench.c). A size is what one rank sends in all: a block to every rank (itself too). */
#include <math.h>
#include <string.h>

#include "bench.h"
#include "collbench.h"

/* nccl-tests' factor: (n-1)/n of what a rank sends leaves it. */
static double a2a_busbw(int n) { return (double)(n - 1) / n; }

/* A seeded uniform draw in (0, 1) for (seed, p, q): splitmix64. */
static double a2a_unit(uint64_t seed, int p, int q) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (1 + (uint64_t)p * 4099 + (uint64_t)q);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

/* Sender p's count to q: its total n x block split by weights exp(2F g), g a seeded standard
 * normal (Box-Muller); the remainder of the rounding goes to the first receivers, so every
 * sender's total stays n x block. Every rank computes the same matrix. */
static void a2a_counts(size_t *m, int n, size_t block, double imbalance, uint64_t seed) {
  size_t total = (size_t)n * block;
  for (int p = 0; p < n; p++) {
    size_t *row = m + (size_t)p * n;
    if (imbalance <= 0) {
      for (int q = 0; q < n; q++) row[q] = block;
      continue;
    }
    double w[4096], sum = 0; /* n <= 4096 (-n's bound) */
    for (int q = 0; q < n; q++) {
      double g = sqrt(-2 * log(a2a_unit(seed, p, 2 * q))) * cos(2 * M_PI * a2a_unit(seed, p, 2 * q + 1));
      sum += w[q] = exp(2 * imbalance * g);
    }
    size_t given = 0;
    for (int q = 0; q < n; q++) given += row[q] = (size_t)floor((double)total * w[q] / sum);
    for (int q = 0; given < total; q = (q + 1) % n) row[q]++, given++;
  }
}

static int a2a_shape(bench_coll_shape *s, double imbalance) {
  int n = s->size, me = s->rank;
  a2a_counts(s->matrix, n, s->block, imbalance, s->seed);
  size_t so = 0, ro = 0;
  for (int q = 0; q < n; q++) {
    s->sc[q] = s->matrix[(size_t)me * n + q], s->sd[q] = so, so += s->sc[q];
    s->rc[q] = s->matrix[(size_t)q * n + me], s->rd[q] = ro, ro += s->rc[q];
  }
  s->send_elems = so;
  s->recv_elems = ro;
  s->uneven = imbalance > 0;
  return 0;
}

/* Even counts (no --imbalance): the all-to-all of equal blocks, which Bruck takes too. */
static int a2a_call(coll_comm *c, const bench_coll_shape *s, void *send, void *recv, coll_algo a,
                    coll_algo *ran, coll_err *e) {
  if (s->uneven) return coll_alltoallv(c, send, s->sc, s->sd, recv, s->rc, s->rd, s->dt, a, ran, e);
  return coll_alltoall(c, send, recv, s->block, s->dt, a, ran, e);
}

static void a2a_fill(const bench_coll_shape *s, void *send, void *recv) {
  coll_pattern_fill(send, s->send_elems, s->dt, COLL_SUM, s->rank, s->seed);
  memset(recv, 0xa5, s->recv_elems * coll_dtype_size(s->dt));
}

/* From sender p: its elements at its displacement for this rank (the sum of its counts to the
 * ranks before this one). */
static size_t a2a_check(const bench_coll_shape *s, const void *recv, size_t *first) {
  size_t bad = 0, es = coll_dtype_size(s->dt);
  for (int p = 0; p < s->size; p++) {
    size_t off = 0, f = 0;
    for (int q = 0; q < s->rank; q++) off += s->matrix[(size_t)p * s->size + q];
    size_t b = coll_pattern_check_rank((const char *)recv + s->rd[p] * es, s->rc[p], s->dt, COLL_SUM, p, s->seed,
                                       off, &f);
    if (b && !bad) *first = s->rd[p] + f;
    bad += b;
  }
  return bad;
}

static int a2a_algo(const char *s, coll_algo *a) { return coll_colls_algo_parse(COLL_ALLTOALL, s, a); }

static const char *a2a_unsupported(coll_algo a, double imbalance) {
  if (imbalance > 0 && a.kind == COLL_ALGO_BRUCK) return "bruck takes even counts only (--imbalance 0)";
  return imbalance > 0 && a.kind == COLL_ALGO_DIRECT ? "direct takes even counts only (--imbalance 0)" : NULL;
}

const bench_coll bench_coll_alltoall = {
    .name = "alltoall",
    .what = "all-to-all",
    .kind = COLL_ALLTOALL,
    .algos = "pairwise,bruck,native",
    .algo_help = "pairwise,linear (every peer's exchange posted at once, 8 peers in flight at most),bruck (even "
                 "counts only),hier (what crosses hosts through one leader per host: gathered, exchanged between "
                 "hosts pairwise, handed out),direct (the peers' mapped copies read in place: ucx, one host; else "
                 "pairwise; even counts only),native,auto",
    .varies = 1,
    .blocks = 1,
    .busbw = a2a_busbw,
    .shape = a2a_shape,
    .call = a2a_call,
    .fill = a2a_fill,
    .check = a2a_check,
    .algo_parse = a2a_algo,
    .unsupported = a2a_unsupported,
};

int bench_cmd_alltoall(int argc, char **argv) { return bench_coll_main(&bench_coll_alltoall, argc, argv); }
