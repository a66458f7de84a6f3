/* Reduce-scatter and all-gather (MPI_Reduce_scatter_block, MPI_Allgather) on blocks of count
 * elements, block r being rank r's:
 *   ring: n - 1 steps, each rank sending one block to the next and receiving one from the
 *         previous (the reduce-scatter reducing it into its copy): (n-1)/n of the vector each
 *         way, the fewest bytes a rank can move;
 *   rhd / rd (a power of two of ranks; others run the ring): recursive halving / doubling,
 *         lg n steps of n/2, n/4, ... blocks (halving) or 1, 2, 4, ... (doubling) with partner
 *         rank ^ mask: fewer start-ups for short vectors;
 *   bruck (all-gather, any n): ceil(lg n) steps of 1, 2, 4, ... blocks to rank - 2^k, then one
 *         rotation into place;
 *   hier: inside hosts, then across them (algo_rsag_hier.c);
 *   direct: the peers' mapped copies read in place (algo_direct.c), else the ring.
 * Each block is reduced on one rank only, so a reduce-scatter has one result per block. */
#include "algo_plan.h"

static int pof2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* auto and the rank counts an algorithm does not take: what runs. */
static coll_algo rsag_pick(const coll_comm *c, coll_kind k, coll_algo a, size_t bytes) {
  if (a.kind == COLL_ALGO_AUTO) a = coll_colls_pick(&c->model, k, c->size, bytes, c->chunk_bytes);
  if ((a.kind == COLL_ALGO_RHD || a.kind == COLL_ALGO_RD) && !pof2(c->size)) a.kind = COLL_ALGO_RING;
  if (a.kind == COLL_ALGO_HIER && !coll_rsag_hier_fits(c)) a.kind = COLL_ALGO_RING;
  a.param = 0;
  return a;
}

/* Recursive halving in place on work (n a power of two): the range of blocks [lo, hi) that
 * holds block r halves each step; the other half goes to partner r ^ mask, whose copy of ours
 * comes back into tmp and is reduced in. */
