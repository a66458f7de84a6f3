/* fabench report: report.md with gnuplot plots (PNG and SVG) from one or more run directories.
 * Rows of every directory are read with results' one reader and merged; a directory that is
 * not a fabench run, or whose schema is newer, is refused with the reason. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "coll.h"
#include "report_int.h"
#include "res.h"
#include "util.h"

enum { O_OUT = 256, O_NOPLOT };

static const bench_flag rp_flags[] = {
    {"out", "DIR", NULL, "where to write (default: results/<UTC>-report)", O_OUT},
    {"no-plot", NULL, NULL, "write report.md and the data, skip gnuplot", O_NOPLOT},
};
static const bench_flags_cmd rp_cmd = {
    "usage: fabench report [options] DIR...\n"
    "  Merges the run directories' records (allreduce, colls, coll_ranks, p2p, p2p_matrix, train,\n"
    "  train_buckets, train_epochs, predict) and writes report.md with plots (PNG and SVG): busbw\n"
    "  against size per fabric and algorithm with the cost model's curve, latency percentiles,\n"
    "  the other collectives' busbw per collective and rank count with the best algorithm against\n"
    "  the peer, the rank the others waited for, training images/s and step breakdown, a training\n"
    "  sweep's settings with test accuracy against epoch per setting and images/s against global\n"
    "  batch, predicted against measured, scaling efficiency to 1024 ranks, the p2p matrix. The\n"
    "  model is the first model.json found, else fitted from the rows.\n",
    rp_flags, sizeof rp_flags / sizeof *rp_flags, NULL, NULL, NULL};

typedef struct {
  const char *out;
  int plot;
} rp_opts;

static int rp_set(void *ctx, int code, const char *val, int given) {
  rp_opts *o = ctx;
  (void)given;
  if (code == O_OUT) o->out = val;
  if (code == O_NOPLOT) o->plot = 0;
  return 0;
}

static const res_schema *rp_schema(int k) {
  switch (k) {
  case RP_AR: return res_schema_allreduce();
  case RP_P2P: return res_schema_p2p();
  case RP_MAT: return res_schema_p2p_matrix();
  case RP_TRAIN: return res_schema_train();
  case RP_BUCKETS: return res_schema_train_buckets();
  case RP_EPOCHS: return res_schema_train_epochs();
  case RP_COLLS: return res_schema_colls();
  case RP_COLL_RANKS: return res_schema_coll_ranks();
  default: return res_schema_predict();
  }
}

/* Reads one run directory into the merged rows. */
static int rp_read_dir(rp_ctx *x, const char *d, char *err, size_t cap) {
  struct stat st;
  if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) return snprintf(err, cap, "'%s' is not a directory", d), -1;
  char path[4200];
  snprintf(path, sizeof path, "%s/accept.json", d);
  if (stat(path, &st) == 0) return 0; /* an accept run: its verdict is a section (rp_accept) */
  snprintf(path, sizeof path, "%s/run.json", d);
  if (stat(path, &st) != 0) return snprintf(err, cap, "'%s' is not a fabench run directory (no run.json)", d), -1;
  const res_schema *sch[RP_NREC];
  for (int k = 0; k < RP_NREC; k++) sch[k] = rp_schema(k);
  int found = res_run_read(x->rec, sch, RP_NREC, d, err, cap);
  if (found < 0) return -1;
  /* left out and said, as fit does (res_fit_read_dirs): a negative time would be plotted as a
   * median and priced as a model error; NaN is a time not measured */
  size_t u = res_rows_drop_untimed(&x->rec[RP_AR]) + res_rows_drop_untimed(&x->rec[RP_P2P]) +
             res_rows_drop_untimed(&x->rec[RP_COLLS]);
  if (u) {
    size_t l = strlen(x->untimed_in);
    snprintf(x->untimed_in + l, sizeof x->untimed_in - l, "%s%s: %zu", l ? ", " : "", d, u);
    x->untimed += u;
  }
  snprintf(path, sizeof path, "%s/model.json", d);
  if (!x->have_model && stat(path, &st) == 0) {
    if (res_costmodel_read(&x->model, path, err, cap)) return -1;
    x->have_model = 1;
    snprintf(x->model_src, sizeof x->model_src, "%s", path);
    found = 1;
  }
  if (!found) return snprintf(err, cap, "'%s' holds no fabench records (allreduce, colls, p2p, train, predict)", d), -1;
  return 0;
}


/* The model's time for an all-reduce row (NaN without a model for its fabric); where formulas
 * is not NULL, also its formulas' alone (*formulas) and whether the model learned the row's
 * algorithm, ranks and size (*at: there it holds a measured time, not a prediction). */
static double rp_pred_us_ex(const rp_ctx *x, const res_allreduce_row *r, double *formulas, int *at) {
  /* a row measured beside a load (compute_loss) is not the link's time the model predicts */
  if (!x->have_model || isfinite(r->compute_loss)) return NAN;
  double t = res_allreduce_row_time(&x->model, r, formulas, at) * 1e6;
  if (formulas) *formulas *= 1e6;
  return isfinite(t) && t > 0 ? t : NAN;
}

/* What the report's tables and plots show as the model's time: at a size where the model learned
 * its formulas' misses it holds a measured time (in-sample, this row's), so there the formulas'
 * alone, which is a prediction; elsewhere the model's. */
static double rp_pred_us(const rp_ctx *x, const res_allreduce_row *r) {
  double p0 = NAN;
  int at = 0;
  double t = rp_pred_us_ex(x, r, &p0, &at);
  return at && isfinite(p0) && p0 > 0 ? p0 : t;
}

/* A curve: one run's rows of a fabric, algorithm, rank count, dtype and op (two runs' rows of one
 * key, two clusters' or a repeat, zigzagged as one line). `other_run`: the same key, another run. */
static int rp_same_group(const res_allreduce_row *a, const res_allreduce_row *b, int other_run) {
  return !strcmp(a->fabric, b->fabric) && !strcmp(a->transport, b->transport) && !strcmp(a->algo, b->algo) &&
         a->ranks == b->ranks && !strcmp(a->dtype, b->dtype) && !strcmp(a->op, b->op) &&
         !strcmp(a->run_id, b->run_id) == !other_run;
}


/* A time that grows over RP_STEEP times as fast as the size between two sizes from 1 MiB, where
 * every algorithm moves its bytes at a rate: something other than the link set in there (a
 * library's allocation, a protocol's switch, the machine slowing), and a ratio against that row
 * would mislead (docs/measurements.md, "MPI_Allreduce's scratch buffer"). The group's steepest
 * step (from, to) and how many times its time grew there; 0 where none is that steep. */
#define RP_STEEP 3.0
static double rp_steepest(const int64_t *b, const double *t, size_t n, int64_t *from, int64_t *to) {
  double worst = 0, grew = 0;
  for (size_t i = 0; i < n; i++) { /* each size against the next larger one measured */
    int64_t nb = 0;
    double nt = NAN;
    for (size_t j = 0; j < n; j++)
      if (b[j] > b[i] && (!nb || b[j] < nb)) nb = b[j], nt = t[j];
    if (!nb || b[i] < (1 << 20) || !(t[i] > 0) || !(nt > 0)) continue;
    double g = (nt / t[i]) / ((double)nb / (double)b[i]);
    if (g > worst) worst = g, grew = nt / t[i], *from = b[i], *to = nb;
  }
  return worst > RP_STEEP ? grew : 0;
}

