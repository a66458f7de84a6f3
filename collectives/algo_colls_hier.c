/* Two-level broadcast and all-to-all(v) (hier) over the hosts of the layout (coll_layout_plan:
 * node_order lists the ranks host by host), for hosts of any rank counts. Each host has one
 * leader; only leaders talk across hosts (on c), the rest goes inside the host (over c->intra
 * where there is one), so fewer, larger messages cross the slower links.
 *   broadcast: the leader of the root's host is the root itself, elsewhere a host's first rank.
 *     1. the leaders broadcast among themselves (tree, chain or vdg, the cheapest for H ranks
 *        by c's cost model); 2. each leader broadcasts inside its host (the same pick for its L
 *        ranks on the intra model), or, where the host's ranks map each other's buffer (ucx),
 *        each rank copies the leader's copy in place between two rounds of tokens.
 *   all-to-all(v): the leader is a host's first rank. 1. each rank sends the leader its counts
 *     (what it sends and receives per peer) and its send data for other hosts packed in node
 *     order, then exchanges its parts for its own host's ranks with them directly (pairwise);
 *     2. the leaders exchange per pair of hosts everything one host's ranks send the other's
 *     (pairwise, H - 1 steps); 3. each leader hands each of its ranks what it receives from
 *     other hosts, packed in node order, which the rank unpacks at its displacements.
 *     Zero-length parts move nothing.
 * Each phase has its own seq (base, base + 1, base + 2), so phases never match each other's
 * messages. */
#include <stdlib.h>
#include <string.h>

#include "algo_plan.h"

static int ch_flush(coll_comm *c, coll_err *e) {
  return c->tp->ops->flush ? c->tp->ops->flush(c->tp, c->timeout_ms, e) : 0;
}

/* Inside the host's view (leader `lead`): every rank copies the leader's mapped copy in place,
 * 0; or 1 where the ranks did not pass mapped memory (then messages run: GPU memory always,
 * coll_host_ptr mapping host memory only); -1 failed. */
static int bh_mapped(coll_comm *in, void *buf, size_t bytes, int lead, coll_err *e) {
  int rc = coll_mapped_same(in, buf, bytes, 0, e);
  if (rc == -2)
    return coll_fail(e, "rank %d (%s): hier broadcast: ranks on this host passed different places of mapped memory, "
                     "or some mapped memory and some not", in->world_rank, in->hosts[in->world_rank]);
  if (rc != 1) return rc == 0 ? 1 : -1;
  if (in->rank != lead) {
    uint64_t w[2];
    const void *src = coll_host_ptr(in, lead, buf, bytes, w);
    if (!src) return coll_fail(e, "rank %d: internal: hier lost its mapping of rank %d", in->world_rank, in->view[lead]);
    memcpy(buf, src, bytes);
  }
  unsigned char tok = 1, toks[COLL_MAPPED_MAX];
  return coll_tokens(in, &tok, toks, 1, 1, e); /* nobody reads the leader's copy after this */
}

int coll_bcast_hier(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e) {
  const int *order = c->node_order, *start = c->host_start;
  int H = c->nhosts, h = c->node_host, L = start[h + 1] - start[h], j = c->node_pos - start[h];
  int rpos = 0, hr = 0;
  while (order[rpos] != root) rpos++;
  while (start[hr + 1] <= rpos) hr++;
  for (int g = 0; g < H; g++) c->group[g] = g == hr ? root : order[start[g]];
  int lead = h == hr ? rpos - start[h] : 0; /* local index of this host's leader */
  uint32_t base = c->seq;
  coll_comm *in = c->intra ? c->intra : c;
  int rc = in != c ? ch_flush(c, e) : 0; /* what an earlier call on c left buffered */
  if (rc == 0 && H > 1 && j == lead) { /* 1 */
    c->seq = base;
    coll_algo_kind k = coll_colls_pick_flat(&c->model, COLL_BCAST, H, bytes, c->chunk_bytes).kind;
    coll_view_set(c, c->group, H, h);
    rc = coll_bcast_flat(c, k, buf, bytes, hr, e);
    coll_view_clear(c);
    if (rc == 0 && in != c) rc = ch_flush(c, e);
  }
  if (rc == 0 && L > 1) { /* 2 */
    in->seq = base + 1;
    coll_view_set(in, order + start[h], L, j);
    rc = in->tp->maps ? bh_mapped(in, buf, bytes, lead, e) : 1;
    if (rc == 1) {
      coll_algo_kind k = coll_colls_pick_flat(&in->model, COLL_BCAST, L, bytes, in->chunk_bytes).kind;
      rc = coll_bcast_flat(in, k, buf, bytes, lead, e);
    }
    coll_view_clear(in);
    if (rc == 0 && in != c) rc = ch_flush(in, e); /* the next call may start on c */
  }
  c->seq = in->seq = base + 2;
  return rc;
}

