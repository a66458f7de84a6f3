/* Ring all-reduce: reduce-scatter then all-gather, 2(n-1) steps, pipelined in sub-chunks of
 * c->chunk_bytes so that reducing one sub-chunk overlaps the transfer of the next.
 *
 * Step s sends block (r - s) mod n and receives block (r - s - 1) mod n; the first n-1 steps
 * reduce what they receive (from scratch slots that stay in cache: ring_flow), the last n-1
 * receive straight into place. Each block is reduced once, in ring order, then copied around,
 * so every rank ends with bit-identical results. A block's first c->ring_ramp sub-chunks are
 * chunk/4 and chunk/2: a small first piece shortens the pipeline's fill.
 *
 * Variants: on memory every rank maps, the ring reads its neighbour's block in place
 * (ring_direct); small messages (n * bytes <= COLL_RING_SMALL) all-gather whole vectors and
 * reduce them in rank order, n-1 latencies instead of 2(n-1). */
#include <string.h>

#include "coll_internal.h"

#define COLL_RING_SMALL (64u * 1024u)
#define COLL_RING_DIRECT_MIN (16u * 1024u) /* below, ring_small's one exchange is as quick */

static int ring_small(coll_comm *c, char *buf, size_t count, coll_dtype dt, coll_op op, coll_err *e) {
  int n = c->size, r = c->rank;
  size_t bytes = count * coll_dtype_size(dt);
  char *all = coll_scratch(c, 0, bytes * (size_t)n, e);
  if (!all) return -1;
  coll_ccopy(c, all + (size_t)r * bytes, buf, bytes);
  int next = (r + 1) % n, prev = (r - 1 + n) % n;
  for (int s = 0; s < n - 1; s++) {
    int sb = ((r - s) % n + n) % n, rb = ((r - s - 1) % n + n) % n;
    coll_req q[2];
    if (coll_irecv(c, prev, all + (size_t)rb * bytes, bytes, coll_tag(c, (uint32_t)s), &q[0], e) != 0 ||
        coll_isend(c, next, all + (size_t)sb * bytes, bytes, coll_tag(c, (uint32_t)s), &q[1], e) != 0 ||
        coll_waitall(c, q, 2, e) != 0)
      return -1;
  }
  coll_ccopy(c, buf, all, bytes);
  for (int k = 1; k < n; k++) coll_creduce(c, buf, all + (size_t)k * bytes, count, dt, op);
  return 0;
}

typedef struct {
  int n, r;
  size_t count, esize, ce; /* elements; element size; elements per (full) sub-chunk */
  int ramp;                /* how many ramp sub-chunks (ce >> ramp, ..., ce >> 1) lead a block */
} ring_plan;

static int ring_mod(int a, int n) { return ((a % n) + n) % n; }

static void ring_blk(const ring_plan *p, int b, size_t *off, size_t *len) {
  coll_block(p->count, p->n, b, off, len);
}

/* Sub-chunk j of a block, relative to the block's start, unclipped: the ramp (ce >> ramp,
 * ce >> (ramp - 1), ..., ce >> 1), then ce each. */
static void ring_sub_rel(const ring_plan *p, size_t j, size_t *rel, size_t *len) {
  size_t c0 = p->ce >> p->ramp;
  if (j < (size_t)p->ramp) {
    *rel = c0 * (((size_t)1 << j) - 1);
    *len = c0 << j;
  } else {
    *rel = c0 * (((size_t)1 << p->ramp) - 1) + (j - (size_t)p->ramp) * p->ce;
    *len = p->ce;
  }
}

static size_t ring_nsub(const ring_plan *p, int b) {
  size_t off, len, rel, sl;
  ring_blk(p, b, &off, &len);
  size_t j = 0;
  for (; j < (size_t)p->ramp; j++) { /* within the ramp */
    ring_sub_rel(p, j, &rel, &sl);
    if (rel + sl >= len) return len ? j + 1 : 0;
  }
  ring_sub_rel(p, j, &rel, &sl);
  return len <= rel ? j : j + (len - rel + p->ce - 1) / p->ce;
}

