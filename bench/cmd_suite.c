/* fabench suite: the main job. It finds what the machine has (topology, the transports built in,
 * root for emulated links) and runs, each into a run directory of its own under one suite
 * directory: topo, p2p, all-reduce per fabric and algorithm, one-rank and data-parallel training
 * per fabric with the no-communication baseline, then the cost model's fit, the predictions and
 * the report. Every step is this binary run again as a child (the commands stay the only place
 * that measures); suite.json records each step as it ends, so --resume skips what is on disk
 * unless a step it reads runs again. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "coll.h"
#include "launch.h"
#include "nn.h"
#include "res.h"
#include "util.h"

enum { O_T = 256, O_A, O_E, O_M, O_D, O_B, O_S, O_TH, O_Q, O_TO, O_OUT, O_RES, O_R };

static const bench_flag suite_flags[] = {
    {"n", "N", "2", "ranks of the multi-rank steps", 'n'},
    {"ranks", "N", NULL, "the same as -n", 'n'},
    {"transport", "LIST", NULL, "tcp,ucx,mpi (default: those built)", O_T},
    {"algo", "LIST", "ring,rhd,rd,tree,ps,native", "all-reduce algorithms measured and fitted", O_A},
    {"emulate", "LIST", "1gbit,10gbit", "emulated link rates besides loopback, as root; none; an item NxR:RATE is "
                                        "an emulated cluster of N hosts of R ranks", O_E},
    {"model", "NAME", "resnet18", "the network trained", O_M},
    {"data", "SPEC", "synthetic:3x32x32", "its data", O_D},
    {"batch", "N", "32", "per rank", O_B},
    /* enough steps that a machine's slow spells of seconds average out: with too few, a pair's
     * fabric efficiency came out above 1, faster than no communication at all
     * (docs/measurements.md, "The training loop's figures") */
    {"steps", "N", "48", "training steps per pair", O_S},
    /* and the pairs in turns, so a slow spell cannot land on the none baseline alone
     * (docs/measurements.md, History) */
    {"rounds", "R", "3", "the training pairs take turns R times, each row its fastest round, so that a slow spell "
                         "of the machine does not pass for a fabric's cost", O_R},
    {"threads", "N", "1", "compute threads per rank", O_TH},
    {"quick", NULL, NULL, "a smaller sweep: about 2 minutes here (the defaults it changes are shown as --quick's)", O_Q},
    {"timeout", "SEC", "60", "every network wait of the steps", O_TO},
    {"out", "DIR", NULL, "suite directory (default: results/<UTC>-suite)", O_OUT},
    {"resume", "DIR", NULL, "continue an interrupted suite with its own flags (give no others): steps already done "
                            "are not run again, unless what they read is (then their results would be stale: "
                            "training after a fit that now succeeds, the report)", O_RES},
};
static const bench_flag_alt suite_quick[] = {{O_A, "ring,rhd,ps"}, {O_E, "1gbit"}, {O_M, "resnet20"},
                                             {O_D, "synthetic:1x28x28"}, {O_S, "24"}, {O_R, "2"}, {0, NULL}};
static const bench_flags_cmd suite_cmd = {"usage: fabench suite [options]\n", suite_flags,
                                          sizeof suite_flags / sizeof *suite_flags, NULL, "quick", suite_quick};
static const char *suite_usage(void) { return bench_flags_help(&suite_cmd); }

#define SUITE_MAX_STEPS 48
#define SUITE_MAX_ARGS 48
#define SUITE_MAX_RATES 8

typedef struct {
  char name[64];               /* its run directory under the suite's */
  char *argv[SUITE_MAX_ARGS];  /* the subcommand and its flags (owned) */
  int argc;
  int optional;                /* a failure is said, not fatal (the fit, predictions, report) */
  uint64_t reads;              /* the steps whose output it reads (bit i: steps[i]) */
} suite_step;
_Static_assert(SUITE_MAX_STEPS <= 64, "suite_step.reads holds a bit per step");

typedef struct {
  int nranks, quick, threads;
  int others; /* flags given besides --resume */
  long steps, batch, timeout_s, rounds;
  const char *transports, *algos, *emulate, *model, *data, *out, *resume;
} suite_opts;

static int suite_set(void *ctx, int code, const char *val, int given) {
  suite_opts *o = ctx;
  long v;
  o->others += given && code != O_RES;
  switch (code) {
  case 'n':
    if (bench_parse_int(val, 2, 256, &v)) return bench_usage_error(suite_usage(), "-n: '%s' is not a rank count (2..256)", val);
    o->nranks = (int)v;
    break;
  case O_T: o->transports = val; break;
  case O_A: o->algos = val; break;
  case O_E: o->emulate = val; break;
  case O_M: o->model = val; break;
  case O_D: o->data = val; break;
  case O_B:
    if (bench_parse_int(val, 1, 1 << 16, &o->batch)) return bench_usage_error(suite_usage(), "--batch: '%s' is not 1..65536", val);
    break;
  case O_S:
    if (bench_parse_int(val, 2, 1 << 20, &o->steps)) return bench_usage_error(suite_usage(), "--steps: '%s' is not 2..1048576", val);
    break;
  case O_R:
    if (bench_parse_int(val, 1, 100, &o->rounds)) return bench_usage_error(suite_usage(), "--rounds: '%s' is not 1..100", val);
    break;
  case O_TH:
    if (bench_parse_int(val, 1, 4096, &v)) return bench_usage_error(suite_usage(), "--threads: '%s' is not 1..4096", val);
    o->threads = (int)v;
    break;
  case O_Q: o->quick = 1; break;
  case O_TO:
    if (bench_parse_int(val, 1, 86400, &o->timeout_s))
      return bench_usage_error(suite_usage(), "--timeout: '%s' is not seconds (1..86400)", val);
    break;
  case O_OUT: o->out = val; break;
  case O_RES: o->resume = val; break;
  }
  return 0;
}

/* 0; 1 after --help; else the usage error's status. */
static int suite_parse(suite_opts *o, int argc, char **argv) {
  *o = (suite_opts){0};
  int rc = bench_flags_parse(&suite_cmd, argc, argv, suite_set, o, NULL);
  if (rc) return rc;
  /* a resumed suite takes every flag from its suite.json: one given here would be ignored */
  if (o->resume && o->others)
    return bench_usage_error(suite_usage(), "--resume continues with the suite's own flags (its suite.json's): "
                                            "give --resume DIR alone");
  return 0;
}

