/* fabench fit: the cost model from run directories' allreduce and p2p rows, as model.json; and
 * the model checked against rows it was not fitted on (--check), the honest error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "launch.h"
#include "res.h"
#include "util.h"

enum { O_OUT = 256, O_K, O_NOK, O_MIN, O_CORES, O_CHECK, O_CHECK_OUT, O_MODEL, O_REPEAT, O_FORMULAS };

static const bench_flag fit_flags[] = {
    {"out", "FILE", NULL, "where to write the model (default: DIR/model.json of the first DIR)", O_OUT},
    {"min-bytes", "SIZE", "0", "fit only all-reduce rows of at least SIZE bytes; 0: all", O_MIN},
    {"cores", "N", NULL, "CPU cores of the host the rows were measured on (default: from the first DIR's "
                         "run.json; 0: no sharing of cores modelled)", O_CORES},
    {"check", "DIR", NULL, "predict DIR's all-reduce rows with the model and print the error per fabric, ranks, "
                           "algorithm and size (repeatable; rows from --min-bytes)", O_CHECK},
    {"check-out", "DIR", NULL, "write the checked rows as DIR/model_check.csv (and .jsonl)", O_CHECK_OUT},
    {"repeat", "DIR", NULL, "runs that measured some checked rows again (the fit set, minutes before): per "
                            "fabric, how far the machine moved between the two, the floor under any model's "
                            "error, and the model's error on the rows both measured within 10% alike "
                            "(repeatable)", O_REPEAT},
    {"model", "FILE", NULL, "check this model (model.json or a directory with one) instead of fitting: no DIR "
                            "needed", O_MODEL},
    {"gamma-kernel", NULL, NULL, "check gamma against the reduction kernel's rate, for fabrics whose rows cannot "
                                 "tell gamma from beta: as the runs recorded it (run.json's reduce_gbps), else "
                                 "measured here (default: on)", O_K},
    {"no-gamma-kernel", NULL, NULL, "use the transport's default gamma instead", O_NOK},
    {"formulas-only", NULL, NULL, "predict with the formulas alone (fitting, or the --model checked): by default a "
                                  "fabric also learns what its formulas miss at the sizes fitted, per algorithm "
                                  "and rank count (model.json's residuals), and its predictions there carry it; "
                                  "other rank counts and algorithms get the formulas alone", O_FORMULAS},
};
static const bench_flags_cmd fit_cmd = {
    "usage: fabench fit [options] DIR...\n"
    "  Fits alpha (start-up), beta (s/byte), gamma (reduction s/byte) and the host's CPU cost\n"
    "  per byte shared by its ranks per fabric and host count from the run directories'\n"
    "  allreduce.csv (and p2p.csv), and writes model.json.\n",
    fit_flags, sizeof fit_flags / sizeof *fit_flags,
    "Rows measured beside a load (allreduce --beside-compute) are kept for the training step's\n"
    "share of the cores (compute_loss in model.json) and left out of the rest.\n",
    NULL, NULL};
static const char *fit_usage(void) { return bench_flags_help(&fit_cmd); }

static void fit_print(const res_costmodel *m) {
  printf("# %-22s %-5s %5s %-9s %9s %10s %10s %10s %10s %7s %7s %7s\n", "fabric", "trans", "hosts", "source",
         "alpha(us)", "link(GB/s)", "cpu(GB/s)", "hcpu(GB/s)", "red.(GB/s)", "R^2", "rms_rel", "used");
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    char used[32], red[16], hcpu[16] = "-";
    if (f->cpu_byte > 0) snprintf(hcpu, sizeof hcpu, "%.3f", 1e-9 / f->cpu_byte);
    snprintf(used, sizeof used, "%zu/%zu", f->n_used, f->n);
    if (f->m.gamma > 0)
      snprintf(red, sizeof red, "%.3f", 1e-9 / f->m.gamma);
    else
      snprintf(red, sizeof red, "hidden");
    /* a long fabric string is cut to the column, but never another machine's hash after it */
    char name[256];
    res_costmodel_label(m, f, name, sizeof name);
    int w = strcmp(name, f->fabric) ? (int)strlen(name) : 22;
    printf("  %-22.*s %-5s %5d %-9s %9.2f %10.3f %10.3f %10s %9s%s%s %7.4f %7.3f %7s\n", w, name, f->transport,
           f->host_count, f->source, f->m.alpha * 1e6, f->m.beta > 0 ? 1e-9 / f->m.beta : INFINITY,
           f->m.beta_cpu > 0 ? 1e-9 / f->m.beta_cpu : INFINITY, hcpu, red,
           f->gamma_fixed && f->m.gamma > 0 ? "*" : " ", f->m.red_hidden ? "h" : " ", f->r2, f->rms_rel, used);
  }
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    if (!f->m.ncurves) continue;
    double worst = 0;
    int pts = 0;
    for (int c = 0; c < f->m.ncurves; c++)
      for (int q = 0; q < f->m.curve[c].n; q++, pts++)
        if (fabs(expm1(f->m.curve[c].ln[q])) > worst) worst = fabs(expm1(f->m.curve[c].ln[q]));
    char name[256];
    printf("# learned: %s %s: what the formulas miss at %d sizes of %d algorithms and rank counts, at most %.0f%%\n",
           res_costmodel_label(m, f, name, sizeof name), f->transport, pts, f->m.ncurves, 100 * worst);
  }
  if (isfinite(m->gamma_kernel)) printf("# reduction kernel (f32 sum, 8 MiB): %.3f GB/s", 1e-9 / m->gamma_kernel);
  printf("%s\n", isfinite(m->gamma_kernel) ? "; * = gamma from the kernel (not identified by the rows)" : "");
  printf("# link: 1/beta; cpu: 1/beta_cpu, the host's CPU per byte sent, which its cores share (a call takes the\n"
         "# slower of its busiest link and its host's CPU); hcpu: bytes the host's ranks send per CPU second,\n"
         "# measured (host_cpu_us, where no rank spun; -: none): the CPU a training step's compute loses to them;\n"
         "# red. h: an emulated link's shaper banks the pauses of a pipelined reduction (every algorithm\n"
         "# reduces in pieces as they arrive; res_fit.c)\n");
  int any = 0;
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    if (!f->nbusy) continue;
    if (!any++)
      printf("# beside a load (allreduce --beside-compute): the share of a computing core's pace the all-reduce "
             "took, by ranks and size, and (/) the all-reduce's own pace against the model's time\n");
    char name[256];
    printf("  %-22s %-5s", res_costmodel_label(m, f, name, sizeof name), f->transport);
    for (int q = 0; q < f->nbusy; q++) {
      char sz[32];
      coll_format_size(sz, sizeof sz, (uint64_t)f->busy[q].bytes);
      printf(" p%d %s:%.2f", f->busy[q].ranks, sz, f->busy[q].loss);
      if (f->busy[q].pace > 0) printf("/%.2f", f->busy[q].pace);
    }
    printf("\n");
  }
}

