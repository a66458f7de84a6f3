/* results: the cost-model fit. Once the fabric's structure is fixed (cores, hosts, mapped memory,
 * CPU ratio beta_cpu / beta, the shaper), every all-reduce formula (coll_model_time) is linear in
 * alpha, beta and gamma, so a row's design vector is the formula at the unit models and the fit
 * is linear least squares: relative residuals (sizes span decades), Huber-weighted and refitted
 * (IRLS), points beyond 4 robust deviations left out. A parameter the rows cannot tell apart, or
 * that comes out negative, is fixed (gamma to the reduction kernel's rate, the others to 0). The
 * non-linear choices (CPU ratio, hidden reductions) are tried as candidates and the best trimmed
 * residual kept. docs/cost-model.md ("The fit") has the rules. */
#include "res.h"
#include "res_internal.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RF_NP 3 /* alpha, beta, gamma */
enum { RF_ALPHA, RF_BETA, RF_GAMMA };

typedef struct {
  double x[RF_NP]; /* design: seconds per unit of each parameter */
  double y;    /* seconds measured */
  double den;  /* the residual's scale: the current prediction (at first y) */
  double w;    /* robustness weight */
  int out;     /* outlier */
  const char *algo;
  int ranks;
  int64_t bytes;
} rf_pt;