/* ---- steps ---- */

static suite_step *step_new(suite_step *v, int *n, int optional, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static suite_step *step_new(suite_step *v, int *n, int optional, const char *fmt, ...) {
  if (*n == SUITE_MAX_STEPS) return NULL;
  suite_step *s = &v[(*n)++];
  memset(s, 0, sizeof *s);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->name, sizeof s->name, fmt, ap);
  va_end(ap);
  s->optional = optional;
  return s;
}

static void arg(suite_step *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(suite_step *s, const char *fmt, ...) {
  if (!s || s->argc + 1 >= SUITE_MAX_ARGS) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  s->argv[s->argc++] = strdup(buf);
}

/* Runs `self step-args --out DIR/name` (or the step's own output flag) with its output in
 * DIR/name.log (bench_child_run); returns its exit status. */
static int step_run(const char *self, const suite_step *s, const char *dir, const sigset_t *sigs,
                    const sigset_t *old_mask, int *interrupted) {
  char log[32768];
  char *args[SUITE_MAX_ARGS + 1];
  snprintf(log, sizeof log, "%s/%s.log", dir, s->name);
  for (int i = 0; i < s->argc; i++) args[i] = s->argv[i];
  args[s->argc] = NULL;
  return bench_child_run(self, args, log, 0, sigs, old_mask, interrupted);
}

/* A failed step's report (bench_child_log_tail). */
static void log_tail(const char *dir, const char *name) {
  char p[32768];
  snprintf(p, sizeof p, "%s/%s.log", dir, name);
  bench_child_log_tail(p);
}

/* suite.json: {"steps": {name: "ok" | "failed" | "skipped"}, ...}, rewritten after each step. */
static int steps_done(cJSON *state, const char *name) {
  cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(state, "steps"), name);
  return cJSON_IsString(v) && !strcmp(v->valuestring, "ok");
}

/* suite.json, or NULL with the reason in err */
static cJSON *state_load(const char *dir, char *err, size_t errcap) {
  char p[4200];
  snprintf(p, sizeof p, "%s/suite.json", dir);
  cJSON *s = NULL;
  int rc = util_json_read_file(p, &s, err, errcap);
  if (rc == -2) snprintf(err, errcap, "no suite.json there (not a suite directory?)");
  return rc ? NULL : s;
}

static void progress(int tty, int i, int n, const char *name, const char *what) {
  if (tty) {
    int w = 24, fill = n ? w * i / n : w;
    fprintf(stderr, "\r[%.*s%*s] %2d/%d %-28.28s %s", fill, "########################", w - fill,
            "", i, n, name, what);
    if (strcmp(what, "...")) fputc('\n', stderr);
  } else if (strcmp(what, "...")) {
    fprintf(stderr, "suite: %2d/%d %s: %s\n", i, n, name, what);
  }
}

/* Removes flag and its value from a step's arguments. */
static void drop_arg(suite_step *s, const char *flag) {
  for (int i = 0; i + 1 < s->argc; i++)
    if (!strcmp(s->argv[i], flag)) {
      free(s->argv[i]);
      free(s->argv[i + 1]);
      memmove(&s->argv[i], &s->argv[i + 2], (size_t)(s->argc - i - 2) * sizeof *s->argv);
      s->argc -= 2;
      return;
    }
}

/* Whether a is dir/name. */
static int names_in(const char *a, const char *dir, const char *name) {
  size_t dl = strlen(dir);
  return !strncmp(a, dir, dl) && a[dl] == '/' && !strcmp(a + dl + 1, name);
}

/* Which steps each step reads: an argument naming another step's run directory, or the fit's
 * model.json (train's --model-from, predict's fabrics chosen from it). */
static void plan_reads(suite_step *v, int n, const char *dir) {
  for (int i = 0; i < n; i++) {
    int predict = !strcmp(v[i].name, "predict");
    for (int j = 0; j < n; j++) {
      if (j == i) continue;
      int fit = !strcmp(v[j].name, "fit");
      int r = fit && predict;
      for (int k = 0; k < v[i].argc && !r; k++)
        r = names_in(v[i].argv[k], dir, v[j].name) || (fit && names_in(v[i].argv[k], dir, "model.json"));
      if (r) v[i].reads |= UINT64_C(1) << j;
    }
  }
}

/* predict's cluster from the fit: inside a node the fastest of this machine's, between nodes
 * the slowest emulated link (a cluster's network), else 100 Gbit/s over this machine's stack
 * (held out: one host's fabric is never stretched past one node); nodes of the fitted host's
 * cores in ranks (its topology). */
static void predict_fabrics(suite_step *s, const char *dir) {
  char p[4200], err[512];
  snprintf(p, sizeof p, "%s/model.json", dir);
  res_costmodel m;
  if (bench_costmodel_load(&m, p, 0, err, sizeof err)) return;
  const res_fabric_cost *intra = NULL, *inter = NULL;
  for (size_t i = 0; i < m.n; i++) {
    const res_fabric_cost *f = &m.f[i];
    if (!(f->m.beta > 0)) continue;
    if (!strncmp(f->fabric, "emu-", 4)) {
      if (!inter || f->m.beta > inter->m.beta) inter = f;
    } else if (!intra || f->m.beta < intra->m.beta) {
      intra = f;
    }
  }
  if (intra) arg(s, "--intra"), arg(s, "%s@%s", p, intra->fabric);
  if (inter) arg(s, "--inter"), arg(s, "%s@%s", p, inter->fabric);
  else if (intra) arg(s, "--inter"), arg(s, "%s@%s,gbit=100", p, intra->fabric);
  long ppn = intra ? lround(res_machine_cores(intra)) : 0;
  if (ppn >= 1) arg(s, "--ranks-per-node"), arg(s, "%ld", ppn);
  res_costmodel_free(&m);
}

/* ---- the summary: a row per fabric, from the steps' records ---- */

typedef struct {
  char label[64];
  double busbw, images_s, fabric_eff, exposed_ms, step_ms, pred_ips;
} suite_fabric;

/* An algorithm's busbw at the size nearest the gradient's, per transport, from allreduce.csv. */
static double busbw_at(const char *dir, const char *transport, const char *algo, double bytes) {
  res_rows rows = {0};
  char err[512];
  if (res_table_read(&rows, res_schema_allreduce(), dir, err, sizeof err)) return NAN;
  const res_allreduce_row *r = rows.rows;
  double best = NAN, dist = INFINITY;
  for (size_t i = 0; i < rows.n; i++) {
    if (strcmp(r[i].transport, transport) || strcmp(r[i].algo, algo)) continue;
    double d = fabs(log((double)r[i].bytes / bytes));
    if (d < dist) dist = d, best = r[i].busbw_gbps;
  }
  res_rows_free(&rows);
  return best;
}

