/* Hierarchical all-reduce (hier, hier:ALG), as NCCL and Horovod run it on multi-GPU nodes:
 *   1. reduce-scatter inside each host: each rank ends with its host's reduction of the blocks
 *      it owns;
 *   2. across hosts, for each block, an all-reduce among the block's owners (one per host) by
 *      the flat algorithm ALG (ring, rhd, rd, tree, dtree), run unchanged on that group through
 *      the communicator's group view (coll_view_set);
 *   3. all-gather inside each host.
 * Only step 2 crosses host boundaries, with 1/L of the vector per rank (L ranks on the host).
 *
 * Blocks (algo_plan.h, coll_hier_group): the vector is cut into lmax blocks, lmax the most ranks
 * on one host, and local rank j of a host of L ranks owns the blocks k with k mod L == j. So
 * hosts of different rank counts agree on every block's bounds and each host has exactly one
 * owner of each block, the group that reduces it across hosts. A rank owning several blocks
 * runs their step 2 in block order; every group's members reach block k after their blocks
 * below k, which by induction all finish, so the groups cannot wait on each other in a cycle.
 *
 * Bit-identical results: a host's partial of block k is formed once, by its owner; the owners
 * then all-reduce it with an algorithm that ends bit-identical on its members, and step 3 only
 * copies. Every element is therefore the one value its group computed, on every rank.
 *
 * Steps 1 and 3 go over c->intra where the communicator has one (another transport inside the
 * hosts: coll_comm_opts.intra), on the same ranks and with the same seq.
 *
 * Tags: each step takes its own c->seq (the call's base, then base + 1 + k for block k, then
 * base + 1 + lmax for the all-gather), the same on every rank whatever it owns, so messages of
 * two steps between one pair of ranks never match each other. */
#include "algo_plan.h"

/* One ring phase inside the host, on the view of its ranks (c->rank = j, c->size = L) and
 * "super-blocks": super-block i is the blocks this host's local rank i owns (i, i + L, ...).
 * Reduce-scatter (ag 0): step s sends super-block (j - s - 1) mod L to the next rank and
 * receives (j - s - 2) mod L from the previous, reducing it into place; after L - 1 steps super-
 * block j is the host's sum. All-gather (ag 1): step s sends (j - s) and receives (j - s - 1)
 * straight into place. A step's messages are posted together and then waited for (grouped
 * transports move them only so), one message per block. */
static int hier_phase(coll_comm *c, unsigned char *buf, size_t count, int lmax, coll_dtype dt, coll_op op,
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
  if (in != c) rc = hier_flush(c, e); /* what an earlier call on c left buffered */
  if (rc == 0 && L > 1) { /* 1 */
    in->seq = base;
    coll_view_set(in, order + start[h], L, j);
    rc = hier_phase(in, buf, count, lmax, dt, op, 0, e);
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
    rc = hier_phase(in, buf, count, lmax, dt, op, 1, e);
    coll_view_clear(in);
  }
  if (rc == 0 && in != c) rc = hier_flush(in, e); /* the next call may start on c */
  return rc;
}
