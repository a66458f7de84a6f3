/* `auto` and the cost model's formulas: coll_model_time prices one all-reduce of each algorithm
 * on a fitted (or default) alpha-beta-gamma model, and `auto` runs the cheapest per size.
 *
 * Each algorithm is counted at its busiest rank (model_algo_terms): messages in sequence,
 * bytes in sequence on its link, bytes it reduces, and the bytes all ranks send. The time is
 * messages x alpha + the slower of the link (less what an emulated link's shaper banks) and
 * the host's CPU + reductions x gamma, times what the fit learned the formulas miss.
 * docs/cost-model.md gives every formula and why it is so. */
#include <math.h>
#include <string.h>

#include "algo_plan.h"

void coll_model_default(coll_model *m, coll_transport_kind kind) {
  /* Orders of magnitude: kernel TCP costs tens of microseconds per message, UCX and MPI on one
   * host (shared memory) a few. */
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
  double msgs, link, red, sent; /* sent: by all ranks */
  int reducers;  /* ranks that reduce (0: all): a parameter server's servers */
  double banked; /* bytes of link the shaper's credit saves a call (model_banked) */
} model_terms;

/* The bytes of link a shaper's credit saves a call: the busiest direction (`most` bytes in the
 * call, against the `link` bytes the call's steps last) idles in the steps that another
 * direction bounds, banks that up to its bucket (burst bytes, a tbf's) and spends it at once
 * when its chunks come, once a call. Credited once, not per step: the ranks do not wait for
 * one another's steps, so a direction idles less than the lockstep count says
 * (docs/measurements.md, "The emulated link's queue and credit"). */
static double model_banked(double link, double most, double burst) {
  double idle = link - most;
  return !(burst > 0) || !(idle > 0) ? 0 : idle < burst ? idle : burst;
}

/* Our binary trees (algo_tree.c) carrying k chunks each, step by step: in step s a rank of
 * height h and depth d receives chunk s - h_c from each child c and sends chunk s - h up, then
 * receives chunk s - H - d + 1 from its parent and sends chunk s - H - d to its children (H the
 * root's height). A step costs what its busiest rank moves one way and reduces; *link and *red
 * get those summed over the k + 2H - 1 steps, in chunks, *H the greatest root height, *most the
 * busiest direction's chunks (model_banked). Step by step, because where k is small the steady
 * load overstates it (dtree on 4 ranks at 2 chunks a tree: 2.25 n, not 4.75). Steps 2H .. k-1
 * carry the steady load, so only the first 2H + 2 are walked. Beyond 64 ranks: the large-p
 * steady loads (3 chunks each way for tree, 4 for dtree) at every step. */
static void model_tree_sched(int p, int ntrees, double k, double *link, double *red, int *H, double *most) {
  enum { MAXP = 64 };
  if (p > MAXP) {
    *H = ceil_lg(p);
    double steps = k + 2 * *H - 1;
    *link = *most = steps * (ntrees == 1 ? 3 : 4);
    *red = steps * 2;
    return;
  }
  int parent[2][MAXP], child[2][2 * MAXP], hgt[2][MAXP], dep[2][MAXP], root[2];
  double tin[MAXP] = {0}, tout[MAXP] = {0}, steady_in[MAXP] = {0}, steady_out[MAXP] = {0};
  *H = 0;
  for (int t = 0; t < ntrees; t++) {
    root[t] = coll_btree(parent[t], child[t], p, t);
    coll_btree_levels(hgt[t], dep[t], parent[t], child[t], p);
    if (hgt[t][root[t]] > *H) *H = hgt[t][root[t]];
  }
  long kk = (long)k, ks = kk > 2L * *H + 2 ? 2L * *H + 2 : kk, steps = ks + 2L * *H - 1;
  double lk = 0, rk = 0, lsteady = 0, rsteady = 0;
  for (long s = 0; s < steps; s++) {
    double lmax = 0, rmax = 0;
    for (int r = 0; r < p; r++) {
      int in = 0, out = 0, up = 0;
      for (int t = 0; t < ntrees; t++) {
        int h = hgt[t][r], Ht = hgt[t][root[t]], d = dep[t][r];
        for (int i = 0; i < 2; i++) {
          int ch = child[t][2 * r + i];
          if (ch < 0) continue;
          up += s - hgt[t][ch] >= 0 && s - hgt[t][ch] < ks;
          out += s - Ht - d >= 0 && s - Ht - d < ks;
        }
        if (parent[t][r] >= 0) {
          out += s - h >= 0 && s - h < ks;
          in += s - Ht - d + 1 >= 0 && s - Ht - d + 1 < ks;
        }
      }
      in += up;
      tin[r] += in, tout[r] += out;
      if (s == 2L * *H) steady_in[r] = in, steady_out[r] = out;
      if ((in > out ? in : out) > lmax) lmax = in > out ? in : out;
      if (up > rmax) rmax = up;
    }
    lk += lmax, rk += rmax;
    if (s == 2L * *H) lsteady = lmax, rsteady = rmax;
  }
  *link = lk + (double)(kk - ks) * lsteady;
  *red = rk + (double)(kk - ks) * rsteady;
  *most = 0;
  for (int r = 0; r < p; r++) {
    double i = tin[r] + (double)(kk - ks) * steady_in[r], o = tout[r] + (double)(kk - ks) * steady_out[r];
    if ((i > o ? i : o) > *most) *most = i > o ? i : o;
  }
}