/* Sub-chunk j of block b: element offset (absolute), offset within the block, and length. */
static void ring_sub(const ring_plan *p, int b, size_t j, size_t *off, size_t *rel, size_t *len) {
  size_t boff, blen, sl;
  ring_blk(p, b, &boff, &blen);
  ring_sub_rel(p, j, rel, &sl);
  *off = boff + *rel;
  *len = blen - *rel < sl ? blen - *rel : sl;
}

/* The pipelined ring's messages, each direction one sequence in step order: sends carry block
 * (r - s) of step s (at step 0 this rank's own block, later what it has just reduced or
 * received), receives block (r - s - 1); the left's sends are this rank's receives, one for
 * one. A cursor walks one sequence (shift 0: sends, 1: receives), skipping empty blocks. */
typedef struct {
  int s, shift; /* step; 0 for the sends, 1 for the receives */
  size_t j, k;  /* sub-chunk within the step's block; place in the sequence */
} ring_cursor;

/* Normalises cur to a sub-chunk that exists and gives its element offset and length; 0, or 1
 * past the last step. */
static int ring_at(const ring_plan *p, ring_cursor *cur, size_t *off, size_t *len) {
  int nsteps = 2 * (p->n - 1), b;
  for (;; cur->s++, cur->j = 0) {
    if (cur->s >= nsteps) return 1;
    b = ring_mod(p->r - cur->s - cur->shift, p->n);
    if (cur->j < ring_nsub(p, b)) break;
  }
  size_t rel;
  ring_sub(p, b, cur->j, off, &rel, len);
  return 0;
}

/* Flow control: receive k is posted once receive k - COLL_RING_SLOTS has been consumed, so its
 * slot is free: a reduce-scatter receive lands in scratch slot k % COLL_RING_SLOTS, which stays
 * in cache, where a block-sized scratch sent every received byte through memory and back. Send
 * m is posted no more than COLL_RING_SLOTS ahead of the receives consumed, and past step 0 once
 * what it forwards has been consumed; sends are not reordered, so a step's messages still
 * follow the step before's on the wire. Pushing a whole block at once had it wait in socket
 * buffers, out of cache, until the neighbour read it. */
typedef struct {
  coll_comm *c;
  const ring_plan *p;
  char *buf, *slots;
  coll_req *rq, *sq;         /* COLL_RING_SLOTS receives, 2 COLL_RING_SLOTS sends (in order) */
  ring_cursor rcv, snd, use; /* the next receive to post, send to post, receive to consume */
  size_t own, reaped;        /* sends of step 0; sends waited for */
  int next, prev;
} ring_flow;

/* Scratch slot of receive k. */
static char *ring_slot(const ring_flow *f, size_t k) {
  return f->slots + k % COLL_RING_SLOTS * f->p->ce * f->p->esize;
}

static int ring_pump(ring_flow *f, coll_err *e) {
  const ring_plan *p = f->p;
  size_t off, len;
  size_t consumed = f->use.k;
  while (f->rcv.k < consumed + COLL_RING_SLOTS && !ring_at(p, &f->rcv, &off, &len)) {
    char *dst = f->rcv.s < p->n - 1 ? ring_slot(f, f->rcv.k) : f->buf + off * p->esize;
    if (coll_irecv(f->c, f->prev, dst, len * p->esize, coll_tag(f->c, (uint32_t)f->rcv.s),
                   &f->rq[f->rcv.k % COLL_RING_SLOTS], e) != 0)
      return -1;
    f->rcv.j++, f->rcv.k++;
  }
  while (f->snd.k < consumed + COLL_RING_SLOTS && (f->snd.k < f->own || f->snd.k - f->own < consumed) &&
         !ring_at(p, &f->snd, &off, &len)) {
    if (f->snd.k - f->reaped == 2 * COLL_RING_SLOTS) { /* its request slot: the send 2 COLL_RING_SLOTS back */
      if (coll_waitall(f->c, &f->sq[f->reaped % (2 * COLL_RING_SLOTS)], 1, e) != 0) return -1;
      f->reaped++;
    }
    if (coll_isend(f->c, f->next, f->buf + off * p->esize, len * p->esize,
                   coll_tag(f->c, (uint32_t)f->snd.s), &f->sq[f->snd.k % (2 * COLL_RING_SLOTS)], e) != 0)
      return -1;
    f->snd.j++, f->snd.k++;
  }
  return 0;
}

