/* The other collectives' cost formulas (alpha-beta-gamma, one level) and auto's pick by them.
 * p ranks, n bytes (the whole vector for reduce-scatter and all-gather, the message for a
 * broadcast, what one rank sends in all for an all-to-all), lg = ceil(log2 p):
 *   reduce-scatter ring   (p-1) alpha + (p-1)/p n (beta + gamma)
 *                  rhd    lg alpha    + (p-1)/p n (beta + gamma)        (p a power of two)
 *   all-gather     ring   (p-1) alpha + (p-1)/p n beta
 *                  rd     lg alpha    + (p-1)/p n beta                  (p a power of two)
 *                  bruck  lg alpha    + (p-1)/p n beta
 *   broadcast      tree   lg (alpha + n beta)
 *                  chain  (p - 2 + k) (alpha + c beta), k chunks of c
 *                  vdg    (lg + p - 1) alpha + 2 (p-1)/p n beta
 *                  linear (p-1) (alpha + n beta): the root posts every send and its link carries
 *                         every copy (the sends overlap on the wire, not in the core that posts
 *                         them); never below the tree's, so auto leaves it out
 *   all-to-all     pairwise (p-1) alpha + (p-1)/p n beta
 *                  linear   the same: the same messages on the same links, posted by the same
 *                           cores; a tie, which auto gives pairwise
 * Off a power of two rhd and rd run the ring, and are priced so.
 * hier, by level, on H = m->hosts hosts (1 where unset) of L = ceil(p/H) ranks, alpha and beta
 * alike on both levels (one fabric's model):
 *   broadcast      B(H) + B(L), B(q) the cheapest one-level broadcast of n among q ranks (what
 *                  hier runs at each level; 0 for q < 2)
 *   all-to-all     b = n/p to each peer: the leader gathers what its L-1 ranks send other hosts,
 *                  (L-1) alpha + (L-1)(p-L) b beta, and hands out as much; the ranks of a host
 *                  exchange their parts pairwise, (L-1) (alpha + b beta); the leaders pairwise,
 *                  (H-1) alpha + L (p-L) b beta: in all
 *                  (3 (L-1) + H-1) alpha + ((3L-2)(p-L) + L-1) b beta
 * auto considers hier where m->hosts > 1 (coll_colls_auto sets it from the communicator). */
#include <math.h>
#include <stdlib.h>

#include "algo_plan.h"

static int model_lg(int p) {
  int lg = 0;
  while ((1 << lg) < p) lg++;
  return lg;
}

static coll_algo cm_pick(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes, int hier);

/* The formulas (auto resolved). */
static double cm_time(const coll_model *m, coll_kind k, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  if (p < 2 || bytes == 0) return 0;
  double n = (double)bytes, pr = (double)(p - 1) / p, lg = model_lg(p);
  int pow2 = (p & (p - 1)) == 0;
  if ((a.kind == COLL_ALGO_RHD || a.kind == COLL_ALGO_RD) && !pow2) a.kind = COLL_ALGO_RING;
  switch (a.kind) {
  case COLL_ALGO_RING: return (p - 1) * m->alpha + pr * n * (m->beta + (k == COLL_REDUCE_SCATTER ? m->gamma : 0));
  case COLL_ALGO_RHD: return lg * m->alpha + pr * n * (m->beta + m->gamma);
  case COLL_ALGO_RD: return lg * m->alpha + pr * n * m->beta;
  /* the all-gather's Bruck sends (n-1)/n in all; the all-to-all's about half the blocks a step */
  case COLL_ALGO_BRUCK: return lg * m->alpha + (k == COLL_ALLTOALL ? lg / 2 : pr) * n * m->beta;
  case COLL_ALGO_TREE: return lg * (m->alpha + n * m->beta);
  case COLL_ALGO_CHAIN: {
    double c = chunk_bytes ? (double)chunk_bytes : COLL_CHUNK_DEFAULT, kc = ceil(n / c), u = n < c ? n : c;
    return (p - 2 + kc) * (m->alpha + u * m->beta);
  }
  case COLL_ALGO_VDG: return (lg + p - 1) * m->alpha + 2 * pr * n * m->beta;
  case COLL_ALGO_PAIRWISE: return (p - 1) * m->alpha + pr * n * m->beta;
  case COLL_ALGO_LINEAR:
    if (k == COLL_BCAST) return (p - 1) * (m->alpha + n * m->beta);
    return (p - 1) * m->alpha + pr * n * m->beta;
  case COLL_ALGO_HIER: {
    int H = m->hosts > 1 ? (m->hosts < p ? m->hosts : p) : 1, L = (p + H - 1) / H;
    if (k == COLL_BCAST)
      return cm_time(m, k, cm_pick(m, k, H, bytes, chunk_bytes, 0), H, bytes, chunk_bytes) +
             cm_time(m, k, cm_pick(m, k, L, bytes, chunk_bytes, 0), L, bytes, chunk_bytes);
    if (k == COLL_ALLTOALL)
      return (3 * (L - 1) + (H - 1)) * m->alpha + ((3.0 * L - 2) * (p - L) + (L - 1)) * (n / p) * m->beta;
    return INFINITY;
  }
  default: return INFINITY;
  }
}

