/* Broadcast from any root, in ranks relative to it (v = rank - root mod n):
 *   tree:  binomial; v receives from v - lowbit(v) and sends to v + 2^k for each 2^k below
 *          lowbit(v) (the root: below n): ceil(lg n) rounds of the whole message;
 *   chain: v receives each chunk (the communicator's chunk) from v - 1 and passes it to v + 1
 *          as soon as it is in: about one message's time plus n - 2 chunks';
 *   linear: the root sends the whole message to every other rank itself, COLL_LINEAR_WINDOW
 *          sends in flight at most (the oldest done, the next posted): one message on every
 *          rank's path, its link carrying n - 1 copies;
 *   vdg:   van de Geijn: the root's n blocks scattered down the binomial tree (each subtree
 *          gets its ranks' blocks), then the ring all-gather: 2 (n-1)/n of the message a rank,
 *          for large messages;
 *   hier:  among one leader per host (the root on its own), then inside each host
 *          (algo_colls_hier.c). */
#include "algo_plan.h"

static int bc_real(int v, int root, int n) { return (v + root) % n; }

static int bc_tree(coll_comm *c, unsigned char *buf, size_t bytes, int root, coll_err *e) {
  int n = c->size, v = (c->rank - root + n) % n, m = 1;
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 1, e) != 0) return -1;
  for (; m < n; m <<= 1)
    if (v & m) {
      if (coll_reqset_recv(&rs, bc_real(v - m, root, n), buf, bytes, coll_tag(c, 0), e) != 0 ||
          coll_reqset_wait(&rs, e) != 0)
        return -1;
      break;
    }
  for (m >>= 1; m > 0; m >>= 1)
    if (v + m < n && (coll_reqset_send(&rs, bc_real(v + m, root, n), buf, bytes, coll_tag(c, 0), e) != 0 ||
                      coll_reqset_wait(&rs, e) != 0))
      return -1;
  return 0;
}

static int bc_chain(coll_comm *c, unsigned char *buf, size_t bytes, int root, coll_err *e) {
  enum { W = COLL_RING_SLOTS };
  int n = c->size, v = (c->rank - root + n) % n;
  size_t ch = c->tp->on_device || !c->chunk_bytes ? bytes : c->chunk_bytes, k = (bytes + ch - 1) / ch;
  coll_req *q = coll_reqs(c, 2 * W, e);
  if (!q) return -1;
  int prev = bc_real(v - 1 + n, root, n), next = bc_real(v + 1, root, n);
  size_t posted = 0, got = 0, sent = 0, done = 0; /* receives posted and in; sends posted, reaped */
  while (done < (v < n - 1 ? k : 0) || got < (v > 0 ? k : 0)) {
    while (v > 0 && posted < k && posted - got < W) { /* receives ahead, up to W */
      size_t off = posted * ch, len = bytes - off < ch ? bytes - off : ch;
      if (coll_irecv(c, prev, buf + off, len, coll_tag(c, (uint32_t)posted), &q[posted % W], e) != 0) return -1;
      posted++;
    }
    if (v > 0 && got < posted) { /* the oldest receive, then it can go on */
      if (coll_waitall(c, &q[got % W], 1, e) != 0) return -1;
      got++;
    }
    size_t have = v > 0 ? got : k;
    while (v < n - 1 && sent < have && sent - done < W) {
      size_t off = sent * ch, len = bytes - off < ch ? bytes - off : ch;
      if (coll_isend(c, next, buf + off, len, coll_tag(c, (uint32_t)sent), &q[W + sent % W], e) != 0) return -1;
      sent++;
    }
    if (v < n - 1 && done < sent && (sent - done == W || sent == k || (v > 0 && got == k))) {
      if (coll_waitall(c, &q[W + done % W], 1, e) != 0) return -1;
      done++;
    }
  }
  return 0;
}

static int bc_linear(coll_comm *c, unsigned char *buf, size_t bytes, int root, coll_err *e) {
  int n = c->size, v = (c->rank - root + n) % n, w = n - 1 < COLL_LINEAR_WINDOW ? n - 1 : COLL_LINEAR_WINDOW;
  coll_req *q = coll_reqs(c, (size_t)w, e);
  if (!q) return -1;
  if (v > 0)
    return coll_irecv(c, root, buf, bytes, coll_tag(c, 0), q, e) != 0 || coll_waitall(c, q, 1, e) != 0 ? -1 : 0;
  for (int s = 1, done = 1; done < n;) {
    if (s < n && s - done < w) { /* relative rank s's send */
      if (coll_isend(c, bc_real(s, root, n), buf, bytes, coll_tag(c, 0), &q[(s - 1) % w], e) != 0) return -1;
      s++;
    } else { /* the window is full, or every send posted: the oldest */
      if (coll_waitall(c, &q[(done - 1) % w], 1, e) != 0) return -1;
      done++;
    }
  }
  return 0;
}