/* "1gbit" x 10 -> "10gbit": a rate as tc writes it, for the what-if sentence */
static void rate_label(char *out, size_t cap, double bps) {
  if (bps >= 1e9) snprintf(out, cap, "%ggbit", bps / 1e9);
  else snprintf(out, cap, "%gmbit", bps / 1e6);
}

/* One data-parallel row's line and the sentence a user can act on: how far the fabric keeps
 * training from its no-communication speed, what bounds it, and for a link-bound emulated
 * link what a link ten times faster would give under the cost model. */
static void summarize_row(const char *label, const suite_opts *o, const res_train_row *r,
                          const res_train_row *none, const res_rows *buckets, const res_costmodel *m,
                          double busbw, char rates[][32], int nrates) {
  printf("  %-22s %12.3f %12.1f %10.2f %10.1f %12.1f %-9s\n", label, busbw, r->images_per_s,
         r->fabric_eff, r->exposed_comm_ms, r->images_per_s_pred,
         isfinite(r->images_per_s_pred) && r->pred_kind && *r->pred_kind ? r->pred_kind : "-");
  double step, base;
  res_bound bound = res_train_bound(r, none, &step, &base);
  char whatif[160] = "";
  uint64_t bps = 0;
  res_train_row fast = *r;
  /* from the model without that rate's fabric: where the suite measured it too, the measurement
   * is set beside this figure (summarize_checks) and must not be in it */
  if (bound == RES_BOUND_LINK && none && m && none->images_per_s > 0 && !strncmp(r->fabric, "emu-", 4) &&
      !launch_emu_parse_rate(r->fabric + 4, &bps) &&
      !res_predict_train_row_heldout(&fast, none, buckets, m, 10.0 * (double)bps, NULL, 0) &&
      fast.images_per_s_pred > 0) {
    char to[32];
    rate_label(to, sizeof to, 10.0 * (double)bps);
    double eff = fast.images_per_s_pred / none->images_per_s;
    int measured = 0; /* the suite measured that rate too: the two are set side by side below */
    for (int g = 0; g < nrates; g++) {
      uint64_t b = 0;
      measured |= !strchr(rates[g], ':') && !launch_emu_parse_rate(rates[g], &b) && b == 10 * bps;
    }
    snprintf(whatif, sizeof whatif, "; a %s link would give %.2f (predicted, held out%s)", to, eff > 1 ? 1.0 : eff,
             measured && r->host_count <= 1 ? ": measured beside it below" : "");
  }
  char speed[160];
  if (r->fabric_eff > 1.02) /* faster than no exchange: the machine drifted between the two */
    snprintf(speed, sizeof speed, "as fast as with no communication (%.2f: the difference is this "
             "machine's noise; more --steps or --rounds narrow it)", r->fabric_eff);
  else
    snprintf(speed, sizeof speed, "at %.2f of its no-communication speed", r->fabric_eff);
  char why[200];
  if (bound == RES_BOUND_CORES)
    snprintf(why, sizeof why, "slowed by the exchange's CPU work on the same cores (a step takes %.0f ms against "
             "%.0f with no communication, %.0f of it waiting for the all-reduce)", step, base,
             r->exposed_comm_ms);
  else
    snprintf(why, sizeof why, "%s (%.0f of %.0f ms a step waits for the all-reduce)",
             bound == RES_BOUND_LINK ? "link-bound" : "compute-bound", r->exposed_comm_ms, r->step_ms);
  printf("    %s: %s trains %s, %s%s.\n", label, o->model, speed, why, whatif);
  /* a replay rebuilds the row from its own fabric's fitted all-reduce; held out, it was not fitted */
  if (isfinite(r->images_per_s_pred))
    printf("      the cost model %s %.1f images/s (measured %.1f).\n",
           r->pred_kind && !strcmp(r->pred_kind, "replay") ? "replayed (fitted on this configuration)"
                                                             : "predicted (held out)",
           r->images_per_s_pred, r->images_per_s);
}

/* The largest all-reduce on an emulated link: 16 MiB (--quick: 4 MiB), or more where that
 * leaves fewer than two sizes of at least 8 of its shaper's bursts, which the fit needs to
 * tell the link from the shaper's credit (res_fit.c); at most 256 MiB. */
static uint64_t suite_emu_max(const char *rate, int quick) {
  uint64_t bps = 0, max = quick ? 4u << 20 : 16u << 20;
  launch_emu_spec sp;
  char err[256];
  if (launch_emu_parse_spec(rate, &sp, err, sizeof err) || launch_emu_parse_rate(sp.rate, &bps)) return max;
  while (max < (256u << 20) && (double)max / 4 < 8.0 * (double)launch_emu_burst(bps)) max *= 4;
  return max;
}

static void summarize(const char *dir, const suite_opts *o, char rates[][32], int nrates,
                      double grad_bytes, const char *talgo) {
  printf("\n# fabench suite: %s, %d ranks x batch %ld, gradients %.1f MB\n", o->model, o->nranks,
         o->batch, grad_bytes / 1e6);
  char bcol[32]; /* the busbw is the training's algorithm's, at the gradients' size */
  snprintf(bcol, sizeof bcol, "%.24s GB/s", talgo);
  printf("# %-22s %12s %12s %10s %10s %12s %-9s\n", "fabric", bcol, "images/s", "fabric_eff",
         "exposed_ms", "pred img/s", "pred kind");
  char mpath[4200], err[512];
  snprintf(mpath, sizeof mpath, "%s/model.json", dir);
  res_costmodel model;
  int have_model = bench_costmodel_load(&model, mpath, 0, err, sizeof err) == 0;
  for (int f = -1; f < nrates; f++) {
    char tdir[4200], adir[4200];
    const char *tag = f < 0 ? "loopback" : rates[f];
    snprintf(tdir, sizeof tdir, "%s/train-%s", dir, tag);
    snprintf(adir, sizeof adir, "%s/allreduce-%s", dir, tag);
    res_rows rows = {0}, buckets = {0};
    if (res_table_read(&rows, res_schema_train(), tdir, err, sizeof err)) continue;
    int have_buckets = !res_table_read(&buckets, res_schema_train_buckets(), tdir, err, sizeof err);
    const res_train_row *r = rows.rows, *none = NULL;
    for (size_t i = 0; i < rows.n; i++)
      if (!strcmp(r[i].role, "none")) none = &r[i];
    for (size_t i = 0; i < rows.n; i++) {
      if (strcmp(r[i].role, "dp")) continue;
      char label[96];
      /* an emulated cluster's layout before its link's rate: "2x2 emu-1gbit" */
      const char *colon = f < 0 ? NULL : strchr(rates[f], ':');
      snprintf(label, sizeof label, "%.*s%s%s %s/%s", colon ? (int)(colon - rates[f]) : 0, colon ? rates[f] : "",
               colon ? " " : "", f < 0 ? "loopback" : r[i].fabric, r[i].transport, r[i].algo);
      summarize_row(label, o, &r[i], none, have_buckets ? &buckets : NULL, have_model ? &model : NULL,
                    busbw_at(adir, r[i].transport, r[i].algo, grad_bytes), rates, nrates);
    }
    res_rows_free(&buckets);
    res_rows_free(&rows);
  }
  if (have_model) res_costmodel_free(&model);
}