double coll_colls_time(const coll_model *m, coll_kind k, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  if (!coll_colls_algo(k, a) || a.kind == COLL_ALGO_NATIVE) return INFINITY;
  if (a.kind == COLL_ALGO_AUTO) a = coll_colls_pick(m, k, p, bytes, chunk_bytes);
  if (p < 2 || bytes == 0) return 0;
  double t = cm_time(m, k, a, p, bytes, chunk_bytes);
  return isfinite(t) ? t : INFINITY;
}

/* hier last, and only where hier is 1 and the model has several hosts: ties go to one level. */
static coll_algo cm_pick(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes, int hier) {
  static const coll_algo_kind cand[] = {COLL_ALGO_RING, COLL_ALGO_RHD,   COLL_ALGO_RD,  COLL_ALGO_BRUCK,
                                        COLL_ALGO_TREE, COLL_ALGO_CHAIN, COLL_ALGO_VDG, COLL_ALGO_PAIRWISE,
                                        COLL_ALGO_LINEAR, COLL_ALGO_HIER};
  coll_algo best = {COLL_ALGO_NATIVE, 0};
  double bt = INFINITY;
  for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
    coll_algo a = {cand[i], 0};
    if (!coll_colls_algo(k, a) || (a.kind == COLL_ALGO_HIER && (!hier || m->hosts < 2))) continue;
    double t = cm_time(m, k, a, p, bytes, chunk_bytes);
    if (t < bt) bt = t, best = a; /* ties: the earlier, the ring first */
  }
  return best;
}

coll_algo coll_colls_pick(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes) {
  return cm_pick(m, k, p, bytes, chunk_bytes, 1);
}

coll_algo coll_colls_pick_flat(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes) {
  return cm_pick(m, k, p, bytes, chunk_bytes, 0);
}

coll_algo coll_colls_auto(const coll_comm *c, coll_kind k, size_t bytes) {
  /* a broadcast across hosts with several ranks on some: hier, as the all-reduce's auto (the
   * formulas price both levels alike, so they tie it with the flat tree; crossing each host
   * boundary once is what the slower links reward) */
  int several = c->nhosts > 1 && c->lmax > 1;
  if (k == COLL_BCAST && several) return (coll_algo){COLL_ALGO_HIER, 0};
  if (!several) return coll_colls_pick_flat(&c->model, k, c->size, bytes, c->chunk_bytes);
  if (c->model.hosts == c->nhosts) return coll_colls_pick(&c->model, k, c->size, bytes, c->chunk_bytes);
  coll_model *m = malloc(sizeof *m);
  if (!m) return coll_colls_pick_flat(&c->model, k, c->size, bytes, c->chunk_bytes);
  *m = c->model;
  m->hosts = c->nhosts;
  coll_algo a = coll_colls_pick(m, k, c->size, bytes, c->chunk_bytes);
  free(m);
  return a;
}
