/* Hierarchical all-reduce (hier, hier:ALG), as NCCL and Horovod run it on multi-GPU nodes:
 * 1. reduce-scatter inside each host; 2. for each block, an all-reduce among its owners (one per
 * host) by the flat ALG, through the group view; 3. all-gather inside each host. Only step 2
 * crosses hosts. The vector is cut into lmax blocks and local rank j of a host of L ranks owns
 * the blocks k = j mod L (coll_hier_group), so uneven hosts agree on every block; owners run
 * their blocks in order, so groups cannot wait on each other in a cycle. A block's host partial
 * is formed once and step 3 only copies: results are bit-identical everywhere. Steps 1 and 3 go
 * over c->intra where there is one, and read the peers' mapped copies where the host maps them.
 * Each step has its own seq (base, base + 1 + k, base + 1 + lmax), so steps never match each
 * other's messages. */
#include "algo_plan.h"


/* One ring phase inside the host, on the view of its ranks (c->rank = j, c->size = L) and
 * "super-blocks": super-block i is the blocks this host's local rank i owns (i, i + L, ...).
 * Reduce-scatter (ag 0): step s sends super-block (j - s - 1) mod L to the next rank and
 * receives (j - s - 2) mod L from the previous, reducing it into place; after L - 1 steps super-
 * block j is the host's sum. All-gather (ag 1): step s sends (j - s) and receives (j - s - 1)
 * straight into place. A step's messages are posted together and then waited for (grouped
 * transports move them only so), one message per block. */
int coll_ring_phase(coll_comm *c, unsigned char *buf, size_t count, int lmax, coll_dtype dt, coll_op op,
                    int ag, coll_err *e) {
  int L = c->size, j = c->rank, next = (j + 1) % L, prev = (j - 1 + L) % L;
  int per = (lmax + L - 1) / L; /* blocks in the largest super-block */
  size_t es = coll_dtype_size(dt), bmax = (count + (size_t)lmax - 1) / (size_t)lmax;
  unsigned char *scr = NULL;
  if (!ag && !(scr = coll_scratch(c, 1, (size_t)per * bmax * es, e))) return -1;
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2 * per, e) != 0) return -1;
  for (int s = 0; s < L - 1; s++) {
    int sb = ((j - s - 1 + ag) % L + L) % L, rb = ((j - s - 2 + ag) % L + L) % L;
    uint32_t tag = coll_tag(c, (uint32_t)s);
    size_t at = 0; /* packed place in scratch of the received blocks */
    for (int k = rb; k < lmax; k += L) {
      size_t off, len;
      coll_block(count, lmax, k, &off, &len);
      if (coll_reqset_recv(&rs, prev, ag ? buf + off * es : scr + at * es, len * es, tag, e) != 0) return -1;
      at += len;
    }
    for (int k = sb; k < lmax; k += L) {
      size_t off, len;
      coll_block(count, lmax, k, &off, &len);
      if (coll_reqset_send(&rs, next, buf + off * es, len * es, tag, e) != 0) return -1;
    }
    if (coll_reqset_wait(&rs, e) != 0) return -1;
    if (ag) continue;
    at = 0;
    for (int k = rb; k < lmax; k += L) {
      size_t off, len;
      coll_block(count, lmax, k, &off, &len);
      if (len) coll_creduce(c, buf + off * es, scr + at * es, len, dt, op);
      at += len;
    }
  }
  return 0;
}

/* ---- the phases inside a host on mapped memory (coll_host_ptr) ----
 * Step 1: the owner of block k reduces every peer's copy of k into its own; step 3: each rank
 * copies the owners' final blocks out of their copies. Three rounds of tokens order it: at the
 * start (inputs in place, same place everywhere), after step 2 (blocks final), at the end
 * (nobody reads this copy any more). A rank writes only its own blocks before the end. */
/* The start's round: 1 where every rank of the host passed the same place of mapped memory
 * (then the phases read), 0 where none did (they send messages), -1 on a mix. */
static int hier_mapped(coll_comm *c, unsigned char *buf, size_t bytes, coll_err *e) {
  int rc = coll_mapped_same(c, buf, bytes, 0, e);
  if (rc == -2)
    return coll_fail(e, "rank %d (%s): hier: ranks on this host passed different places of mapped memory, or "
                     "some mapped memory and some not (every rank must pass the same place of coll_mem_alloc "
                     "memory)", c->world_rank, c->hosts[c->world_rank]);
  return rc;
}