/* The ring over memory every rank maps (ucx on one host; CUDA IPC): the same steps and
 * reduction order, but each rank reads its left neighbour's block in place, and only tokens
 * cross the transport: token s says the left finished step s-1 (token 0, the hello: its buffer
 * holds its input), and AG done, sent back, that the right finished copying. The chain of
 * tokens around the ring orders every overwrite after the reads it must follow. With marks
 * (CUDA IPC) the receiver's GPU waits for the mark instead of its host, and steps go in pieces
 * (ring_pieces), so the device runs them back to back. Where `right` maps the right's buffer,
 * the last reduce-scatter step writes there too: the right's all-gather step 0 is saved. */
typedef struct {
  uint64_t region, offset, count, kind;
} ring_hello;

enum { RING_TOK_AG_DONE = 0x4001 };

/* Pieces a step goes in: one on host memory (each is a token the host waits for), on the GPU
 * one per COLL_RING_PIECE_BYTES of a block, at most COLL_RING_PIECES_MAX, as far as the
 * transport's marks and the tags below the AG-done token allow. FABENCH_RING_PIECES (read at
 * coll_comm_open) sets it. 64 MiB pieces were the best of 1 to 8 at every size measured
 * (docs/measurements.md, GPUs). */
static int ring_pieces(const coll_comm *c, size_t block_bytes) {
  int n = c->size, want = c->ring_pieces < COLL_RING_PIECES_MAX ? c->ring_pieces : COLL_RING_PIECES_MAX;
  if (want <= 0) {
    size_t k = c->tp->on_device ? block_bytes / COLL_RING_PIECE_BYTES : 1;
    want = k < 1 ? 1 : k > COLL_RING_PIECES_MAX ? COLL_RING_PIECES_MAX : (int)k;
  }
  /* a step token's tag stays below AG done's, and its mark below the transport's count */
  int most = (RING_TOK_AG_DONE - 2) / (2 * n - 2);
  if (c->tp->marks && (c->tp->marks - 2) / (2 * n - 2) < most) most = (c->tp->marks - 2) / (2 * n - 2);
  return want < most ? want : most > 1 ? most : 1;
}

/* Piece i of `pieces` of [off, off+len): cut at multiples of 64 elements, so that every piece of
 * an aligned block stays aligned for the kernels' 16-byte accesses. */
static void ring_piece(size_t off, size_t len, int pieces, int i, size_t *poff, size_t *plen) {
  size_t each = (len + (size_t)pieces - 1) / (size_t)pieces;
  each = (each + 63) & ~(size_t)63;
  size_t a = each * (size_t)i < len ? each * (size_t)i : len, b = a + each < len ? a + each : len;
  *poff = off + a, *plen = b - a;
}

