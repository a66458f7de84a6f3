/* fabench predict: what-if. Training images/s and scaling efficiency at many ranks from a
 * one-rank compute profile, the bucket plan and the cost model of an intra-node and an
 * inter-node fabric; and the inter-node link rate a target efficiency needs. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "bench.h"
#include "coll.h"
#include "launch.h" /* launch_emu_parse_rate: an emulated fabric's name gives its rate */
#include "res.h"
#include "util.h"

enum { O_MODEL = 256, O_PROFILE, O_IPS, O_BATCH, O_RANKS, O_PPN, O_INTRA, O_INTER, O_ALGO, O_BMB,
       O_FMB, O_NOOV, O_TARGET, O_NOPLOT, O_OUT, O_CORES, O_THREADS };

static const bench_flag pr_flags[] = {
    {"model", "NAME", "resnet50", "resnet18, resnet34, resnet50 (ImageNet) or resnet20 (CIFAR); with --profile, "
                                  "the profile's", O_MODEL},
    {"profile", "DIR", NULL, "a one-rank `fabench train` run: its fwd/bwd/opt times, gradient size and bucket "
                             "readiness (train.csv, train_buckets.csv) replace the model's defaults", O_PROFILE},
    {"images-per-s-rank", "R", NULL, "one rank's compute speed without a profile (default: the model's V100-class "
                                     "figure, printed)", O_IPS},
    {"batch", "N", "32", "images per rank per step; with --profile, the profile's unless given", O_BATCH},
    {"ranks", "LIST", "8,64,512,1024", "rank counts", O_RANKS},
    {"ranks-per-node", "N", "8", "ranks per node", O_PPN},
    {"intra", "SPEC", "alpha=5,gbps=50", "the fabric inside a node", O_INTRA},
    {"inter", "SPEC", "alpha=10,gbit=100", "the fabric between nodes.\n"
                                           "SPEC: alpha=US,gbps=GB/s|gbit=Gbit/s[,reduce=GB/s], or a "
                                           "model.json / run directory (fitted: fabench fit), with @FABRIC or "
                                           "@TRANSPORT where it has several fabrics, and ,gbit=R or ,gbps=R for a "
                                           "stated rate it did not fit: its nearest emulated rate of the transport "
                                           "scaled to R (held out)", O_INTER},
    {"cores", "N", NULL, "cores per node, which its ranks share with the communication's CPU work (default: the "
                         "fitted host's, at least one per rank of --ranks-per-node; a stated fabric's 0: none "
                         "shared)", O_CORES},
    {"threads", "N", "1", "compute threads per rank", O_THREADS},
    {"algo", "LIST", "ring,dtree,hier:ring", "ring,rhd,rd,tree,dtree,ps,ps:K and hier:ALG (ring reduce-scatter "
                                             "and all-gather in the node, ALG across nodes)", O_ALGO},
    {"bucket-mb", "MB", "25", "bucket size", O_BMB},
    {"first-bucket-mb", "MB", "1", "the first bucket's size", O_FMB},
    {"no-overlap", NULL, NULL, "buckets reduced after backward, not during it", O_NOOV},
    {"target-eff", "E", "0.9", "the efficiency the link rate is solved for", O_TARGET},
    {"no-plot", NULL, NULL, "skip the gnuplot plot", O_NOPLOT},
    {"out", "DIR", NULL, "run directory (default: results/<UTC>-predict)", O_OUT},
};
static const bench_flags_cmd pr_cmd = {"usage: fabench predict [options]\n", pr_flags,
                                       sizeof pr_flags / sizeof *pr_flags, NULL, NULL, NULL};
static const char *pr_usage(void) { return bench_flags_help(&pr_cmd); }

/* Parameters of the ImageNet ResNets (torchvision's counts) and CIFAR ResNet-20, with a fp32
 * V100-class training speed per GPU for the default compute time (a stand-in: give a profile
 * or --images-per-s-rank for your hardware). */
static const struct {
  const char *name;
  double params, ips;
} pr_models[] = {
    {"resnet18", 11689512, 1200}, {"resnet34", 21797672, 700},
    {"resnet50", 25557032, 360},  {"resnet20", 272474, 9000},
};

#define PR_MAX 32

/* A fabric as predict prices it: fc.m its parameters, fc what the training step's CPU share
 * comes from (fc.resid points into model, the loaded fit, for the replay label). */
typedef struct {
  res_fabric_cost fc;
  res_costmodel model; /* n 0: a stated fabric */
  double cpu_beta;     /* res_fabric_cpu_beta */
  int fitted;          /* fc is a fitted fabric as fitted (not scaled to a stated rate) */
  char desc[200];
} pr_fabric;