/* Solves the k x k system a z = b (Gaussian elimination, partial pivoting); -1 if singular. */
static int rf_solve(double a[RF_NP][RF_NP], double b[RF_NP], double z[RF_NP], int k) {
  for (int c = 0; c < k; c++) {
    int piv = c;
    for (int r = c + 1; r < k; r++)
      if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
    if (fabs(a[piv][c]) < 1e-300) return -1;
    if (piv != c) {
      for (int j = 0; j < k; j++) {
        double t = a[c][j];
        a[c][j] = a[piv][j];
        a[piv][j] = t;
      }
      double t = b[c];
      b[c] = b[piv];
      b[piv] = t;
    }
    for (int r = c + 1; r < k; r++) {
      double f = a[r][c] / a[c][c];
      for (int j = c; j < k; j++) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  for (int c = k - 1; c >= 0; c--) {
    double s = b[c];
    for (int j = c + 1; j < k; j++) s -= a[c][j] * z[j];
    z[c] = s / a[c][c];
  }
  return 0;
}

/* Weighted least squares of relative residuals over the free parameters (free[j]); fixed
 * ones keep theta[j]. Columns are scaled to unit size so alpha (1e-5) and beta (1e-9) share a
 * well-conditioned system. */
static int rf_wls(const rf_pt *pt, size_t n, const int free[RF_NP], double theta[RF_NP]) {
  int idx[RF_NP], k = 0;
  for (int j = 0; j < RF_NP; j++)
    if (free[j]) idx[k++] = j;
  if (k == 0) return 0;
  double scale[RF_NP] = {0};
  for (size_t i = 0; i < n; i++)
    for (int q = 0; q < k; q++) {
      double v = pt[i].x[idx[q]] / pt[i].den;
      if (v > scale[q]) scale[q] = v;
    }
  for (int q = 0; q < k; q++)
    if (scale[q] <= 0) return -1;
  double a[RF_NP][RF_NP] = {{0}}, b[RF_NP] = {0}, z[RF_NP] = {0};
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    if (pt[i].out || pt[i].w <= 0) continue;
    used++;
    double fixed = 0;
    for (int j = 0; j < RF_NP; j++)
      if (!free[j]) fixed += pt[i].x[j] * theta[j];
    double r = (pt[i].y - fixed) / pt[i].den, w = pt[i].w, u[RF_NP];
    for (int q = 0; q < k; q++) u[q] = pt[i].x[idx[q]] / pt[i].den / scale[q];
    for (int q = 0; q < k; q++) {
      b[q] += w * u[q] * r;
      for (int s = 0; s < k; s++) a[q][s] += w * u[q] * u[s];
    }
  }
  if (used < (size_t)k) return -1;
  if (rf_solve(a, b, z, k)) return -1;
  for (int q = 0; q < k; q++) theta[idx[q]] = z[q] / scale[q];
  return 0;
}

static double rf_pred(const rf_pt *p, const double th[RF_NP]) {
  double t = 0;
  for (int j = 0; j < RF_NP; j++) t += p->x[j] * th[j];
  return t;
}

static int rf_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median absolute relative residual of the points not yet outliers, scaled to a standard
 * deviation (1.4826 MAD). */
static double rf_mad(const rf_pt *pt, size_t n, const double th[RF_NP]) {
  double *r = malloc(n * sizeof *r);
  if (!r) return NAN;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (!pt[i].out) r[m++] = fabs(pt[i].y - rf_pred(&pt[i], th)) / pt[i].den;
  double med = NAN;
  if (m) {
    qsort(r, m, sizeof *r, rf_cmp);
    med = m % 2 ? r[m / 2] : 0.5 * (r[m / 2 - 1] + r[m / 2]);
  }
  free(r);
  return 1.4826 * med;
}

/* The robust fit: IRLS with Huber weights (k = 1.345 robust deviations), then points beyond
 * 4 robust deviations are outliers and the fit is repeated without them. Positivity by
 * fixing a negative parameter (gamma at gamma_fix, the others at 0) and refitting. */
static int rf_robust(rf_pt *pt, size_t n, double gamma_fix, const int free_in[RF_NP],
                     double th[RF_NP], int *gamma_fixed) {
  int free[RF_NP];
  for (int j = 0; j < RF_NP; j++) free[j] = free_in[j], th[j] = 0;
  th[RF_GAMMA] = gamma_fix;
  for (size_t i = 0; i < n; i++) pt[i].w = 1, pt[i].out = 0, pt[i].den = pt[i].y;
  for (int pass = 0; pass < 2; pass++) {
    for (int it = 0; it < 20; it++) {
      double prev[RF_NP];
      memcpy(prev, th, sizeof prev);
      if (rf_wls(pt, n, free, th)) return -1;
      for (int j = 0; j < RF_NP; j++)
        if (free[j] && th[j] < 0) {
          free[j] = 0;
          th[j] = j == RF_GAMMA ? gamma_fix : 0;
          it = -1; /* start over with this parameter fixed */
        }
      if (it < 0) continue;
      /* residuals relative to the prediction, not the measurement: relative to the
       * measurement an underestimate costs at most 1 and an overestimate without bound, which
       * biases the fit low */
      for (size_t i = 0; i < n; i++) {
        double pr = rf_pred(&pt[i], th);
        pt[i].den = pr > 0.05 * pt[i].y ? pr : 0.05 * pt[i].y;
      }
      double s = rf_mad(pt, n, th);
      if (!(s > 1e-12)) break; /* a perfect fit */
      for (size_t i = 0; i < n; i++) {
        double r = fabs(pt[i].y - rf_pred(&pt[i], th)) / pt[i].den / s;
        pt[i].w = r <= 1.345 ? 1 : 1.345 / r;
      }
      double d = 0;
      for (int j = 0; j < RF_NP; j++) d += fabs(th[j] - prev[j]) / (fabs(th[j]) + 1e-30);
      if (it > 0 && d < 1e-9) break;
    }
    if (pass == 0) {
      double s = rf_mad(pt, n, th);
      size_t kept = 0;
      for (size_t i = 0; i < n; i++) {
        pt[i].out = s > 1e-12 && fabs(pt[i].y - rf_pred(&pt[i], th)) / pt[i].den > 4 * s;
        kept += !pt[i].out;
        pt[i].w = 1;
      }
      if (kept < 3) {
        for (size_t i = 0; i < n; i++) pt[i].out = 0;
        break;
      }
    }
  }
  *gamma_fixed = !free[RF_GAMMA];
  return 0;
}

/* What the formulas miss, from f's residuals: per algorithm and rank count, ln(t / pred) of its
 * non-outlier rows by size, sorted, rows of one size averaged (several runs). Outliers stay out
 * as in the fit: one slow spell should not be learned. Sizes beyond COLL_MODEL_POINTS of a curve,
 * and curves beyond COLL_MODEL_CURVES, are left to the formulas. The misses repeat from run to
 * run on one machine, which is why learning them pays (docs/measurements.md, "What the formulas
 * miss, learned"). */
void res_fabric_learn(res_fabric_cost *f) {
  coll_model *m = &f->m;
  m->ncurves = 0;
  m->learned_chunk = f->chunk_bytes > 0 ? (size_t)f->chunk_bytes : 0;
  if (!f->learned) return;
  int cnt[COLL_MODEL_CURVES][COLL_MODEL_POINTS];
  for (size_t i = 0; i < f->nresid; i++) {
    const res_resid *r = &f->resid[i];
    coll_algo a;
    if (r->outlier || !(r->resid > -1) || !isfinite(r->resid) || r->bytes <= 0 || r->ranks < 2 ||
        coll_algo_parse(r->algo, &a) || a.kind == COLL_ALGO_NATIVE || a.kind == COLL_ALGO_AUTO ||
        a.kind == COLL_ALGO_HIER)
      continue;
    int c = 0;
    while (c < m->ncurves && !(m->curve[c].ranks == r->ranks && m->curve[c].algo.kind == a.kind &&
                                m->curve[c].algo.param == a.param))
      c++;
    if (c == COLL_MODEL_CURVES) continue;
    coll_model_curve *k = &m->curve[c];
    if (c == m->ncurves) *k = (coll_model_curve){.algo = a, .ranks = r->ranks}, m->ncurves++;
    float x = (float)log2((double)r->bytes), y = (float)log1p(r->resid);
    int j = 0;
    while (j < k->n && k->lg[j] < x) j++;
    if (j < k->n && k->lg[j] == x) { /* the same size again: the mean */
      k->ln[j] = (k->ln[j] * (float)cnt[c][j] + y) / (float)(cnt[c][j] + 1);
      cnt[c][j]++;
      continue;
    }
    if (k->n == COLL_MODEL_POINTS) continue;
    for (int q = k->n; q > j; q--) k->lg[q] = k->lg[q - 1], k->ln[q] = k->ln[q - 1], cnt[c][q] = cnt[c][q - 1];
    k->lg[j] = x, k->ln[j] = y, cnt[c][j] = 1;
    k->n++;
  }
}

static int rf_fill_stats(res_fabric_cost *f, const rf_pt *pt, size_t n, const double th[RF_NP]) {
  f->resid = calloc(n ? n : 1, sizeof *f->resid);
  if (!f->resid) return -1;
  double mean = 0, sr = 0, st = 0, rel = 0;
  size_t used = 0;
  for (size_t i = 0; i < n; i++)
    if (!pt[i].out) mean += pt[i].y, used++;
  mean = used ? mean / (double)used : 0;
  for (size_t i = 0; i < n; i++) {
    double pr = rf_pred(&pt[i], th);
    res_resid *r = &f->resid[i];
    snprintf(r->algo, sizeof r->algo, "%s", pt[i].algo);
    r->ranks = pt[i].ranks;
    r->bytes = pt[i].bytes;
    r->t_us = pt[i].y * 1e6;
    r->pred_us = pr * 1e6;
    r->resid = pr > 0 ? (pt[i].y - pr) / pr : NAN;
    r->outlier = pt[i].out;
    if (pt[i].out) continue;
    sr += (pt[i].y - pr) * (pt[i].y - pr);
    st += (pt[i].y - mean) * (pt[i].y - mean);
    rel += r->resid * r->resid;
  }
  f->nresid = n;
  f->n = n;
  f->n_used = used;
  f->r2 = st > 0 ? 1 - sr / st : NAN;
  f->rms_rel = used ? sqrt(rel / (double)used) : NAN;
  return 0;
}

/* Which parameters the rows determine: alpha and beta always; gamma only where its column,
 * relative to each point's time, keeps more than 3% of its length outside the span of those
 * already in (Gram-Schmidt), otherwise the fit would trade it for them: it needs algorithms
 * that reduce a different share of what they move. An all-zero column is not in. */
static void rf_identify(const rf_pt *pt, size_t n, int on[RF_NP]) {
  static const int order[RF_NP] = {RF_ALPHA, RF_BETA, RF_GAMMA};
  double *basis = malloc((size_t)RF_NP * (n ? n : 1) * sizeof *basis), *v = malloc((n ? n : 1) * sizeof *v);
  int nb = 0;
  for (int j = 0; j < RF_NP; j++) on[j] = 0;
  for (int q = 0; q < RF_NP && basis && v; q++) {
    int j = order[q];
    double len = 0;
    for (size_t i = 0; i < n; i++) v[i] = pt[i].x[j] / pt[i].y, len += v[i] * v[i];
    len = sqrt(len);
    if (!(len > 0)) continue;
    for (int b = 0; b < nb; b++) { /* remove the parts along the orthonormal basis */
      double d = 0;
      for (size_t i = 0; i < n; i++) d += v[i] * basis[(size_t)b * n + i];
      for (size_t i = 0; i < n; i++) v[i] -= d * basis[(size_t)b * n + i];
    }
    double rest = 0;
    for (size_t i = 0; i < n; i++) rest += v[i] * v[i];
    rest = sqrt(rest);
    if (j != RF_ALPHA && j != RF_BETA && !(rest > 0.03 * len)) continue;
    if (!(rest > 1e-12 * len)) continue;
    on[j] = 1;
    for (size_t i = 0; i < n; i++) basis[(size_t)nb * n + i] = v[i] / rest;
    nb++;
  }
  free(basis);
  free(v);
}

/* A new, zeroed fabric model at the end of m, named; NULL with err when out of memory. */
res_fabric_cost *res_fabric_add(res_costmodel *m, const char *fabric, const char *transport, const char *source,
                                 int host_count, const char *topo, char *err, size_t cap) {
  res_fabric_cost *f = realloc(m->f, (m->n + 1) * sizeof *f);
  if (!f) return res_errf(err, cap, "out of memory"), NULL;
  m->f = f;
  f = &f[m->n++];
  memset(f, 0, sizeof *f);
  snprintf(f->fabric, sizeof f->fabric, "%s", fabric);
  snprintf(f->transport, sizeof f->transport, "%s", transport);
  snprintf(f->source, sizeof f->source, "%s", source);
  f->host_count = host_count;
  snprintf(f->topo, sizeof f->topo, "%s", topo ? topo : "");
  return f;
}

static const char *rf_str(const char *s) { return s ? s : ""; }

/* The design vectors of a fabric's points for one CPU ratio (shape->beta_cpu holds its ratio to
 * beta): the formula at each unit model. */
static void rf_design(rf_pt *pt, size_t n, const coll_model *shape, const res_allreduce_row *const *src) {
  for (size_t i = 0; i < n; i++) {
    const res_allreduce_row *r = src[i];
    coll_algo a;
    coll_algo_parse(pt[i].algo, &a);
    for (int q = 0; q < RF_NP; q++) {
      coll_model u = *shape;
      u.alpha = q == RF_ALPHA, u.beta = q == RF_BETA, u.gamma = q == RF_GAMMA;
      u.beta_cpu = q == RF_BETA ? shape->beta_cpu : 0;
      pt[i].x[q] = coll_model_time(&u, a, (int)r->ranks, (size_t)r->bytes, (size_t)r->chunk_bytes);
    }
  }
}

/* The trimmed mean absolute relative residual of every point (outliers included, each capped at
 * 0.5): what the candidate shapes are compared by. */
static double rf_score(const rf_pt *pt, size_t n, const double th[RF_NP]) {
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    double pr = rf_pred(&pt[i], th), r = pr > 0 ? fabs(pt[i].y - pr) / pr : 0.5;
    s += r < 0.5 ? r : 0.5;
  }
  return n ? s / (double)n : INFINITY;
}

