/* All-to-all(v):
 *   pairwise: in step s (1 .. n-1) rank r sends to r + s and receives from r - s, so every rank
 *             has one partner each way a step and every pair meets once; a rank's own part is a
 *             copy. Parts of zero elements send nothing (both ends know the count);
 *   linear:   the same partners in the same order, but every one's receive and send posted at
 *             once, up to COLL_LINEAR_WINDOW partners each way in flight (the oldest done, the next
 *             posted): no rank waits for one partner before it can move bytes with the next,
 *             where the transport progresses every peer at once;
 *   bruck (equal counts only, coll_alltoall): ceil(lg n) steps instead of n - 1, each moving
 *             about half the blocks: fewer start-ups for short blocks, more bytes;
 *   direct (equal counts only): the peers' mapped copies read in place (algo_direct.c), else
 *             pairwise;
 *   hier:     what crosses hosts through one leader per host: gathered to it, exchanged between
 *             leaders pairwise, handed out; the rest pairwise inside the host
 *             (algo_colls_hier.c); counts may differ. */
#include <stdlib.h>

#include "algo_plan.h"

/* linear's exchange: step s (1 .. n-1) receives from r - s and sends to r + s under tag s; steps
 * s and s + w share slot (s - 1) % w of the request array, two requests each (fewer where a part
 * is empty: nothing is posted for it). The rank's own part is copied once the first window is
 * posted, while a transport that moves bytes on its own can already move them. */
static int a2a_linear(coll_comm *c, const unsigned char *in, const size_t *scounts, const size_t *sdispls,
                      unsigned char *out, const size_t *rcounts, const size_t *rdispls, size_t es, coll_err *e) {
  int n = c->size, r = c->rank, w = n - 1 < COLL_LINEAR_WINDOW ? n - 1 : COLL_LINEAR_WINDOW;
  coll_req *q = w > 0 ? coll_reqs(c, 2 * (size_t)w, e) : NULL;
  if (w > 0 && !q) return -1;
  int used[COLL_LINEAR_WINDOW] = {0}; /* requests posted in each slot */
  for (int s = 1, done = 1, copied = 0; done < n || !copied;) {
    if (s < n && s - done < w) { /* post step s */
      int to = (r + s) % n, from = (r - s + n) % n, k = (s - 1) % w;
      coll_req *sl = &q[2 * k];
      uint32_t tag = coll_tag(c, (uint32_t)s);
      used[k] = 0;
      if (rcounts[from] && coll_irecv(c, from, out + rdispls[from] * es, rcounts[from] * es, tag, &sl[used[k]++], e) != 0)
        return -1;
      if (scounts[to] && coll_isend(c, to, in + sdispls[to] * es, scounts[to] * es, tag, &sl[used[k]++], e) != 0)
        return -1;
      s++;
      continue;
    }
    if (!copied) {
      if (scounts[r]) coll_ccopy(c, out + rdispls[r] * es, in + sdispls[r] * es, scounts[r] * es);
      copied = 1;
      continue;
    }
    int k = (done - 1) % w; /* the window is full, or every step posted: wait for the oldest */
    if (coll_waitall(c, &q[2 * k], used[k], e) != 0) return -1;
    done++;
  }
  return 0;
}

