/* Planning shared by the all-reduce algorithms: the MPICH fold, binary tree shapes, and a
 * request set. See algo_plan.h. */
#include <string.h>

#include "algo_plan.h"

void coll_fold_plan(coll_fold *f, int size, int rank) {
  int pof2 = 1;
  while (pof2 * 2 <= size) pof2 *= 2;
  f->pof2 = pof2;
  f->rem = size - pof2;
  if (rank < 2 * f->rem)
    f->newrank = (rank % 2) ? rank / 2 : -1;
  else
    f->newrank = rank - f->rem;
}

int coll_fold_real(const coll_fold *f, int newrank) {
  return newrank < f->rem ? newrank * 2 + 1 : newrank + f->rem;
}

/* Tree 0, see algo_plan.h, one node at a time. Every rank x below the root owns the aligned
 * range [x - b + 1, x + b - 1] of the complete tree (b its lowest set bit). Where size cuts the
 * upper half, the highest existing node of that half's left spine takes its place: it still
 * covers every rank that exists above x. */
static void coll_btree0_node(int size, int x, int *parent, int *c0, int *c1) {
  *parent = *c0 = *c1 = -1;
  if (size < 2) return;
  if (x == 0) {
    int top = 1;
    while (top * 2 < size) top *= 2;
    *c0 = top;
    return;
  }
  int b = x & -x;
  /* Bit 2b set: x is its parent's upper child, x - b. Clear: the lower child of x + b, or,
   * when x + b does not exist, the spine node adopted by x - b (the root for the top). */
  if (x & (2 * b))
    *parent = x - b;
  else
    *parent = x + b < size ? x + b : x - b;
  if (b < 2) return; /* odd ranks are leaves */
  *c0 = x - b / 2;
  int step = b / 2;
  while (step >= 1 && x + step >= size) step /= 2;
  if (step >= 1) *c1 = x + step;
}

int coll_btree(int *parent, int *child, int size, int which) {
  /* Tree 1 relabels tree 0: rank r plays tree-0 node inv(r) and its neighbours map back. */
  int mirror = size % 2 == 0;
  for (int r = 0; r < size; r++) {
    int x = which == 0 ? r : mirror ? size - 1 - r : (r - 1 + size) % size;
    int nb[3];
    coll_btree0_node(size, x, &nb[0], &nb[1], &nb[2]);
    for (int i = 0; i < 3 && which != 0; i++)
      if (nb[i] >= 0) nb[i] = mirror ? size - 1 - nb[i] : (nb[i] + 1) % size;
    parent[r] = nb[0];
    child[2 * r] = nb[1];
    child[2 * r + 1] = nb[2];
  }
  if (which == 0 || size < 2) return 0;
  return mirror ? size - 1 : 1;
}

/* Heights need children first; depths need parents first. Trees are small (size ranks), so a
 * few passes until nothing changes are cheap and need no recursion or stack. */
void coll_btree_levels(int *height, int *depth, const int *parent, const int *child, int size) {
  for (int r = 0; r < size; r++) height[r] = depth[r] = 0;
  for (int changed = 1; changed;) {
    changed = 0;
    for (int r = 0; r < size; r++) {
      int h = 0, d = parent[r] < 0 ? 0 : depth[parent[r]] + 1;
      for (int i = 0; i < 2; i++) {
        int ch = child[2 * r + i];
        if (ch >= 0 && height[ch] + 1 > h) h = height[ch] + 1;
      }
      if (h != height[r] || d != depth[r]) {
        height[r] = h;
        depth[r] = d;
        changed = 1;
      }
    }
  }
}

int coll_host_index(int *host_of, const char (*hosts)[COLL_HOST_MAX], int size) {
  int n = 0;
  for (int r = 0; r < size; r++) {
    int q = 0;
    while (q < r && strncmp(hosts[q], hosts[r], COLL_HOST_MAX) != 0) q++;
    host_of[r] = q < r ? host_of[q] : n++;
  }
  return n;
}