/* ---- the job ---- */

typedef struct {
  suite_opts o;
  cJSON *state;                        /* suite.json's */
  char *rargv[64];                     /* a resumed suite's command line (state's strings) */
  char tl[16 * 5], talgo[32];          /* the transports; the algorithm training uses */
  const char *algos;
  char rates[SUITE_MAX_RATES][32];     /* the emulated links */
  int nrates;
  char check[48];                      /* the held-out check's --emulate ("": none) */
  double check_bps;
  double grad_bytes;
  uint64_t maxb;                       /* the largest all-reduce on loopback */
  char dir[4096];
  suite_step steps[SUITE_MAX_STEPS];
  int ns;
  /* running the steps */
  char self[4096];
  launch_sigs sg;
  int tty, fit_ok, interrupted, failed;
  uint64_t ran_now;                    /* the steps run, and ok, by this invocation */
  const char *stopped_in;
  double t0;
} suite_job;

static int suite_resume(suite_job *x) {
  const char *rdir = x->o.resume;
  char serr[600];
  if (!(x->state = state_load(rdir, serr, sizeof serr))) return bench_error("--resume %s: %s", rdir, serr);
  /* without its command line the suite's flags are unknown: the defaults would run another
   * suite (as root, the emulated one) into this directory */
  cJSON *av = cJSON_GetObjectItem(x->state, "argv"), *it;
  int bad = !cJSON_IsArray(av) || cJSON_GetArraySize(av) < 1 || cJSON_GetArraySize(av) > 62, rargc = 0;
  cJSON_ArrayForEach(it, av) {
    if (bad || !cJSON_IsString(it)) {
      bad = 1;
      break;
    }
    x->rargv[rargc++] = it->valuestring;
  }
  x->rargv[rargc] = NULL;
  if (bad)
    return bench_error("--resume %s: its suite.json has no \"argv\" (the suite's command line as a list of "
                       "strings), so its flags are unknown; start a new suite with --out", rdir);
  if (suite_parse(&x->o, rargc, x->rargv))
    return bench_error("--resume %s: suite.json's command line no longer parses", rdir);
  x->o.out = NULL;
  x->o.resume = rdir;
  return 0;
}

/* The transports as one list for the steps' --transport: the user's, parsed before any step
 * runs (not by the step that first uses them) and written back by their names, which fit in tl
 * whatever the spelling; else those built. */
static int suite_transports(suite_job *x) {
  coll_transport_kind ks[16] = {COLL_TCP, COLL_UCX, COLL_MPI};
  int n = 3, want_mpi, rc;
  if (x->o.transports && (rc = bench_parse_transports(x->o.transports, ks, 16, &n, &want_mpi, suite_usage())))
    return rc;
  for (int i = 0; i < n; i++)
    if (x->o.transports || coll_transport_built(ks[i]))
      snprintf(x->tl + strlen(x->tl), sizeof x->tl - strlen(x->tl), "%s%s", *x->tl ? "," : "",
               coll_transport_name(ks[i]));
  return 0;
}

static int suite_algos(suite_job *x) {
  x->algos = x->o.algos;
  /* training uses ring, the train command's own, when it is measured, else the first measured */
  coll_algo al[16];
  int na, rc = bench_parse_algos(x->algos, al, 16, &na, suite_usage());
  if (rc) return rc;
  for (int i = 0; i < na; i++)
    if (i == 0 || al[i].kind == COLL_ALGO_RING) coll_algo_format(x->talgo, sizeof x->talgo, al[i]);
  return 0;
}

static int suite_rates(suite_job *x) {
  const char *el = x->o.emulate;
  if (!strcmp(el, "none")) return 0;
  char *items[SUITE_MAX_RATES], *store = NULL;
  int n = bench_split_list(el, items, SUITE_MAX_RATES, &store);
  for (int i = 0; i < n; i++) {
    launch_emu_spec sp;
    char err[256];
    if (launch_emu_parse_spec(items[i], &sp, err, sizeof err)) {
      int rc = bench_usage_error(suite_usage(), "--emulate: '%s' is not a rate (e.g. 1gbit) or NODESxRANKS:RATE "
                                 "(e.g. 2x2:1gbit)", items[i]);
      free(store);
      return rc;
    }
    snprintf(x->rates[x->nrates++], sizeof x->rates[0], "%s", items[i]);
  }
  free(store);
  if (n <= 0) return bench_usage_error(suite_usage(), "--emulate: '%s' is empty, has an empty item or is too long", el);
  char why[512];
  if (launch_emu_usable(why, sizeof why)) {
    printf("suite: no emulated links (%s): loopback only\n", why);
    x->nrates = 0;
  }
  return 0;
}

static int suite_gradients(suite_job *x) {
  nn_data_spec spec;
  char err[1024];
  if (nn_data_parse_spec(&spec, x->o.data, err, sizeof err)) return bench_usage_error(suite_usage(), "%s", err);
  size_t nparams = 0;
  int classes = spec.kind == NN_DATA_SYNTHETIC ? spec.classes : 10;
  int c = spec.kind == NN_DATA_SYNTHETIC ? spec.c : spec.kind == NN_DATA_FMNIST ? 1 : 3;
  int hw = spec.kind == NN_DATA_SYNTHETIC ? spec.h : spec.kind == NN_DATA_FMNIST ? 28 : 32;
  if (nn_model_param_count(x->o.model, c, hw, spec.kind == NN_DATA_SYNTHETIC ? spec.w : hw,
                           classes > 0 ? classes : 10, &nparams, err, sizeof err))
    return bench_usage_error(suite_usage(), "--model: %s", err);
  x->grad_bytes = 4.0 * (double)nparams;
  x->maxb = 4096;
  while ((double)x->maxb < x->grad_bytes) x->maxb *= 2;
  return 0;
}