/* ---- all-to-all(v) ---- */

/* What one call of the leader keeps: its host's counts (row i of its L ranks: n send counts,
 * then n receive counts, by world rank) and the offsets derived from them, for the parts that
 * cross hosts (those inside the host go between its ranks directly). */
typedef struct {
  size_t *cnt;  /* L x 2n */
  size_t *poff; /* L x n: where rank i's part for node position pos starts in i's packed data */
  size_t *goff; /* L + 1: rank i's packed data in the gathered buffer */
  size_t *roff; /* L + 1: rank i's received data in the buffer handed out */
  size_t *hoff; /* 2 (H + 1): per host, the outgoing and the incoming parts */
} ah_plan;

static void ah_plan_free(ah_plan *p) {
  free(p->cnt), free(p->poff), free(p->goff), free(p->roff), free(p->hoff);
}

/* The counts of local rank i: to world rank q (S) and from world rank q (R). */
static size_t ah_s(const ah_plan *p, int n, int i, int q) { return p->cnt[(size_t)i * 2 * n + (size_t)q]; }
static size_t ah_r(const ah_plan *p, int n, int i, int q) { return p->cnt[(size_t)i * 2 * n + (size_t)n + (size_t)q]; }

/* Is node position pos on this rank's host? */
static int ah_here(const coll_comm *c, int pos) {
  return pos >= c->host_start[c->node_host] && pos < c->host_start[c->node_host + 1];
}

/* Offsets from the counts: the gathered and handed-out buffers (rank by rank), each rank's
 * packed parts (node order, other hosts only), and per other host g the outgoing part (for each
 * of g's ranks in node order, this host's ranks in turn) and the incoming one (for each of this
 * host's ranks, g's ranks in turn); this host's own parts are empty. */
static void ah_offsets(ah_plan *p, const coll_comm *c, int n, int L) {
  int H = c->nhosts;
  const int *order = c->node_order, *start = c->host_start;
  size_t *out = p->hoff, *inc = p->hoff + H + 1;
  p->goff[0] = p->roff[0] = 0;
  for (int i = 0; i < L; i++) {
    size_t s = 0, r = 0;
    for (int pos = 0; pos < n; pos++) {
      p->poff[(size_t)i * n + pos] = s;
      if (ah_here(c, pos)) continue;
      s += ah_s(p, n, i, order[pos]);
      r += ah_r(p, n, i, order[pos]);
    }
    p->goff[i + 1] = p->goff[i] + s;
    p->roff[i + 1] = p->roff[i] + r;
  }
  out[0] = inc[0] = 0;
  for (int g = 0; g < H; g++) {
    size_t so = 0, ri = 0;
    for (int pos = start[g]; pos < start[g + 1] && g != c->node_host; pos++)
      for (int i = 0; i < L; i++) so += ah_s(p, n, i, order[pos]), ri += ah_r(p, n, i, order[pos]);
    out[g + 1] = out[g] + so;
    inc[g + 1] = inc[g] + ri;
  }
}

/* This rank's send data for other hosts packed by destination in node order (n: the world's
 * size, whatever view c is in). */
