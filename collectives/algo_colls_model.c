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
 *   all-to-all     pairwise (p-1) alpha + (p-1)/p n beta
 * Off a power of two rhd and rd run the ring, and are priced so. */
#include <math.h>

#include "algo_plan.h"

static int model_lg(int p) {
  int lg = 0;
  while ((1 << lg) < p) lg++;
  return lg;
}

double coll_colls_time(const coll_model *m, coll_kind k, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  if (!coll_colls_algo(k, a) || a.kind == COLL_ALGO_NATIVE) return INFINITY;
  if (a.kind == COLL_ALGO_AUTO) a = coll_colls_pick(m, k, p, bytes, chunk_bytes);
  if (p < 2 || bytes == 0) return 0;
  double n = (double)bytes, pr = (double)(p - 1) / p, lg = model_lg(p);
  int pow2 = (p & (p - 1)) == 0;
  if ((a.kind == COLL_ALGO_RHD || a.kind == COLL_ALGO_RD) && !pow2) a.kind = COLL_ALGO_RING;
  double t;
  switch (a.kind) {
  case COLL_ALGO_RING: t = (p - 1) * m->alpha + pr * n * (m->beta + (k == COLL_REDUCE_SCATTER ? m->gamma : 0)); break;
  case COLL_ALGO_RHD: t = lg * m->alpha + pr * n * (m->beta + m->gamma); break;
  case COLL_ALGO_RD: t = lg * m->alpha + pr * n * m->beta; break;
  /* the all-gather's Bruck sends (n-1)/n in all; the all-to-all's about half the blocks a step */
  case COLL_ALGO_BRUCK: t = lg * m->alpha + (k == COLL_ALLTOALL ? lg / 2 : pr) * n * m->beta; break;
  case COLL_ALGO_TREE: t = lg * (m->alpha + n * m->beta); break;
  case COLL_ALGO_CHAIN: {
    double c = chunk_bytes ? (double)chunk_bytes : COLL_CHUNK_DEFAULT, kc = ceil(n / c), u = n < c ? n : c;
    t = (p - 2 + kc) * (m->alpha + u * m->beta);
    break;
  }
  case COLL_ALGO_VDG: t = (lg + p - 1) * m->alpha + 2 * pr * n * m->beta; break;
  case COLL_ALGO_PAIRWISE: t = (p - 1) * m->alpha + pr * n * m->beta; break;
  default: return INFINITY;
  }
  return m->delta + t;
}

coll_algo coll_colls_pick(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes) {
  static const coll_algo_kind cand[] = {COLL_ALGO_RING, COLL_ALGO_RHD,   COLL_ALGO_RD,  COLL_ALGO_BRUCK,
                                        COLL_ALGO_TREE, COLL_ALGO_CHAIN, COLL_ALGO_VDG, COLL_ALGO_PAIRWISE};
  coll_algo best = {COLL_ALGO_NATIVE, 0};
  double bt = INFINITY;
  for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
    coll_algo a = {cand[i], 0};
    if (!coll_colls_algo(k, a)) continue;
    double t = coll_colls_time(m, k, a, p, bytes, chunk_bytes);
    if (t < bt) bt = t, best = a; /* ties: the earlier, the ring first */
  }
  return best;
}