/* The suite directory, and a new suite's suite.json with its command line. */
static int suite_open(suite_job *x, int argc, char **argv) {
  char err[1024];
  if (x->o.resume)
    snprintf(x->dir, sizeof x->dir, "%s", x->o.resume);
  else if (res_run_dir(x->dir, sizeof x->dir, x->o.out, "suite", err, sizeof err))
    return bench_error("%s", err);
  if (!x->state) {
    x->state = cJSON_CreateObject();
    cJSON *cmd = cJSON_AddArrayToObject(x->state, "argv");
    for (int i = 0; i < argc; i++) cJSON_AddItemToArray(cmd, cJSON_CreateString(argv[i]));
    cJSON_AddObjectToObject(x->state, "steps");
  }
  return 0;
}

/* An emulated cluster (NODESxRANKS:RATE) sets its own rank count; anything else takes -n n. */
static int suite_cluster(const suite_job *x, int f) { return f >= 0 && strchr(x->rates[f], ':'); }
static void suite_ranks(suite_step *s, const suite_job *x, int f, int n) {
  if (!suite_cluster(x, f)) arg(s, "-n"), arg(s, "%d", n);
}

/* p2p and all-reduce on loopback (f < 0) or the emulated link rates[f]. */
static void suite_plan_micro(suite_job *x, int f) {
  const suite_opts *o = &x->o;
  const char *tag = f < 0 ? "loopback" : x->rates[f];
  /* on emulated links shared memory would bypass them: tcp carries every transport there */
  const char *ftl = f < 0 ? x->tl : "tcp";
  suite_step *s = step_new(x->steps, &x->ns, 0, "p2p-%s", tag);
  arg(s, "p2p"), suite_ranks(s, x, f, 2), arg(s, "--transport"), arg(s, "%s", ftl);
  if (suite_cluster(x, f)) { /* rank 0 and the first rank of the next node: across the link */
    launch_emu_spec sp;
    char err[256];
    launch_emu_parse_spec(x->rates[f], &sp, err, sizeof err);
    arg(s, "--pairs"), arg(s, "0,%d", sp.per_node);
  }
  arg(s, "--tests"), arg(s, "latency,bw"), arg(s, "--min-bytes"), arg(s, "8");
  arg(s, "--max-bytes"), arg(s, "%s", o->quick ? "4M" : "16M"), arg(s, "--step-factor"), arg(s, "4");
  arg(s, "--time-per-size"), arg(s, "%s", o->quick ? "0.02" : "0.05");
  arg(s, "--timeout"), arg(s, "%ld", o->timeout_s);
  if (f >= 0) arg(s, "--emulate"), arg(s, "%s", x->rates[f]);
  s = step_new(x->steps, &x->ns, 0, "allreduce-%s", tag);
  arg(s, "allreduce"), suite_ranks(s, x, f, o->nranks), arg(s, "--transport"), arg(s, "%s", ftl);
  arg(s, "--algo"), arg(s, "%s", x->algos), arg(s, "--min-bytes"), arg(s, "4K");
  arg(s, "--max-bytes");
  arg(s, "%llu", (unsigned long long)(f < 0 ? x->maxb : suite_emu_max(x->rates[f], o->quick)));
  arg(s, "--step-factor"), arg(s, "4"), arg(s, "--timeout"), arg(s, "%ld", o->timeout_s);
  /* Asleep while they wait, as training's communication thread is: the fit then prices the
   * all-reduce as training gets it (MPI moves data only when a poll comes round) and measures
   * the host's CPU per byte (a spinning rank's is not), the share of the cores the exchange
   * costs the compute. Spinning rows predicted training fast (docs/measurements.md, History). */
  arg(s, "--no-spin");
  if (f < 0) {
    arg(s, "--time-per-size"), arg(s, "%s", o->quick ? "0.02" : "0.05"), arg(s, "--rounds"), arg(s, "2");
  } else { /* a slow link: few iterations, the sizes the fit needs */
    arg(s, "--warmup"), arg(s, "1"), arg(s, "--iters"), arg(s, "4"), arg(s, "--rounds"), arg(s, "1");
    arg(s, "--emulate"), arg(s, "%s", x->rates[f]);
  }
  /* the ring beside a load: what a computing core loses to the all-reduce, which the fit gives
   * the training step's share of the cores; without it training was predicted fast */
  s = step_new(x->steps, &x->ns, 0, "busy-%s", tag);
  arg(s, "allreduce"), suite_ranks(s, x, f, o->nranks), arg(s, "--transport"), arg(s, "%s", ftl);
  arg(s, "--algo"), arg(s, "ring"), arg(s, "--beside-compute"), arg(s, "--peer"), arg(s, "none");
  arg(s, "--min-bytes"), arg(s, "1M"), arg(s, "--max-bytes"), arg(s, "%s", o->quick ? "4M" : "16M");
  arg(s, "--step-factor"), arg(s, "4"), arg(s, "--timeout"), arg(s, "%ld", o->timeout_s);
  arg(s, "--warmup"), arg(s, "1"), arg(s, "--iters"), arg(s, "4"), arg(s, "--rounds"), arg(s, "2");
  if (f >= 0) arg(s, "--emulate"), arg(s, "%s", x->rates[f]);
}

/* Training on loopback (f < 0) or the emulated link rates[f], with the no-communication baseline. */
static void suite_plan_train(suite_job *x, int f) {
  const suite_opts *o = &x->o;
  suite_step *s = step_new(x->steps, &x->ns, 0, "train-%s", f < 0 ? "loopback" : x->rates[f]);
  arg(s, "train"), suite_ranks(s, x, f, o->nranks), arg(s, "--transport");
  arg(s, "none,%s", f < 0 ? x->tl : "tcp");
  arg(s, "--model"), arg(s, "%s", o->model), arg(s, "--data"), arg(s, "%s", o->data);
  arg(s, "--batch"), arg(s, "%ld", o->batch), arg(s, "--threads"), arg(s, "%d", o->threads);
  arg(s, "--steps"), arg(s, "%ld", o->steps);
  arg(s, "--warmup-steps"), arg(s, "%ld", o->steps / 4 > 1 ? o->steps / 4 : 1);
  arg(s, "--rounds"), arg(s, "%ld", o->rounds);
  arg(s, "--eval-every"), arg(s, "0"), arg(s, "--timeout"), arg(s, "%ld", o->timeout_s);
  arg(s, "--algo"), arg(s, "%s", x->talgo);
  if (f >= 0) arg(s, "--emulate"), arg(s, "%s", x->rates[f]), arg(s, "--no-single");
  arg(s, "--model-from"), arg(s, "%s/model.json", x->dir);
}