static void pr_fabric_free(pr_fabric *f) { res_costmodel_free(&f->model); }

/* A model's fabric at a stated rate (bits/s; the one named by `want`, an emulated one scaled by its
 * own rate, another by its fitted one; or a transport's nearest emulated rate): 0, or -1 with err. */
static int pr_stated_rate(pr_fabric *f, const res_fabric_cost *pick, int by_rate, const char *want, double bps,
                          const char *spec, char *err, size_t cap) {
  char name[64], l[256];
  uint64_t own = 0;
  if (bps >= 1e9) snprintf(name, sizeof name, "%ggbit", bps / 1e9);
  else snprintf(name, sizeof name, "%gmbit", bps / 1e6);
  const res_fabric_cost *src = pick;
  if (by_rate && !res_fabric_at_rate(&f->fc, &f->model, want, 1, NULL, bps, name, &src))
    ;
  else if (pick && !strncmp(pick->fabric, "emu-", 4) && !launch_emu_parse_rate(pick->fabric + 4, &own) && own)
    res_fabric_scaled(&f->fc, &f->model, pick, bps / (double)own, name);
  else if (pick)
    res_fabric_scaled(&f->fc, &f->model, pick, bps / 8.0 * pick->m.beta, name);
  else
    return snprintf(err, cap, "'%s': the model has no emulated fabric of transport %s to scale to %s", spec,
                    want ? want : "?", name), -1;
  f->fc.m.cores = res_machine_cores(src); /* a cluster's host: the whole machine's cores */
  f->cpu_beta = res_fabric_cpu_beta(&f->model, src);
  snprintf(f->desc, sizeof f->desc, "%s/%s(from %s)", name, src->transport, res_costmodel_label(&f->model, src, l, sizeof l));
  return 0;
}