/* The robust fit, with gamma checked against the reduction kernel measured on the spot (when
 * kernel): only algorithms that reduce a different share of what they move tell gamma from beta,
 * and noise can swamp that. A fitted rate over 10x slower than the kernel's (out of cache it is a
 * few times slower) or 2x faster is refitted with the kernel's (docs/measurements.md, "What the
 * fit guards against"). */
static int rf_fit_gamma(rf_pt *pt, size_t n, double gfix, int kernel, const int fr[RF_NP], double th[RF_NP],
                        int *gfixed) {
  if (rf_robust(pt, n, gfix, fr, th, gfixed)) return -1;
  if (!kernel || *gfixed || (th[RF_GAMMA] <= 10 * gfix && th[RF_GAMMA] >= 0.5 * gfix)) return 0;
  int f2[RF_NP];
  memcpy(f2, fr, sizeof f2);
  f2[RF_GAMMA] = 0;
  return rf_robust(pt, n, gfix, f2, th, gfixed);
}

/* A fit's work over n rows: which rows are grouped already, the points, and (all-reduce) each
 * point's row. */
typedef struct {
  char *done;
  rf_pt *pt;
  const res_allreduce_row **src;
} rf_work;

static void rf_work_free(rf_work *w) {
  free(w->done);
  free(w->pt);
  free(w->src);
}