/* A rate as tc takes it, in whole gbit or mbit. */
static void rate_spell(char *out, size_t cap, double bps) {
  if (bps >= 1e9 && fmod(bps, 1e9) == 0) snprintf(out, cap, "%.0fgbit", bps / 1e9);
  else snprintf(out, cap, "%.0fmbit", bps / 1e6);
}

/* The held-out check, where links are emulated: training at a rate between the suite's
 * (res_middle_rate) on two emulated nodes of the suite's ranks (one node's were measured on
 * loopback), briefly: its prediction is made before it runs, from the fit without it. */
static void suite_plan_check(suite_job *x) {
  const suite_opts *o = &x->o;
  double bps[SUITE_MAX_RATES];
  int n = 0;
  for (int f = 0; f < x->nrates; f++) {
    launch_emu_spec sp;
    uint64_t b = 0;
    char err[256];
    if (!launch_emu_parse_spec(x->rates[f], &sp, err, sizeof err) && !launch_emu_parse_rate(sp.rate, &b))
      bps[n++] = (double)b;
  }
  double mid = res_middle_rate(bps, n);
  if (!(mid > 0)) return;
  char rate[32];
  rate_spell(rate, sizeof rate, mid);
  if (o->nranks % 2 == 0) snprintf(x->check, sizeof x->check, "2x%d:%s", o->nranks / 2, rate);
  else snprintf(x->check, sizeof x->check, "%s", rate); /* one host: the rate alone held out */
  x->check_bps = mid;
  long steps = o->steps / 4 > 8 ? o->steps / 4 : 8;
  suite_step *s = step_new(x->steps, &x->ns, 1, "heldout-%s", x->check);
  arg(s, "train");
  if (!strchr(x->check, ':')) arg(s, "-n"), arg(s, "%d", o->nranks);
  arg(s, "--transport"), arg(s, "tcp"), arg(s, "--emulate"), arg(s, "%s", x->check), arg(s, "--no-single");
  arg(s, "--model"), arg(s, "%s", o->model), arg(s, "--data"), arg(s, "%s", o->data);
  arg(s, "--batch"), arg(s, "%ld", o->batch), arg(s, "--threads"), arg(s, "%d", o->threads);
  arg(s, "--steps"), arg(s, "%ld", steps), arg(s, "--warmup-steps"), arg(s, "%ld", steps / 4);
  arg(s, "--rounds"), arg(s, "1"), arg(s, "--eval-every"), arg(s, "0");
  arg(s, "--timeout"), arg(s, "%ld", o->timeout_s), arg(s, "--algo"), arg(s, "%s", x->talgo);
}

static void suite_plan(suite_job *x) {
  suite_step *v = x->steps, *s = step_new(v, &x->ns, 0, "topo");
  const char *dir = x->dir;
  arg(s, "topo");
  for (int f = -1; f < x->nrates; f++) suite_plan_micro(x, f);
  /* the cost model from the microbenchmarks, then training per fabric, predicted by it */
  s = step_new(v, &x->ns, 1, "fit");
  arg(s, "fit"), arg(s, "--out"), arg(s, "%s/model.json", dir);
  for (int i = 0; i + 1 < x->ns; i++)
    if (strncmp(v[i].name, "topo", 4)) arg(s, "%s/%s", dir, v[i].name);
  for (int f = -1; f < x->nrates; f++) suite_plan_train(x, f);
  suite_plan_check(x);
  /* the predictions beyond this machine (their fabrics chosen once the fit is there), and the
   * report over every run directory */
  s = step_new(v, &x->ns, 1, "predict");
  arg(s, "predict"), arg(s, "--model"), arg(s, "%s", x->o.model);
  arg(s, "--profile"), arg(s, "%s/train-loopback", dir), arg(s, "--ranks"), arg(s, "8,64,512,1024");
  for (int i = 0; i < x->ns; i++)
    if (strcmp(v[i].name, "fit")) arg(&v[i], "--out"), arg(&v[i], "%s/%s", dir, v[i].name);
  s = step_new(v, &x->ns, 1, "report");
  arg(s, "report"), arg(s, "--out"), arg(s, "%s/report", dir);
  for (int i = 0; i + 1 < x->ns; i++) /* the run directories (topo's is a topology's) */
    if (strcmp(v[i].name, "fit") && strcmp(v[i].name, "topo")) arg(s, "%s/%s", dir, v[i].name);
  plan_reads(v, x->ns, dir);
  /* the check's prediction, made before it runs, reads the fit and loopback training's profile */
  for (int i = 0; i < x->ns; i++)
    if (!strncmp(v[i].name, "heldout-", 8))
      for (int j = 0; j < x->ns; j++)
        if (!strcmp(v[j].name, "fit") || !strcmp(v[j].name, "train-loopback")) v[i].reads |= UINT64_C(1) << j;
}

/* ---- figures set beside predictions made without them ---- */

/* A train run directory's rows and buckets, its data-parallel row of transport (NULL: the
 * first) and its no-communication row; 0, or -1 where it has no such data-parallel row. */
typedef struct {
  res_rows rows, buckets;
  int have_buckets;
  const res_train_row *dp, *none;
} suite_trained;

static int trained_read(suite_trained *t, const char *dir, const char *name, const char *transport) {
  char p[4200], err[512];
  memset(t, 0, sizeof *t);
  snprintf(p, sizeof p, "%s/%s", dir, name);
  if (res_table_read(&t->rows, res_schema_train(), p, err, sizeof err)) return -1;
  t->have_buckets = !res_table_read(&t->buckets, res_schema_train_buckets(), p, err, sizeof err);
  const res_train_row *r = t->rows.rows;
  for (size_t i = 0; i < t->rows.n; i++) {
    if (!strcmp(r[i].role, "none")) t->none = &r[i];
    if (!t->dp && !strcmp(r[i].role, "dp") && (!transport || !strcmp(r[i].transport, transport))) t->dp = &r[i];
  }
  return t->dp ? 0 : -1;
}