/* alpha=US,gbps=GB/s|gbit=Gbit/s[,reduce=GB/s] or PATH[@FABRIC|@TRANSPORT]. */
static int pr_fabric_parse(pr_fabric *f, const char *spec, double gamma, long cores, char *err, size_t cap) {
  memset(f, 0, sizeof *f);
  f->fc.m.gamma = gamma;
  const char *comma = strchr(spec, ','), *eq = strchr(spec, '=');
  if (eq && (!comma || eq < comma)) {
    char *items[8], *store = NULL;
    int n = bench_split_list(spec, items, 8, &store), have_bw = 0, rc = n > 0 ? 0 : -1;
    if (rc) snprintf(err, cap, "'%s': an empty item or too many", spec);
    for (int i = 0; i < n && !rc; i++) {
      char *kv = items[i], *eq = strchr(kv, '=');
      if (!eq) {
        snprintf(err, cap, "'%s': '%s' is not KEY=VALUE", spec, kv);
        rc = -1;
        break;
      }
      *eq = '\0';
      /* times may be 0 (no start-up); rates may not: they divide. 1e12 keeps
       * every time and rate derived from them finite. */
      int may_be_0 = !strcmp(kv, "alpha");
      double v;
      if (bench_parse_double(eq + 1, 0, 1e12, &v) || (!may_be_0 && v == 0)) {
        snprintf(err, cap, "'%s': %s needs a number %s 0 to 1e12", spec, kv, may_be_0 ? "from" : "above");
        rc = -1;
      } else if (!strcmp(kv, "alpha")) f->fc.m.alpha = v * 1e-6;
      else if (!strcmp(kv, "gbps")) f->fc.m.beta = 1.0 / (v * 1e9), have_bw = 1;
      else if (!strcmp(kv, "gbit")) f->fc.m.beta = 8.0 / (v * 1e9), have_bw = 1;
      else if (!strcmp(kv, "reduce")) f->fc.m.gamma = 1.0 / (v * 1e9);
      else {
        snprintf(err, cap, "'%s': unknown key '%s' (alpha, gbps, gbit, reduce)", spec, kv);
        rc = -1;
      }
    }
    free(store);
    if (rc) return -1;
    if (!have_bw) return snprintf(err, cap, "'%s': needs gbps= or gbit=", spec), -1;
    if (cores > 0) f->fc.m.cores = (int)cores;
    snprintf(f->desc, sizeof f->desc, "%s", spec);
    return 0;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s", spec);
  /* PATH[@FABRIC|@TRANSPORT][,gbit=R|,gbps=R] */
  double bps = 0;
  char *rate = strchr(path, ',');
  if (rate) {
    *rate++ = '\0';
    double v;
    int gbit = !strncmp(rate, "gbit=", 5), gbps = !strncmp(rate, "gbps=", 5);
    if ((!gbit && !gbps) || bench_parse_double(rate + 5, 1e-6, 1e6, &v))
      return snprintf(err, cap, "'%s': after the model, ',gbit=R' or ',gbps=R' (R a rate above 0), not '%s'", spec, rate), -1;
    bps = gbit ? v * 1e9 : v * 8e9;
  }
  char *at = strrchr(path, '@');
  const char *want = NULL;
  if (at) *at = '\0', want = at + 1;
  res_costmodel m;
  if (bench_costmodel_load(&m, path, 0, err, cap)) return -1;
  /* FABRIC is a fabric string as fit wrote it, or a transport that names one fabric of the
   * model (`@ucx`: the fabric strings carry the machine's UCX transports); without it the model
   * must have one fabric, since picking the first of several silently priced ucx as tcp */
  const res_fabric_cost *pick = NULL, *by = NULL;
  size_t by_transport = 0;
  char l[256];
  /* a fabric fitted on two machines is named with its hash, as fit and report label it */
  for (size_t i = 0; i < m.n && want && !pick; i++)
    if (strcmp(m.f[i].fabric, want) && !strcmp(res_costmodel_label(&m, &m.f[i], l, sizeof l), want)) pick = &m.f[i];
  int machines = 0; /* the fabric string names fits of more than one machine */
  if (want && !pick)
    for (size_t i = 0; i < m.n; i++) {
      if (strcmp(m.f[i].fabric, want)) continue;
      if (!pick) pick = &m.f[i];
      else machines |= strcmp(m.f[i].topo, pick->topo) != 0;
    }
  if (machines) {
    char list[1024] = "";
    for (size_t i = 0, o = 0; i < m.n && o < sizeof list; i++)
      if (!strcmp(m.f[i].fabric, want))
        o += (size_t)snprintf(list + o, sizeof list - o, "%s'%s' (%s, topology %s)", o ? ", " : "",
                              res_costmodel_label(&m, &m.f[i], l, sizeof l), m.f[i].transport,
                              *m.f[i].topo ? m.f[i].topo : "not recorded");
    snprintf(err, cap, "'%s': fabric %s was fitted on more than one machine: %.600s; name one as PATH@'LABEL'",
             spec, want, list);
    res_costmodel_free(&m);
    return -1;
  }
  for (size_t i = 0; i < m.n && !pick; i++)
    if (!want || !strcmp(m.f[i].transport, want)) by = &m.f[i], by_transport++;
  if (!pick && by_transport == 1) pick = by;
  if (bps > 0 && (pick || want)) { /* a stated rate: held out */
    int by_rate = !pick || !want || strcmp(pick->fabric, want); /* not @FABRIC: the transport's nearest rate */
    f->model = m;
    if (pr_stated_rate(f, pick, by_rate, want, bps, spec, err, cap)) return pr_fabric_free(f), -1;
    f->fc.m.hosts = 0;
    if (cores >= 0) f->fc.m.cores = (int)cores;
    else if (f->fc.m.cores > 0 && f->fc.m.cores < -cores) f->fc.m.cores = (int)-cores;
    return 0;
  }
  if (!pick) {
    char list[1024] = "";
    for (size_t i = 0, o = 0; i < m.n && o < sizeof list; i++)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", res_costmodel_label(&m, &m.f[i], l, sizeof l));
    if (!want)
      snprintf(err, cap, "'%s' has %zu fabrics (%.600s): name one, as %s@FABRIC or %s@TRANSPORT", spec,
               m.n, m.n ? list : "none", spec, spec);
    else if (by_transport > 1)
      snprintf(err, cap, "'%s': %zu fabrics of transport %s in the model (%.600s): name one", spec,
               by_transport, want, list);
    else
      snprintf(err, cap, "'%s': no fabric or transport '%s' in the model (it has %.600s)", spec, want,
               m.n ? list : "none");
    res_costmodel_free(&m);
    return -1;
  }
  f->model = m;
  f->fc = *pick;
  f->fc.m.cores = res_machine_cores(pick); /* a cluster's host: the whole machine's cores */
  f->fitted = 1;
  f->cpu_beta = res_fabric_cpu_beta(&f->model, pick);
  /* the what-if's nodes are counted by --ranks-per-node, not by the fit's host count; their
   * cores are the fitted host's unless --cores says otherwise (cores < -1: at least -cores) */
  f->fc.m.hosts = 0;
  if (cores >= 0) f->fc.m.cores = (int)cores;
  else if (f->fc.m.cores > 0 && f->fc.m.cores < -cores) f->fc.m.cores = (int)-cores;
  snprintf(f->desc, sizeof f->desc, "%s/%s(fit)", res_costmodel_label(&m, pick, l, sizeof l), pick->transport);
  return 0;
}

typedef struct {
  char model[32];
  double grad_bytes, fwd_ms, bwd_ms, opt_ms, data_ms;
  int batch;
  res_bucket b[4096];
  size_t nb;
} pr_profile;

/* The bucket plan of DESIGN section 4 over gradients that backward completes evenly in time
 * (no profile): first bucket first_mb, then bucket_mb each. */
static void pr_even_buckets(pr_profile *p, double bucket_mb, double first_mb) {
  double off = 0, total = p->grad_bytes;
  p->nb = 0;
  while (off < total && p->nb < sizeof p->b / sizeof *p->b) {
    double sz = (p->nb == 0 ? first_mb : bucket_mb) * 1048576.0;
    if (sz > total - off) sz = total - off;
    off += sz;
    p->b[p->nb++] = (res_bucket){sz, p->bwd_ms * off / total};
  }
}

static int pr_load_profile(pr_profile *p, const char *dir, char *err, size_t cap) {
  res_rows t, bk;
  if (res_table_read(&t, res_schema_train(), dir, err, cap)) return -1;
  const res_train_row *one = NULL;
  for (size_t i = 0; i < t.n; i++) {
    const res_train_row *r = &((const res_train_row *)t.rows)[i];
    if (r->ranks == 1 && r->fwd_ms > 0 && r->bwd_ms > 0) one = r;
  }
  if (!one) {
    res_rows_free(&t);
    snprintf(err, cap, "--profile %s: no one-rank train row with fwd_ms and bwd_ms", dir);
    return -1;
  }
  snprintf(p->model, sizeof p->model, "%s", one->model);
  p->fwd_ms = one->fwd_ms;
  p->bwd_ms = one->bwd_ms;
  p->opt_ms = isfinite(one->opt_ms) ? one->opt_ms : 0;
  p->data_ms = isfinite(one->data_ms) ? one->data_ms : 0;
  p->batch = (int)one->batch;
  /* the one-rank row exchanges nothing (its grad_bytes is 0): the gradient is its parameters' */
  p->grad_bytes = 4.0 * (double)one->params;
  res_rows_free(&t);
  if (!(p->grad_bytes > 0)) return snprintf(err, cap, "--profile %s: its one-rank train row has no params", dir), -1;
  p->nb = 0;
  if (res_table_exists(res_schema_train_buckets(), dir)) {
    if (res_table_read(&bk, res_schema_train_buckets(), dir, err, cap)) return -1;
    for (size_t i = 0; i < bk.n && p->nb < sizeof p->b / sizeof *p->b; i++) {
      const res_train_buckets_row *r = &((const res_train_buckets_row *)bk.rows)[i];
      if (r->ranks != 1 || !(r->bytes > 0) || !isfinite(r->ready_ms)) continue;
      p->b[p->nb++] = (res_bucket){(double)r->bytes, r->ready_ms};
    }
    res_rows_free(&bk);
  }
  return 0;
}

typedef struct {
  coll_algo algo;
  int hier;
  char name[24];
} pr_algo;

static double pr_eff_at(const pr_profile *pf, res_step_in in, coll_model inter, double gbps) {
  inter.beta = 1.0 / (gbps * 1e9);
  if (in.ar.inter)
    in.ar.inter = &inter;
  else
    in.ar.intra = &inter;
  res_step_out o;
  (void)pf;
  res_predict_step(&o, &in);
  return o.scaling_eff;
}

/* The link rate (GB/s) of the fabric that bounds the run at which efficiency reaches target:
 * efficiency grows with the rate, so bisect on its logarithm. */
static double pr_needed(const pr_profile *pf, const res_step_in *in, const coll_model *bound, double target) {
  double lo = 1e-3, hi = 1e6;
  if (pr_eff_at(pf, *in, *bound, hi) < target) return INFINITY; /* start-ups or compute bound */
  /* reached at 1 MB/s already: the link does not bound it (one rank, or a ring on mapped
   * memory, which moves nothing over a link); 0 says any rate, not the search's bound */
  if (pr_eff_at(pf, *in, *bound, lo) >= target) return 0;
  for (int i = 0; i < 80; i++) {
    double mid = sqrt(lo * hi);
    if (pr_eff_at(pf, *in, *bound, mid) >= target)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

/* Not reached by the inter-node link at any rate: whether a faster intra-node link would reach
 * it, so that the intra-node one is what holds it back (start-ups and compute otherwise). */
static int pr_intra_bound(const pr_profile *pf, const res_step_in *in, const coll_model *inter, double target) {
  if (!in->ar.inter) return 0;
  coll_model fast = *in->ar.intra;
  fast.beta = 1.0 / (1e6 * 1e9);
  res_step_in v = *in;
  v.ar.intra = &fast;
  return pr_eff_at(pf, v, *inter, 1e6) >= target;
}

static int pr_write_plot(const char *dir, int nalgos, const pr_algo *al, char *err, size_t cap) {
  char path[4200], *buf = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/predict.gp", dir);
  /* in memory, then written whole: a run stopped or a disk full midway leaves no cut script */
  FILE *f = open_memstream(&buf, &len);
  if (!f) return snprintf(err, cap, "cannot write %.900s: %s", path, strerror(errno)), -1;
  fprintf(f, "set datafile separator ','\nset key top left\nset logscale x 2\nset grid\n"
             "set xlabel 'ranks'\n");
  for (int t = 0; t < 2; t++) {
    fprintf(f, t ? "set terminal svg size 1000,450 dynamic\nset output 'predict.svg.tmp'\n"
                 : "set terminal pngcairo size 1000,450\nset output 'predict.png.tmp'\n");
    fprintf(f, "set multiplot layout 1,2\nset ylabel 'images/s'\nset logscale y\nplot ");
    for (int a = 0; a < nalgos; a++)
      fprintf(f, "%s'predict.csv' using (strcol(10) eq '%s' ? $7 : 1/0):18 with linespoints title '%s (predicted)' noenhanced",
              a ? ", " : "", al[a].name, al[a].name);
    fprintf(f, "\nunset logscale y\nset ylabel 'scaling efficiency'\nset yrange [0:1.05]\nplot ");
    for (int a = 0; a < nalgos; a++)
      fprintf(f, "%s'predict.csv' using (strcol(10) eq '%s' ? $7 : 1/0):19 with linespoints title '%s (predicted)' noenhanced",
              a ? ", " : "", al[a].name, al[a].name);
    fprintf(f, "\nunset yrange\nunset multiplot\n");
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(buf);
    return snprintf(err, cap, "cannot write %.900s: out of memory", path), -1;
  }
  int rc = util_file_replace(path, buf, len, err, cap);
  free(buf);
  if (rc) return -1;
  bench_gnuplot_log_reset(dir);
  return bench_gnuplot(dir, "predict.gp", err, cap);
}

/* The command's options. */
typedef struct {
  const char *model, *profile, *intra, *inter, *ranks, *algos, *out;
  double ips, bucket_mb, first_mb, target;
  long batch, ppn, cores, threads;
  int overlap, plot;
  int model_given, batch_given; /* given, not the defaults: a --profile's own stand otherwise */
} pr_opts;

static int pr_set(void *ctx, int code, const char *val, int given) {
  pr_opts *o = ctx;
  (void)given;
  switch (code) {
  case O_MODEL: o->model = val, o->model_given = given; break;
  case O_PROFILE: o->profile = val; break;
  case O_IPS:
    if (bench_parse_double(val, 1e-6, 1e9, &o->ips)) return bench_usage_error(pr_usage(), "--images-per-s-rank: '%s' is not a positive rate", val);
    break;
  case O_BATCH:
    if (bench_parse_int(val, 1, 1 << 20, &o->batch)) return bench_usage_error(pr_usage(), "--batch: '%s' is not a count >= 1", val);
    o->batch_given = given;
    break;
  case O_RANKS: o->ranks = val; break;
  case O_PPN:
    if (bench_parse_int(val, 1, 1 << 16, &o->ppn)) return bench_usage_error(pr_usage(), "--ranks-per-node: '%s' is not a count >= 1", val);
    break;
  case O_INTRA: o->intra = val; break;
  case O_CORES:
    if (bench_parse_int(val, 0, 1 << 20, &o->cores)) return bench_usage_error(pr_usage(), "--cores: '%s' is not a count >= 0", val);
    break;
  case O_THREADS:
    if (bench_parse_int(val, 1, 1 << 12, &o->threads)) return bench_usage_error(pr_usage(), "--threads: '%s' is not a count >= 1", val);
    break;
  case O_INTER: o->inter = val; break;
  case O_ALGO: o->algos = val; break;
  case O_BMB:
    if (bench_parse_double(val, 1e-3, 1e6, &o->bucket_mb)) return bench_usage_error(pr_usage(), "--bucket-mb: '%s' is not a size in MB", val);
    break;
  case O_FMB:
    if (bench_parse_double(val, 1e-3, 1e6, &o->first_mb)) return bench_usage_error(pr_usage(), "--first-bucket-mb: '%s' is not a size in MB", val);
    break;
  case O_NOOV: o->overlap = 0; break;
  case O_TARGET:
    if (bench_parse_double(val, 0.01, 1.0, &o->target)) return bench_usage_error(pr_usage(), "--target-eff: '%s' is not in (0, 1]", val);
    break;
  case O_NOPLOT: o->plot = 0; break;
  case O_OUT: o->out = val; break;
  }
  return 0;
}

/* 0; 1 after --help; else the usage error's status. */
static int pr_parse(pr_opts *o, int argc, char **argv) {
  *o = (pr_opts){.ips = NAN, .cores = -1, .overlap = 1, .plot = 1}; /* what no default string says */
  return bench_flags_parse(&pr_cmd, argc, argv, pr_set, o, NULL);
}

/* --ranks and --algo into their lists: 0, or the usage error's status. */
static int pr_lists(const pr_opts *o, int *ranks, int *nranks, pr_algo *al, int *nalgos) {
  char *items[PR_MAX], *store = NULL;
  int rc = bench_flags_list(pr_usage(), "--ranks", o->ranks, items, PR_MAX, nranks, &store);
  for (int i = 0; i < *nranks && !rc; i++) {
    long v;
    if (bench_parse_int(items[i], 1, 1 << 24, &v))
      rc = bench_usage_error(pr_usage(), "--ranks: '%s' is not a rank count", items[i]);
    else
      ranks[i] = (int)v;
  }
  free(store);
  if (rc) return rc;
  store = NULL;
  rc = bench_flags_list(pr_usage(), "--algo", o->algos, items, PR_MAX, nalgos, &store);
  for (int i = 0; i < *nalgos && !rc; i++) {
    const char *a = items[i];
    al[i].hier = !strncmp(a, "hier:", 5);
    if (coll_algo_parse(a + (al[i].hier ? 5 : 0), &al[i].algo) || al[i].algo.kind == COLL_ALGO_NATIVE ||
        al[i].algo.kind == COLL_ALGO_AUTO || (al[i].hier && al[i].algo.kind == COLL_ALGO_HIER))
      rc = bench_usage_error(pr_usage(), "--algo: '%s' has no cost formula (ring, rhd, rd, tree, dtree, ps, ps:K, hier:ALG)", a);
    else if (al[i].algo.kind == COLL_ALGO_HIER) /* plain "hier" is hier:ring */
      al[i].hier = 1, al[i].algo = (coll_algo){(coll_algo_kind)al[i].algo.param, 0};
    snprintf(al[i].name, sizeof al[i].name, "%s", a);
  }
  free(store);
  return rc;
}

/* The compute profile: a one-rank run's (--profile, scaled to --batch), or the model's defaults
 * at --images-per-s-rank or its V100-class speed; *src says which. 0, or the exit status after
 * saying why. */
static int pr_make_profile(pr_profile *pf, const pr_opts *o, const char **src) {
  char err[1024];
  if (o->profile) {
    if (pr_load_profile(pf, o->profile, err, sizeof err)) return bench_error("predict: %s", err);
    if (o->model_given && strcmp(o->model, pf->model)) /* the profile's figures are its model's */
      return bench_usage_error(pr_usage(), "--model %s: the --profile run trained %s (leave --model out, or "
                               "profile %s)", o->model, pf->model, o->model);
    if (o->batch_given) { /* compute scales with the batch */
      double s = (double)o->batch / pf->batch;
      pf->fwd_ms *= s, pf->bwd_ms *= s, pf->data_ms *= s; /* the optimizer: per parameter */
      for (size_t i = 0; i < pf->nb; i++) pf->b[i].ready_ms *= s;
      pf->batch = (int)o->batch;
    }
    if (!pf->nb) pr_even_buckets(pf, o->bucket_mb, o->first_mb);
    *src = "profile";
    return 0;
  }
  const char *model = o->model;
  int mi = -1;
  for (size_t i = 0; i < sizeof pr_models / sizeof *pr_models; i++)
    if (!strcmp(pr_models[i].name, model)) mi = (int)i;
  if (mi < 0) return bench_usage_error(pr_usage(), "--model: '%s' is not resnet18, resnet34, resnet50 or resnet20", model);
  snprintf(pf->model, sizeof pf->model, "%s", model);
  pf->grad_bytes = pr_models[mi].params * 4;
  pf->batch = (int)o->batch;
  double r = isfinite(o->ips) ? o->ips : pr_models[mi].ips;
  double step = 1e3 * pf->batch / r; /* backward about twice forward */
  pf->fwd_ms = step / 3;
  pf->bwd_ms = 2 * step / 3;
  pr_even_buckets(pf, o->bucket_mb, o->first_mb);
  *src = isfinite(o->ips) ? "--images-per-s-rank" : "V100-class default";
  return 0;
}

/* The run directory, its run.json and predict.csv: 0, or the exit status after saying why. */
static int pr_begin(bench_run *run, res_table **tab, const pr_opts *o, const pr_fabric *intra,
                    const pr_fabric *inter, const char *compute_src, int argc, char **argv) {
  char err[1024];
  memset(run, 0, sizeof *run);
  if (res_run_dir(run->dir, sizeof run->dir, o->out, "predict", err, sizeof err)) return bench_error("%s", err);
  res_run_id(run->run_id, sizeof run->run_id);
  res_run_desc meta;
  if (res_run_desc_init(&meta, run->run_id, "predict", argc, argv)) return bench_error("out of memory");
  meta.intra = intra->desc;
  meta.inter = inter->desc;
  meta.compute = compute_src;
  res_run_write(run->dir, &meta, err, sizeof err);
  res_run_desc_free(&meta);
  if (res_table_open_schema(tab, run->dir, res_schema_predict(), err, sizeof err)) return bench_error("%s", err);
  return 0;
}

/* One algorithm at one rank count: predicted, printed and written. 0, or 1 after saying why. */
static int pr_row(res_table *tab, const char *run_id, const pr_opts *o, const pr_profile *pf, const pr_algo *al,
                  int ranks, const pr_fabric *intra, const pr_fabric *inter) {
  char err[1024];
  int ppn = (int)o->ppn, nodes = (ranks + ppn - 1) / ppn;
  res_step_in in = {.data_ms = pf->data_ms, .fwd_ms = pf->fwd_ms, .bwd_ms = pf->bwd_ms, .opt_ms = pf->opt_ms,
                    .buckets = pf->b, .nbuckets = pf->nb, .overlap = o->overlap, .batch = pf->batch,
                    .ar = {.intra = &intra->fc.m, .inter = nodes > 1 ? &inter->fc.m : NULL, .algo = al->algo,
                           .hier = al->hier, .ranks = ranks, .ranks_per_node = ppn}};
  /* the fabric that bounds the run gives the pipelining unit and the CPU share, as for a
   * train row (res_price_step) */
  const pr_fabric *bf = nodes > 1 ? inter : intra;
  const coll_model *bound = &bf->fc.m;
  if (bf->fc.chunk_bytes > 0) in.ar.chunk_bytes = (size_t)bf->fc.chunk_bytes;
  res_step_out out;
  res_price_step(&out, &in, &bf->fc, bf->cpu_beta, ranks, (int)o->threads);
  /* a replay where the fit measured this very all-reduce: one fabric, its rank count and
   * algorithm on as many hosts */
  int flat = !al->hier && (nodes == 1 || ppn == 1);
  res_pred_kind kind = bf->fitted && flat && res_fabric_measured(&bf->fc, al->name, ranks, nodes) ? RES_PRED_REPLAY
                                                                                                : RES_PRED_HELDOUT;
  double need = pr_needed(pf, &in, bound, o->target);
  char needs[32];
  if (need == 0)
    snprintf(needs, sizeof needs, "any");
  else if (isfinite(need))
    snprintf(needs, sizeof needs, "%.3g", need);
  else
    snprintf(needs, sizeof needs, pr_intra_bound(pf, &in, bound, o->target) ? "intra-bound" : "not by link");
  printf("  %7d %6d %-12s %10.2f %10.2f %10.2f %12.1f %6.3f %-8s %14s\n", ranks, nodes, al->name, out.step_ms,
         out.comm_ms, out.exposed_comm_ms, out.images_per_s, out.scaling_eff, res_pred_kind_name(kind), needs);
  res_predict_row row;
  res_row_init(res_schema_predict(), &row);
  row.run_id = run_id;
  row.schema = RES_SCHEMA_VERSION;
  row.model = pf->model;
  row.grad_bytes = (int64_t)pf->grad_bytes;
  row.buckets = (int64_t)pf->nb;
  row.batch = pf->batch;
  row.ranks = ranks;
  row.ranks_per_node = ppn;
  row.nodes = nodes;
  row.algo = al->name;
  row.intra = intra->desc;
  row.inter = inter->desc;
  row.overlap = o->overlap;
  row.compute_ms = pf->data_ms + pf->fwd_ms + pf->bwd_ms + pf->opt_ms;
  row.step_ms = out.step_ms;
  row.comm_ms = out.comm_ms;
  row.exposed_comm_ms = out.exposed_comm_ms;
  row.images_per_s = out.images_per_s;
  row.scaling_eff = out.scaling_eff;
  row.inter_gbps = 1e-9 / bound->beta;
  row.target_eff = o->target;
  row.inter_gbps_needed = need; /* empty when no link rate reaches it, 0 when any does */
  row.pred_kind = res_pred_kind_name(kind);
  return res_table_put(tab, &row, err, sizeof err) ? bench_error("%s", err) : 0;
}

int bench_cmd_predict(int argc, char **argv) {
  pr_opts o;
  int rc = pr_parse(&o, argc, argv);
  if (rc) return rc == 1 ? 0 : rc;
  int ranks[PR_MAX], nranks, nalgos;
  pr_algo al[PR_MAX];
  if ((rc = pr_lists(&o, ranks, &nranks, al, &nalgos))) return rc;

  /* the fabrics and the profile */
  char err[1024];
  double gamma = bench_gamma_kernel();
  pr_fabric intra, inter;
  /* a node has at least a core for each of its ranks, as the profile's rank had */
  long cores = o.cores >= 0 ? o.cores : -o.ppn;
  if (pr_fabric_parse(&intra, o.intra, gamma, cores, err, sizeof err)) return bench_usage_error(pr_usage(), "--intra: %s", err);
  if (pr_fabric_parse(&inter, o.inter, gamma, cores, err, sizeof err)) {
    pr_fabric_free(&intra);
    return bench_usage_error(pr_usage(), "--inter: %s", err);
  }
  pr_profile *pf = calloc(1, sizeof *pf); /* 64 KiB of buckets: off the stack */
  if (!pf) return pr_fabric_free(&intra), pr_fabric_free(&inter), bench_error("out of memory");
  const char *compute_src = NULL;
  bench_run run;
  res_table *tab = NULL;
  if ((rc = pr_make_profile(pf, &o, &compute_src)) || (rc = pr_begin(&run, &tab, &o, &intra, &inter, compute_src, argc, argv))) {
    free(pf);
    pr_fabric_free(&intra), pr_fabric_free(&inter);
    return rc;
  }

  printf("# fabench predict: %s, %.1f MB of gradients in %zu buckets, batch %d per rank, one rank's step %.1f ms (%s)\n",
         pf->model, pf->grad_bytes / 1e6, pf->nb, pf->batch, pf->data_ms + pf->fwd_ms + pf->bwd_ms + pf->opt_ms,
         compute_src);
  printf("# intra-node: %s (alpha %.2f us, %.2f GB/s); inter-node: %s (alpha %.2f us, %.2f GB/s); %ld ranks per node; overlap %s\n",
         intra.desc, intra.fc.m.alpha * 1e6, 1e-9 / intra.fc.m.beta, inter.desc, inter.fc.m.alpha * 1e6, 1e-9 / inter.fc.m.beta, o.ppn,
         o.overlap ? "on" : "off");
  printf("  %7s %6s %-12s %10s %10s %10s %12s %6s %-8s %14s\n", "ranks", "nodes", "algo", "step(ms)", "comm(ms)",
         "exposed", "images/s", "eff", "kind", "GB/s for eff");
  /* algorithm by algorithm, so that each one's rows are consecutive (the plot's lines) */
  for (int a = 0; a < nalgos && !rc; a++)
    for (int r = 0; r < nranks && !rc; r++) rc = pr_row(tab, run.run_id, &o, pf, &al[a], ranks[r], &intra, &inter);
  res_table_close(tab);
  free(pf);
  pr_fabric_free(&intra), pr_fabric_free(&inter);
  printf("# kind: replay where the fit measured this very all-reduce (fabric, ranks, algorithm), else held-out\n"
         "# GB/s for eff: the link rate (inter-node, or intra-node on one node) at which efficiency reaches %.2f;\n"
         "# intra-bound: no inter-node rate reaches it, a faster intra-node link would; not by link: start-ups\n"
         "# or compute hold it back at any rate\n", o.target);
  if (!rc && o.plot) {
    if (pr_write_plot(run.dir, nalgos, al, err, sizeof err))
      fprintf(stderr, "fabench: predict: no plot: %s\n", err);
    else
      printf("# plot: %s/predict.png (and .svg)\n", run.dir);
  }
  printf("# %s: %s/predict.csv\n", rc ? "FAILED" : "written", run.dir);
  return bench_stdout_check("predict") || rc;
}