static void ah_pack(coll_comm *c, int n, unsigned char *dst, const unsigned char *src, const size_t *sc,
                    const size_t *sd, size_t es) {
  for (int pos = 0; pos < n; pos++) {
    int q = c->node_order[pos];
    if (ah_here(c, pos)) continue;
    if (sc[q]) coll_ccopy(c, dst, src + sd[q] * es, sc[q] * es);
    dst += sc[q] * es;
  }
}

/* What this rank receives from other hosts, packed by source in node order, to its
 * displacements. */
static void ah_unpack(coll_comm *c, int n, unsigned char *dst, const unsigned char *src, const size_t *rc,
                      const size_t *rd, size_t es) {
  for (int pos = 0; pos < n; pos++) {
    int p = c->node_order[pos];
    if (ah_here(c, pos)) continue;
    if (rc[p]) coll_ccopy(c, dst + rd[p] * es, src, rc[p] * es);
    src += rc[p] * es;
  }
}

/* The parts between this host's ranks, straight between their buffers, on the host's view of in:
 * pairwise (step s: to local rank j + s, from j - s), this rank's own part a copy. Tags from
 * step 2 (0 and 1 are the leader's counts and data). */
static int ah_local(coll_comm *c, coll_comm *in, const unsigned char *sb, const size_t *sc, const size_t *sd,
                    unsigned char *rb, const size_t *rcn, const size_t *rd, size_t es, coll_err *e) {
  const int *mine = c->node_order + c->host_start[c->node_host];
  int L = in->size, j = in->rank, me = mine[j];
  if (sc[me]) coll_ccopy(c, rb + rd[me] * es, sb + sd[me] * es, sc[me] * es);
  coll_reqset rs;
  if (L > 1 && coll_reqset_init(&rs, in, 2, e) != 0) return -1;
  for (int s = 1; s < L; s++) {
    int to = mine[(j + s) % L], from = mine[(j - s + L) % L];
    uint32_t tag = coll_tag(in, 2 + (uint32_t)s);
    if (coll_reqset_recv(&rs, (j - s + L) % L, rb + rd[from] * es, rcn[from] * es, tag, e) != 0 ||
        coll_reqset_send(&rs, (j + s) % L, sb + sd[to] * es, sc[to] * es, tag, e) != 0 ||
        coll_reqset_wait(&rs, e) != 0)
      return -1;
  }
  return 0;
}

/* The leader's phases: 1's receives into g (gathered), then its parts inside the host, 2 (o:
 * outgoing by host, ib: incoming by host) and 3 (x: handed out by rank), the leader's own part
 * unpacked at once. */