/* An emulated fabric ("emu-<rate>") against the payload its shaped links can carry: tbf counts
 * each frame's bytes from the Ethernet header on (14 + MTU), of which MTU - 52 are TCP payload
 * (20 IP, 20 TCP, 12 timestamp option); ACKs of the other direction share the link too (one of
 * 66 bytes per two segments, about 0.4% at 9000). */
static void fit_print_links(const res_costmodel *m, char **dirs, int ndirs) {
  int header = 0;
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    uint64_t bps;
    if (strncmp(f->fabric, "emu-", 4) || launch_emu_parse_rate(f->fabric + 4, &bps)) continue;
    int mtu = 0;
    for (int d = 0; d < ndirs && !mtu; d++) mtu = res_fit_dir_emu_mtu(dirs[d], f->fabric);
    if (!mtu) mtu = LAUNCH_EMU_DEFAULT_MTU;
    double ceil_gbps = (double)bps / 8 * (mtu - 52) / (mtu + 14) / 1e9;
    double ack = (double)bps / 8 * (mtu - 52) / (mtu + 14 + 33) / 1e9;
    double fit = res_costmodel_link_gbps(&f->m, 2);
    if (!header++)
      printf("# emulated links: fitted bandwidth (2 ranks) against the TCP payload the shaped rate carries\n"
             "# %-14s %-5s %5s %10s %10s %10s %8s %8s\n", "fabric", "trans", "mtu", "rate(GB/s)", "ceil(GB/s)",
             "fit(GB/s)", "fit/ceil", "w/ acks");
    char name[256];
    printf("  %-14s %-5s %5d %10.4f %10.4f %10.4f %8.3f %8.3f\n", res_costmodel_label(m, f, name, sizeof name), f->transport, mtu, (double)bps / 8e9,
           ceil_gbps, fit, fit / ceil_gbps, fit / ack);
  }
  if (header)
    printf("# ceil: rate x (MTU - 52) / (MTU + 14), what tbf lets through as TCP payload; w/ acks: also one\n"
           "# 66-byte ACK per two segments of the other direction on the same link\n");
}

