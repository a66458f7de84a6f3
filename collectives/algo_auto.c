/* `auto`: picks the all-reduce algorithm per size from an alpha-beta-gamma cost model.
 *
 * Notation: p ranks, n bytes per rank, alpha = seconds per message (start-up), beta = seconds
 * per byte on one link, gamma = seconds per byte reduced, lg = log2, p' = 2^floor(lg p),
 * f = 1 when p is not a power of two (the MPICH fold), else 0; c = the pipelining unit
 * (c->chunk_bytes), H = ceil(lg p) the height of our binary trees.
 *
 * Each algorithm is counted at its busiest rank: M messages in sequence, L bytes in sequence on
 * its link (each way), R bytes it reduces; its time is
 *   delta + M alpha + L (beta + (s - 1) beta_cpu) + R s gamma + x s (L + R) mem
 * with s = max(1, ranks per host / cores) (a host's ranks share its cores: moving bytes on one
 * host and reducing are CPU work) and x = max(0, 1 - cache / (2 x ranks per host x n)) (beyond
 * the cache every byte comes from memory). Per algorithm (M; L; R):
 *   ring  (Patarasuk-Yuan 2009; Thakur-Rabenseifner-Gropp 2005), pipelined: each of the
 *         2(p-1) steps sends its block of n/p bytes as sub-chunks of c, whose start-ups overlap
 *         the previous sub-chunk's transfer, so only one start-up per step shows:
 *         2(p-1); 2 (p-1)/p n; (p-1)/p n
 *         algo_ring.c all-gathers whole vectors when p n <= 64 KiB (its COLL_RING_SMALL):
 *         p-1; (p-1) n; (p-1) n
 *         on memory every rank maps (m->mapped, from 16 KiB) it reads its left neighbour's
 *         block in place: reduce-scatter reduces from it, all-gather copies it, tokens only:
 *         2(p-1); (p-1)/p n; (p-1)/p n
 *   rhd   (Rabenseifner, TRG 2005): reduce-scatter by recursive halving + all-gather by
 *         recursive doubling, plus the fold's two whole-vector messages (f = 1 if p is not a
 *         power of two): 2 lg p' + 2f; 2 (p'-1)/p' n + 2 f n; (p'-1)/p' n + f n
 *   rd    (TRG 2005) lg p' + 2f; lg p' n + 2 f n; lg p' n + f n
 *   tree  (pipelined reduce + broadcast; Sanders-Speck-Traeff 2009, NCCL's tree model): k =
 *         ceil(n/c) chunks of u = min(n, c) bytes in k + 2H - 1 lockstep steps (algo_tree.c),
 *         H the root's height; the busiest rank moves d chunks each way per step (its children
 *         and parent: 3 for an interior node, 1 on 2 ranks where the root has one child) and
 *         reduces r (its children): (k + 2H - 1); (k + 2H - 1) d u; (k + 2H - 1) r u
 *         ~ 3 n beta for large n and p
 *   dtree two trees each carrying n/2 (k = ceil(n/2c), u = min(n/2, c)); d and r summed over
 *         both trees (interior in one, a leaf in the other: 4 and 2 for large p; 2 and 1 on 2
 *         ranks) ~ 2 n beta for large n. d, r and H come from coll_btree itself up to 64 ranks.
 *   ps:K  (not a candidate: the many-to-one baseline) shards of n/K in chunks of u = min(n/K, c),
 *         k + 1 steps; a server moves (p-1)u of pushes and (K-1)u of other servers' returns
 *         each way per step, reducing (p-1)u:
 *         k + 1; (k + 1) (p + K - 2) u; (k + 1) (p - 1) u                  ~ (p-1) n beta, K = 1
 *
 * So for small n the alpha terms rule and rd (lg p messages) or rhd (2 lg p, but less data)
 * win; for large n the beta terms rule and ring and rhd (2 (p-1)/p n, the lower bound) win over
 * dtree (2n) and tree (3n); the pipelined trees pay 2H - 1 extra steps of alpha, which matters
 * only in the middle. Every formula adds delta, a cost per call that no algorithm escapes
 * (on an oversubscribed host: waking the ranks; always: their skew at the start). beta is a
 * byte's cost with a core per rank; beta_cpu what each further rank per core adds: on one host
 * (copies are CPU work) about beta itself, on an emulated or real link about 0.
 * A communicator's model is the fitted one it was opened with
 * (coll_comm_opts.model, from `fabench fit`), else its transport's order-of-magnitude
 * default. */