static void trained_free(suite_trained *t) {
  res_rows_free(&t->rows);
  res_rows_free(&t->buckets);
}

/* The held-out check's prediction, before it runs: loopback training's tcp row as the template
 * (its ranks, model, batch, algorithm; its no-communication row the compute profile) on the
 * check's hosts, priced at the check's rate by the fit without that rate. Into suite.json's
 * "heldout": {"pred", "from"}; nothing where there is no fit or no loopback tcp row. */
static void check_predict(suite_job *x) {
  char p[4200], err[512], from[64] = "";
  cJSON_DeleteItemFromObject(x->state, "heldout");
  snprintf(p, sizeof p, "%s/model.json", x->dir);
  res_costmodel m;
  if (!x->fit_ok || bench_costmodel_load(&m, p, 0, err, sizeof err)) return;
  suite_trained t;
  if (!trained_read(&t, x->dir, "train-loopback", "tcp") && t.none) {
    res_train_row row = *t.dp;
    launch_emu_spec sp;
    launch_emu_parse_spec(x->check, &sp, err, sizeof err);
    row.host_count = sp.nodes ? sp.nodes : 1; /* a plain rate: every rank's namespace on one host */
    row.ranks_per_host = sp.nodes ? sp.per_node : x->o.nranks;
    if (!res_predict_train_row_heldout(&row, t.none, t.have_buckets ? &t.buckets : NULL, &m, x->check_bps, from,
                                       sizeof from) &&
        isfinite(row.images_per_s_pred)) {
      cJSON *h = cJSON_AddObjectToObject(x->state, "heldout");
      cJSON_AddNumberToObject(h, "pred", row.images_per_s_pred);
      cJSON_AddStringToObject(h, "from", from);
    }
  }
  trained_free(&t);
  res_costmodel_free(&m);
}

/* Runs step i unless it is done; nonzero where the suite stops there. */
static int suite_step_one(suite_job *x, int i) {
  suite_step *p = &x->steps[i];
  /* done before, unless what it reads was measured again now: a train step done while the
   * fit had failed has no predictions, a report drawn before a step ran again is stale */
  if (steps_done(x->state, p->name) && !(p->reads & x->ran_now)) {
    progress(x->tty, i + 1, x->ns, p->name, "done before (resumed)");
    return 0;
  }
  progress(x->tty, i, x->ns, p->name, "...");
  if (!x->fit_ok) drop_arg(p, "--model-from"); /* train without predictions */
  if (!strcmp(p->name, "predict") && x->fit_ok) predict_fabrics(p, x->dir);
  if (!strncmp(p->name, "heldout-", 8)) check_predict(x);
  double ts = util_now();
  int src = step_run(x->self, p, x->dir, &x->sg.set, &x->sg.old, &x->interrupted);
  if (!strcmp(p->name, "fit")) x->fit_ok = src == 0;
  if (src == 0) x->ran_now |= UINT64_C(1) << i;
  char what[128], sj[4200], err[1024];
  snprintf(what, sizeof what, "%s in %.0f s",
           src == 0 ? "ok" : x->interrupted ? "interrupted" : p->optional ? "failed (optional)" : "FAILED",
           util_now() - ts);
  progress(x->tty, i + 1, x->ns, p->name, what);
  cJSON *sv = cJSON_GetObjectItem(x->state, "steps");
  cJSON_DeleteItemFromObject(sv, p->name);
  /* a step that ended ok despite the signal is done; one cut short runs again on --resume */
  cJSON_AddStringToObject(sv, p->name, src == 0 ? "ok" : x->interrupted ? "interrupted" : "failed");
  snprintf(sj, sizeof sj, "%s/suite.json", x->dir);
  if (util_json_write_file(sj, x->state, err, sizeof err)) {
    bench_error("%s", err);
    x->failed = 1;
    return 1;
  }
  if (x->interrupted) {
    x->stopped_in = p->name;
    return 1;
  }
  if (src != 0) {
    log_tail(x->dir, p->name);
    if (!p->optional) x->failed = 1;
  }
  return 0;
}

static int suite_run_steps(suite_job *x) {
  printf("suite: %s, %d ranks, transports %s, algorithms %s, emulated:", x->dir, x->o.nranks, x->tl,
         x->algos);
  for (int f = 0; f < x->nrates; f++) printf(" %s", x->rates[f]);
  printf("%s\nsuite: %d steps; each one's output is in %s/<step>.log\n", x->nrates ? "" : " none",
         x->ns, x->dir);
  fflush(stdout);
  x->tty = isatty(2), x->fit_ok = steps_done(x->state, "fit");
  ssize_t sl = readlink("/proc/self/exe", x->self, sizeof x->self - 1);
  if (sl <= 0) return bench_error("cannot find this program (/proc/self/exe)");
  x->self[sl] = 0;
  x->t0 = util_now();
  launch_sigs_take(&x->sg); /* as the -n launcher does: signals go to the running step */
  struct timespec zero = {0, 0};
  for (int i = 0; i < x->ns; i++) {
    int sig;
    while (!x->interrupted && (sig = sigtimedwait(&x->sg.set, NULL, &zero)) > 0) /* one between steps */
      if (sig != SIGCHLD) x->interrupted = sig;
    if (x->interrupted || suite_step_one(x, i)) break;
  }
  launch_sigs_restore(&x->sg);
  return 0;
}

/* A check's row into suite_check.csv (t may be NULL) and its line. */
static void check_put(res_table *t, const char *check, const char *label, const res_train_row *meas,
                      const char *from, double pred, const char *model) {
  res_suite_check_row c;
  res_row_init(res_schema_suite_check(), &c);
  c.run_id = meas->run_id, c.check = check, c.fabric = meas->fabric, c.from = from;
  c.nodes = meas->host_count, c.ranks = meas->ranks, c.algo = meas->algo, c.model = model;
  c.images_s_pred = pred, c.images_s_meas = meas->images_per_s;
  c.err = (pred - meas->images_per_s) / meas->images_per_s;
  c.pred_kind = res_pred_kind_name(RES_PRED_HELDOUT);
  char err[512];
  if (t && res_table_put(t, &c, err, sizeof err)) bench_error("%s", err);
  printf("  %-22s %12.1f %12.1f %+9.1f%%  held-out (from %s, without %s's rows)\n", label, pred,
         meas->images_per_s, 100 * c.err, from, meas->fabric);
}