typedef struct {
  const char *fabric, *transport, *algo;
  int64_t ranks, bytes;
  double err, again; /* again: measured against the same row in --repeat's runs (NaN: none) */
  double err0;       /* the formulas alone (the model's learned misses left out) */
  int fitted;        /* its size is one the model learned its algorithm and ranks at */
  double spread;     /* the row's round_spread (NaN: one round) */
} fit_chk;

static int fit_chk_cmp(const void *a, const void *b) {
  const fit_chk *x = a, *y = b;
  int c = strcmp(x->fabric, y->fabric);
  if (!c) c = strcmp(x->transport, y->transport);
  if (!c) c = (x->ranks > y->ranks) - (x->ranks < y->ranks);
  if (!c) c = strcmp(x->algo, y->algo);
  if (!c) c = (x->bytes > y->bytes) - (x->bytes < y->bytes);
  return c;
}


/* The same measurement (fabric, transport, hosts, ranks, algorithm, size) in the --repeat rows:
 * r's time against it, or NaN. */
static double fit_again(const res_allreduce_row *r, const char *an, const res_rows *rep) {
  const res_allreduce_row *q = rep->rows;
  for (size_t i = 0; i < rep->n; i++) {
    const char *qa = *q[i].algo_ran ? q[i].algo_ran : q[i].algo;
    if (!q[i].errors && q[i].t_p50_us > 0 && !isfinite(q[i].compute_loss) && q[i].bytes == r->bytes && q[i].ranks == r->ranks &&
        q[i].host_count == r->host_count && !strcmp(qa, an) && !strcmp(q[i].transport, r->transport) &&
        !strcmp(q[i].fabric, r->fabric))
      return (r->t_p50_us - q[i].t_p50_us) / q[i].t_p50_us;
  }
  return NAN;
}

/* What a check holds between its phases: the rows it checks, those --repeat measured again, and
 * the checked rows' errors. */
typedef struct {
  res_rows ar, rep;
  fit_chk *c;
  size_t n;
} fit_check_ctx;

/* The check's rows and --repeat's, and --check-out's table (left NULL without it). 0, or 1 after
 * saying why. */
static int fit_check_read(fit_check_ctx *k, char **dirs, int ndirs, char **reps, int nreps, const char *out,
                          res_table **t) {
  res_rows pp;
  char err[1024];
  if (res_fit_read_dirs(&k->ar, &pp, dirs, ndirs, 0, err, sizeof err)) return bench_error("fit --check: %s", err);
  res_rows_free(&pp);
  if (nreps && res_fit_read_dirs(&k->rep, &pp, reps, nreps, 0, err, sizeof err))
    return bench_error("fit --repeat: %s", err);
  if (nreps) res_rows_free(&pp);
  char odir[4096];
  if (out && (res_run_dir(odir, sizeof odir, out, "check", err, sizeof err) ||
              res_table_open_schema(t, odir, res_schema_model_check(), err, sizeof err)))
    return bench_error("fit --check-out: %s", err);
  return 0;
}

/* Row r, predicted as pred (us) with error e, into --check-out's table. 0, or 1 after saying why. */
static int fit_check_put(res_table *t, const res_allreduce_row *r, const char *an, double pred, double e) {
  res_model_check_row k;
  char err[1024];
  res_row_init(res_schema_model_check(), &k);
  k.run_id = r->run_id;
  k.schema = RES_SCHEMA_VERSION;
  k.fabric = r->fabric;
  k.transport = r->transport;
  k.host_count = r->host_count;
  k.ranks = r->ranks;
  k.algo = an;
  k.bytes = r->bytes;
  k.t_p50_us = r->t_p50_us;
  k.t_pred_us = pred;
  k.pred_err = e;
  return res_table_put(t, &k, err, sizeof err) ? bench_error("fit --check-out: %s", err) : 0;
}