static int rf_work_new(rf_work *w, size_t n, int with_src, char *err, size_t cap) {
  size_t k = n ? n : 1;
  *w = (rf_work){calloc(k, 1), malloc(k * sizeof *w->pt), with_src ? malloc(k * sizeof *w->src) : NULL};
  if (w->done && w->pt && (w->src || !with_src)) return 0;
  rf_work_free(w);
  return res_errf(err, cap, "out of memory"), -1;
}

/* An emulated fabric's shaper, as its run recorded it (NULL: none recorded). */
static const res_fit_burst *rf_emu_shaper(const res_fit_opts *o, const char *fabric) {
  for (size_t i = 0; i < o->nbursts; i++)
    if (!strcmp(o->bursts[i].fabric, fabric)) return &o->bursts[i];
  return NULL;
}

/* The kernel's rate for a cell (s/byte): the median over the runs that recorded one (o->runs)
 * among those its n rows came from (ids: their run_ids), else o->gamma_kernel. A run whose rows
 * are another fabric's says nothing of this one's host, so rates are not pooled over all runs. */
static double rf_cell_gamma(const res_fit_opts *o, const char *const *ids, size_t n) {
  double *v = o->nruns ? malloc(o->nruns * sizeof *v) : NULL;
  size_t k = 0;
  for (size_t r = 0; v && r < o->nruns; r++) {
    if (!(o->runs[r].gamma_kernel > 0) || !isfinite(o->runs[r].gamma_kernel)) continue;
    size_t i = 0;
    while (i < n && strcmp(ids[i], o->runs[r].run_id)) i++;
    if (i < n) v[k++] = o->runs[r].gamma_kernel;
  }
  util_stats st = {0};
  if (k) util_stats_compute(&st, v, k); /* p50 as bench_fit_gamma takes it */
  free(v);
  return k ? st.p50 : o->gamma_kernel;
}

/* Rows of an emulated fabric shorter than RF_BURSTS bursts are left out where two longer sizes
 * remain: after the barrier before each call the shaper's bucket is full, so a short transfer
 * passes partly unshaped and measures the shaper's credit, not the link. Two sizes, because one
 * does not tell alpha from beta; with fewer the bar halves, down to one burst, and below that
 * every row stays (docs/measurements.md, "Emulated rows shorter than the shaper's burst"). */
#define RF_BURSTS 8
#define RF_LONG_SIZES 2
/* an emulated link fitted this much slower than its ceiling is CPU-bound (rf_cell_store) */
#define RF_BELOW_CEIL 1.05

/* The CPU ratios beta_cpu / beta tried: RF_RATIO0 x RF_RATIO_STEP^i, i < RF_NRATIO (1/4 to 10). */
#define RF_RATIO0 0.25
#define RF_RATIO_STEP 1.1
#define RF_NRATIO 40

/* r is a row of k's fabric, transport, host count and machine */
static int rf_same_cell(const res_allreduce_row *r, const res_allreduce_row *k) {
  return !strcmp(r->fabric, k->fabric) && !strcmp(r->transport, k->transport) &&
         r->host_count == k->host_count && !strcmp(rf_str(r->topo_hash), rf_str(k->topo_hash));
}

/* The size below which an emulated cell's rows are left out (RF_BURSTS): the largest bar of
 * RF_BURSTS, RF_BURSTS/2 .. 1 bursts with RF_LONG_SIZES sizes at or above it; 0 for none. */
static int64_t rf_short_below(const res_allreduce_row *rows, size_t nrows, size_t first,
                              const char *done, double burst) {
  if (!(burst > 0)) return 0;
  for (int b = RF_BURSTS; b >= 1; b /= 2) {
    double bar = b * burst;
    int64_t sizes[RF_LONG_SIZES];
    int ns = 0;
    for (size_t j = first; j < nrows && ns < RF_LONG_SIZES; j++) {
      const res_allreduce_row *r = &rows[j];
      if (done[j] || !rf_same_cell(r, &rows[first]) || (double)r->bytes < bar) continue;
      int seen = 0;
      for (int q = 0; q < ns; q++) seen |= sizes[q] == r->bytes;
      if (!seen) sizes[ns++] = r->bytes;
    }
    if (ns >= RF_LONG_SIZES) return (int64_t)ceil(bar);
  }
  return 0;
}

/* The best candidate shape of a cell so far (rf_try_shape). */
typedef struct {
  double score, th[RF_NP], ratio, g; /* its residual score, parameters, CPU ratio, gamma */
  int gfixed, fitted;                       /* gamma from the kernel; any candidate fitted at all */
  int hidden;                               /* its pipelined reductions hidden (red_hidden) */
} rf_best;

/* One candidate: CPU ratio index ri (-1: no CPU bound, then 1/4 .. 10 x beta) and gamma g,
 * fitted to the cell's points and kept in b where it scores better. A CPU bound must earn its
 * place: a clearly better fit (a tenth less residual). */
