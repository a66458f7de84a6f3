/* All-to-all(v), pairwise exchange: in step s (1 .. n-1) rank r sends to r + s and receives
 * from r - s, so every rank has one partner each way a step and every pair meets once; a
 * rank's own part is a copy. Parts of zero elements send nothing (both ends know the count). */
#include "algo_plan.h"

int coll_alltoallv(coll_comm *c, const void *sendbuf, const size_t *scounts, const size_t *sdispls,
                   void *recvbuf, const size_t *rcounts, const size_t *rdispls, coll_dtype dt,
                   coll_algo algo, coll_algo *ran, coll_err *e) {
  if (coll_colls_begin(c, COLL_ALLTOALL, algo, dt, e) != 0) return -1;
  coll_algo a = {algo.kind == COLL_ALGO_NATIVE ? COLL_ALGO_NATIVE : COLL_ALGO_PAIRWISE, 0};
  if (ran) *ran = a;
  if (a.kind == COLL_ALGO_NATIVE)
    return coll_colls_end(c, c->tp->ops->alltoallv(c->tp, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, dt, e), e);
  int n = c->size, r = c->rank;
  size_t es = coll_dtype_size(dt);
  const unsigned char *in = sendbuf;
  unsigned char *out = recvbuf;
  if (scounts[r] != rcounts[r])
    return coll_fail(e, "rank %d: all-to-all: %zu elements to itself but %zu from itself", r, scounts[r], rcounts[r]);
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