#include <math.h>
#include <string.h>

#include "algo_plan.h"

void coll_model_default(coll_model *m, coll_transport_kind kind) {
  /* Orders of magnitude on this project's 2-core test machine: kernel TCP costs tens of
   * microseconds per message, UCX and MPI on one host (shared memory) a few. */
  *m = (coll_model){0};
  m->gamma = 1.0 / 4e9;
  switch (kind) {
  case COLL_TCP:
    m->alpha = 40e-6;
    m->beta = 1.0 / 1.5e9;
    break;
  case COLL_UCX:
  case COLL_MPI:
    m->alpha = 3e-6;
    m->beta = 1.0 / 4e9;
    break;
  case COLL_NCCL:
    m->alpha = 10e-6;
    m->beta = 1.0 / 20e9;
    m->gamma = 1.0 / 200e9;
    break;
  default:
    m->alpha = 50e-6;
    m->beta = 1.0 / 1e9;
    break;
  }
}

static int ceil_lg(int p) {
  int h = 0;
  while ((1 << h) < p) h++;
  return h;
}

/* One call's work at its busiest rank: messages in sequence (start-ups), bytes in sequence on
 * its link (each way), bytes it reduces. */
typedef struct {
  double msgs, link, red;
} model_terms;

/* The busiest rank of our binary trees (algo_tree.c): per lockstep step it moves `deg` chunks
 * each way (a chunk from each child and one from the parent coming down, one to the parent and
 * one to each child going down) and reduces `red`; H the greatest root height. Summed over the
 * trees used (tree: 1, dtree: 2). Up to 64 ranks from the real shapes (2 ranks: the root has one
 * child, so 1 chunk each way, not 3); beyond, the large-p values. */
static void model_tree_shape(int p, int ntrees, double *deg, double *red, int *H) {
  enum { MAXP = 64 };
  if (p > MAXP) {
    *deg = ntrees == 1 ? 3 : 4;
    *red = 2;
    *H = ceil_lg(p);
    return;
  }
  int parent[MAXP], child[2 * MAXP], hgt[MAXP], dep[MAXP], d[MAXP] = {0}, rd[MAXP] = {0};
  *H = 0;
  for (int t = 0; t < ntrees; t++) {
    int root = coll_btree(parent, child, p, t);
    coll_btree_levels(hgt, dep, parent, child, p);
    if (hgt[root] > *H) *H = hgt[root];
    for (int r = 0; r < p; r++) {
      int nc = (child[2 * r] >= 0) + (child[2 * r + 1] >= 0);
      d[r] += nc + (parent[r] >= 0);
      rd[r] += nc;
    }
  }
  *deg = *red = 0;
  for (int r = 0; r < p; r++)
    if (d[r] > *deg || (d[r] == *deg && rd[r] > *red)) *deg = d[r], *red = rd[r];
}