/* busbw against size and latency percentiles: one data block per group. */
/* One group of all-reduce rows (rp_same_group: one fabric, transport, algorithm, type, op and
 * rank count): what its table row and plots need. */
typedef struct {
  double errs[256], gt[256]; /* the model's relative errors from 1 MiB; the medians by size */
  int64_t gb[256];           /* the sizes of gt */
  size_t ne, nsz, nbw, nlat, ng;
  double top;                /* busbw at the largest size */
} rp_ar_group;

/* Writes the group of row i (its rows marked done) as a block of allreduce.dat, and sums it up. */
static void rp_ar_group_data(rp_ctx *x, FILE *d, const res_rows *R, char *done, size_t i, rp_ar_group *g) {
  const res_allreduce_row *rows = R->rows, *k = &rows[i];
  memset(g, 0, sizeof *g);
  int64_t topb = 0;
  for (size_t j = i; j < R->n; j++) {
    if (done[j] || !rp_same_group(&rows[j], k, 0)) continue;
    done[j] = 1;
    const res_allreduce_row *r = &rows[j];
    double pred = rp_pred_us(x, r), f = 2.0 * (r->ranks - 1) / r->ranks;
    double pbw = isfinite(pred) ? (double)r->bytes / (pred * 1e-6) / 1e9 * f : NAN;
    fprintf(d, "%lld,%.6g,", (long long)r->bytes, r->busbw_gbps);
    if (isfinite(pbw)) fprintf(d, "%.6g", pbw);
    fprintf(d, ",%.6g,%.6g,%.6g\n", r->t_p50_us, r->t_p90_us, r->t_p99_us);
    g->nsz++;
    /* what the log-log plots can show: a 1-rank all-reduce's busbw is 0 */
    g->nbw += r->bytes > 0 && (r->busbw_gbps > 0 || pbw > 0);
    g->nlat += r->bytes > 0 && (r->t_p50_us > 0 || r->t_p99_us > 0);
    if (r->bytes >= topb) topb = r->bytes, g->top = r->busbw_gbps;
    if (r->bytes >= (1 << 20) && isfinite(pred) && g->ne < 256) g->errs[g->ne++] = fabs(r->t_p50_us - pred) / pred;
    if (g->ng < 256) g->gb[g->ng] = r->bytes, g->gt[g->ng++] = r->t_p50_us;
  }
}

/* The group's line in report.md's all-reduce table (its errors sorted), and in st (may be NULL)
 * its line where its time grows faster than its size. */
static void rp_ar_md_row(rp_ctx *x, FILE *st, const res_allreduce_row *k, const char *who, rp_ar_group *gr) {
  double med = NAN, mx = NAN;
  if (gr->ne) {
    /* insertion sort: few sizes */
    for (size_t a = 1; a < gr->ne; a++)
      for (size_t b = a; b > 0 && gr->errs[b - 1] > gr->errs[b]; b--) {
        double t = gr->errs[b];
        gr->errs[b] = gr->errs[b - 1];
        gr->errs[b - 1] = t;
      }
    med = gr->errs[gr->ne / 2];
    mx = gr->errs[gr->ne - 1];
  }
  char c0[300], c1[640], c2[64], c3[64], c4[64], c5[64];
  snprintf(c0, sizeof c0, "%s%s", k->fabric, who);
  fprintf(x->md, "| %s | %s | %s | %s | %s | %lld | %zu | %.3f | ", rp_md(c1, sizeof c1, c0),
          rp_md(c2, sizeof c2, k->transport), rp_md(c3, sizeof c3, k->algo), rp_md(c4, sizeof c4, k->dtype),
          rp_md(c5, sizeof c5, k->op), (long long)k->ranks, gr->nsz, gr->top);
  if (gr->ne)
    fprintf(x->md, "%.1f%%, %.1f%% |\n", 100 * med, 100 * mx);
  else
    fprintf(x->md, "- |\n");
  int64_t s0 = 0, s1 = 0;
  double g = rp_steepest(gr->gb, gr->gt, gr->ng, &s0, &s1);
  if (g > 0 && st) {
    fprintf(st, "- **%s** (%s): %s on %lld ranks, from %.0f to %.0f MiB its time grew %.1fx, the size %.0fx.%s\n",
            c1, c2, c3, (long long)k->ranks, s0 / 1048576.0, s1 / 1048576.0, g, (double)s1 / (double)s0,
            !strcmp(k->transport, "mpi") && !strcmp(k->algo, "native")
                ? " Open MPI 4.1's MPI_Allreduce maps a fresh scratch buffer in every call from 32 MiB; where "
                  "the machine's page faults are slow that is most of its time (README: what fabench leaves "
                  "to MPI)."
                : "");
  }
}

/* The panel of a group's curves in both plots (bw, lat: np so far): its fabric, and the transport
 * where the fabric does not name it (emu-1gbit); a new one where none has that title yet. */
static size_t rp_ar_panel(rp_panel *bw, rp_panel *lat, size_t *np, const res_allreduce_row *k) {
  char panel[sizeof bw->title];
  size_t tl = strlen(k->transport), q = 0;
  if (!strncmp(k->fabric, k->transport, tl) && k->fabric[tl] == ':')
    snprintf(panel, sizeof panel, "%s", k->fabric);
  else
    snprintf(panel, sizeof panel, "%s (%s)", k->fabric, k->transport);
  rp_label(panel, 0);
  while (q < *np && strcmp(bw[q].title, panel)) q++;
  if (q == *np) {
    memcpy(bw[q].title, panel, sizeof panel);
    memcpy(lat[q].title, panel, sizeof panel);
    (*np)++;
  }
  return q;
}