/* A counting sort by host: stable, so each host's ranks stay in rank order. */
int coll_layout_plan(int *order, int *start, const int *host_of, int size) {
  int n = 0;
  for (int r = 0; r < size; r++)
    if (host_of[r] + 1 > n) n = host_of[r] + 1;
  for (int h = 0; h <= n; h++) start[h] = 0;
  for (int r = 0; r < size; r++) start[host_of[r] + 1]++;
  for (int h = 0; h < n; h++) start[h + 1] += start[h];
  for (int h = n; h > 0; h--) start[h] = start[h - 1]; /* shift: used as fill cursors below */
  start[0] = 0;
  for (int r = 0; r < size; r++) order[start[host_of[r] + 1]++] = r;
  return n;
}

void coll_hier_group(int *group, const int *order, const int *start, int nhosts, int k) {
  for (int h = 0; h < nhosts; h++) group[h] = order[start[h] + coll_hier_owner(k, start[h + 1] - start[h])];
}

int coll_reqset_init(coll_reqset *s, coll_comm *c, int cap, coll_err *e) {
  s->c = c;
  s->n = 0;
  s->cap = cap;
  s->r = coll_reqs(c, (size_t)cap, e);
  return s->r ? 0 : -1;
}

int coll_reqset_send(coll_reqset *s, int peer, const void *buf, size_t bytes, uint32_t tag,
                     coll_err *e) {
  if (bytes == 0) return 0;
  if (s->n >= s->cap) return coll_fail(e, "rank %d: internal: request set full", s->c->rank);
  if (coll_isend(s->c, peer, buf, bytes, tag, &s->r[s->n], e) != 0) return -1;
  s->n++;
  return 0;
}

int coll_reqset_recv(coll_reqset *s, int peer, void *buf, size_t bytes, uint32_t tag,
                     coll_err *e) {
  if (bytes == 0) return 0;
  if (s->n >= s->cap) return coll_fail(e, "rank %d: internal: request set full", s->c->rank);
  if (coll_irecv(s->c, peer, buf, bytes, tag, &s->r[s->n], e) != 0) return -1;
  s->n++;
  return 0;
}

int coll_reqset_wait(coll_reqset *s, coll_err *e) {
  int n = s->n;
  s->n = 0;
  return coll_waitall(s->c, s->r, n, e);
}

/* Elements in piece k of total elements cut into pieces of ce. */
static size_t xchg_piece(size_t total, size_t k, size_t ce) { return total - k * ce < ce ? total - k * ce : ce; }

int coll_xchg_reduce(coll_comm *c, int peer, const void *sbuf, size_t scount, void *dst, size_t rcount,
                     coll_dtype dt, coll_op op, int rev, uint32_t tag, coll_err *e) {
  enum { W = COLL_RING_SLOTS };
  size_t es = coll_dtype_size(dt), most = scount > rcount ? scount : rcount;
  size_t ce = c->tp->on_device ? most : c->chunk_bytes / es;
  if (ce == 0) ce = 1;
  size_t ns = (scount + ce - 1) / ce, nr = (rcount + ce - 1) / ce;
  size_t slot = ce < rcount ? ce : rcount, nslots = nr < W ? nr : W; /* piece k in slot k % W */
  unsigned char *slots = nr ? coll_scratch(c, 0, nslots * slot * es, e) : NULL;
  coll_req *rq = coll_reqs(c, 2 * W, e);
  if ((nr && !slots) || !rq) return -1;
  coll_req *sq = rq + W; /* after the check: no offset from a null pointer */
  const unsigned char *s = sbuf;
  unsigned char *d = dst;
  int inplace = sbuf == dst;
  size_t rpost = 0, spost = 0, sdone = 0, used = 0;
  for (;;) {
    for (; rpost < nr && rpost < used + W; rpost++) {
      size_t len = xchg_piece(rcount, rpost, ce);
      if (coll_irecv(c, peer, slots + rpost % W * slot * es, len * es, tag, &rq[rpost % W], e) != 0) return -1;
    }
    /* a send no further ahead than the receives consumed: a piece waiting in a socket's
     * buffer until the partner takes it would leave the cache */
    for (; spost < ns && (spost < used + W || used == nr); spost++) {
      if (spost - sdone == W && coll_waitall(c, &sq[sdone++ % W], 1, e) != 0) return -1;
      size_t len = xchg_piece(scount, spost, ce);
      if (coll_isend(c, peer, s + spost * ce * es, len * es, tag, &sq[spost % W], e) != 0) return -1;
    }
    if (used == nr) break;
    if (coll_waitall(c, &rq[used % W], 1, e) != 0) return -1;
    while (inplace && sdone <= used)
      if (coll_waitall(c, &sq[sdone++ % W], 1, e) != 0) return -1;
    size_t len = xchg_piece(rcount, used, ce);
    unsigned char *in = slots + used % W * slot * es, *out = d + used * ce * es;
    if (rev) coll_creduce_rev(c, out, in, len, dt, op);
    else coll_creduce(c, out, in, len, dt, op);
    used++;
  }
  for (; sdone < spost; sdone++)
    if (coll_waitall(c, &sq[sdone % W], 1, e) != 0) return -1;
  return 0;
}