static void rf_try_shape(rf_work *w, size_t n, coll_model *shape, int ri, double g, int kernel, rf_best *b) {
  shape->beta_cpu = ri < 0 ? 0 : RF_RATIO0 * pow(RF_RATIO_STEP, ri);
  rf_design(w->pt, n, shape, w->src);
  int fr[RF_NP];
  rf_identify(w->pt, n, fr);
  if (shape->red_hidden) fr[RF_GAMMA] = 0;
  double th[RF_NP];
  int gfixed = 0;
  if (rf_fit_gamma(w->pt, n, g, kernel, fr, th, &gfixed)) return;
  double sc = rf_score(w->pt, n, th) / (ri >= 0 ? 0.9 : 1);
  if (sc < b->score) {
    b->score = sc;
    memcpy(b->th, th, sizeof b->th);
    b->ratio = shape->beta_cpu;
    b->gfixed = gfixed;
    b->g = g;
    b->hidden = shape->red_hidden;
  }
  b->fitted = 1;
}

/* A fabric's host CPU cost per byte sent (res_fabric_cost.cpu_byte) from its rows' host_cpu_us:
 * what is left after the reductions at the model's gamma (the training step's share adds them
 * back at the same rate), over the bytes the host's ranks sent, median of the rows from 1 MiB
 * (a jiffy matters less there); 0 without such rows. Measured, not fitted from times: on an
 * emulated link the CPU bound never binds, yet a slower shaper costs more CPU a byte, and that
 * work slows a training step's compute. host_cpu_us is the busy CPU of rank 0's machine: on an
 * emulated cluster that is every node's (all_nodes), so the bytes are all the nodes' too. */
static double rf_cpu_byte(const res_allreduce_row *const *src, size_t n, const coll_model *m, double gamma,
                          int all_nodes) {
  double *v = malloc((n ? n : 1) * sizeof *v);
  size_t k = 0;
  if (!v) return 0;
  for (size_t i = 0; i < n; i++) {
    const res_allreduce_row *r = src[i];
    coll_algo a;
    double sent, red;
    if (!(r->host_cpu_us > 0) || r->bytes < (1 << 20) || coll_algo_parse(*r->algo_ran ? r->algo_ran : r->algo, &a))
      continue;
    coll_model_host_bytes(m, a, (int)r->ranks, (size_t)r->bytes, (size_t)r->chunk_bytes, &sent, &red);
    if (all_nodes && m->hosts > 1) sent *= m->hosts, red *= m->hosts;
    double c = sent > 0 ? (r->host_cpu_us * 1e-6 - red * gamma) / sent : NAN;
    if (isfinite(c)) v[k++] = c > 0 ? c : 0;
  }
  double med = 0;
  if (k) {
    qsort(v, k, sizeof *v, rf_cmp);
    med = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
  }
  free(v);
  return med;
}

/* Where the rows cannot fit a CPU bound (no host had more ranks than cores), the measured CPU
 * cost of a byte sent is the bound: what a node's cores can send, shared by its ranks, stops a
 * faster link or more ranks on the same cores (coll_model_time's B). Only where it agrees with
 * the rows' times: it must not make any of them over 5% slower than the fit, or the measured
 * CPU was not the sending's (a rank's wake-ups, another process). */
static int rf_cpu_agrees(const res_allreduce_row *const *src, size_t n, const coll_model *m, double cpu_byte) {
  coll_model with = *m, without = *m;
  with.ncurves = without.ncurves = 0;
  with.beta_cpu = cpu_byte, without.beta_cpu = 0;
  for (size_t i = 0; i < n; i++) {
    const res_allreduce_row *r = src[i];
    coll_algo a;
    if (coll_algo_parse(*r->algo_ran ? r->algo_ran : r->algo, &a)) continue;
    double t0 = coll_model_time(&without, a, (int)r->ranks, (size_t)r->bytes, (size_t)r->chunk_bytes);
    double t1 = coll_model_time(&with, a, (int)r->ranks, (size_t)r->bytes, (size_t)r->chunk_bytes);
    if (t0 > 0 && t1 > 1.05 * t0) return 0;
  }
  return 1;
}

/* The fabric's rows measured beside a load (compute_loss; its fabric, transport, host count and
 * machine, whether its model came from all-reduce or p2p rows) into f->busy: per rank count
 * and size of 1 MiB or more, the mean loss of its rows (ring, or whichever algorithms ran) and
 * the mean pace of the all-reduce itself against the fitted model's time (a link-bound ring
 * keeps it; one whose CPU work shares a core with the load does not), sorted by ranks then
 * size; at most RES_BUSY_MAX points, the first found. */
static void rf_busy(res_fabric_cost *f, const res_allreduce_row *rows, size_t n) {
  int cnt[RES_BUSY_MAX] = {0}, npace[RES_BUSY_MAX] = {0};
  f->nbusy = 0;
  for (size_t i = 0; i < n; i++) {
    const res_allreduce_row *r = &rows[i];
    if (!isfinite(r->compute_loss) || strcmp(r->fabric, f->fabric) || strcmp(r->transport, f->transport) ||
        r->host_count != f->host_count || strcmp(rf_str(r->topo_hash), f->topo) || r->errors || r->ranks < 2 ||
        r->bytes < (1 << 20))
      continue;
    int j = 0;
    while (j < f->nbusy && !(f->busy[j].ranks == r->ranks && f->busy[j].bytes == (double)r->bytes)) j++;
    if (j == f->nbusy) {
      if (j == RES_BUSY_MAX) continue;
      f->busy[j] = (res_busy){(int)r->ranks, (double)r->bytes, 0, NAN};
      f->nbusy++;
    }
    f->busy[j].loss += (r->compute_loss - f->busy[j].loss) / ++cnt[j]; /* running mean */
    coll_algo a;
    double t = coll_algo_parse(*r->algo_ran ? r->algo_ran : r->algo, &a) ? NAN
               : coll_model_time(&f->m, a, (int)r->ranks, (size_t)r->bytes, (size_t)r->chunk_bytes);
    if (t > 0 && r->t_p50_us > 0) {
      double pace = t * 1e6 / r->t_p50_us;
      f->busy[j].pace = npace[j]++ ? f->busy[j].pace + (pace - f->busy[j].pace) / npace[j] : pace;
    }
  }
  for (int a = 1; a < f->nbusy; a++) /* insertion sort: a few points */
    for (int b = a; b > 0 && (f->busy[b - 1].ranks > f->busy[b].ranks ||
                              (f->busy[b - 1].ranks == f->busy[b].ranks && f->busy[b - 1].bytes > f->busy[b].bytes));
         b--) {
      res_busy t = f->busy[b];
      f->busy[b] = f->busy[b - 1];
      f->busy[b - 1] = t;
    }
  /* a share of the load's pace lies in -1..1 (a model holds no other): a mean beyond is a noisy
   * pace alone, not a load that ran more than twice as fast beside the all-reduce */
  for (int a = 0; a < f->nbusy; a++) f->busy[a].loss = fmax(-1, fmin(1, f->busy[a].loss));
}