static model_terms model_algo_terms(coll_algo a, int p, double n, double c, int mapped, int hidden, double burst) {
  int pof2 = 1, lg = 0;
  while (pof2 * 2 <= p) {
    pof2 *= 2;
    lg++;
  }
  int f = pof2 != p; /* the fold: one whole vector in, reduced, and the result back out */
  double fr = (double)(pof2 - 1) / pof2, pr = (double)(p - 1) / p, all = 2.0 * (p - 1) * n;
  double fold = 2.0 * (p - pof2) * n; /* the fold's ranks: a vector in and the result out */
  switch (a.kind) {
  case COLL_ALGO_RING:
    if (mapped && n >= 16.0 * 1024) /* reads the left's block: reduce in place, copy in place */
      return (model_terms){p > 1 ? 2.0 * p - 3 : 0, 0, (5.0 * p - 6) / (3.0 * p) * n, 0, 0, 0};
    if (p * n <= 64.0 * 1024) return (model_terms){p - 1.0, (p - 1) * n, (p - 1) * n, p * (p - 1) * n, 0, 0};
    return (model_terms){2.0 * (p - 1), 2 * pr * n, hidden ? 0 : pr * n, all, 0, 0};
  case COLL_ALGO_RHD: /* its reducing exchanges in pieces of c (coll_xchg_reduce) */
    return (model_terms){2.0 * lg + 2 * f, 2 * fr * n + 2 * f * n, hidden ? 0 : fr * n + f * n,
                         2.0 * (pof2 - 1) * n + fold, 0, 0};
  case COLL_ALGO_RD:
    return (model_terms){lg + 2.0 * f, lg * n + 2 * f * n, hidden ? 0 : lg * n + f * n, (double)pof2 * lg * n + fold,
                         0, 0};
  case COLL_ALGO_TREE:
  case COLL_ALGO_DTREE: {
    int nt = a.kind == COLL_ALGO_TREE ? 1 : 2, H;
    double link, red, s = n / nt, k = ceil(s / c), u = s < c ? s : c;
    double most;
    model_tree_sched(p, nt, k, &link, &red, &H, &most);
    return (model_terms){k + 2 * H - 1, link * u, hidden ? 0 : red * u, all, 0, model_banked(link * u, most * u, burst)};
  }
  case COLL_ALGO_PS: {
    int K = a.param < 1 ? 1 : a.param > p ? p : a.param;
    double s = n / K, k = ceil(s / c), u = s < c ? s : c;
    /* a server's directions carry k (p + K - 2) chunks of the k + 1 steps' worth */
    double link = (k + 1) * (p + K - 2) * u;
    return (model_terms){k + 1, link, hidden ? 0 : (k + 1) * (p - 1) * u, all, K,
                         model_banked(link, k * (p + K - 2) * u, burst)};
  }
  default: return (model_terms){INFINITY, INFINITY, INFINITY, INFINITY, 0, 0};
  }
}

void coll_model_host_bytes(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes,
                           double *sent, double *reduced) {
  *sent = *reduced = 0;
  if (p < 2 || bytes == 0) return;
  double c = chunk_bytes ? (double)chunk_bytes : COLL_CHUNK_DEFAULT;
  model_terms t = model_algo_terms(a, p, (double)bytes, c, m->mapped, 0, 0);
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (p + hosts - 1) / hosts;
  *sent = t.sent / hosts;
  *reduced = t.red * (t.reducers > 0 && t.reducers < local ? t.reducers : local);
}