static int ah_leader(coll_comm *c, coll_comm *in, const void *sendbuf, const size_t *sc, const size_t *sd,
                     void *recvbuf, const size_t *rcn, const size_t *rd, size_t es, uint32_t base, coll_err *e) {
  const int *order = c->node_order, *start = c->host_start;
  int n = c->size, H = c->nhosts, h = c->node_host, L = start[h + 1] - start[h], rc = 0;
  ah_plan p = {calloc((size_t)L * 2 * (size_t)n, sizeof(size_t)), calloc((size_t)L * (size_t)n, sizeof(size_t)),
               calloc((size_t)L + 1, sizeof(size_t)), calloc((size_t)L + 1, sizeof(size_t)),
               calloc(2 * ((size_t)H + 1), sizeof(size_t))};
  if (!p.cnt || !p.poff || !p.goff || !p.roff || !p.hoff) {
    ah_plan_free(&p);
    return coll_fail(e, "rank %d: out of memory", c->rank);
  }
  memcpy(p.cnt, sc, (size_t)n * sizeof(size_t));
  memcpy(p.cnt + n, rcn, (size_t)n * sizeof(size_t));
  coll_reqset rs;
  in->seq = base; /* 1: the counts, then the data */
  coll_view_set(in, order + start[h], L, 0);
  rc = coll_reqset_init(&rs, in, 2 * L, e);
  for (int i = 1; i < L && rc == 0; i++)
    rc = coll_reqset_recv(&rs, i, p.cnt + (size_t)i * 2 * n, 2 * (size_t)n * sizeof(size_t), coll_tag(in, 0), e);
  if (rc == 0) rc = coll_reqset_wait(&rs, e);
  unsigned char *g = NULL, *o = NULL, *ib = NULL, *x = NULL;
  if (rc == 0) {
    ah_offsets(&p, c, n, L);
    size_t tg = p.goff[L] * es, tr = p.roff[L] * es;
    g = coll_scratch(c, 0, 2 * tg + 64, e);
    ib = coll_scratch(c, 1, 2 * tr + 64, e);
    if (!g || !ib) rc = -1;
    else o = g + tg, x = ib + tr;
  }
  if (rc == 0) {
    ah_pack(c, n, g, sendbuf, sc, sd, es);
    for (int i = 1; i < L && rc == 0; i++)
      rc = coll_reqset_recv(&rs, i, g + p.goff[i] * es, (p.goff[i + 1] - p.goff[i]) * es, coll_tag(in, 1), e);
    if (rc == 0) rc = coll_reqset_wait(&rs, e);
  }
  if (rc == 0) rc = ah_local(c, in, sendbuf, sc, sd, recvbuf, rcn, rd, es, e);
  coll_view_clear(in);
  if (rc == 0 && in != c) rc = ch_flush(in, e);
  const size_t *out = p.hoff, *inc = p.hoff + H + 1;
  if (rc == 0) { /* 2: outgoing by host (none to this one), then pairwise between the leaders */
    unsigned char *w = o;
    for (int pos = 0; pos < n; pos++)
      for (int i = 0; i < L && !ah_here(c, pos); i++) {
        size_t len = ah_s(&p, n, i, order[pos]) * es;
        if (len) coll_ccopy(c, w, g + (p.goff[i] + p.poff[(size_t)i * n + pos]) * es, len);
        w += len;
      }
    c->seq = base + 1;
    coll_view_set(c, c->group, H, h);
    if (H > 1) rc = coll_reqset_init(&rs, c, 2, e);
    for (int s = 1; s < H && rc == 0; s++) {
      int to = (h + s) % H, from = (h - s + H) % H;
      if (coll_reqset_recv(&rs, from, ib + inc[from] * es, (inc[from + 1] - inc[from]) * es, coll_tag(c, (uint32_t)s), e) != 0 ||
          coll_reqset_send(&rs, to, o + out[to] * es, (out[to + 1] - out[to]) * es, coll_tag(c, (uint32_t)s), e) != 0 ||
          coll_reqset_wait(&rs, e) != 0)
        rc = -1;
    }
    coll_view_clear(c);
    if (rc == 0 && in != c) rc = ch_flush(c, e);
  }
  if (rc == 0) { /* 3: host g's part holds, for each of this host's ranks t in turn, g's ranks' data */
    size_t cur[COLL_MAPPED_MAX], *curs = H <= COLL_MAPPED_MAX ? cur : malloc((size_t)H * sizeof *curs);
    if (!curs) rc = coll_fail(e, "rank %d: out of memory", c->rank);
    for (int gg = 0; gg < H && curs; gg++) curs[gg] = inc[gg];
    for (int t = 0; t < L && curs; t++) {
      unsigned char *w = x + p.roff[t] * es;
      for (int gg = 0; gg < H; gg++)
        for (int pos = start[gg]; pos < start[gg + 1] && gg != h; pos++) {
          size_t len = ah_r(&p, n, t, order[pos]);
          if (len) coll_ccopy(c, w, ib + curs[gg] * es, len * es);
          w += len * es, curs[gg] += len;
        }
    }
    if (curs != cur) free(curs);
  }
  if (rc == 0) {
    in->seq = base + 2;
    coll_view_set(in, order + start[h], L, 0);
    rc = coll_reqset_init(&rs, in, L, e);
    for (int t = 1; t < L && rc == 0; t++)
      rc = coll_reqset_send(&rs, t, x + p.roff[t] * es, (p.roff[t + 1] - p.roff[t]) * es, coll_tag(in, 0), e);
    if (rc == 0) ah_unpack(c, n, recvbuf, x, rcn, rd, es);
    if (rc == 0) rc = coll_reqset_wait(&rs, e);
    coll_view_clear(in);
  }
  ah_plan_free(&p);
  return rc;
}