/* The rows the model predicts into k->c, and into t where there is one (closed here). 0, or 1
 * after saying why. */
static int fit_check_rows(fit_check_ctx *k, const res_costmodel *m, int64_t min_bytes, res_table *t) {
  fit_chk *c = k->c = calloc(k->ar.n ? k->ar.n : 1, sizeof *c);
  int failed = !c;
  if (!c) bench_error("fit --check: out of memory");
  const res_allreduce_row *rows = k->ar.rows;
  for (size_t i = 0; c && i < k->ar.n; i++) {
    const res_allreduce_row *r = &rows[i];
    coll_algo a;
    const char *an = *r->algo_ran ? r->algo_ran : r->algo;
    /* beside a load (compute_loss) the times are not the link's the model predicts */
    if (r->errors || r->ranks < 2 || r->bytes < min_bytes || !(r->t_p50_us > 0) || isfinite(r->compute_loss) ||
        coll_algo_parse(an, &a) || a.kind == COLL_ALGO_NATIVE || a.kind == COLL_ALGO_AUTO)
      continue;
    /* one fabric's time, or on a cluster both levels' (which learned nothing of the row) */
    double pred0;
    int at;
    double pred = res_allreduce_row_time(m, r, &pred0, &at) * 1e6;
    if (!(pred > 0) || !isfinite(pred)) continue;
    pred0 *= 1e6;
    c[k->n] = (fit_chk){r->fabric, r->transport, an, r->ranks, r->bytes, (r->t_p50_us - pred) / pred,
                        fit_again(r, an, &k->rep), (r->t_p50_us - pred0) / pred0, at, r->round_spread};
    if (t && fit_check_put(t, r, an, pred, c[k->n].err)) {
      failed = 1;
      break;
    }
    k->n++;
  }
  if (t) res_table_close(t);
  return failed;
}

/* Per fabric, transport, ranks and algorithm (c sorted), a line of the errors by size. */
static void fit_check_print_sizes(const fit_chk *c, size_t n) {
  printf("# out-of-sample error of the model, (measured - predicted) / predicted of the median time\n");
  for (size_t i = 0; i < n;) {
    size_t j = i;
    printf("  %-22s %-4s p%-2lld %-6s", c[i].fabric, c[i].transport, (long long)c[i].ranks, c[i].algo);
    double worst = 0;
    for (; j < n && !strcmp(c[j].fabric, c[i].fabric) && !strcmp(c[j].transport, c[i].transport) &&
           c[j].ranks == c[i].ranks && !strcmp(c[j].algo, c[i].algo);
         j++) {
      char sz[32];
      coll_format_size(sz, sizeof sz, (uint64_t)c[j].bytes);
      printf(" %s:%+.0f%%", sz, 100 * c[j].err);
      if (fabs(c[j].err) > worst) worst = fabs(c[j].err);
    }
    printf("  max %.0f%%\n", 100 * worst);
    i = j;
  }
}

/* Per fabric and transport (c sorted), the median and largest |error| and how many are within
 * 10%; of the rows measured in rounds, how many of those whose rounds agreed within 10% (the
 * machine steady while they were measured) are; with --repeat, how far the rows measured again
 * moved. */