/* One all-reduce cell (fabric, transport, host count, machine) through its fit's phases: k its
 * first row, n its points (w->pt, w->src). */
typedef struct {
  const res_allreduce_row *k;
  const res_fit_burst *shaper; /* an emulated link's, else NULL */
  size_t n;
  int64_t chunk;
  double gfix;                 /* gamma where the rows do not tell it */
  int kernel;                  /* gfix is the kernel's measured rate, not the default */
  int emulated, crowded;       /* see rf_cell_search */
  coll_model shape;
  rf_best b;
} rf_cell;

/* The points of row i's cell, its rows all marked done: the fit leaves out an emulated link's
 * short rows (RF_BURSTS), native and auto (no formula of ours), and rows that failed, had one
 * rank or are under o->min_bytes. Returns how many. */
static size_t rf_cell_points(rf_work *w, const res_rows *ar, size_t i, const res_fit_opts *o, rf_cell *c) {
  const res_allreduce_row *rows = ar->rows;
  c->shaper = rf_emu_shaper(o, c->k->fabric);
  int64_t short_below = c->shaper ? rf_short_below(rows, ar->n, i, w->done, c->shaper->bytes) : 0;
  for (size_t j = i; j < ar->n; j++) {
    const res_allreduce_row *r = &rows[j];
    if (w->done[j] || !rf_same_cell(r, c->k)) continue;
    w->done[j] = 1;
    if (r->bytes < short_below) continue;
    coll_algo a;
    const char *an = *r->algo_ran ? r->algo_ran : r->algo;
    /* one fabric per row: not native, auto or hier, nor a cluster's flat rows crossing both
     * levels (the levels are fitted apart: on one host, and across hosts of one rank) */
    if (coll_algo_parse(an, &a) || !res_row_one_fabric(a, r->host_count, r->ranks_per_host, r->ranks))
      continue;
    if (r->errors || r->ranks < 2 || r->bytes <= 0 || r->bytes < o->min_bytes || !(r->t_p50_us > 0)) continue;
    if (isfinite(r->compute_loss)) continue; /* measured beside a load: not the link's times */
    rf_pt *p = &w->pt[c->n];
    w->src[c->n++] = r;
    p->y = r->t_p50_us * 1e-6;
    p->algo = an;
    p->ranks = (int)r->ranks;
    p->bytes = r->bytes;
    c->chunk = r->chunk_bytes;
  }
  return c->n;
}

/* The gamma a candidate falls back on: the kernel's rate from the cell's own runs, else the
 * transport's default. -1 (err said) when out of memory. */
static int rf_cell_kernel(const rf_work *w, const res_fit_opts *o, rf_cell *c, char *err, size_t cap) {
  coll_model def;
  coll_transport_kind tk;
  if (coll_transport_parse(c->k->transport, &tk)) tk = COLL_TCP;
  coll_model_default(&def, tk);
  const char **ids = malloc(c->n * sizeof *ids);
  if (!ids) return res_errf(err, cap, "out of memory"), -1;
  for (size_t j = 0; j < c->n; j++) ids[j] = w->src[j]->run_id;
  double gk = rf_cell_gamma(o, ids, c->n);
  free(ids);
  c->kernel = isfinite(gk) && gk > 0;
  c->gfix = c->kernel ? gk : def.gamma;
  return 0;
}

/* More ranks on a host of the shape than it has cores (known) */
static int rf_crowded(const coll_model *shape, int ranks) {
  int hosts = shape->hosts > 1 ? shape->hosts : 1;
  return shape->cores > 0 && (ranks + hosts - 1) / hosts > shape->cores;
}

/* Every candidate shape of the cell (rf_try_shape), the best kept in c->b. -1 (err said) where
 * none could be fitted. */