/* Another rank of the host: its counts and data for other hosts to the leader, its parts inside
 * the host, and what it receives from other hosts back from the leader. */
static int ah_member(coll_comm *c, coll_comm *in, const void *sendbuf, const size_t *sc, const size_t *sd,
                     void *recvbuf, const size_t *rcn, const size_t *rd, size_t es, uint32_t base, coll_err *e) {
  const int *order = c->node_order, *start = c->host_start;
  int n = c->size, h = c->node_host, L = start[h + 1] - start[h], j = c->node_pos - start[h];
  size_t ts = 0, tr = 0;
  for (int pos = 0; pos < n; pos++)
    if (!ah_here(c, pos)) ts += sc[order[pos]], tr += rcn[order[pos]];
  size_t *cnt = malloc(2 * (size_t)n * sizeof *cnt);
  unsigned char *pk = coll_scratch(c, 0, ts * es + 64, e), *got = coll_scratch(c, 1, tr * es + 64, e);
  if (!cnt) return coll_fail(e, "rank %d: out of memory", c->rank);
  if (!pk || !got) return free(cnt), -1;
  memcpy(cnt, sc, (size_t)n * sizeof *cnt);
  memcpy(cnt + n, rcn, (size_t)n * sizeof *cnt);
  ah_pack(c, n, pk, sendbuf, sc, sd, es);
  coll_reqset rs;
  in->seq = base;
  coll_view_set(in, order + start[h], L, j);
  int rc = coll_reqset_init(&rs, in, 2, e);
  if (rc == 0) rc = coll_reqset_send(&rs, 0, cnt, 2 * (size_t)n * sizeof *cnt, coll_tag(in, 0), e);
  if (rc == 0) rc = coll_reqset_send(&rs, 0, pk, ts * es, coll_tag(in, 1), e);
  if (rc == 0) rc = coll_reqset_wait(&rs, e);
  if (rc == 0) rc = ah_local(c, in, sendbuf, sc, sd, recvbuf, rcn, rd, es, e);
  in->seq = base + 2;
  if (rc == 0) rc = coll_reqset_init(&rs, in, 2, e);
  if (rc == 0) rc = coll_reqset_recv(&rs, 0, got, tr * es, coll_tag(in, 0), e);
  if (rc == 0) rc = coll_reqset_wait(&rs, e);
  coll_view_clear(in);
  if (rc == 0) ah_unpack(c, n, recvbuf, got, rcn, rd, es);
  free(cnt);
  return rc;
}

int coll_a2a_hier(coll_comm *c, const void *sendbuf, const size_t *scounts, const size_t *sdispls, void *recvbuf,
                  const size_t *rcounts, const size_t *rdispls, size_t es, coll_err *e) {
  const int *order = c->node_order, *start = c->host_start;
  int H = c->nhosts, j = c->node_pos - start[c->node_host];
  for (int g = 0; g < H; g++) c->group[g] = order[start[g]];
  uint32_t base = c->seq;
  coll_comm *in = c->intra ? c->intra : c;
  int rc = in != c ? ch_flush(c, e) : 0; /* what an earlier call on c left buffered */
  if (rc == 0)
    rc = j == 0 ? ah_leader(c, in, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, es, base, e)
                : ah_member(c, in, sendbuf, scounts, sdispls, recvbuf, rcounts, rdispls, es, base, e);
  if (rc == 0 && in != c) rc = ch_flush(in, e); /* the next call may start on c */
  c->seq = in->seq = base + 3;
  return rc;
}
