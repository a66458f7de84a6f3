/* The collectives by direct reads (direct): where every rank is on one host and passed the same
 * place of memory the others map (ucx's coll_mem_alloc), each rank reads what it needs from its
 * peers' copies in place, a memory copy (or reduction) each, instead of messages. A round of
 * tokens first (each rank's data is final, and the places agree), one last (nobody reads a
 * rank's copy after it returns). Elsewhere the caller's fallback runs, every rank alike: on GPU
 * memory too (coll_host_ptr maps host memory only), so the copies here are the host's. */
#include <string.h>

#include "algo_plan.h"

/* The first round: 1 where the reads can run on buf, else 1's caller falls back (returns 2 for
 * that); -1 failed. */
static int dr_begin(coll_comm *c, const void *buf, size_t bytes, coll_err *e) {
  if (c->nhosts != 1 || c->view || c->size < 2) return 2;
  int rc = coll_mapped_same(c, buf, bytes, 0, e);
  return rc == 1 ? 1 : rc == -1 ? -1 : 2;
}

static int dr_end(coll_comm *c, coll_err *e) {
  unsigned char tok = 1, toks[COLL_MAPPED_MAX];
  return coll_tokens(c, &tok, toks, 1, 1, e);
}

/* Peer p's copy of mine (bytes at buf), or NULL (said in e). */
static const unsigned char *dr_peer(coll_comm *c, int p, const void *buf, size_t bytes, coll_err *e) {
  uint64_t w[2];
  const unsigned char *src = coll_host_ptr(c, p, buf, bytes, w);
  if (!src) coll_fail(e, "rank %d: internal: direct lost its mapping of rank %d", c->rank, p);
  return src;
}

int coll_ag_direct(coll_comm *c, const void *sendbuf, void *recvbuf, size_t bb, coll_err *e) {
  int rc = dr_begin(c, sendbuf, bb, e);
  if (rc != 1) return rc == 2 ? 1 : -1;
  unsigned char *out = recvbuf;
  memcpy(out + (size_t)c->rank * bb, sendbuf, bb);
  for (int i = 1; i < c->size; i++) {
    int p = (c->rank + i) % c->size;
    const unsigned char *src = dr_peer(c, p, sendbuf, bb, e);
    if (!src) return -1;
    memcpy(out + (size_t)p * bb, src, bb);
  }
  return dr_end(c, e);
}

int coll_rs_direct(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt, coll_op op,
                   coll_err *e) {
  size_t bb = count * coll_dtype_size(dt);
  int rc = dr_begin(c, sendbuf, bb * (size_t)c->size, e);
  if (rc != 1) return rc == 2 ? 1 : -1;
  const unsigned char *mine = (const unsigned char *)sendbuf + (size_t)c->rank * bb;
  memcpy(recvbuf, mine, bb);
  for (int i = 1; i < c->size; i++) { /* this rank's block of every peer's vector, in turn */
    const unsigned char *src = dr_peer(c, (c->rank + i) % c->size, mine, bb, e);
    if (!src) return -1;
    coll_reduce(recvbuf, src, count, dt, op);
  }
  return dr_end(c, e);
}

int coll_bcast_direct(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e) {
  int rc = dr_begin(c, buf, bytes, e);
  if (rc != 1) return rc == 2 ? 1 : -1;
  if (c->rank != root) {
    const unsigned char *src = dr_peer(c, root, buf, bytes, e);
    if (!src) return -1;
    memcpy(buf, src, bytes);
  }
  return dr_end(c, e);
}

int coll_a2a_direct(coll_comm *c, const void *sendbuf, void *recvbuf, size_t bb, coll_err *e) {
  int rc = dr_begin(c, sendbuf, bb * (size_t)c->size, e);
  if (rc != 1) return rc == 2 ? 1 : -1;
  unsigned char *out = recvbuf;
  const unsigned char *mine = (const unsigned char *)sendbuf + (size_t)c->rank * bb;
  memcpy(out + (size_t)c->rank * bb, mine, bb);
  for (int i = 1; i < c->size; i++) { /* peer p's block for this rank: its copy at this rank's block */
    int p = (c->rank + i) % c->size;
    const unsigned char *src = dr_peer(c, p, mine, bb, e);
    if (!src) return -1;
    memcpy(out + (size_t)p * bb, src, bb);
  }
  return dr_end(c, e);
}