static void fit_check_print_fabrics(const fit_chk *c, size_t n, int nreps) {
  int spread = 0;
  for (size_t i = 0; i < n; i++) spread |= isfinite(c[i].spread);
  int learned_any = 0;
  for (size_t i = 0; i < n; i++) learned_any |= c[i].err0 != c[i].err;
  printf("# per fabric: median |error|, largest |error|, rows within 10%%%s%s%s\n",
         learned_any ? "; formulas alone: rows within 10% without what the model learned they miss at the sizes "
                   "fitted; between: of the rows at sizes it did not learn at (not fitted), how many within 10%, "
                   "and with the formulas alone" : "",
         spread ? "; steady: of the rows whose rounds' medians were within 10% of each other, how many "
                  "the model has within 10%" : "",
         nreps ? "; again: the rows --repeat measured too, median |difference| between the two runs and how "
                 "many within 10% (the machine's own drift); repeated: of those within 10%, how many the model "
                 "has within 10% (its error where the machine held its pace; the formulas alone where the model "
                 "learned: at the sizes fitted it holds the fit's own measurements)" : "");
  double *e = malloc(2 * n * sizeof *e), *g = e ? e + n : NULL;
  for (size_t i = 0; e && i < n;) {
    size_t j = i, k = 0, ok = 0, ng = 0, gok = 0, gmok = 0, ns = 0, sok = 0, ok0 = 0, learned = 0, nb = 0, bok = 0,
           bok0 = 0;
    for (; j < n && !strcmp(c[j].fabric, c[i].fabric) && !strcmp(c[j].transport, c[i].transport); j++) {
      e[k++] = fabs(c[j].err);
      ok += fabs(c[j].err) <= 0.10;
      ok0 += fabs(c[j].err0) <= 0.10;
      learned += c[j].err0 != c[j].err;
      if (!c[j].fitted) {
        nb++;
        bok += fabs(c[j].err) <= 0.10;
        bok0 += fabs(c[j].err0) <= 0.10;
      }
      if (c[j].spread <= 0.10) { /* NaN (one round): not counted */
        ns++;
        sok += fabs(c[j].err) <= 0.10;
      }
      if (isfinite(c[j].again)) {
        g[ng++] = fabs(c[j].again);
        gok += fabs(c[j].again) <= 0.10;
        gmok += fabs(c[j].again) <= 0.10 && fabs(learned_any ? c[j].err0 : c[j].err) <= 0.10;
      }
    }
    double med = util_median(e, k);
    printf("  %-22s %-4s median %5.1f%%  max %6.1f%%  within 10%%: %zu/%zu", c[i].fabric, c[i].transport,
           100 * med, 100 * e[k - 1], ok, k);
    if (learned) printf("   formulas alone: %zu/%zu   between: %zu/%zu, formulas alone %zu/%zu", ok0, k, bok, nb, bok0, nb);
    if (spread) printf("   steady: %zu/%zu", sok, ns);
    if (ng)
      printf("   again: median %5.1f%%  within 10%%: %zu/%zu   repeated: %zu/%zu", 100 * util_median(g, ng), gok, ng,
             gmok, gok);
    printf("\n");
    i = j;
  }
  free(e);
}

/* The other collectives' formulas (coll_colls_time, from the all-reduce's fitted alpha, beta and
 * gamma) on the check directories' colls.csv rows, every one held out: per collective and
 * algorithm, the median and largest |error| and how many are within 10%. Nothing where no
 * directory has such rows. */
