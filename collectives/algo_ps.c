/* Parameter-server all-reduce: the many-to-one baseline the ring is compared against.
 * param K servers (0 or 1: one, on rank 0) sit on ranks 0..K-1; the vector is sharded into K
 * blocks (coll_block) and server v owns block v. Every other rank pushes its copy of block v to
 * server v, the server reduces the p contributions and sends the result back to every rank.
 * A server moves (p-1) n/K bytes in and out, so with one server its link carries p/2 times what
 * a ring puts on any link: busbw falls as 2/p of the ring's as ranks grow.
 *
 * The shards go in chunks of c->chunk_bytes, in lockstep steps: in step s every rank pushes
 * chunk s of each shard and every server returns chunk s-1, reduced in rank order, so all ranks
 * end bit-identical. Pushes are posted before returns on both ends, which keeps the in-order
 * matching between two ranks that are both servers. */
#include "algo_plan.h"

int coll_ar_ps(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
               coll_err *e) {
  int p = c->size, me = c->rank;
  if (p < 2 || count == 0) return 0;
  int K = param < 1 ? 1 : param > p ? p : param;
  size_t es = coll_dtype_size(dt);
  size_t chunk = c->chunk_bytes / es ? c->chunk_bytes / es : 1;
  unsigned char *b = buf;
  int server = me < K;
  size_t my_off = 0, my_len = 0;
  if (server) coll_block(count, K, me, &my_off, &my_len);
  unsigned char *slots = NULL;
  if (server) {
    slots = coll_scratch(c, 0, chunk * es * (size_t)(p - 1), e);
    if (!slots) return -1;
  }
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2 * (K + p), e) != 0) return -1;
  size_t off0, len0;
  coll_block(count, K, 0, &off0, &len0); /* shard 0 is the largest */
  long nsteps = (long)((len0 + chunk - 1) / chunk) + 1;

  for (long s = 0; s < nsteps; s++) {
    uint32_t tag_push = coll_tag(c, (uint32_t)(2 * s)), tag_ret = coll_tag(c, (uint32_t)(2 * s + 1));
    /* pushes: chunk s. Every rank walks peers in rank order, as worker and as server. */
    size_t mine_first = (size_t)s * chunk;
    size_t mine_n = server && mine_first < my_len
                        ? (my_len - mine_first < chunk ? my_len - mine_first : chunk)
                        : 0;
    for (int q = 0, slot = 0; q < p; q++) {
      if (q == me) continue;
      if (q < K) { /* q is a server: push my copy of its chunk s */
        size_t off, len;
        coll_block(count, K, q, &off, &len);
        size_t first = (size_t)s * chunk;
        if (first < len) {
          size_t n = len - first < chunk ? len - first : chunk;
          if (coll_reqset_send(&rs, q, b + (off + first) * es, n * es, tag_push, e) != 0) return -1;
        }
      }
      if (server && coll_reqset_recv(&rs, q, slots + (size_t)slot * chunk * es, mine_n * es,
                                     tag_push, e) != 0)
        return -1;
      slot++;
    }
    /* returns: chunk s-1 */
    if (s >= 1) {
      size_t first = (size_t)(s - 1) * chunk;
      for (int q = 0; q < p; q++) {
        if (q == me) continue;
        if (q < K) { /* receive server q's reduced chunk s-1 of its shard */
          size_t off, len;
          coll_block(count, K, q, &off, &len);
          if (first < len) {
            size_t n = len - first < chunk ? len - first : chunk;
            if (coll_reqset_recv(&rs, q, b + (off + first) * es, n * es, tag_ret, e) != 0) return -1;
          }
        }
        if (server && first < my_len) {
          size_t n = my_len - first < chunk ? my_len - first : chunk;
          if (coll_reqset_send(&rs, q, b + (my_off + first) * es, n * es, tag_ret, e) != 0) return -1;
        }
      }
    }
    if (coll_reqset_wait(&rs, e) != 0) return -1;
    if (mine_n > 0)
      for (int slot = 0; slot < p - 1; slot++)
        coll_creduce(c, b + (my_off + mine_first) * es, slots + (size_t)slot * chunk * es, mine_n, dt, op);
  }
  return 0;
}