/* Where the suite measured a rate that it also predicts (the what-if's faster link), the two side
 * by side, the prediction from the fit without that rate's rows; and the held-out check's
 * prediction, made before it ran, against its measurement. Rows into suite_check.csv. */
static void summarize_checks(suite_job *x) {
  char p[4200], err[512];
  snprintf(p, sizeof p, "%s/model.json", x->dir);
  res_costmodel m;
  int have_model = bench_costmodel_load(&m, p, 0, err, sizeof err) == 0;
  res_table *t = NULL;
  if (res_table_open_schema(&t, x->dir, res_schema_suite_check(), err, sizeof err)) {
    bench_error("%s", err);
    t = NULL;
  }
  printf("\n# predicted without the measurement, beside it (images/s)\n# %-22s %12s %12s %10s  kind\n",
         "fabric", "predicted", "measured", "error");
  int lines = 0;
  for (int f = 0; have_model && f < x->nrates; f++) {
    suite_trained hi;
    char name[64];
    uint64_t bhi = 0;
    snprintf(name, sizeof name, "train-%s", x->rates[f]);
    if (!trained_read(&hi, x->dir, name, NULL) && !strncmp(hi.dp->fabric, "emu-", 4) &&
        !launch_emu_parse_rate(hi.dp->fabric + 4, &bhi)) {
      /* from the nearest slower emulated rate of the same layout that the suite measured */
      int lo = -1;
      uint64_t blo = 0;
      for (int g = 0; g < x->nrates; g++) {
        launch_emu_spec a, b;
        uint64_t r = 0;
        if (g == f || launch_emu_parse_spec(x->rates[g], &a, err, sizeof err) ||
            launch_emu_parse_spec(x->rates[f], &b, err, sizeof err) || a.nodes != b.nodes ||
            a.per_node != b.per_node || launch_emu_parse_rate(a.rate, &r) || r >= bhi || r <= blo)
          continue;
        lo = g, blo = r;
      }
      suite_trained s;
      char from[64] = "";
      snprintf(name, sizeof name, "train-%s", lo >= 0 ? x->rates[lo] : "");
      if (lo >= 0 && !trained_read(&s, x->dir, name, hi.dp->transport)) {
        res_train_row row = *s.dp;
        if (s.none && !res_predict_train_row_heldout(&row, s.none, s.have_buckets ? &s.buckets : NULL, &m,
                                                     (double)bhi, from, sizeof from)) {
          char label[96];
          snprintf(label, sizeof label, "%s %s/%s", hi.dp->fabric, hi.dp->transport, hi.dp->algo);
          check_put(t, "whatif", label, hi.dp, from, row.images_per_s_pred, x->o.model);
          lines++;
        }
      }
      if (lo >= 0) trained_free(&s);
    }
    trained_free(&hi);
  }
  /* the suite's own check: predicted before it ran */
  cJSON *h = cJSON_GetObjectItem(x->state, "heldout");
  double pred = cJSON_GetNumberValue(cJSON_GetObjectItem(h, "pred"));
  const char *from = cJSON_GetStringValue(cJSON_GetObjectItem(h, "from"));
  suite_trained c;
  char name[80];
  snprintf(name, sizeof name, "heldout-%s", x->check);
  if (!*x->check) {
    printf("  held-out check: skipped (the suite emulates no links: --emulate none, or not root with "
           "iproute2)\n");
  } else if (trained_read(&c, x->dir, name, NULL)) {
    printf("  held-out check %s: not measured (see %s/%s.log)\n", x->check, x->dir, name);
    trained_free(&c);
  } else {
    char label[96];
    snprintf(label, sizeof label, "%dx%d %s %s/%s", (int)c.dp->host_count,
             (int)(c.dp->ranks / (c.dp->host_count > 0 ? c.dp->host_count : 1)), c.dp->fabric, c.dp->transport,
             c.dp->algo);
    if (isfinite(pred) && from) {
      check_put(t, "heldout", label, c.dp, from, pred, x->o.model);
      lines++;
    } else {
      printf("  held-out check %s: measured %.1f images/s; no prediction (no fit or no loopback tcp training)\n",
             x->check, c.dp->images_per_s);
    }
    trained_free(&c);
  }
  if (!lines) printf("  (no figure here was both predicted and measured)\n");
  res_table_close(t);
  if (have_model) res_costmodel_free(&m);
}

static int suite_finish(suite_job *x) {
  if (x->interrupted) {
    fprintf(stderr, "fabench: suite: stopped by %s%s%s; the steps done are kept: --resume %s runs the rest\n",
            x->interrupted == SIGINT ? "SIGINT" : x->interrupted == SIGTERM ? "SIGTERM" : "SIGHUP",
            x->stopped_in ? " during " : "", x->stopped_in ? x->stopped_in : "", x->dir);
    return 128 + x->interrupted;
  }
  printf("suite: %.0f s\n", util_now() - x->t0);
  summarize(x->dir, &x->o, x->rates, x->nrates, x->grad_bytes, x->talgo);
  summarize_checks(x);
  printf("\nsuite: %s%s\n", x->dir,
         x->failed ? " (some steps FAILED: see their logs; --resume runs them again)" : "");
  struct stat sb;
  char rp[4200];
  snprintf(rp, sizeof rp, "%s/report/report.md", x->dir);
  if (stat(rp, &sb) == 0) printf("suite: the report is %s\n", rp);
  return x->failed ? 1 : 0;
}

int bench_cmd_suite(int argc, char **argv) {
  suite_job x = {0};
  int rc = suite_parse(&x.o, argc, argv);
  if (rc) return rc == 1 ? 0 : rc;
  /* a resumed suite runs as it was started: its options come from suite.json */
  if (x.o.resume) rc = suite_resume(&x);
  /* what the machine has */
  if (!rc) rc = suite_transports(&x);
  if (!rc) rc = suite_algos(&x);
  if (!rc) rc = suite_rates(&x);
  if (!rc) rc = suite_gradients(&x);
  if (!rc) rc = suite_open(&x, argc, argv);
  if (!rc) {
    suite_plan(&x);
    rc = suite_run_steps(&x);
  }
  if (!rc) rc = suite_finish(&x);
  cJSON_Delete(x.state);
  for (int i = 0; i < x.ns; i++)
    for (int k = 0; k < x.steps[i].argc; k++) free(x.steps[i].argv[k]);
  return rc;
}