/* m's curve of algorithm a on p ranks at this pipelining unit, or NULL */
static const coll_model_curve *model_curve(const coll_model *m, coll_algo a, int p, size_t chunk_bytes) {
  size_t c = chunk_bytes ? chunk_bytes : COLL_CHUNK_DEFAULT;
  size_t lc = m->learned_chunk ? m->learned_chunk : COLL_CHUNK_DEFAULT;
  if (c != lc) return NULL;
  for (int i = 0; i < m->ncurves && i < COLL_MODEL_CURVES; i++) {
    const coll_model_curve *k = &m->curve[i];
    if (k->ranks == p && k->algo.kind == a.kind && k->algo.param == a.param && k->n >= 1) return k;
  }
  return NULL;
}

int coll_model_learned_at(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  const coll_model_curve *k = bytes ? model_curve(m, a, p, chunk_bytes) : NULL;
  float x = bytes ? (float)log2((double)bytes) : 0; /* as the fit stored it (rf_learn) */
  for (int q = 0; k && q < k->n && q < COLL_MODEL_POINTS; q++)
    if (k->lg[q] == x) return 1;
  return 0;
}

double coll_model_learned(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  const coll_model_curve *k = bytes ? model_curve(m, a, p, chunk_bytes) : NULL;
  if (!k) return 1;
  int n = k->n < COLL_MODEL_POINTS ? k->n : COLL_MODEL_POINTS;
  double x = log2((double)bytes), ln;
  if (x <= k->lg[0]) /* beyond the sizes measured it fades over an octave */
    ln = k->ln[0] * fmax(0, 1 - (k->lg[0] - x));
  else if (x >= k->lg[n - 1])
    ln = k->ln[n - 1] * fmax(0, 1 - (x - k->lg[n - 1]));
  else {
    int j = 1;
    while (j < n - 1 && k->lg[j] < x) j++;
    double w = (x - k->lg[j - 1]) / (k->lg[j] - k->lg[j - 1]);
    ln = k->ln[j - 1] + w * (k->ln[j] - k->ln[j - 1]);
  }
  return exp(ln);
}

double coll_model_time(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes) {
  if (p < 2 || bytes == 0) return 0;
  double n = (double)bytes, c = chunk_bytes ? (double)chunk_bytes : COLL_CHUNK_DEFAULT;
  model_terms t = model_algo_terms(a, p, n, c, m->mapped, m->red_hidden, m->burst);
  if (!isfinite(t.msgs)) return INFINITY;
  /* ranks of one host share its cores: the reductions stretch by reducers/cores beyond one
   * per core, and the bytes its ranks send are sent with at most its cores. A parameter
   * server's K servers are its only reducers; the workers wait asleep */
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (p + hosts - 1) / hosts;
  int reducers = t.reducers > 0 && t.reducers < local ? t.reducers : local;
  double share = m->cores > 0 && reducers > m->cores ? (double)reducers / m->cores : 1;
  double senders = m->cores > 0 && local > m->cores ? m->cores : local;
  /* less what a shaper's credit saves (model_banked) */
  double link = (t.link - t.banked) * m->beta, cpu = t.sent / hosts / senders * m->beta_cpu;
  double t_ = t.msgs * m->alpha + (link > cpu ? link : cpu) + t.red * share * m->gamma;
  return t_ * coll_model_learned(m, a, p, bytes, chunk_bytes);
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
   * every other algorithm from 128 KiB. */
  uint64_t where[2];
  if (c->size > 1 && bytes >= COLL_AUTO_MAPPED_RING &&
      coll_peer_ptr(c, (c->rank + c->size - 1) % c->size, buf, bytes, where))
    return (coll_algo){COLL_ALGO_RING, 0};
  /* several hosts, and more than one rank on some: only 1/L of the vector per rank crosses hosts
   * (algo_hier.c), where a flat algorithm moves it all over the slower links */
  if (c->nhosts > 1 && c->lmax > 1) return (coll_algo){COLL_ALGO_HIER, COLL_ALGO_RING};
  if (bytes == 0 || bytes != c->auto_bytes) {
    c->auto_algo = coll_model_pick(&c->model, c->size, bytes, c->chunk_bytes);
    c->auto_bytes = bytes;
  }
  return c->auto_algo;
}