int coll_fold_in(coll_comm *c, const coll_fold *f, void *buf, size_t count, coll_dtype dt, coll_op op,
                 uint32_t step, coll_err *e) {
  if (c->rank >= 2 * f->rem) return 0;
  if (f->newrank < 0) return coll_xchg_reduce(c, c->rank + 1, buf, count, NULL, 0, dt, op, 0, coll_tag(c, step), e);
  return coll_xchg_reduce(c, c->rank - 1, NULL, 0, buf, count, dt, op, 1, coll_tag(c, step), e); /* lower first */
}

int coll_fold_out(coll_comm *c, const coll_fold *f, coll_reqset *rs, void *buf, size_t bytes,
                  coll_err *e) {
  if (c->rank >= 2 * f->rem) return 0;
  const uint32_t back = 0xfffeu;
  int rc = f->newrank < 0 ? coll_reqset_recv(rs, c->rank + 1, buf, bytes, coll_tag(c, back), e)
                          : coll_reqset_send(rs, c->rank - 1, buf, bytes, coll_tag(c, back), e);
  return rc != 0 || coll_reqset_wait(rs, e) != 0 ? -1 : 0;
}

int coll_tokens(coll_comm *c, const void *mine, unsigned char *all, size_t sz, uint32_t step, coll_err *e) {
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2 * c->size, e) != 0) return -1;
  for (int i = 0; i < c->size; i++) {
    if (i == c->rank) continue;
    if (coll_reqset_recv(&rs, i, all + (size_t)i * sz, sz, coll_tag(c, step), e) != 0 ||
        coll_reqset_send(&rs, i, mine, sz, coll_tag(c, step), e) != 0)
      return -1;
  }
  return coll_reqset_wait(&rs, e);
}

/* What a rank says of its buffer in coll_mapped_same's round. */
typedef struct {
  uint64_t mapped, where[2];
} coll_place;

int coll_mapped_same(coll_comm *c, const void *buf, size_t bytes, uint32_t step, coll_err *e) {
  coll_place me = {0}, all[COLL_MAPPED_MAX];
  if (c->size > COLL_MAPPED_MAX) return 0;
  me.mapped = bytes && coll_host_ptr(c, c->rank, buf, bytes, me.where) != NULL;
  if (coll_tokens(c, &me, (unsigned char *)all, sizeof me, step, e) != 0) return -1;
  int n = 0, same = 1;
  for (int i = 0; i < c->size; i++) {
    const coll_place *p = i == c->rank ? &me : &all[i];
    n += p->mapped != 0;
    same &= !p->mapped || !me.mapped || (p->where[0] == me.where[0] && p->where[1] == me.where[1]);
  }
  if (n == c->size && same) return 1;
  return n == 0 ? 0 : -2;
}