/* vdg: block i (of n nearly equal blocks, coll_block) belongs to relative rank i. A subtree of
 * the binomial tree rooted at v with span s holds relative ranks v .. v + s - 1: its root gets
 * their blocks, contiguous, from its parent, and hands each child its subtree's. */
static int bc_vdg(coll_comm *c, unsigned char *buf, size_t bytes, int root, coll_err *e) {
  int n = c->size, v = (c->rank - root + n) % n, m = 1;
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  size_t off, len, end, elen;
  for (; m < n; m <<= 1)
    if (v & m) { /* my subtree: v .. min(v + m, n) - 1 */
      int last = v + m < n ? v + m : n;
      coll_block(bytes, n, v, &off, &len);
      coll_block(bytes, n, last - 1, &end, &elen);
      if (coll_reqset_recv(&rs, bc_real(v - m, root, n), buf + off, end + elen - off, coll_tag(c, 0), e) != 0 ||
          coll_reqset_wait(&rs, e) != 0)
        return -1;
      break;
    }
  for (m >>= 1; m > 0; m >>= 1) {
    if (v + m >= n) continue;
    int last = v + 2 * m < n ? v + 2 * m : n;
    coll_block(bytes, n, v + m, &off, &len);
    coll_block(bytes, n, last - 1, &end, &elen);
    if (coll_reqset_send(&rs, bc_real(v + m, root, n), buf + off, end + elen - off, coll_tag(c, 0), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
  }
  /* ring all-gather of the blocks in relative order: step s passes block v - s on */
  for (int s = 0; s < n - 1; s++) {
    size_t so, sl, ro, rl;
    coll_block(bytes, n, ((v - s) % n + n) % n, &so, &sl);
    coll_block(bytes, n, ((v - s - 1) % n + n) % n, &ro, &rl);
    if (coll_reqset_recv(&rs, bc_real(v - 1 + n, root, n), buf + ro, rl, coll_tag(c, 1 + (uint32_t)s), e) != 0 ||
        coll_reqset_send(&rs, bc_real(v + 1, root, n), buf + so, sl, coll_tag(c, 1 + (uint32_t)s), e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
  }
  return 0;
}

int coll_bcast_tree(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e) {
  return bytes ? bc_tree(c, buf, bytes, root, e) : 0;
}

int coll_bcast_flat(coll_comm *c, coll_algo_kind k, void *buf, size_t bytes, int root, coll_err *e) {
  if (c->size < 2 || !bytes) return 0;
  return k == COLL_ALGO_CHAIN    ? bc_chain(c, buf, bytes, root, e)
         : k == COLL_ALGO_VDG    ? bc_vdg(c, buf, bytes, root, e)
         : k == COLL_ALGO_LINEAR ? bc_linear(c, buf, bytes, root, e)
                                 : bc_tree(c, buf, bytes, root, e);
}

int coll_broadcast(coll_comm *c, void *buf, size_t count, coll_dtype dt, int root, coll_algo algo,
                   coll_algo *ran, coll_err *e) {
  if (coll_colls_begin(c, COLL_BCAST, algo, dt, e) != 0) return -1;
  if (root < 0 || root >= c->size) return coll_fail(e, "broadcast: root %d is not a rank (0..%d)", root, c->size - 1);
  size_t bytes = count * coll_dtype_size(dt);
  coll_algo a = algo;
  if (a.kind == COLL_ALGO_AUTO) a = coll_colls_auto(c, COLL_BCAST, bytes);
  a.param = 0;
  if (ran) *ran = a;
  if (a.kind == COLL_ALGO_NATIVE) return coll_colls_end(c, c->tp->ops->bcast(c->tp, buf, count, dt, root, e), e);
  if (c->size == 1 || bytes == 0) return coll_colls_end(c, 0, e);
  if (a.kind == COLL_ALGO_DIRECT) {
    int rc = coll_bcast_direct(c, buf, bytes, root, e);
    if (rc != 1) return coll_colls_end(c, rc, e);
    a.kind = COLL_ALGO_TREE; /* not every rank's copy can be read here */
    if (ran) *ran = a;
  }
  if (a.kind == COLL_ALGO_HIER) return coll_colls_end(c, coll_bcast_hier(c, buf, bytes, root, e), e);
  return coll_colls_end(c, coll_bcast_flat(c, a.kind, buf, bytes, root, e), e);
}