static int ring_direct(coll_comm *c, char *buf, const char *left, char *right, const uint64_t where[2],
                       size_t count, coll_dtype dt, coll_op op, coll_err *e) {
  int n = c->size, r = c->rank, next = (r + 1) % n, prev = (r - 1 + n) % n;
  size_t es = coll_dtype_size(dt);
  int P = ring_pieces(c, count / (size_t)n * es);
  /* every token's send stays posted until the end: (2n - 2) P + 2 */
  coll_req *sq = coll_reqs(c, (size_t)((2 * n - 2) * P + 2), e);
  if (!sq) return -1;
  int ns = 0;
  uint64_t tok = 0, got = 0;
  /* Streaming stores only where FABENCH_RING_STREAM_BYTES asks (c->ring_stream_bytes): a
   * result the neighbour reads next then comes from memory, not out of this core's cache. Not
   * the default: the results land where this core has just read its inputs, so a streaming
   * store must first evict lines the core holds, and it lost by up to 4x (docs/measurements.md,
   * "The mapped ring's stores"). */
  int stream = count * es >= c->ring_stream_bytes && !c->tp->on_device; /* GPU: its own kernel */
  ring_hello mine = {where[0], where[1], count, (uint64_t)dt * 64 + (uint64_t)op}, theirs;
  coll_req rq;
  coll_transport *tp = c->tp;
  int mk = tp->marks >= (2 * n - 2) * P + 2; /* hello, the steps' pieces, AG done */
  /* token k (1 .. 2n-2), piece i: mark and tag 1 + (k-1) P + i; AG done the last mark */
#define RING_MARK(tk) ((tk) == RING_TOK_AG_DONE ? (2 * n - 2) * P + 1 : (int)(tk))
#define RING_TOK(k, i) ((uint32_t)(1 + ((k) - 1) * P + (i)))
#define RING_SEND(to, tk)                                              \
  ((mk && tp->ops->dev_mark(tp, RING_MARK(tk), e) != 0) ||             \
   coll_isend(c, (to), &tok, sizeof tok, coll_tag(c, (tk)), &sq[ns++], e))
#define RING_WAIT(from, tk)                                                                  \
  (coll_irecv(c, (from), &got, sizeof got, coll_tag(c, (tk)), &rq, e) ||                     \
   coll_waitall(c, &rq, 1, e) || (mk && tp->ops->dev_after(tp, (from), RING_MARK(tk), e) != 0))
  if (coll_irecv(c, prev, &theirs, sizeof theirs, coll_tag(c, 0), &rq, e) != 0 ||
      (mk && tp->ops->dev_mark(tp, 0, e) != 0) ||
      coll_isend(c, next, &mine, sizeof mine, coll_tag(c, 0), &sq[ns++], e) != 0 ||
      coll_waitall(c, &rq, 1, e) != 0)
    return -1;
  if (memcmp(&theirs, &mine, sizeof mine) != 0)
    return coll_fail(e,
                     "ring: rank %d (%s) passed a different buffer or call than rank %d (%s): "
                     "region %llu offset %llu count %llu, against region %llu offset %llu count "
                     "%llu (every rank must pass the same place of coll_mem_alloc memory)",
                     prev, coll_comm_host(c, prev), r, coll_comm_host(c, r),
                     (unsigned long long)theirs.region, (unsigned long long)theirs.offset,
                     (unsigned long long)theirs.count, (unsigned long long)mine.region,
                     (unsigned long long)mine.offset, (unsigned long long)mine.count);
  if (mk && tp->ops->dev_after(tp, prev, 0, e) != 0) return -1;
  for (int s = 0; s < n - 1; s++) {
    size_t boff, blen;
    coll_block(count, n, ring_mod(r - s - 1, n), &boff, &blen);
    for (int i = 0; i < P; i++) {
      size_t off, len;
      ring_piece(boff, blen, P, i, &off, &len);
      if (s > 0 && RING_WAIT(prev, RING_TOK(s, i))) return -1;
      if (right && s == n - 2)
        coll_creduce2(c, buf + off * es, right + off * es, left + off * es, len, dt, op, stream);
      else if (stream)
        coll_reduce_stream(buf + off * es, left + off * es, len, dt, op);
      else
        coll_creduce(c, buf + off * es, left + off * es, len, dt, op);
      if (RING_SEND(next, RING_TOK(s + 1, i))) return -1;
    }
  }
  for (int t = 0; t < n - 1; t++) {
    size_t boff, blen;
    coll_block(count, n, ring_mod(r - t, n), &boff, &blen);
    for (int i = 0; i < P; i++) {
      size_t off, len;
      ring_piece(boff, blen, P, i, &off, &len);
      if (RING_WAIT(prev, RING_TOK(t == 0 ? n - 1 : n + t, i))) return -1;
      if (right && t == 0)
        ; /* the left wrote it here in its last reduce-scatter step */
      else if (stream)
        coll_copy_stream(buf + off * es, left + off * es, len * es);
      else
        coll_ccopy(c, buf + off * es, left + off * es, len * es);
      if (t + 1 < n - 1 && RING_SEND(next, RING_TOK(n + t + 1, i))) return -1;
    }
  }
  if (RING_SEND(prev, RING_TOK_AG_DONE) || RING_WAIT(next, RING_TOK_AG_DONE)) return -1;
#undef RING_MARK
#undef RING_TOK
#undef RING_SEND
#undef RING_WAIT
  return coll_waitall(c, sq, ns, e);
}