int coll_alltoallv(coll_comm *c, const void *sendbuf, const size_t *scounts, const size_t *sdispls,
                   void *recvbuf, const size_t *rcounts, const size_t *rdispls, coll_dtype dt,
                   coll_algo algo, coll_algo *ran, coll_err *e) {
  if (coll_colls_begin(c, COLL_ALLTOALL, algo, dt, e) != 0) return -1;
  if (algo.kind == COLL_ALGO_BRUCK || algo.kind == COLL_ALGO_DIRECT)
    return coll_colls_end(c, coll_fail(e, "rank %d: all-to-allv: %s takes equal counts only (coll_alltoall)", c->rank,
                                       algo.kind == COLL_ALGO_BRUCK ? "bruck" : "direct"), e);
  coll_algo a = {algo.kind == COLL_ALGO_NATIVE || algo.kind == COLL_ALGO_HIER || algo.kind == COLL_ALGO_LINEAR
                     ? algo.kind
                     : COLL_ALGO_PAIRWISE,
                 0};
  if (ran) *ran = a;
  if (a.kind == COLL_ALGO_NATIVE)
    return coll_colls_end(c, c->tp->ops->alltoallv(c->tp, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, dt, e), e);
  int n = c->size, r = c->rank;
  size_t es = coll_dtype_size(dt);
  const unsigned char *in = sendbuf;
  unsigned char *out = recvbuf;
  if (scounts[r] != rcounts[r])
    return coll_fail(e, "rank %d: all-to-all: %zu elements to itself but %zu from itself", r, scounts[r], rcounts[r]);
  if (a.kind == COLL_ALGO_HIER && n > 1)
    return coll_colls_end(c, coll_a2a_hier(c, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, es, e), e);
  if (a.kind == COLL_ALGO_LINEAR)
    return coll_colls_end(c, a2a_linear(c, in, scounts, sdispls, out, rcounts, rdispls, es, e), e);
  if (scounts[r]) coll_ccopy(c, out + rdispls[r] * es, in + sdispls[r] * es, scounts[r] * es);
  coll_reqset rs;
  int rc = coll_reqset_init(&rs, c, 2, e);
  for (int s = 1; s < n && rc == 0; s++) {
    int to = (r + s) % n, from = (r - s + n) % n;
    if (coll_reqset_recv(&rs, from, out + rdispls[from] * es, rcounts[from] * es, coll_tag(c, (uint32_t)s), e) != 0 ||
        coll_reqset_send(&rs, to, in + sdispls[to] * es, scounts[to] * es, coll_tag(c, (uint32_t)s), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      rc = -1;
  }
  return coll_colls_end(c, rc, e);
}

/* Bruck on n blocks of bb bytes. Slot i of rank r starts as its block for rank r + i; in the
 * step of bit k every slot with that bit set moves to rank r + k, keeping its index, so after
 * the last step slot i of rank r holds the block that rank r - i sent it. */
static int a2a_bruck(coll_comm *c, const unsigned char *in, unsigned char *out, size_t bb, coll_err *e) {
  int n = c->size, r = c->rank;
  size_t half = (size_t)(n + 1) / 2;
  unsigned char *slot = coll_scratch(c, 0, (size_t)n * bb, e), *pack = coll_scratch(c, 1, 2 * half * bb, e);
  if (!slot || !pack) return -1;
  unsigned char *got = pack + half * bb;
  for (int i = 0; i < n; i++) coll_ccopy(c, slot + (size_t)i * bb, in + (size_t)((r + i) % n) * bb, bb);
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  uint32_t step = 0;
  for (int k = 1; k < n; k <<= 1, step++) {
    size_t m = 0;
    for (int i = k; i < n; i++)
      if (i & k) coll_ccopy(c, pack + m++ * bb, slot + (size_t)i * bb, bb);
    if (coll_reqset_recv(&rs, (r - k + n) % n, got, m * bb, coll_tag(c, step), e) != 0 ||
        coll_reqset_send(&rs, (r + k) % n, pack, m * bb, coll_tag(c, step), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
    m = 0;
    for (int i = k; i < n; i++)
      if (i & k) coll_ccopy(c, slot + (size_t)i * bb, got + m++ * bb, bb);
  }
  for (int i = 0; i < n; i++) coll_ccopy(c, out + (size_t)((r - i + n) % n) * bb, slot + (size_t)i * bb, bb);
  return 0;
}

int coll_alltoall(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                  coll_algo algo, coll_algo *ran, coll_err *e) {
  int n = c->size;
  size_t es = coll_dtype_size(dt);
  if (algo.kind == COLL_ALGO_AUTO) algo = coll_colls_auto(c, COLL_ALLTOALL, count * es * (size_t)n);
  if (algo.kind == COLL_ALGO_DIRECT) {
    if (coll_colls_begin(c, COLL_ALLTOALL, algo, dt, e) != 0) return -1;
    if (ran) *ran = algo;
    int rc = count ? coll_a2a_direct(c, sendbuf, recvbuf, count * es, e) : 0;
    if (rc != 1) return coll_colls_end(c, rc, e);
    coll_colls_end(c, 0, e);
    algo = (coll_algo){COLL_ALGO_PAIRWISE, 0}; /* not every rank's copy can be read here */
  }
  if (algo.kind != COLL_ALGO_BRUCK) { /* pairwise, linear and native: the v call with equal counts */
    size_t *v = malloc(4 * (size_t)n * sizeof *v);
    if (!v) return coll_fail(e, "rank %d: out of memory", c->rank);
    for (int p = 0; p < n; p++) v[p] = v[2 * n + p] = count, v[n + p] = v[3 * n + p] = (size_t)p * count;
    int rc = coll_alltoallv(c, sendbuf, v, v + n, recvbuf, v + 2 * n, v + 3 * n, dt, algo, ran, e);
    free(v);
    return rc;
  }
  if (coll_colls_begin(c, COLL_ALLTOALL, algo, dt, e) != 0) return -1;
  if (ran) *ran = algo;
  if (n == 1 || count == 0) {
    if (count) coll_ccopy(c, recvbuf, sendbuf, count * es);
    return coll_colls_end(c, 0, e);
  }
  return coll_colls_end(c, a2a_bruck(c, sendbuf, recvbuf, count * es, e), e);
}