static void rp_allreduce(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_AR];
  if (!R->n) return;
  const res_allreduce_row *rows = R->rows;
  FILE *d = rp_open(x, "allreduce.dat");
  if (!d) return;
  char *done = calloc(R->n, 1);
  /* a panel per fabric and transport (their rows' order), of each plot */
  rp_panel *bw = calloc(R->n, sizeof *bw), *lat = calloc(R->n, sizeof *lat);
  size_t np = 0;
  int blk = 0, mixed = 0; /* mixed: the rows hold more than one dtype or op, the keys name them */
  for (size_t i = 1; i < R->n; i++) mixed |= strcmp(rows[i].dtype, rows[0].dtype) || strcmp(rows[i].op, rows[0].op);
  char *steep = NULL; /* the groups whose time grows faster than their size, a line each */
  size_t steep_len = 0;
  FILE *st = open_memstream(&steep, &steep_len);
  size_t loaded = 0; /* rows measured beside a load (compute_loss): a loaded machine's times */
  for (size_t i = 0; done && i < R->n; i++)
    if (isfinite(rows[i].compute_loss)) done[i] = 1, loaded++;
  fprintf(x->md, "\n## All-reduce\n\n");
  if (loaded)
    fprintf(x->md, "%zu rows measured beside a load (`--beside-compute`) are left out here: they give the training "
                   "step's share of the cores (model.json's compute_loss).\n\n", loaded);
  fprintf(x->md, "| fabric | transport | algo | dtype | op | ranks | sizes | busbw at largest (GB/s) | model error from 1 MiB (median, max) |\n|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < R->n && bw && lat && done; i++) {
    if (done[i]) continue;
    const res_allreduce_row *k = &rows[i];
    fprintf(d, "# %s %s %s %s %s p%lld\nbytes,busbw,pred_busbw,p50,p90,p99\n", k->fabric, k->transport, k->algo, k->dtype,
            k->op, (long long)k->ranks);
    rp_ar_group g;
    rp_ar_group_data(x, d, R, done, i, &g);
    fprintf(d, "\n\n");
    /* another run's rows of the key (rows measured beside a load are not shown: not theirs) */
    int elsewhere = 0;
    for (size_t j = 0; j < R->n && !elsewhere; j++)
      elsewhere = !isfinite(rows[j].compute_loss) && rp_same_group(&rows[j], k, 1);
    char who[96], title[384], clause[1024];
    rp_run_suffix(who, sizeof who, elsewhere, k->run_id);
    snprintf(title, sizeof title, "%s p%lld%s%s%s%s%s", k->algo, (long long)k->ranks, mixed ? " " : "",
             mixed ? k->dtype : "", mixed ? " " : "", mixed ? k->op : "", who);
    rp_label(title, 0);
    size_t q = rp_ar_panel(bw, lat, &np, k);
    int lc = (int)bw[q].ncurves + 1; /* the same colour in both plots */
    snprintf(clause, sizeof clause, "'allreduce.dat' index %d using 1:2 with linespoints lc %d title '%s' noenhanced, "
             "'' index %d using 1:3 with lines dt 2 lc %d notitle", blk, lc, title, blk, lc);
    rp_panel_add(&bw[q], clause, title, g.nbw);
    snprintf(clause, sizeof clause, "'allreduce.dat' index %d using 1:4 with linespoints lc %d title '%s' noenhanced, "
             "'' index %d using 1:6 with lines dt 3 lc %d notitle", blk, lc, title, blk, lc);
    rp_panel_add(&lat[q], clause, title, g.nlat);
    blk++;
    rp_ar_md_row(x, st, k, who, &g);
  }
  if (st && fclose(st) == 0 && steep_len)
    fprintf(x->md, "\nRows whose time grows over %.0f times as fast as their size from 1 MiB, where every algorithm "
                   "moves its bytes at a rate: something other than the link set in there (an allocation in every "
                   "call, a protocol's switch, or the machine slowing). Measure them again before comparing against "
                   "them.\n\n%s", RP_STEEP, steep);
  else if (!st)
    fprintf(stderr, "fabench report: cannot check the all-reduce rows' growth with size: out of memory\n");
  free(steep);
  rp_close(x, d, "allreduce.dat");
  if (bw && lat && blk) {
    rp_panels_against_size(x, "busbw", "all-reduce busbw (dashed: cost model)", "busbw (GB/s)", bw, np);
    rp_panels_against_size(x, "latency", "all-reduce time (solid: p50, dotted: p99)", "time (us)", lat, np);
  }
  for (size_t q = 0; q < np; q++) free(bw[q].plots), free(lat[q].plots);
  free(bw);
  free(lat);
  free(done);
}

/* Rows from 1 MiB below which no verdict is given: a short sweep (suite --quick's ends at
 * 1 MiB) has too few rows there, and one size's misses would condemn the model */
#define RP_VERDICT_MIN_ROWS 6

/* What a user may do with a model that has ok of n rows within 10%. */
static const char *rp_verdict(size_t ok, size_t n) {
  if (n < RP_VERDICT_MIN_ROWS) return "Too few rows from 1 MiB to judge it: a sweep to larger sizes would tell.";
  return ok == n ? "It can be trusted for these sizes." : 2 * ok >= n ? "Use it for trends, not single figures."
                                                                      : "Do not rely on it for this fabric.";
}

/* The model's all-reduce error from 1 MiB in plain words, per fabric and transport: how many
 * rows it predicts within 10%, the median and the worst, and whether that is in-sample. Where
 * the model learned its formulas' misses at a row's size it holds the time it learned from
 * (this row's, when fitted on it): the verdict then goes by the formulas alone. */
static void rp_model_words(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_AR];
  if (!R->n || !x->have_model) return;
  const res_allreduce_row *rows = R->rows;
  char *done = calloc(R->n, 1);
  double *e = malloc(2 * R->n * sizeof *e), *e0 = e ? e + R->n : NULL; /* e0: the formulas alone */
  if (!done || !e) {
    free(done);
    free(e);
    return;
  }
  int any = 0;
  for (size_t i = 0; i < R->n; i++) {
    if (done[i]) continue;
    const res_allreduce_row *k = &rows[i];
    size_t n = 0, ok = 0, nr = 0, moved = 0; /* nr: rows measured in rounds; moved: > 10% apart */
    size_t ok0 = 0, at = 0;                   /* the formulas alone; rows at a size the model learned */
    const res_allreduce_row *worst = NULL, *worst0 = NULL;
    double wv = -1, wv0 = -1;
    for (size_t j = i; j < R->n; j++) {
      const res_allreduce_row *r = &rows[j];
      if (done[j] || strcmp(r->fabric, k->fabric) || strcmp(r->transport, k->transport)) continue;
      done[j] = 1;
      double p0 = NAN;
      int learned_at = 0;
      double p = rp_pred_us_ex(x, r, &p0, &learned_at);
      if (r->bytes < (1 << 20) || r->errors || !isfinite(p) || !(r->t_p50_us > 0)) continue;
      double v = fabs(r->t_p50_us - p) / p, v0 = fabs(r->t_p50_us - p0) / p0;
      e0[n] = v0;
      e[n++] = v;
      ok += v <= 0.10;
      ok0 += v0 <= 0.10;
      at += learned_at;
      if (v > wv) wv = v, worst = r;
      if (v0 > wv0) wv0 = v0, worst0 = r;
      nr += isfinite(r->round_spread);
      moved += r->round_spread > 0.10;
    }
    if (!n) continue;
    /* where it learned at these sizes it holds the times it was fitted to: the formulas speak */
    if (at) worst = worst0, wv = wv0;
    if (!any++)
      fprintf(x->md, "\n### How well the model predicts the all-reduce (from 1 MiB)\n\n");
    fprintf(x->md,
            "- **%s** (%s): the model%s %zu of %zu measured all-reduce times from 1 MiB within 10%%; "
            "the median error is %.0f%% and the worst %.0f%% (%s on %lld ranks at %.0f MiB). %s\n",
            k->fabric, k->transport, at ? "'s formulas predict" : " predicts", at ? ok0 : ok, n, 100 * util_median(at ? e0 : e, n),
            100 * wv, *worst->algo_ran ? worst->algo_ran : worst->algo, (long long)worst->ranks,
            (double)worst->bytes / 1048576, rp_verdict(at ? ok0 : ok, n));
    if (at)
      fprintf(x->md, "  With what it learned of their misses (at %zu of these rows' sizes, where it holds the times it "
                     "was fitted to) %zu are within 10%%: no test of a prediction; `fabench fit --check` on a second "
                     "run is.\n", at, ok);
    if (moved)
      fprintf(x->md, "  %zu of the %zu rows measured in rounds moved more than 10%% between their rounds "
                     "(round_spread): the machine changed speed while measuring them, which no model predicts; "
                     "measure those again.\n", moved, nr);
  }
  if (any)
    fprintf(x->md, "\nThe model (%s) %s. Errors are (measured - predicted) / predicted of the median time; a "
                   "busy machine (other processes on the cores) shows up as error.\n",
            x->model_src,
            strcmp(x->model_src, "fitted from these runs") ? "may have been fitted on other runs (out-of-sample when it was)"
                                                          : "was fitted on these same rows: these errors are in-sample, "
                                                            "an out-of-sample check needs a second run (scripts/bench-model.sh)");
  free(done);
  free(e);
}