/* The ring on a grouped transport (NCCL): each step's receive and send go as one group and the
 * reduction follows on the same stream, so the pipelining is NCCL's own (its channels and
 * slices) rather than ours: posting step s+1 before step s completes would put a receive in a
 * group whose matching send the neighbour issues only in a later group, and the groups of a
 * ring would then wait on each other for ever. Same blocks, same order as the pipelined ring. */
static int ring_steps(coll_comm *c, char *buf, size_t count, coll_dtype dt, coll_op op, coll_err *e) {
  int n = c->size, r = c->rank, next = (r + 1) % n, prev = (r - 1 + n) % n;
  size_t es = coll_dtype_size(dt);
  char *scr = coll_scratch(c, 0, (count + (size_t)n - 1) / (size_t)n * es, e);
  if (!scr) return -1;
  for (int s = 0; s < 2 * (n - 1); s++) {
    size_t soff, slen, roff, rlen;
    coll_block(count, n, ring_mod(r - s, n), &soff, &slen);
    coll_block(count, n, ring_mod(r - s - 1, n), &roff, &rlen);
    int rs = s < n - 1;
    coll_req q[2];
    int nq = 0;
    if (rlen && coll_irecv(c, prev, rs ? scr : buf + roff * es, rlen * es, coll_tag(c, (uint32_t)s), &q[nq++], e) != 0)
      return -1;
    if (slen && coll_isend(c, next, buf + soff * es, slen * es, coll_tag(c, (uint32_t)s), &q[nq++], e) != 0)
      return -1;
    if (coll_waitall(c, q, nq, e) != 0) return -1;
    if (rs && rlen) coll_creduce(c, buf + roff * es, scr, rlen, dt, op);
  }
  return 0;
}

int coll_ar_ring(coll_comm *c, void *vbuf, size_t count, coll_dtype dt, coll_op op, int param,
                 coll_err *e) {
  (void)param;
  char *buf = vbuf;
  int n = c->size, r = c->rank;
  size_t esize = coll_dtype_size(dt);
  uint64_t where[2];
  const char *left = count * esize >= COLL_RING_DIRECT_MIN
                         ? coll_peer_ptr(c, (r - 1 + n) % n, buf, count * esize, where)
                         : NULL;
  if (left) {
    uint64_t w[2];
    char *right = (char *)coll_peer_ptr(c, (r + 1) % n, buf, count * esize, w);
    return ring_direct(c, buf, left, right, where, count, dt, op, e);
  }
  if (count * esize * (size_t)n <= COLL_RING_SMALL) return ring_small(c, buf, count, dt, op, e);
  if (c->tp->grouped) return ring_steps(c, buf, count, dt, op, e);

  ring_plan p = {n, r, count, esize, c->chunk_bytes / esize ? c->chunk_bytes / esize : 1, c->ring_ramp};
  while (p.ramp > 0 && (p.ce >> p.ramp) == 0) p.ramp--;
  char *slots = coll_scratch(c, 0, COLL_RING_SLOTS * p.ce * esize, e);
  coll_req *reqs = coll_reqs(c, 3 * COLL_RING_SLOTS, e);
  if (!slots || !reqs) return -1;
  ring_flow f = {.c = c, .p = &p, .buf = buf, .slots = slots, .rq = reqs, .sq = reqs + COLL_RING_SLOTS,
                 .rcv = {.shift = 1}, .use = {.shift = 1}, .own = ring_nsub(&p, r),
                 .next = (r + 1) % n, .prev = (r - 1 + n) % n};
  if (ring_pump(&f, e) != 0) return -1;
  size_t off, len;
  while (!ring_at(&p, &f.use, &off, &len)) {
    if (coll_waitall(c, &f.rq[f.use.k % COLL_RING_SLOTS], 1, e) != 0) return -1;
    if (f.use.s < n - 1) coll_creduce(c, buf + off * esize, ring_slot(&f, f.use.k), len, dt, op);
    f.use.j++, f.use.k++;
    if (ring_pump(&f, e) != 0) return -1;
  }
  for (; f.reaped < f.snd.k; f.reaped++)
    if (coll_waitall(c, &f.sq[f.reaped % (2 * COLL_RING_SLOTS)], 1, e) != 0) return -1;
  return 0;
}