static model_terms model_algo_terms(coll_algo a, int p, double n, double c, int mapped) {
  int pof2 = 1, lg = 0;
  while (pof2 * 2 <= p) {
    pof2 *= 2;
    lg++;
  }
  int f = pof2 != p; /* the fold: one whole vector in, reduced, and the result back out */
  double fr = (double)(pof2 - 1) / pof2, pr = (double)(p - 1) / p;
  switch (a.kind) {
  case COLL_ALGO_RING:
    if (mapped && n >= 16.0 * 1024) /* reads the left's block: reduce in place, copy in place */
      return (model_terms){2.0 * (p - 1), pr * n, pr * n};
    if (p * n <= 64.0 * 1024) return (model_terms){p - 1.0, (p - 1) * n, (p - 1) * n};
    return (model_terms){2.0 * (p - 1), 2 * pr * n, pr * n};
  case COLL_ALGO_RHD: return (model_terms){2.0 * lg + 2 * f, 2 * fr * n + 2 * f * n, fr * n + f * n};
  case COLL_ALGO_RD: return (model_terms){lg + 2.0 * f, lg * n + 2 * f * n, lg * n + f * n};
  case COLL_ALGO_TREE:
  case COLL_ALGO_DTREE: {
    int nt = a.kind == COLL_ALGO_TREE ? 1 : 2, H;
    double deg, red, s = n / nt, k = ceil(s / c), u = s < c ? s : c;
    model_tree_shape(p, nt, &deg, &red, &H);
    double steps = k + 2 * H - 1;
    return (model_terms){steps, steps * deg * u, steps * red * u};
  }
  case COLL_ALGO_PS: {
    int K = a.param < 1 ? 1 : a.param > p ? p : a.param;
    double s = n / K, k = ceil(s / c), u = s < c ? s : c;
    return (model_terms){k + 1, (k + 1) * (p + K - 2) * u, (k + 1) * (p - 1) * u};
  }
  default: return (model_terms){INFINITY, INFINITY, INFINITY};
  }
}

double coll_model_time(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  if (p < 2 || bytes == 0) return 0;
  double n = (double)bytes, c = chunk_bytes ? (double)chunk_bytes : COLL_CHUNK_DEFAULT;
  model_terms t = model_algo_terms(a, p, n, c, m->mapped);
  if (!isfinite(t.msgs)) return INFINITY;
  /* ranks of one host share its cores: CPU work per byte stretches by ranks/cores beyond one
   * rank per core */
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (p + hosts - 1) / hosts;
  double share = m->cores > 0 && local > m->cores ? (double)local / m->cores : 1;
  /* the host's ranks each hold the vector and a working copy: beyond the cache, every byte
   * moved or reduced comes from memory */
  double ws = 2.0 * local * n, beyond = m->cache_bytes > 0 && ws > m->cache_bytes ? 1 - m->cache_bytes / ws : 0;
  double t_ = m->delta + t.msgs * m->alpha + t.link * (m->beta + (share - 1) * m->beta_cpu) + t.red * share * m->gamma;
  if (beyond > 0 && m->mem != 0) t_ += beyond * share * (t.link + t.red) * m->mem;
  return t_;
}

coll_algo coll_model_pick(const coll_model *m, int p, size_t bytes, size_t chunk_bytes) {
  static const coll_algo_kind cand[] = {COLL_ALGO_RING, COLL_ALGO_RHD, COLL_ALGO_RD,
                                        COLL_ALGO_TREE, COLL_ALGO_DTREE};
  coll_algo best = {COLL_ALGO_RING, 0};
  if (p < 2) return best;
  double tbest = coll_cost(best, p, bytes, chunk_bytes, m);
  for (size_t i = 1; i < sizeof cand / sizeof cand[0]; i++) {
    coll_algo a = {cand[i], 0};
    double t = coll_cost(a, p, bytes, chunk_bytes, m);
    if (t < tbest) {
      tbest = t;
      best = a;
    }
  }
  return best;
}

coll_algo coll_auto_choose(coll_comm *c, const void *buf, size_t bytes) {
  /* The ring on mapped memory (algo_ring.c) moves no data through the transport, which the
   * cost model of message passing does not describe; measured over ucx on one host it beat
   * every other algorithm from 128 KiB (4 ranks: 1.67 GB/s busbw against at most 1.42). */
  uint64_t where[2];
  if (c->size > 1 && bytes >= COLL_AUTO_MAPPED_RING &&
      coll_peer_ptr(c, (c->rank + c->size - 1) % c->size, buf, bytes, where))
    return (coll_algo){COLL_ALGO_RING, 0};
  return coll_model_pick(&c->model, c->size, bytes, c->chunk_bytes);
}