static void fit_check_colls(const res_costmodel *m, char **dirs, int ndirs, int64_t min_bytes) {
  static const char *const names[COLL_NCOLLS] = {"reducescatter", "allgather", "bcast", "alltoall"};
  typedef struct {
    int kind;
    char algo[32];
    double err;
  } fit_cerr;
  fit_cerr *e = NULL;
  size_t n = 0, cap = 0;
  for (int d = 0; d < ndirs; d++) {
    res_rows rows = {0};
    char err[1024];
    if (!res_table_exists(res_schema_colls(), dirs[d])) continue;
    if (res_table_read(&rows, res_schema_colls(), dirs[d], err, sizeof err)) {
      fprintf(stderr, "fabench: fit --check: %s\n", err);
      continue;
    }
    const res_colls_row *r = rows.rows;
    for (size_t i = 0; i < rows.n; i++) {
      int k = 0;
      while (k < COLL_NCOLLS && strcmp(r[i].coll, names[k])) k++;
      coll_algo a;
      const char *an = r[i].algo_ran && *r[i].algo_ran ? r[i].algo_ran : r[i].algo;
      if (k == COLL_NCOLLS || r[i].errors || r[i].ranks < 2 || r[i].bytes < min_bytes || !(r[i].t_p50_us > 0) ||
          coll_colls_algo_parse((coll_kind)k, an, &a) || a.kind == COLL_ALGO_NATIVE || a.kind == COLL_ALGO_AUTO)
        continue;
      const res_fabric_cost *fm = res_costmodel_find(m, r[i].fabric, r[i].transport, (int)r[i].host_count, r[i].topo_hash);
      double pred = fm ? coll_colls_time(&fm->m, (coll_kind)k, a, (int)r[i].ranks, (size_t)r[i].bytes,
                                         (size_t)r[i].chunk_bytes) * 1e6
                       : NAN;
      if (!(pred > 0) || !isfinite(pred)) continue;
      if (n == cap) {
        fit_cerr *g = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof *e);
        if (!g) break;
        e = g;
      }
      e[n].kind = k;
      snprintf(e[n].algo, sizeof e[n].algo, "%s", an);
      e[n++].err = (r[i].t_p50_us - pred) / pred;
    }
    res_rows_free(&rows);
  }
  if (n) printf("# the other collectives: their formulas on the all-reduce's fit, every row held out\n"
                "# %-14s %-10s %5s %12s %12s %10s\n", "collective", "algo", "rows", "median |err|", "worst |err|",
                "within 10%");
  for (int k = 0; k < COLL_NCOLLS; k++)
    for (size_t i = 0; i < n; i++) {
      if (e[i].kind != k || !e[i].algo[0]) continue;
      double v[4096];
      int m2 = 0, in10 = 0;
      char algo[32];
      snprintf(algo, sizeof algo, "%s", e[i].algo);
      for (size_t j = i; j < n && m2 < 4096; j++)
        if (e[j].kind == k && !strcmp(e[j].algo, algo)) {
          v[m2] = fabs(e[j].err);
          in10 += v[m2++] <= 0.10;
          e[j].algo[0] = '\0'; /* counted */
        }
      double worst = 0;
      for (int j = 0; j < m2; j++) worst = v[j] > worst ? v[j] : worst;
      printf("  %-14s %-10s %5d %11.1f%% %11.1f%% %5d/%d\n", names[k], algo, m2, 100 * util_median(v, (size_t)m2),
             100 * worst, in10, m2);
    }
  free(e);
}

/* Predicts every all-reduce row of the check directories and prints the errors: per fabric,
 * transport, ranks and algorithm a line of errors by size, then per fabric and transport the
 * median and largest |error| and how many are within 10%; with repeat directories, also how much
 * the rows measured in both moved. */
static int fit_check(const res_costmodel *m, char **dirs, int ndirs, char **reps, int nreps, int64_t min_bytes,
                     const char *out) {
  fit_check_ctx k = {0};
  res_table *t = NULL;
  int rc = fit_check_read(&k, dirs, ndirs, reps, nreps, out, &t);
  if (!rc) rc = fit_check_rows(&k, m, min_bytes, t);
  if (!rc && !k.n)
    rc = bench_error("fit --check: no all-reduce row of a named algorithm%s has a model for its fabric",
                     min_bytes ? " at --min-bytes or more" : "");
  if (!rc) { /* after a failure, a summary of the rows before it would pass for the whole check */
    qsort(k.c, k.n, sizeof *k.c, fit_chk_cmp);
    fit_check_print_sizes(k.c, k.n);
    fit_check_print_fabrics(k.c, k.n, nreps);
    fit_check_colls(m, dirs, ndirs, min_bytes);
  }
  free(k.c);
  res_rows_free(&k.ar);
  res_rows_free(&k.rep);
  return rc;
}

/* The command's options; the run directories to fit are dirs[0..ndirs). */
typedef struct {
  const char *out, *model, *check_out;
  int kernel, formulas_only;
  long cores;
  uint64_t min_bytes;
  char **checks, **reps, **dirs; /* checks and reps: argc + 1 places each */
  int nchecks, nreps, ndirs;
} fit_opts;

static int fit_set(void *ctx, int code, const char *val, int given) {
  fit_opts *o = ctx;
  (void)given;
  switch (code) {
  case O_OUT: o->out = val; break;
  case O_K: o->kernel = 1; break;
  case O_NOK: o->kernel = 0; break;
  case O_MIN:
    if (bench_parse_size(val, &o->min_bytes))
      return bench_usage_error(fit_usage(), "--min-bytes: '%s' is not a size (e.g. 1M)", val);
    break;
  case O_CORES:
    if (bench_parse_int(val, 0, 1 << 20, &o->cores))
      return bench_usage_error(fit_usage(), "--cores: '%s' is not a count from 0", val);
    break;
  case O_CHECK: o->checks[o->nchecks++] = (char *)val; break; /* repeatable: argc places, in argv */
  case O_CHECK_OUT: o->check_out = val; break;
  case O_REPEAT: o->reps[o->nreps++] = (char *)val; break;
  case O_MODEL: o->model = val; break;
  case O_FORMULAS: o->formulas_only = 1; break;
  }
  return 0;
}