/* Step 1 (ag 0: each owned block += every peer's copy of it, peers in turn from the next) or
 * step 3 (ag 1: every peer's owned blocks copied from its copy), on the host's view. */
static int hier_phase_mapped(coll_comm *c, unsigned char *buf, size_t count, int lmax, coll_dtype dt,
                             coll_op op, int ag, coll_err *e) {
  int L = c->size, j = c->rank;
  size_t es = coll_dtype_size(dt);
  for (int i = 1; i < L; i++) {
    int p = (j + i) % L;
    for (int k = ag ? p : j; k < lmax; k += L) {
      size_t off, len;
      uint64_t w[2];
      coll_block(count, lmax, k, &off, &len);
      if (!len) continue;
      const unsigned char *src = coll_host_ptr(c, p, buf + off * es, len * es, w);
      if (!src) return coll_fail(e, "rank %d: internal: hier lost its mapping of rank %d", c->world_rank, c->view[p]);
      if (ag)
        memcpy(buf + off * es, src, len * es);
      else
        coll_reduce(buf + off * es, src, len, dt, op);
    }
  }
  return 0;
}

/* Before the other transport's step: what c's completed sends left buffered goes out, since
 * this rank will not progress c while it waits on the other (a peer may wait for it). */
static int hier_flush(coll_comm *c, coll_err *e) {
  return c->tp->ops->flush ? c->tp->ops->flush(c->tp, c->timeout_ms, e) : 0;
}

int coll_ar_hier(coll_comm *c, void *vbuf, size_t count, coll_dtype dt, coll_op op, int param,
                 coll_err *e) {
  coll_algo_fn across = param >= 0 && param < COLL_ALGO_PS ? coll_algo_flat((coll_algo_kind)param) : NULL;
  if (!across) return coll_fail(e, "hier: no such algorithm across hosts (%d)", param);
  if (c->view) return coll_fail(e, "rank %d: internal: hier inside a group view", c->world_rank);
  unsigned char *buf = vbuf;
  size_t es = coll_dtype_size(dt);
  const int *order = c->node_order, *start = c->host_start;
  int nh = c->nhosts, lmax = c->lmax, h = c->node_host;
  int L = start[h + 1] - start[h], j = c->node_pos - start[h], rc = 0;
  uint32_t base = c->seq;
  coll_comm *in = c->intra ? c->intra : c; /* the host's phases' transport */
  int mapped = 0;
  unsigned char tok = 1, toks[COLL_MAPPED_MAX];
  if (in != c) rc = hier_flush(c, e); /* what an earlier call on c left buffered */
  if (rc == 0 && L > 1) { /* 1 */
    in->seq = base;
    coll_view_set(in, order + start[h], L, j);
    if (in->tp->maps && (mapped = rc = hier_mapped(in, buf, count * es, e)) == 1)
      rc = hier_phase_mapped(in, buf, count, lmax, dt, op, 0, e);
    else if (rc == 0)
      rc = coll_ring_phase(in, buf, count, lmax, dt, op, 0, e);
    coll_view_clear(in);
    if (rc == 0 && in != c) rc = hier_flush(in, e);
  }
  for (int k = j; k < lmax && nh > 1 && rc == 0; k += L) { /* 2: this rank's blocks, in order */
    size_t off, len;
    coll_block(count, lmax, k, &off, &len);
    if (len == 0) continue; /* every owner of block k sees it empty */
    c->seq = base + 1 + (uint32_t)k;
    coll_hier_group(c->group, order, start, nh, k);
    coll_view_set(c, c->group, nh, h);
    rc = across(c, buf + off * es, len, dt, op, 0, e);
    coll_view_clear(c);
  }
  if (rc == 0 && in != c) rc = hier_flush(c, e);
  c->seq = in->seq = base + 1 + (uint32_t)lmax;
  if (rc == 0 && L > 1) { /* 3 */
    coll_view_set(in, order + start[h], L, j);
    if (mapped == 1) {
      rc = coll_tokens(in, &tok, toks, 1, 0, e);
      if (rc == 0) rc = hier_phase_mapped(in, buf, count, lmax, dt, op, 1, e);
      if (rc == 0) rc = coll_tokens(in, &tok, toks, 1, 1, e);
    } else {
      rc = coll_ring_phase(in, buf, count, lmax, dt, op, 1, e);
    }
    coll_view_clear(in);
  }
  if (rc == 0 && in != c) rc = hier_flush(in, e); /* the next call may start on c */
  return rc;
}