static int rs_halving(coll_comm *c, unsigned char *work, size_t count, coll_dtype dt, coll_op op, coll_err *e) {
  int n = c->size, r = c->rank, lo = 0, hi = n;
  size_t bb = count * coll_dtype_size(dt);
  unsigned char *tmp = coll_scratch(c, 1, (size_t)(n / 2) * bb, e);
  coll_reqset rs;
  if (!tmp || coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  uint32_t step = 0;
  for (int mask = n / 2; mask >= 1; mask >>= 1, step++) {
    int mid = (lo + hi) / 2, up = (r & mask) != 0;
    int klo = up ? mid : lo, khi = up ? hi : mid, glo = up ? lo : mid;
    size_t half = (size_t)(khi - klo) * bb;
    if (coll_reqset_recv(&rs, r ^ mask, tmp, half, coll_tag(c, step), e) != 0 ||
        coll_reqset_send(&rs, r ^ mask, work + (size_t)glo * bb, half, coll_tag(c, step), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
    if (count) coll_creduce(c, work + (size_t)klo * bb, tmp, (size_t)(khi - klo) * count, dt, op);
    lo = klo, hi = khi;
  }
  return 0;
}

int coll_reduce_scatter(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                        coll_op op, coll_algo algo, coll_algo *ran, coll_err *e) {
  if (op >= COLL_NOPS) return coll_fail(e, "invalid op");
  if (coll_colls_begin(c, COLL_REDUCE_SCATTER, algo, dt, e) != 0) return -1;
  size_t bb = count * coll_dtype_size(dt);
  coll_algo a = rsag_pick(c, COLL_REDUCE_SCATTER, algo, bb * (size_t)c->size);
  if (ran) *ran = a;
  if (a.kind == COLL_ALGO_NATIVE)
    return coll_colls_end(c, c->tp->ops->reduce_scatter(c->tp, sendbuf, recvbuf, count, dt, op, e), e);
  const unsigned char *in = sendbuf;
  if (a.kind == COLL_ALGO_DIRECT && count) {
    int rc = coll_rs_direct(c, sendbuf, recvbuf, count, dt, op, e);
    if (rc != 1) return coll_colls_end(c, rc, e);
    a.kind = COLL_ALGO_RING; /* not every rank's copy can be read here */
    if (ran) *ran = a;
  }
  if (a.kind == COLL_ALGO_HIER && c->size > 1 && count)
    return coll_colls_end(c, coll_rs_hier(c, sendbuf, recvbuf, count, dt, op, e), e);
  if (c->size == 1 || count == 0) {
    if (count) coll_ccopy(c, recvbuf, in, bb);
    return coll_colls_end(c, 0, e);
  }
  unsigned char *work = coll_scratch(c, 0, bb * (size_t)c->size, e);
  if (!work) return -1;
  coll_ccopy(c, work, in, bb * (size_t)c->size); /* sendbuf stays as it was */
  int rc = a.kind == COLL_ALGO_RHD ? rs_halving(c, work, count, dt, op, e)
                                    : coll_ring_phase(c, work, count * (size_t)c->size, c->size, dt, op, 0, e);
  if (rc == 0) coll_ccopy(c, recvbuf, work + (size_t)c->rank * bb, bb);
  return coll_colls_end(c, rc, e);
}

/* Recursive doubling in place on out (n a power of two): before the step of mask m a rank holds
 * the m blocks from r & ~(m - 1); it swaps them with partner r ^ m's. */
static int ag_doubling(coll_comm *c, unsigned char *out, size_t bb, coll_err *e) {
  int n = c->size, r = c->rank;
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  uint32_t step = 0;
  for (int m = 1; m < n; m <<= 1, step++) {
    int mine = r & ~(m - 1), theirs = (r ^ m) & ~(m - 1);
    if (coll_reqset_recv(&rs, r ^ m, out + (size_t)theirs * bb, (size_t)m * bb, coll_tag(c, step), e) != 0 ||
        coll_reqset_send(&rs, r ^ m, out + (size_t)mine * bb, (size_t)m * bb, coll_tag(c, step), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
  }
  return 0;
}

/* Bruck: tmp block i ends as rank (r + i)'s block. Step k sends the first min(2^k, n - 2^k)
 * blocks to rank r - 2^k and receives as many from r + 2^k after the 2^k it holds. */
static int ag_bruck(coll_comm *c, const unsigned char *mine, unsigned char *out, size_t bb, coll_err *e) {
  int n = c->size, r = c->rank;
  unsigned char *tmp = coll_scratch(c, 0, (size_t)n * bb, e);
  coll_reqset rs;
  if (!tmp || coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  coll_ccopy(c, tmp, mine, bb);
  uint32_t step = 0;
  for (int d = 1; d < n; d <<= 1, step++) {
    size_t k = (size_t)(d < n - d ? d : n - d);
    if (coll_reqset_recv(&rs, (r + d) % n, tmp + (size_t)d * bb, k * bb, coll_tag(c, step), e) != 0 ||
        coll_reqset_send(&rs, (r - d + n) % n, tmp, k * bb, coll_tag(c, step), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
  }
  /* rotate: blocks 0 .. n-r-1 of tmp are ranks r .. n-1, the rest ranks 0 .. r-1 */
  coll_ccopy(c, out + (size_t)r * bb, tmp, (size_t)(n - r) * bb);
  if (r) coll_ccopy(c, out, tmp + (size_t)(n - r) * bb, (size_t)r * bb);
  return 0;
}

int coll_allgather(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                   coll_algo algo, coll_algo *ran, coll_err *e) {
  if (coll_colls_begin(c, COLL_ALLGATHER, algo, dt, e) != 0) return -1;
  size_t bb = count * coll_dtype_size(dt);
  coll_algo a = rsag_pick(c, COLL_ALLGATHER, algo, bb * (size_t)c->size);
  if (ran) *ran = a;
  if (a.kind == COLL_ALGO_NATIVE) return coll_colls_end(c, c->tp->ops->allgather(c->tp, sendbuf, recvbuf, count, dt, e), e);
  unsigned char *out = recvbuf;
  if (count == 0) return coll_colls_end(c, 0, e);
  if (a.kind == COLL_ALGO_HIER && c->size > 1) return coll_colls_end(c, coll_ag_hier(c, sendbuf, recvbuf, count, dt, e), e);
  if (a.kind == COLL_ALGO_DIRECT) {
    int rc = coll_ag_direct(c, sendbuf, recvbuf, bb, e);
    if (rc != 1) return coll_colls_end(c, rc, e);
    a.kind = COLL_ALGO_RING; /* not every rank's copy can be read here */
    if (ran) *ran = a;
  }
  if (c->size == 1 || a.kind != COLL_ALGO_BRUCK) coll_ccopy(c, out + (size_t)c->rank * bb, sendbuf, bb);
  if (c->size == 1) return coll_colls_end(c, 0, e);
  int rc = a.kind == COLL_ALGO_BRUCK ? ag_bruck(c, sendbuf, out, bb, e)
           : a.kind == COLL_ALGO_RD  ? ag_doubling(c, out, bb, e)
                                     : coll_ring_phase(c, out, count * (size_t)c->size, c->size, dt, COLL_SUM, 1, e);
  return coll_colls_end(c, rc, e);
}