/* 0; 1 after --help; else the usage error's status. */
static int fit_parse(fit_opts *o, int argc, char **argv) {
  int first = 0; /* the first run directory */
  int rc = bench_flags_parse(&fit_cmd, argc, argv, fit_set, o, &first);
  if (rc) return rc;
  if (o->model && first < argc)
    return bench_usage_error(fit_usage(), "--model checks a model: no run directory to fit (got '%s')", argv[first]);
  if ((o->check_out || o->nreps) && !o->nchecks)
    return bench_usage_error(fit_usage(), "%s needs --check DIR", o->check_out ? "--check-out" : "--repeat");
  if (o->model && !o->nchecks) return bench_usage_error(fit_usage(), "--model needs --check DIR");
  if (!o->model && first >= argc) return bench_usage_error(fit_usage(), "no run directory given");
  o->dirs = argv + first;
  o->ndirs = argc - first;
  return 0;
}

/* The model: --model's, or fitted to the run directories, printed and written. 0, or the exit
 * status after saying why (m is then not held). */
static int fit_model(res_costmodel *m, const fit_opts *o) {
  char err[1024];
  if (o->model) {
    if (bench_costmodel_load(m, o->model, 0, err, sizeof err)) return bench_error("fit --model: %s", err);
    for (size_t i = 0; o->formulas_only && i < m->n; i++) m->f[i].learned = m->f[i].m.ncurves = 0;
    return 0;
  }
  res_fit_opts fo = {.gamma_kernel = o->kernel ? bench_fit_gamma(o->dirs, o->ndirs) : NAN,
                     .min_bytes = (int64_t)o->min_bytes, .formulas_only = o->formulas_only};
  res_fit_dir_host(o->dirs[0], &fo.cores);
  if (o->cores >= 0) fo.cores = (int)o->cores;
  if (res_fit_dirs(m, o->dirs, o->ndirs, &fo, 0, err, sizeof err)) return bench_error("fit: %s", err);
  char path[4200];
  if (o->out)
    snprintf(path, sizeof path, "%s", o->out);
  else
    snprintf(path, sizeof path, "%s/model.json", o->dirs[0]);
  fit_print(m);
  fit_print_links(m, o->dirs, o->ndirs);
  if (res_costmodel_write(m, path, err, sizeof err)) {
    res_costmodel_free(m);
    return bench_error("fit: %s", err);
  }
  printf("# model: %s\n", path);
  return 0;
}

int bench_cmd_fit(int argc, char **argv) {
  fit_opts o = {.kernel = 1, .cores = -1};
  o.checks = calloc(2 * ((size_t)argc + 1), sizeof *o.checks);
  if (!o.checks) return bench_error("fit: out of memory");
  o.reps = o.checks + argc + 1;
  int rc = fit_parse(&o, argc, argv);
  if (rc) {
    free(o.checks);
    return rc == 1 ? 0 : rc; /* 1: --help */
  }
  /* a run given twice (however spelled, or a copy) is read once: its rows twice would weigh
   * double in the fit and count twice in the check */
  char note[1024];
  if (res_run_dirs_unique(o.dirs, &o.ndirs, note, sizeof note)) fprintf(stderr, "fabench: fit: %s\n", note);
  if (res_run_dirs_unique(o.checks, &o.nchecks, note, sizeof note)) fprintf(stderr, "fabench: fit --check: %s\n", note);
  if (res_run_dirs_unique(o.reps, &o.nreps, note, sizeof note)) fprintf(stderr, "fabench: fit --repeat: %s\n", note);
  res_costmodel m;
  if (!(rc = fit_model(&m, &o))) {
    if (o.nchecks) rc = fit_check(&m, o.checks, o.nchecks, o.reps, o.nreps, (int64_t)o.min_bytes, o.check_out);
    res_costmodel_free(&m);
    if (bench_stdout_check("fit")) rc = 1;
  }
  free(o.checks);
  return rc;
}
