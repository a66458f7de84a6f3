/* Two-level reduce-scatter and all-gather (hier), for hosts of L ranks each (H hosts): the host's
 * phase runs inside the host (over c->intra where there is one), the other only between the
 * ranks of one local index across hosts, so each byte crosses hosts once.
 * The vector's blocks are first packed so that super-block j holds, host by host, the blocks of
 * the ranks of local index j (block of rank order[start[g] + j] at j H + g):
 *   reduce-scatter: 1. a ring reduce-scatter of the L super-blocks inside the host: local rank j
 *     has its host's sum of super-block j; 2. a ring reduce-scatter of super-block j among the
 *     H ranks of local index j: each has its own block summed over every host;
 *   all-gather: the same two steps backwards, all-gathers.
 * Hosts of different rank counts run the flat ring (coll_rsag_hier_fits). */
#include "algo_plan.h"

int coll_rsag_hier_fits(const coll_comm *c) {
  if (c->view || c->nhosts < 1) return 0;
  int L = c->host_start[1] - c->host_start[0];
  for (int h = 1; h < c->nhosts; h++)
    if (c->host_start[h + 1] - c->host_start[h] != L) return 0;
  return 1;
}

static int rh_flush(coll_comm *c, coll_err *e) {
  return c->tp->ops->flush ? c->tp->ops->flush(c->tp, c->timeout_ms, e) : 0;
}

/* One phase: inside the host (intra: view of its L ranks, super-blocks of H blocks), or across
 * hosts (view of the H ranks of local index j, on super-block j). */
static int rh_phase(coll_comm *c, unsigned char *packed, size_t count, coll_dtype dt, coll_op op, int ag,
                    int intra, uint32_t seq, coll_err *e) {
  const int *order = c->node_order, *start = c->host_start;
  int H = c->nhosts, h = c->node_host, L = start[1] - start[0], j = c->node_pos - start[h];
  size_t bb = count * coll_dtype_size(dt);
  coll_comm *in = c->intra ? c->intra : c;
  int rc = 0;
  if (intra) {
    if (L == 1) return 0;
    in->seq = seq;
    coll_view_set(in, order + start[h], L, j);
    rc = coll_ring_phase(in, packed, count * (size_t)(H * L), L, dt, op, ag, e);
    coll_view_clear(in);
    if (rc == 0 && in != c) rc = rh_flush(in, e);
    return rc;
  }
  if (H == 1) return 0;
  c->seq = seq;
  coll_hier_group(c->group, order, start, H, j);
  coll_view_set(c, c->group, H, h);
  rc = coll_ring_phase(c, packed + (size_t)j * H * bb, count * (size_t)H, H, dt, op, ag, e);
  coll_view_clear(c);
  if (rc == 0 && in != c) rc = rh_flush(c, e);
  return rc;
}

/* Block of rank order[start[g] + i] to or from its packed place (on the device's stream where
 * the buffers are a GPU's). */
static void rh_pack(coll_comm *c, unsigned char *packed, unsigned char *flat, size_t bb, int unpack) {
  int H = c->nhosts, L = c->host_start[1] - c->host_start[0];
  for (int g = 0; g < H; g++)
    for (int i = 0; i < L; i++) {
      unsigned char *p = packed + (size_t)(i * H + g) * bb, *f = flat + (size_t)c->node_order[c->host_start[g] + i] * bb;
      coll_ccopy(c, unpack ? f : p, unpack ? p : f, bb);
    }
}

int coll_rs_hier(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt, coll_op op,
                 coll_err *e) {
  int H = c->nhosts, h = c->node_host, j = c->node_pos - c->host_start[h];
  size_t bb = count * coll_dtype_size(dt);
  unsigned char *packed = coll_scratch(c, 0, bb * (size_t)c->size, e);
  if (!packed) return -1;
  rh_pack(c, packed, (unsigned char *)sendbuf, bb, 0);
  uint32_t base = c->seq;
  coll_comm *in = c->intra ? c->intra : c;
  int rc = in != c ? rh_flush(c, e) : 0; /* what an earlier call on c left buffered */
  if (rc == 0) rc = rh_phase(c, packed, count, dt, op, 0, 1, base, e);
  if (rc == 0) rc = rh_phase(c, packed, count, dt, op, 0, 0, base + 1, e);
  c->seq = in->seq = base + 2;
  if (rc == 0) coll_ccopy(c, recvbuf, packed + (size_t)(j * H + h) * bb, bb);
  return rc;
}

int coll_ag_hier(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt, coll_err *e) {
  int H = c->nhosts, h = c->node_host, j = c->node_pos - c->host_start[h];
  size_t bb = count * coll_dtype_size(dt);
  unsigned char *packed = coll_scratch(c, 0, bb * (size_t)c->size, e);
  if (!packed) return -1;
  coll_ccopy(c, packed + (size_t)(j * H + h) * bb, sendbuf, bb);
  uint32_t base = c->seq;
  coll_comm *in = c->intra ? c->intra : c;
  int rc = in != c ? rh_flush(c, e) : 0;
  if (rc == 0) rc = rh_phase(c, packed, count, dt, COLL_SUM, 1, 0, base, e);
  if (rc == 0) rc = rh_phase(c, packed, count, dt, COLL_SUM, 1, 1, base + 1, e);
  c->seq = in->seq = base + 2;
  if (rc == 0) rh_pack(c, packed, recvbuf, bb, 1);
  return rc;
}