static void rp_model(rp_ctx *x) {
  if (!x->have_model) {
    fprintf(x->md, "\n## Cost model\n\nNo model: no model.json and no rows to fit.\n");
    return;
  }
  fprintf(x->md, "\n## Cost model (%s)\n\n| fabric | transport | hosts | source | alpha (us) | link (GB/s) | reduction (GB/s) | host CPU per byte sent (ns) | R^2 | rms rel. residual | rows used |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
          x->model_src);
  for (size_t i = 0; i < x->model.n; i++) {
    const res_fabric_cost *f = &x->model.f[i];
    char red[80], cpu[16] = "-"; /* measured where no rank spun (host_cpu_us) */
    if (f->cpu_byte > 0) snprintf(cpu, sizeof cpu, "%.3f", f->cpu_byte * 1e9);
    if (f->m.gamma > 0) /* res_fit.c: an emulated link's shaper banks a pipelined reduction's pauses */
      snprintf(red, sizeof red, "%.3f%s%s", 1e-9 / f->m.gamma, f->gamma_fixed ? " (kernel)" : "",
               f->m.red_hidden ? ", pipelined: hidden by the shaper" : "");
    else
      snprintf(red, sizeof red, "hidden by the shaper");
    char c1[512], c2[64], c3[64], name[256];
    fprintf(x->md, "| %s | %s | %d | %s | %.2f | %.3f | %s | %s | %.4f | %.3f | %zu/%zu |\n",
            rp_md(c1, sizeof c1, res_costmodel_label(&x->model, f, name, sizeof name)), rp_md(c2, sizeof c2, f->transport), f->host_count,
            rp_md(c3, sizeof c3, f->source), f->m.alpha * 1e6,
            1e-9 / f->m.beta, red, cpu,
            f->r2, f->rms_rel, f->n_used, f->n);
  }
  int learned = 0;
  for (size_t i = 0; i < x->model.n; i++) learned |= x->model.f[i].m.ncurves > 0;
  if (learned)
    fprintf(x->md, "\nThe model also learned what its formulas miss at the sizes it was fitted on, per fabric, "
                   "algorithm and rank count (`fabench fit --formulas-only` leaves that out); its predictions carry "
                   "it between and around those sizes. At a size it learned, it holds the time measured there: "
                   "this report's all-reduce tables and plots show the formulas' prediction at such sizes.\n");
}

/* A one-rank training profile of a model, for the step predictions. */
static const res_train_row *rp_one_rank(const rp_ctx *x, const char *model) {
  const res_train_row *t = x->rec[RP_TRAIN].rows;
  for (size_t i = 0; i < x->rec[RP_TRAIN].n; i++)
    if (t[i].ranks == 1 && (!model || !strcmp(t[i].model, model)) && t[i].fwd_ms > 0 && t[i].bwd_ms > 0) return &t[i];
  return NULL;
}

/* The buckets of a one-rank run (ready times), else even readiness over backward. */
static size_t rp_buckets(const rp_ctx *x, const res_train_row *one, res_bucket *b, size_t cap) {
  size_t n = 0;
  const res_train_buckets_row *k = x->rec[RP_BUCKETS].rows;
  for (size_t i = 0; i < x->rec[RP_BUCKETS].n && n < cap; i++)
    if (k[i].ranks == 1 && !strcmp(k[i].run_id, one->run_id) && isfinite(k[i].ready_ms) && k[i].bytes > 0)
      b[n++] = (res_bucket){(double)k[i].bytes, k[i].ready_ms};
  if (n) return n;
  double total = (double)one->grad_bytes, off = 0;
  double bmb = isfinite(one->bucket_mb) && one->bucket_mb > 0 ? one->bucket_mb : 25;
  double fmb = isfinite(one->first_bucket_mb) && one->first_bucket_mb > 0 ? one->first_bucket_mb : 1;
  while (off < total && n < cap) {
    double sz = (n ? bmb : fmb) * 1048576.0;
    if (sz > total - off) sz = total - off;
    off += sz;
    b[n++] = (res_bucket){sz, one->bwd_ms * off / total};
  }
  return n;
}

/* A train row's predicted step and exposed communication: its own columns when the run wrote
 * them, else ours; *kind: replay or held-out ("" where a run wrote no kind). */
static double rp_train_pred(const rp_ctx *x, const res_train_row *r, double *exposed, const char **kind) {
  *exposed = r->exposed_comm_ms_pred;
  *kind = r->pred_kind ? r->pred_kind : "";
  if (isfinite(r->step_ms_pred)) return r->step_ms_pred;
  res_train_row c = *r;
  const res_train_row *prof = res_train_profile(&x->rec[RP_TRAIN], r);
  if (!prof) prof = rp_one_rank(x, r->model);
  if (res_predict_train_row(&c, prof, &x->rec[RP_BUCKETS], x->have_model ? &x->model : NULL)) return NAN;
  *exposed = c.exposed_comm_ms_pred;
  *kind = c.pred_kind;
  return c.step_ms_pred;
}