static int rf_cell_search(rf_work *w, const res_fit_opts *o, rf_cell *c, char *err, size_t cap) {
  const res_allreduce_row *k = c->k;
  coll_model *shape = &c->shape;
  /* the fabric's structure: ucx on one host maps its peers' buffers ("+rkey_ptr" in the
   * fabric string), and the ring then reads them in place */
  shape->mapped = strstr(k->fabric, "+rkey_ptr") != NULL;
  shape->hosts = k->host_count > 1 ? (int)k->host_count : 1;
  shape->burst = c->shaper ? c->shaper->bytes : 0; /* what its links bank while they idle */
  c->b = (rf_best){.score = INFINITY, .g = c->gfix};
  /* an emulated link: bench/emulate.c names it emu-<rate> */
  c->emulated = !strncmp(k->fabric, "emu-", 4);
  /* a node's cores: an emulated cluster's nodes share this machine's */
  shape->cores = res_node_cores(o->cores > 0 ? o->cores : 0, c->emulated, shape->hosts);
  /* The CPU bound differs from the link's bytes only where a host's ranks outnumber its
   * cores; elsewhere a ratio would merely absorb what the formulas miss (the trees' pipeline
   * fill), and a faster link would then gain nothing */
  for (size_t j = 0; j < c->n; j++) c->crowded |= rf_crowded(shape, w->pt[j].ranks);
  /* On an emulated link a rank's pause shorter than the shaper's bucket is banked and spent
   * after it, so a pipelined reduction's chunks cost the link nothing; pricing them anyway puts
   * the fitted link above its ceiling. So reductions hidden (red_hidden) are tried beside them.
   * rd and rhd qualify since they reduce pieces as they arrive (coll_xchg_reduce). */
  for (int gi = 0; gi < (c->emulated ? 2 : 1); gi++)
    for (int ri = -1; ri < (c->crowded ? RF_NRATIO : 0); ri++) {
      shape->red_hidden = gi;
      rf_try_shape(w, c->n, shape, ri, c->gfix, c->kernel, &c->b);
    }
  if (!c->b.fitted)
    return res_errf(err, cap, "fit of %s (%lld hosts): the rows do not determine alpha and beta", k->fabric,
                    (long long)k->host_count), -1;
  return 0;
}

/* The best shape fitted again: the search kept its parameters, not the weights and outliers
 * the points' statistics need. */
static void rf_cell_refit(rf_work *w, rf_cell *c) {
  rf_best *b = &c->b;
  c->shape.beta_cpu = b->ratio;
  c->shape.red_hidden = b->hidden;
  rf_design(w->pt, c->n, &c->shape, w->src);
  int fr[RF_NP];
  rf_identify(w->pt, c->n, fr);
  if (b->hidden) fr[RF_GAMMA] = 0;
  double th[RF_NP];
  if (rf_fit_gamma(w->pt, c->n, b->g, c->kernel, fr, th, &b->gfixed) == 0) memcpy(b->th, th, sizeof th);
}

/* The cell's model into out. -1 (err said) when out of memory. */
static int rf_cell_store(res_costmodel *out, const rf_work *w, const rf_cell *c, const res_fit_opts *o, char *err,
                         size_t cap) {
  const res_allreduce_row *k = c->k;
  const rf_best *b = &c->b;
  const res_fit_burst *shaper = c->shaper;
  res_fabric_cost *f = res_fabric_add(out, k->fabric, k->transport, "allreduce", (int)k->host_count,
                                     rf_str(k->topo_hash), err, cap);
  if (!f) return -1;
  f->m = c->shape;
  f->m.alpha = b->th[RF_ALPHA], f->m.beta = b->th[RF_BETA], f->m.gamma = b->th[RF_GAMMA];
  f->m.beta_cpu = b->ratio * b->th[RF_BETA];
  /* An emulated link slower than its shaper's ceiling with no more ranks than cores was held
   * back by the host's CPU (the emulated stack costs more a byte than loopback): the link is the
   * ceiling, the CPU the rest. The rows' calls are predicted as before (both bounds take the same
   * bytes), but a training step now sees the exchange's CPU work and a faster link stops at the
   * CPU. */
  if (c->emulated && !c->crowded && c->shape.cores > 0 && !(b->ratio > 0) && shaper && shaper->ceil_beta > 0 &&
      f->m.beta > RF_BELOW_CEIL * shaper->ceil_beta) {
    f->m.beta_cpu = f->m.beta;
    f->m.beta = shaper->ceil_beta;
  }
  f->gamma_fixed = b->gfixed;
  f->chunk_bytes = c->chunk;
  f->cpu_byte = rf_cpu_byte(w->src, c->n, &f->m, f->m.gamma, c->emulated);
  if (!(f->m.beta_cpu > 0) && f->cpu_byte > 0 && rf_cpu_agrees(w->src, c->n, &f->m, f->cpu_byte))
    f->m.beta_cpu = f->cpu_byte;
  if (rf_fill_stats(f, w->pt, c->n, b->th)) return res_errf(err, cap, "out of memory"), -1;
  f->learned = !o->formulas_only;
  res_fabric_learn(f);
  return 0;
}

static int rf_fit_allreduce(res_costmodel *out, const res_rows *ar, const res_fit_opts *o, char *err,
                            size_t cap) {
  const res_allreduce_row *rows = ar->rows;
  rf_work w;
  if (rf_work_new(&w, ar->n, 1, err, cap)) return -1;
  int rc = 0;
  for (size_t i = 0; i < ar->n && !rc; i++) {
    if (w.done[i]) continue;
    rf_cell c = {.k = &rows[i]};
    if (rf_cell_points(&w, ar, i, o, &c) < 3) continue; /* nothing to fit: native only, or too few sizes */
    if (rf_cell_kernel(&w, o, &c, err, cap) || rf_cell_search(&w, o, &c, err, cap)) {
      rc = -1;
      break;
    }
    rf_cell_refit(&w, &c);
    rc = rf_cell_store(out, &w, &c, o, err, cap);
  }
  rf_work_free(&w);
  return rc;
}

/* m's fit of exactly this cell (fabric, transport, host count, machine), or NULL */
static const res_fabric_cost *rf_cell_model(const res_costmodel *m, const char *fabric, const char *transport,
                                             int hosts, const char *topo) {
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    if (!strcmp(f->fabric, fabric) && !strcmp(f->transport, transport) && f->host_count == hosts &&
        !strcmp(f->topo, topo))
      return f;
  }
  return NULL;
}

