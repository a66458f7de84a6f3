/* Rabenseifner's all-reduce (Thakur, Rabenseifner, Gropp 2005): a reduce-scatter by recursive
 * halving, then an all-gather by recursive doubling, with the MPICH fold off a power of two. The
 * halving goes nearest partner first (newrank ^ 1, ^ 2, ...), so in the node-aware order its
 * largest exchanges stay inside a node and a node's link carries what hier's would. Exchanges
 * go in pieces reduced as they arrive (coll_xchg_reduce); every block is reduced on one rank and
 * copied to the others, so results are bit-identical. Cost 2 lg p alpha + 2 (p-1)/p n beta +
 * (p-1)/p n gamma for p = 2^k. */
#include <string.h>

#include "algo_plan.h"

/* Element offset of block a of pof2 (a == pof2 gives the end). */
static size_t rhd_off(size_t count, int pof2, int a) {
  if (a >= pof2) return count;
  size_t off, len;
  coll_block(count, pof2, a, &off, &len);
  return off;
}

int coll_ar_rhd(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                coll_err *e) {
  (void)param;
  if (c->size < 2 || count == 0) return 0;
  size_t es = coll_dtype_size(dt), bytes = count * es;
  unsigned char *b = buf;
  coll_fold f;
  coll_fold_plan(&f, c->size, c->rank);
  uint32_t step = 0;

  if (coll_fold_in(c, &f, b, count, dt, op, step, e) != 0) return -1;
  step++;

  int lo = 0, hi = f.pof2; /* blocks [lo, hi) are mine to reduce */
  int was_lo[32], was_hi[32], nsteps = 0; /* each halving step's range before it */
  if (f.newrank >= 0) {
    int nr = f.newrank;
    for (int mask = 1; mask < f.pof2; mask <<= 1, step++, nsteps++) {
      int partner = coll_fold_real(&f, nr ^ mask), mid = (lo + hi) / 2;
      was_lo[nsteps] = lo, was_hi[nsteps] = hi;
      int keep_lo = (nr & mask) ? mid : lo, keep_hi = (nr & mask) ? hi : mid;
      int give_lo = (nr & mask) ? lo : mid, give_hi = (nr & mask) ? mid : hi;
      size_t k0 = rhd_off(count, f.pof2, keep_lo), k1 = rhd_off(count, f.pof2, keep_hi);
      size_t g0 = rhd_off(count, f.pof2, give_lo), g1 = rhd_off(count, f.pof2, give_hi);
      if (coll_xchg_reduce(c, partner, b + g0 * es, g1 - g0, b + k0 * es, k1 - k0, dt, op, 0,
                           coll_tag(c, step), e) != 0)
        return -1;
      lo = keep_lo;
      hi = keep_hi;
    }
  }

  coll_reqset rs; /* after the exchanges: they may grow the communicator's request array */
  if (coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  if (f.newrank >= 0) {
    int nr = f.newrank;
    for (int s = nsteps - 1; s >= 0; s--, step++) { /* the partner holds the other half */
      int partner = coll_fold_real(&f, nr ^ (1 << s));
      int plo = lo == was_lo[s] ? hi : was_lo[s], phi = lo == was_lo[s] ? was_hi[s] : lo;
      size_t m0 = rhd_off(count, f.pof2, lo), m1 = rhd_off(count, f.pof2, hi);
      size_t p0 = rhd_off(count, f.pof2, plo), p1 = rhd_off(count, f.pof2, phi);
      if (coll_reqset_recv(&rs, partner, b + p0 * es, (p1 - p0) * es, coll_tag(c, step), e) != 0 ||
          coll_reqset_send(&rs, partner, b + m0 * es, (m1 - m0) * es, coll_tag(c, step), e) != 0 ||
          coll_reqset_wait(&rs, e) != 0)
        return -1;
      lo = was_lo[s], hi = was_hi[s];
    }
  }

  return coll_fold_out(c, &f, &rs, b, bytes, e);
}