static void rp_train(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_TRAIN];
  if (!R->n) return;
  const res_train_row *t = R->rows;
  FILE *d = rp_open(x, "train.dat");
  if (!d) return;
  fprintf(d, "# label,images_per_s,data_ms,fwd_ms,bwd_ms,exposed_comm_ms,opt_ms,step_ms_mean,step_ms_pred,"
             "exposed_comm_ms_pred\n");
  size_t nimg = 0;
  fprintf(x->md, "\n## Training\n\n| model | ranks | fabric | transport | algo | images/s | step p50 (ms) | exposed comm (ms) | predicted step (ms) | predicted exposed (ms) | error of the mean step | fabric eff. | bound |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < R->n; i++) {
    const res_train_row *r = &t[i];
    const char *kind;
    double pexp, pred = rp_train_pred(x, r, &pexp, &kind);
    /* the prediction is of the wall time per step, the mean (train.csv's pred_err too); the
     * table's step is the p50 (step_ms), as train prints it and train.csv names it */
    double step = isfinite(r->step_ms_mean) ? r->step_ms_mean : r->step_ms;
    char label[128];
    snprintf(label, sizeof label, "%s %s p%lld", r->ranks > 1 ? r->transport : "1 rank", r->ranks > 1 ? r->algo : "",
             (long long)r->ranks);
    rp_label(label, 1);
    fprintf(d, "%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,", label, r->images_per_s, isfinite(r->data_ms) ? r->data_ms : 0,
            r->fwd_ms, r->bwd_ms, isfinite(r->exposed_comm_ms) ? r->exposed_comm_ms : 0, isfinite(r->opt_ms) ? r->opt_ms : 0, step);
    if (isfinite(pred)) fprintf(d, "%.6g", pred);
    fprintf(d, ",");
    if (isfinite(pred) && isfinite(pexp)) fprintf(d, "%.6g", pexp);
    fprintf(d, "\n");
    nimg += isfinite(r->images_per_s);
    char c1[128], c2[512], c3[64], c4[64];
    /* train --rounds: the fastest round's figure, and the slowest's beside it (the machine's drift) */
    char ips[96];
    if (r->rounds > 1 && isfinite(r->images_per_s_slowest))
      snprintf(ips, sizeof ips, "%.1f (slowest of %lld rounds %.1f)", r->images_per_s, (long long)r->rounds,
               r->images_per_s_slowest);
    else
      snprintf(ips, sizeof ips, "%.1f", r->images_per_s);
    fprintf(x->md, "| %s | %lld | %s | %s | %s | %s | %.2f | %.2f | ", rp_md(c1, sizeof c1, r->model), (long long)r->ranks,
            rp_md(c2, sizeof c2, r->fabric), rp_md(c3, sizeof c3, r->transport), rp_md(c4, sizeof c4, r->algo),
            ips, r->step_ms, isfinite(r->exposed_comm_ms) ? r->exposed_comm_ms : 0);
    if (isfinite(pred)) {
      char pe[32] = "-";
      if (isfinite(pexp)) snprintf(pe, sizeof pe, "%.2f", pexp);
      fprintf(x->md, "%.2f%s%s%s | %s | %+.1f%% | ", pred, *kind ? " (" : "", kind, *kind ? ")" : "", pe,
              100 * (step - pred) / pred);
    } else {
      fprintf(x->md, "- | - | - | ");
    }
    if (isfinite(r->fabric_eff))
      fprintf(x->md, "%.3f | ", r->fabric_eff);
    else
      fprintf(x->md, "- | ");
    /* what telemetry said bound the pair's last round, with the busiest link's share */
    if (r->bound && *r->bound && isfinite(r->link_util))
      fprintf(x->md, "%s (link %.0f%%) |\n", r->bound, 100 * r->link_util);
    else
      fprintf(x->md, "%s |\n", r->bound && *r->bound ? r->bound : "-");
  }
  rp_close(x, d, "train.dat");
  rp_plot(x, "train_images", "training images/s",
          "set style data histograms\nset style fill solid 0.7\nset boxwidth 0.8\nset xtics rotate by -30 noenhanced\nset ylabel 'images/s'\n"
          "plot 'train.dat' using 2:xtic(1) title 'images/s'", nimg);
  rp_plot(x, "train_breakdown", "training step breakdown (ms)",
          "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.7\nset boxwidth 0.8\n"
          "set xtics rotate by -30 noenhanced\nset ylabel 'ms per step'\n"
          "plot 'train.dat' using 3:xtic(1) title 'data', '' using 4 title 'forward', '' using 5 title 'backward', "
          "'' using 6 title 'exposed comm', '' using 7 title 'optimizer'", R->n); /* NaN parts are written 0 */
}

/* A sweep row's settings, for a curve's title and the table (the role and pair where they are
 * not one rank alone). */
static void rp_setting_name(char *out, size_t cap, int64_t batch, int64_t global, double lr, const char *opt,
                            int64_t epochs, int64_t threads, int64_t workers, const char *device, const char *role,
                            const char *transport, const char *algo) {
  char pair[96] = "";
  if (strcmp(role, "single")) snprintf(pair, sizeof pair, " %s %s/%s", role, transport, algo);
  snprintf(out, cap, "b%lld (global %lld) lr %g %s %lld ep %lldt %lldw %s%s", (long long)batch, (long long)global,
           lr, opt && *opt ? opt : "sgd", (long long)epochs, (long long)threads, (long long)workers, device, pair);
  rp_label(out, 1);
}

/* A training sweep (train rows that record their setting): its table, test accuracy against
 * epoch per setting (train_epochs.csv), and images/s against the global batch where the rows
 * have more than one. */
static void rp_sweep(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_TRAIN], *E = &x->rec[RP_EPOCHS];
  const res_train_row *t = R->rows;
  size_t nsw = 0;
  for (size_t i = 0; i < R->n; i++) nsw += t[i].optimizer && *t[i].optimizer;
  if (!nsw && !E->n) return;
  fprintf(x->md, "\n## Training sweep\n\n| run | setting | device | role | batch | global batch | lr | optimizer | epochs | threads "
                 "| loader workers | images/s | test acc | target | time to target (s) | data wait (ms/step) | load (ms/batch) |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const res_train_row *first = NULL;
  for (size_t i = 0; i < R->n; i++) {
    const res_train_row *r = &t[i];
    if (!r->optimizer || !*r->optimizer) continue;
    char c1[128], c2[64];
    fprintf(x->md, "| %s | %lld | %s | %s %s | %lld | %lld | %g | %s | %lld | %lld | %lld | %.1f | %.4f | ",
            rp_md(c1, sizeof c1, r->run_id), (long long)r->setting, r->device, r->role, rp_md(c2, sizeof c2, r->transport),
            (long long)r->batch, (long long)r->global_batch, r->lr, r->optimizer, (long long)r->epochs,
            (long long)r->threads, (long long)r->loader_workers, r->images_per_s, r->test_acc);
    if (isfinite(r->target_acc)) fprintf(x->md, "%.4f | ", r->target_acc);
    else fprintf(x->md, "- | ");
    if (isfinite(r->time_to_target_s)) fprintf(x->md, "%.1f | ", r->time_to_target_s);
    else fprintf(x->md, "%s | ", isfinite(r->target_acc) ? "not reached" : "-");
    fprintf(x->md, "%.3f | %.3f |\n", r->data_wait_ms, r->load_ms);
    if (isfinite(r->time_to_target_s) && (!first || r->time_to_target_s < first->time_to_target_s)) first = r;
  }
  if (first) {
    char name[256];
    rp_setting_name(name, sizeof name, first->batch, first->global_batch, first->lr, first->optimizer, first->epochs,
                    first->threads, first->loader_workers, first->device, first->role, first->transport, first->algo);
    fprintf(x->md, "\nFirst to test accuracy %.4f: %s, after %.1f s.\n", first->target_acc, name, first->time_to_target_s);
  }
  /* accuracy against epoch: a data block per (run, setting, role, pair, device, round), in file order */
  const res_train_epochs_row *e = E->rows;
  FILE *d = E->n ? rp_open(x, "sweep_epochs.dat") : NULL;
  size_t cap = 4096, len = 0, np = 0;
  char *plots = d ? malloc(cap) : NULL;
  if (plots) plots[0] = '\0';
  int block = 0;
  for (size_t i = 0; plots && i < E->n; i++) {
    const res_train_epochs_row *q = &e[i];
    int same = i > 0 && !strcmp(q->run_id, e[i - 1].run_id) && q->setting == e[i - 1].setting &&
               !strcmp(q->role, e[i - 1].role) && !strcmp(q->transport, e[i - 1].transport) &&
               !strcmp(q->algo, e[i - 1].algo) && !strcmp(q->device, e[i - 1].device) && q->round == e[i - 1].round;
    if (!same) {
      char name[256], clause[512];
      rp_setting_name(name, sizeof name, q->batch, q->global_batch, q->lr, q->optimizer, q->epochs, q->threads,
                      q->loader_workers, q->device, q->role, q->transport, q->algo);
      if (i) fprintf(d, "\n\n");
      int n = snprintf(clause, sizeof clause, "%s'sweep_epochs.dat' index %d using 1:2 with linespoints title '%s'",
                       block ? ", " : "", block, name);
      if (len + (size_t)n + 1 > cap) {
        char *more = realloc(plots, 2 * cap + (size_t)n);
        if (!more) break;
        plots = more;
        cap = 2 * cap + (size_t)n;
      }
      memcpy(plots + len, clause, (size_t)n + 1);
      len += (size_t)n;
      block++;
    }
    fprintf(d, "%.6g,%.6g\n", q->epoch, q->test_acc);
    np += isfinite(q->test_acc);
  }
  if (d) rp_close(x, d, "sweep_epochs.dat");
  if (plots && block) {
    size_t bl = len + 256;
    char *body = malloc(bl);
    if (body) {
      snprintf(body, bl, "set offsets graph 0.05, graph 0.05, graph 0.05, 0\nset xlabel 'epoch'\nset ylabel 'test accuracy'\nset key noenhanced\nplot %s", plots);
      rp_plot(x, "sweep_acc", "test accuracy against epoch, per setting", body, np);
    }
    free(body);
  }
  free(plots);
  /* images/s against the global batch: one series per (role, pair, device), where the rows have
   * more than one global batch */
  int64_t g0 = -1;
  int several = 0;
  for (size_t i = 0; i < R->n; i++)
    if (t[i].optimizer && *t[i].optimizer) {
      if (g0 < 0) g0 = t[i].global_batch;
      several |= t[i].global_batch != g0;
    }
  if (!several) return;
  d = rp_open(x, "sweep_batch.dat");
  if (!d) return;
  char *done = calloc(R->n, 1), body[8192];
  size_t bl = (size_t)snprintf(body, sizeof body, "set logscale x 2\nset offsets graph 0.05, graph 0.05, graph 0.05, 0\nset xlabel 'global batch'\nset ylabel 'images/s'\n"
                                                    "set key noenhanced\nplot ");
  int series = 0;
  size_t npts = 0;
  for (size_t i = 0; done && i < R->n; i++) {
    if (done[i] || !t[i].optimizer || !*t[i].optimizer) continue;
    if (series) fprintf(d, "\n\n");
    for (size_t k = i; k < R->n; k++) {
      const res_train_row *r = &t[k];
      if (done[k] || !r->optimizer || !*r->optimizer || strcmp(r->role, t[i].role) || strcmp(r->transport, t[i].transport) ||
          strcmp(r->algo, t[i].algo) || strcmp(r->device, t[i].device))
        continue;
      done[k] = 1;
      fprintf(d, "%lld,%.6g\n", (long long)r->global_batch, r->images_per_s);
      npts += isfinite(r->images_per_s);
    }
    char title[160];
    snprintf(title, sizeof title, "%s %s/%s %s", t[i].role, t[i].transport, t[i].algo, t[i].device);
    rp_label(title, 0);
    if (bl + 200 < sizeof body)
      bl += (size_t)snprintf(body + bl, sizeof body - bl, "%s'sweep_batch.dat' index %d using 1:2 with points pt 7 title '%s'",
                             series ? ", " : "", series, title);
    series++;
  }
  free(done);
  rp_close(x, d, "sweep_batch.dat");
  rp_plot(x, "sweep_batch", "training images/s against global batch", body, npts);
}