/* p2p rows carry no host count: the pair's hosts tell */
static int rf_p2p_hosts(const res_p2p_row *r) { return strcmp(r->src_host, r->dst_host) ? 2 : 1; }

/* r is a row of k's fabric, transport, host count and machine */
static int rf_same_p2p(const res_p2p_row *r, const res_p2p_row *k) {
  return !strcmp(r->fabric, k->fabric) && !strcmp(r->transport, k->transport) &&
         rf_p2p_hosts(r) == rf_p2p_hosts(k) && !strcmp(rf_str(r->topo_hash), rf_str(k->topo_hash));
}

/* p2p: one-way time t = alpha + n beta from lat rows (t_p50_us) and bw rows (bytes / rate). */
static int rf_fit_p2p(res_costmodel *out, const res_rows *pp, const res_fit_opts *o, char *err,
                      size_t cap) {
  const res_p2p_row *rows = pp->rows;
  rf_work w;
  if (rf_work_new(&w, pp->n, 0, err, cap)) return -1;
  const char **ids = malloc((pp->n ? pp->n : 1) * sizeof *ids); /* the cell's rows' runs */
  if (!ids) {
    rf_work_free(&w);
    return res_errf(err, cap, "out of memory"), -1;
  }
  int rc = 0;
  for (size_t i = 0; i < pp->n && !rc; i++) {
    if (w.done[i]) continue;
    const res_p2p_row *k = &rows[i];
    int hc = rf_p2p_hosts(k);
    /* Hockney's own experiment is the ping-pong: its one-way time is alpha + n beta at every
     * size. The streaming test keeps a window of messages in flight, so its time per small
     * message is far under alpha; it stands in only where no latency rows were measured. */
    size_t nlat = 0;
    for (size_t j = i; j < pp->n; j++) {
      const res_p2p_row *r = &rows[j];
      nlat += !w.done[j] && rf_same_p2p(r, k) && !strcmp(r->test, "latency") && !r->errors &&
              r->bytes > 0 && r->t_p50_us > 0;
    }
    const char *use = nlat >= 3 ? "latency" : "bw";
    size_t n = 0;
    for (size_t j = i; j < pp->n; j++) {
      const res_p2p_row *r = &rows[j];
      if (w.done[j] || !rf_same_p2p(r, k)) continue;
      w.done[j] = 1;
      if (r->errors || r->bytes <= 0 || strcmp(r->test, use)) continue;
      double t = nlat >= 3 ? r->t_p50_us * 1e-6 : r->gbps > 0 ? (double)r->bytes / (r->gbps * 1e9) : NAN;
      if (!(t > 0)) continue;
      ids[n] = r->run_id;
      rf_pt *p = &w.pt[n++];
      p->x[0] = 1;
      p->x[1] = (double)r->bytes;
      for (int q = 2; q < RF_NP; q++) p->x[q] = 0; /* one-way point to point: no reduction */
      p->y = t;
      p->algo = r->test;
      p->ranks = 2;
      p->bytes = r->bytes;
    }
    if (n < 3) continue;
    if (rf_cell_model(out, k->fabric, k->transport, hc, rf_str(k->topo_hash)))
      continue; /* the all-reduce fit of the same cell is the better one */
    coll_model def;
    coll_transport_kind tk;
    if (coll_transport_parse(k->transport, &tk)) tk = COLL_TCP;
    coll_model_default(&def, tk);
    double gamma_kernel = rf_cell_gamma(o, ids, n);
    double gfix = isfinite(gamma_kernel) && gamma_kernel > 0 ? gamma_kernel : def.gamma;
    double th[RF_NP];
    int gfixed;
    static const int ab[RF_NP] = {[RF_ALPHA] = 1, [RF_BETA] = 1};
    if (rf_robust(w.pt, n, 0, ab, th, &gfixed)) continue;
    res_fabric_cost *f = res_fabric_add(out, k->fabric, k->transport, "p2p", hc, rf_str(k->topo_hash), err, cap);
    if (!f) {
      rc = -1;
      break;
    }
    f->m = (coll_model){.alpha = th[RF_ALPHA], .beta = th[RF_BETA], .gamma = gfix, .hosts = hc};
    f->gamma_fixed = 1;
    if (rf_fill_stats(f, w.pt, n, th)) rc = -1, res_errf(err, cap, "out of memory");
  }
  free(ids);
  rf_work_free(&w);
  return rc;
}

int res_fit(res_costmodel *out, const res_rows *allreduce, const res_rows *p2p, double gamma_kernel,
            char *err, size_t errcap) {
  res_fit_opts o = {.gamma_kernel = gamma_kernel};
  return res_fit_ex(out, allreduce, p2p, &o, err, errcap);
}

int res_fit_ex(res_costmodel *out, const res_rows *allreduce, const res_rows *p2p, const res_fit_opts *o,
               char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  out->gamma_kernel = o->gamma_kernel;
  if (allreduce && rf_fit_allreduce(out, allreduce, o, err, errcap)) goto fail;
  if (p2p && rf_fit_p2p(out, p2p, o, err, errcap)) goto fail;
  for (size_t i = 0; allreduce && i < out->n; i++) rf_busy(&out->f[i], allreduce->rows, allreduce->n);
  if (out->n == 0) {
    res_errf(err, errcap, "nothing to fit: no error-free all-reduce rows of a named algorithm (ring, rhd, ...) or p2p lat/bw rows at 3 or more sizes");
    goto fail;
  }
  return 0;
fail:
  res_costmodel_free(out);
  return -1;
}