/* Predicted against measured: every all-reduce row with a prediction, and training steps. */
static void rp_pred_vs_meas(rp_ctx *x) {
  FILE *d = rp_open(x, "pred_vs_meas.dat");
  if (!d) return;
  size_t n = 0, nt = 0;
  fprintf(d, "# all-reduce: measured_us,predicted_us\n");
  const res_allreduce_row *a = x->rec[RP_AR].rows;
  for (size_t i = 0; i < x->rec[RP_AR].n; i++) {
    double p = rp_pred_us(x, &a[i]);
    if (isfinite(p) && a[i].t_p50_us > 0) fprintf(d, "%.6g,%.6g\n", a[i].t_p50_us, p), n++;
  }
  if (!n) fprintf(d, "nan,nan\n");
  fprintf(d, "\n\n# training steps: measured_us,predicted_us\n");
  const res_train_row *t = x->rec[RP_TRAIN].rows;
  for (size_t i = 0; i < x->rec[RP_TRAIN].n; i++) {
    const char *k;
    double e, p = rp_train_pred(x, &t[i], &e, &k);
    double s = isfinite(t[i].step_ms_mean) ? t[i].step_ms_mean : t[i].step_ms;
    if (isfinite(p) && p > 0 && s > 0) fprintf(d, "%.6g,%.6g\n", s * 1e3, p * 1e3), nt++;
  }
  if (!nt) fprintf(d, "nan,nan\n");
  rp_close(x, d, "pred_vs_meas.dat");
  fprintf(x->md, "\n## Predicted against measured\n\n%zu all-reduce rows and %zu training runs with a prediction.\n", n, nt);
  /* only the blocks with points: one of none is a warning in gnuplot.log */
  char body[1024];
  size_t len = (size_t)snprintf(body, sizeof body, "set logscale xy\nset xlabel 'measured (us)'\nset ylabel 'predicted (us)'\nset size ratio -1\nplot ");
  if (n)
    len += (size_t)snprintf(body + len, sizeof body - len, "'pred_vs_meas.dat' index 0 using 1:2 with points pt 7 ps 0.5 title 'all-reduce', ");
  if (nt)
    len += (size_t)snprintf(body + len, sizeof body - len, "'pred_vs_meas.dat' index 1 using 1:2 with points pt 5 ps 1 title 'training step', ");
  snprintf(body + len, sizeof body - len, "x with lines dt 2 lc 'black' title 'y = x'");
  rp_plot(x, "pred_vs_meas", "predicted against measured (y = x)", body, n + nt);
}

/* Scaling to 1024 ranks: a cluster of nodes of this machine's cores in ranks, inside a node the
 * transport as measured here, between nodes each fitted link and 100 and 400 Gbit/s stated
 * (res_scaling_plan), flat ring and hier:ring, with the one-rank profile measured here (else
 * ResNet-50 at 360 images/s, batch 32). One host's fabric is never stretched past one node. */
static void rp_scaling(rp_ctx *x) {
  if (!x->have_model) return;
  /* ranks per node: the cores of the host the one-host fabrics were fitted on (its topology),
   * else the most ranks they measured there */
  int ppn = 0, most = 1;
  for (size_t i = 0; i < x->model.n && !ppn; i++) {
    const res_fabric_cost *f = &x->model.f[i];
    if (f->host_count > 1 || res_fabric_emulated(f)) continue;
    ppn = (int)lround(res_machine_cores(f));
    for (size_t q = 0; q < f->nresid; q++) most = f->resid[q].ranks > most ? f->resid[q].ranks : most;
  }
  if (ppn < 1) ppn = most;
  static const double stated[] = {100e9, 400e9};
  res_scale_plan plan;
  if (res_scaling_plan(&plan, &x->model, ppn, stated, 2) || !plan.n) {
    res_scaling_plan_free(&plan);
    fprintf(x->md, "\n## Scaling to 1024 ranks\n\nNo fabric fitted on one host of this machine: no cluster to predict "
                   "(one host's fabric is never stretched past one node).\n");
    return;
  }
  res_bucket *b = malloc(1024 * sizeof *b);
  FILE *d = b ? rp_open(x, "scaling.dat") : NULL;
  if (!d) {
    free(b);
    res_scaling_plan_free(&plan);
    return;
  }
  const res_train_row *one = rp_one_rank(x, NULL);
  size_t nb;
  double fwd, bwd, opt = 0, data = 0;
  int batch;
  char what[128];
  if (one) {
    nb = rp_buckets(x, one, b, 1024);
    fwd = one->fwd_ms, bwd = one->bwd_ms, batch = (int)one->batch;
    opt = isfinite(one->opt_ms) ? one->opt_ms : 0;
    data = isfinite(one->data_ms) ? one->data_ms : 0;
    snprintf(what, sizeof what, "%s one-rank profile measured here", one->model);
  } else {
    res_train_row fake;
    res_row_init(res_schema_train(), &fake);
    fake.grad_bytes = (int64_t)(25557032.0 * 4);
    batch = 32;
    fwd = 1e3 * batch / 360 / 3, bwd = 2 * fwd;
    fake.bwd_ms = bwd;
    fake.run_id = "";
    nb = rp_buckets(x, &fake, b, 1024);
    snprintf(what, sizeof what, "ResNet-50 at 360 images/s per rank (no one-rank profile in these runs)");
  }
  char body[16384];
  size_t npts = 0, len = (size_t)snprintf(body, sizeof body, "set logscale x 2\nset xlabel 'ranks'\nset ylabel 'scaling efficiency'\nset yrange [0:1.05]\nset key bottom left\nplot ");
  for (size_t k = 0; k < plan.n; k++) {
    res_scale_curve *c = &plan.c[k];
    fprintf(d, "# %s\nranks,nodes,eff\n", c->label);
    for (int p = ppn > 1 ? ppn : 2; p <= 1024; p *= 2) {
      res_step_in in = {.data_ms = data, .fwd_ms = fwd, .bwd_ms = bwd, .opt_ms = opt, .buckets = b, .nbuckets = nb,
                        .overlap = 1, .batch = batch};
      const res_fabric_cost *bound = res_scaling_spec(c, ppn, p, &in.ar);
      res_step_out o;
      /* the one pricing of a step (train's and predict's), the node's CPU share included */
      res_price_step(&o, &in, bound, bound == c->intra ? res_fabric_cpu_beta(&x->model, c->intra) : c->cpu_beta, p, 1);
      fprintf(d, "%d,%d,%.6g\n", p, (p + ppn - 1) / ppn, o.scaling_eff);
      npts += isfinite(o.scaling_eff);
    }
    fprintf(d, "\n\n");
    char t[sizeof c->label];
    snprintf(t, sizeof t, "%s", c->label);
    rp_label(t, 0);
    if (len + sizeof t + 100 < sizeof body)
      len += (size_t)snprintf(body + len, sizeof body - len, "%s'scaling.dat' index %zu using 1:3 with linespoints title '%s' noenhanced",
                              k ? ", " : "", k, t);
  }
  rp_close(x, d, "scaling.dat");
  fprintf(x->md, "\n## Scaling to 1024 ranks (predicted, held out)\n\nA cluster of nodes of %d ranks (the cores of the host "
                 "fitted here, else the most ranks it measured), overlap on, %s. Inside a node the transport as measured here on one host; between nodes each "
                 "fitted link, and 100 and 400 Gbit/s stated, priced from the nearest fitted rate of the transport (else "
                 "this host's stack at that rate); a flat ring and hier:ring over both levels. Every point past one node is "
                 "a held-out prediction; one host's fabric is never stretched past one node.\n", ppn, what);
  rp_plot(x, "scaling", "predicted scaling efficiency of a cluster", body, npts);
  free(b);
  res_scaling_plan_free(&plan);
}

/* A p2p curve: one run's rows of a fabric, transport, test and pair (as rp_same_group). */
static int rp_same_p2p(const res_p2p_row *a, const res_p2p_row *b, int other_run) {
  return !strcmp(a->fabric, b->fabric) && !strcmp(a->transport, b->transport) && !strcmp(a->test, b->test) &&
         a->src == b->src && a->dst == b->dst && !strcmp(a->run_id, b->run_id) == !other_run;
}

/* Point to point: per fabric, transport, test and pair, the smallest size's one-way latency and
 * the largest size's bandwidth, and the curves against size (latency from the latency test,
 * GB/s from the others), one data block per group. */
enum { RP_P2P_ROWS = 48 }; /* table rows; an all-pairs run's many pairs are the heatmap's */
static void rp_p2p(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_P2P];
  if (!R->n) return;
  const res_p2p_row *rows = R->rows;
  FILE *d = rp_open(x, "p2p.dat");
  char *done = calloc(R->n, 1);
  size_t cap = 1 << 15, llen = 0, blen = 0, nlat = 0, nbw = 0;
  char *lat = malloc(cap), *bw = malloc(cap);
  int blk = 0, shown = 0, more = 0;
  if (d && done && lat && bw) {
    fprintf(x->md, "\n## Point to point\n\n| fabric | transport | test | pair | sizes | one-way latency at smallest, p50 (us) | GB/s at largest |\n"
                   "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < R->n; i++) {
      if (done[i]) continue;
      const res_p2p_row *k = &rows[i];
      int is_lat = !strcmp(k->test, "latency");
      fprintf(d, "# %s %s %s %lld-%lld\nbytes,t_p50_us,gbps\n", k->fabric, k->transport, k->test, (long long)k->src,
              (long long)k->dst);
      const res_p2p_row *lo = NULL, *hi = NULL;
      size_t nsz = 0, npts = 0;
      int elsewhere = 0;
      for (size_t j = 0; j < R->n && !elsewhere; j++) elsewhere = rp_same_p2p(&rows[j], k, 1);
      for (size_t j = i; j < R->n; j++) {
        const res_p2p_row *r = &rows[j];
        if (done[j] || !rp_same_p2p(r, k, 0)) continue;
        done[j] = 1;
        fprintf(d, "%lld,%.6g,%.6g\n", (long long)r->bytes, r->t_p50_us, r->gbps);
        nsz++;
        npts += r->bytes > 0 && (is_lat ? r->t_p50_us > 0 : r->gbps > 0);
        if (!lo || r->bytes < lo->bytes) lo = r;
        if (!hi || r->bytes > hi->bytes) hi = r;
      }
      fprintf(d, "\n\n");
      char who[96], title[320];
      rp_run_suffix(who, sizeof who, elsewhere, k->run_id);
      snprintf(title, sizeof title, "%s %s %s %lld-%lld%s", k->fabric, k->transport, k->test, (long long)k->src,
               (long long)k->dst, who);
      rp_label(title, 0);
      char *buf = is_lat ? lat : bw;
      size_t *len = is_lat ? &llen : &blen;
      if (*len + 300 < cap)
        *len += (size_t)snprintf(buf + *len, cap - *len, "%s'p2p.dat' index %d using 1:%d with linespoints title '%s' noenhanced",
                                 *len ? ", " : "", blk, is_lat ? 2 : 3, title);
      *(is_lat ? &nlat : &nbw) += npts;
      blk++;
      if (shown == RP_P2P_ROWS) {
        more++;
        continue;
      }
      shown++;
      /* a streaming test's time per message at the smallest size is no latency: left out */
      char l[32] = "-";
      if (is_lat) snprintf(l, sizeof l, "%.2f", lo->t_p50_us);
      char c0[300], c1[640], c2[64], c3[64];
      snprintf(c0, sizeof c0, "%s%s", k->fabric, who);
      fprintf(x->md, "| %s | %s | %s | %lld-%lld | %zu | %s | %.3f |\n", rp_md(c1, sizeof c1, c0),
              rp_md(c2, sizeof c2, k->transport), rp_md(c3, sizeof c3, k->test), (long long)k->src, (long long)k->dst, nsz, l,
              hi->gbps);
    }
    if (more) fprintf(x->md, "\n%d more in p2p.csv.\n", more);
  }
  if (d) rp_close(x, d, "p2p.dat");
  if (lat && bw && blk) {
    rp_against_size(x, "p2p_latency", "p2p one-way latency (p50)", "one-way latency p50 (us)", "", lat, nlat);
    rp_against_size(x, "p2p_bw", "p2p bandwidth", "GB/s", "", bw, nbw);
  }
  free(done);
  free(lat);
  free(bw);
}

static void rp_heatmap(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_MAT];
  if (!R->n) return;
  const res_p2p_matrix_row *m = R->rows;
  FILE *d = rp_open(x, "p2p_matrix.dat");
  if (!d) return;
  /* the first transport's bandwidth matrix of the first run, as a plain matrix (diagonal NaN) */
  const char *tr = NULL, *run = NULL;
  int n = 0;
  size_t npts = 0;
  for (size_t i = 0; i < R->n; i++)
    if (!strcmp(m[i].metric, "bw_gbps")) {
      if (!tr) tr = m[i].transport, run = m[i].run_id;
      if (!strcmp(m[i].transport, tr) && !strcmp(m[i].run_id, run) && m[i].ranks > n) n = (int)m[i].ranks;
    }
  double *g = n > 0 && n <= 4096 ? malloc(sizeof *g * (size_t)n * (size_t)n) : NULL;
  if (g) {
    for (int i = 0; i < n * n; i++) g[i] = NAN;
    for (size_t i = 0; i < R->n; i++)
      if (!strcmp(m[i].metric, "bw_gbps") && !strcmp(m[i].transport, tr) && !strcmp(m[i].run_id, run) &&
          m[i].src >= 0 && m[i].src < n && m[i].dst >= 0 && m[i].dst < n)
        g[m[i].src * n + m[i].dst] = m[i].value;
    for (int s = 0; s < n; s++)
      for (int t = 0; t < n; t++) {
        fprintf(d, "%s%.6g%s", t ? " " : "", g[s * n + t], t == n - 1 ? "\n" : "");
        npts += isfinite(g[s * n + t]);
      }
    free(g);
  }
  rp_close(x, d, "p2p_matrix.dat");
  if (!tr || n == 0) return;
  fprintf(x->md, "\n## Point-to-point matrix\n\nBandwidth between every ordered pair over %s (GB/s; the diagonal is empty).\n", tr);
  rp_plot(x, "p2p_heatmap", "p2p bandwidth (GB/s), row: source, column: destination",
          "set datafile separator whitespace\nset xlabel 'destination'\nset ylabel 'source'\nset yrange [] reverse\n"
          "set palette rgb 33,13,10\nset xtics 1\nset ytics 1\nplot 'p2p_matrix.dat' matrix with image title ''", npts);
}

/* fabench validate's section (its run directory's validate.md), as it wrote it. */
static void rp_validate(rp_ctx *x, char *const *dirs, int n) {
  for (int i = 0; i < n; i++) {
    char path[4200], buf[8192];
    snprintf(path, sizeof path, "%s/validate.md", dirs[i]);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    fprintf(x->md, "\n");
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, k, x->md);
    fclose(f);
  }
}

int bench_cmd_report(int argc, char **argv) {
  rp_opts ro = {.plot = 1};
  int first = 0; /* the first run directory */
  int prc = bench_flags_parse(&rp_cmd, argc, argv, rp_set, &ro, &first);
  if (prc) return prc == 1 ? 0 : prc; /* 1: --help */
  const char *out = ro.out;
  int plot = ro.plot;
  if (first >= argc) return bench_usage_error(bench_flags_help(&rp_cmd), "no run directory given");
  /* a run given twice is read once: its rows twice would count twice in every table and fit */
  char note[1024];
  int ndirs = argc - first;
  if (res_run_dirs_unique(argv + first, &ndirs, note, sizeof note)) fprintf(stderr, "fabench: report: %s\n", note);
  argc = first + ndirs;
  rp_ctx *x = calloc(1, sizeof *x); /* the rows of every run: off the stack */
  if (!x) return bench_error("out of memory");
  x->plot = plot;
  for (int k = 0; k < RP_NREC; k++) x->rec[k].schema = rp_schema(k);
  char err[1024];
  int rc = 0;
  for (int i = first; i < argc && !rc; i++)
    if (rp_read_dir(x, argv[i], err, sizeof err)) rc = bench_error("report: %s", err);
  if (!rc && x->untimed)
    fprintf(stderr, "fabench: report: left out %zu row%s whose measure (median time, or a p2p rate) is negative or not a number (%s)\n",
            x->untimed, x->untimed == 1 ? "" : "s", x->untimed_in);
  if (!rc && !x->have_model && (x->rec[RP_AR].n || x->rec[RP_P2P].n)) {
    res_fit_opts fo = {.gamma_kernel = bench_fit_gamma(argv + first, argc - first)};
    res_fit_dir_host(argv[first], &fo.cores);
    if (res_fit_recorded(&fo, argv + first, argc - first) == 0 &&
        res_fit_ex(&x->model, &x->rec[RP_AR], &x->rec[RP_P2P], &fo, err, sizeof err) == 0) {
      x->have_model = 1;
      snprintf(x->model_src, sizeof x->model_src, "fitted from these runs");
    }
    res_fit_recorded_free(&fo);
  }
  char dir[4096];
  if (!rc && res_run_dir(dir, sizeof dir, out, "report", err, sizeof err)) rc = bench_error("report: %s", err);
  if (!rc) {
    x->dir = dir;
    if (plot) bench_gnuplot_log_reset(dir);
    rp_remove_old(dir);
    x->md = rp_open(x, "report.md");
    if (!x->md) rc = bench_error("report: %s", x->werr);
  }
  if (!rc) {
    fprintf(x->md, "# fabench report\n\nRuns:");
    for (int i = first; i < argc; i++) fprintf(x->md, " `%s`", argv[i]);
    fprintf(x->md, "\n\nRows: %zu all-reduce, %zu p2p, %zu p2p matrix, %zu training, %zu bucket, %zu predicted.\n",
            x->rec[RP_AR].n, x->rec[RP_P2P].n, x->rec[RP_MAT].n, x->rec[RP_TRAIN].n, x->rec[RP_BUCKETS].n, x->rec[RP_PREDICT].n);
    rp_accept(x, argv + optind, argc - optind);
    rp_model(x);
    rp_allreduce(x);
    rp_model_words(x);
    rp_colls(x);
    rp_waits(x);
    rp_train(x);
    rp_sweep(x);
    rp_pred_vs_meas(x);
    rp_scaling(x);
    rp_p2p(x);
    rp_heatmap(x);
    rp_validate(x, argv + first, argc - first);
    rp_close(x, x->md, "report.md");
    if (x->failed[0]) fprintf(stderr, "fabench: report: plots missing: %s\n", x->failed);
    if (x->werr[0])
      rc = bench_error("report: %s", x->werr);
    else
      printf("# report: %s/report.md (%d plots%s)\n", dir, x->nplots, plot ? "" : ", not drawn");
  }
  for (int k = 0; k < RP_NREC; k++) res_rows_free(&x->rec[k]);
  res_costmodel_free(&x->model);
  if (!rc && x->failed[0]) rc = 1;
  free(x);
  return rc;
}
