/* fabench validate: the cost model against measurements it was not fitted on. A grid of cells
 * on emulated links (rate, nodes, ranks per node, algorithm, model) is measured; the model is
 * fitted on a training subset of the cells' all-reduce runs and predicts the others' all-reduce
 * (from 1 MiB) and training step, beside two baselines and the machine's own repeat, and with
 * each of its terms turned off in turn. Written as validate.csv, validate_ablation.csv and
 * validate.md; run again with the same --out, the cells measured are kept. */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "launch.h"
#include "res.h"
#include "util.h"

enum { O_QUICK = 256, O_RATES, O_NODES, O_PPN, O_ALGO, O_MODEL, O_TRAIN, O_MAXN, O_DATA, O_BATCH, O_STEPS,
       O_NOREP, O_REPEAT, O_TO, O_OUT, O_ROUNDS, O_NOMEAS };

static const bench_flag vd_flags[] = {
    {"quick", NULL, NULL, "a few cells: 1, 2 and 10 gbit on 2 and 3 nodes of one rank, ring, fitted on 1 and 10 "
                          "gbit and 2 nodes (minutes); the defaults it changes are shown as --quick's", O_QUICK},
    {"rates", "LIST", "1gbit,2gbit,5gbit,10gbit", "emulated link rates", O_RATES},
    {"nodes", "LIST", "2,3,4", "node counts", O_NODES},
    {"ranks-per-node", "LIST", "1,2", "ranks on each node", O_PPN},
    {"algo", "LIST", "ring,hier", "ring, rhd, tree, dtree (the trees: what an emulated link's shaper banks), hier (where nodes and ranks per node are both > 1)", O_ALGO},
    {"model", "LIST", "resnet20", "models trained", O_MODEL},
    {"train-rates", "LIST", NULL, "the rates the model is fitted on (default: the lowest and the highest)", O_TRAIN},
    {"train-max-nodes", "N", "2", "the node counts it is fitted on: up to N", O_MAXN},
    {"data", "SPEC", "synthetic:3x32x32:10:1024", "training data", O_DATA},
    {"batch", "N", "32", "images per rank per step", O_BATCH},
    {"steps", "N", "30", "training steps per cell", O_STEPS},
    {"rounds", "R", "2", "the cell's pairs take turns R times, its row the fastest round's (train --rounds: a slow "
                         "spell of the machine is not the model's miss)", O_ROUNDS},
    {"repeat", "WHICH", "ends", "held-out cells measured twice, the machine's own repeatability: ends (the first, "
                                 "link-bound, and the one of most ranks at the fastest rate, where ranks crowd the "
                                 "cores), all (every one: the summary then judges the model where the machine "
                                 "repeats itself) or none", O_REPEAT},
    {"no-repeat", NULL, NULL, "--repeat none", O_NOREP},
    {"no-measure", NULL, NULL, "fit and price again the cells --out holds, measuring nothing (another model, or "
                               "FABENCH_MODEL_OFF): give the flags they were measured with; a cell missing there is refused",
     O_NOMEAS},
    {"timeout", "SEC", "60", "every network wait of the cells' runs", O_TO},
    {"out", "DIR", NULL, "run directory (default: results/<UTC>-validate); given again, the cells already measured "
                         "there are kept and the rest measured", O_OUT},
};
static const bench_flag_alt vd_quick[] = {{O_RATES, "1gbit,2gbit,10gbit"}, {O_NODES, "2,3"}, {O_PPN, "1"},
                                          {O_ALGO, "ring"}, {O_BATCH, "16"}, {O_STEPS, "16"}, {0, NULL}};
static const bench_flags_cmd vd_cmd = {
    "usage: fabench validate [options]   (needs root and iproute2: emulated links)\n", vd_flags,
    sizeof vd_flags / sizeof *vd_flags,
    "FABENCH_MODEL_OFF=TERMS turns the model's terms off in every prediction (the ablation\n"
    "table turns each off in turn): curves, cpu, burst, share.\n",
    "quick", vd_quick};
static const char *vd_usage(void) { return bench_flags_help(&vd_cmd); }

#define VD_MAX 96
#define VD_LIST 16

typedef struct {
  char rate[24];
  double bps;
  int nodes, ppn;
  char algo[16], model[40];
  char key[96];  /* the all-reduce run: rate, layout, algorithm */
  char id[160];  /* the cell: key and model */
  const char *held; /* "" (fitted on), rate, nodes, both */
  int repeat;    /* the repeat of cell `of` */
  int of;
  int loopback;  /* the intra-node fit's all-reduce on loopback (no training) */
  int fit_only;  /* a link's flat all-reduce the fit needs that the grid lacks (no training) */
  int ok_ar, ok_train;
  res_rows ar, train, bk;
} vd_cell;

enum { VD_REP_NONE, VD_REP_ENDS, VD_REP_ALL };
typedef struct {
  int quick, repeat; /* VD_REP_* */
  int no_measure; /* price what out holds, measure nothing */
  char *rates[VD_LIST], *nodes[VD_LIST], *ppn[VD_LIST], *algos[VD_LIST], *models[VD_LIST], *train_rates[VD_LIST];
  int nrates, nnodes, nppn, nalgos, nmodels, ntrain;
  char *store[6];
  const char *data, *out;
  long batch, steps, rounds, timeout, max_nodes;
} vd_opts;

typedef struct {
  vd_opts o;
  bench_run run;
  char self[4096];
  vd_cell *c;
  int n;
  res_table *tab;
  launch_sigs sg;  /* SIGINT, SIGTERM, SIGHUP go to the running cell (bench_child_run) */
  int interrupted; /* the signal that stopped the run, or 0 */
} vd_job;

/* ---- options ---- */

/* The lists are split where they are set: a list given replaces its default. */
static int vd_set(void *ctx, int code, const char *val, int given) {
  vd_opts *o = ctx;
  (void)given;
  const char *u = vd_usage();
  switch (code) {
  case O_QUICK: o->quick = 1; break;
  case O_RATES: return bench_flags_list(u, "--rates", val, o->rates, VD_LIST, &o->nrates, &o->store[0]);
  case O_NODES: return bench_flags_list(u, "--nodes", val, o->nodes, VD_LIST, &o->nnodes, &o->store[1]);
  case O_PPN: return bench_flags_list(u, "--ranks-per-node", val, o->ppn, VD_LIST, &o->nppn, &o->store[2]);
  case O_ALGO: return bench_flags_list(u, "--algo", val, o->algos, VD_LIST, &o->nalgos, &o->store[3]);
  case O_MODEL: return bench_flags_list(u, "--model", val, o->models, VD_LIST, &o->nmodels, &o->store[4]);
  case O_TRAIN: return bench_flags_list(u, "--train-rates", val, o->train_rates, VD_LIST, &o->ntrain, &o->store[5]);
  case O_MAXN:
    if (bench_parse_int(val, 1, LAUNCH_EMU_MAX_NODES, &o->max_nodes))
      return bench_usage_error(u, "--train-max-nodes: '%s' is not a node count", val);
    break;
  case O_DATA: o->data = val; break;
  case O_BATCH:
    if (bench_parse_int(val, 1, 1 << 16, &o->batch)) return bench_usage_error(u, "--batch: '%s' is not a count >= 1", val);
    break;
  case O_STEPS:
    if (bench_parse_int(val, 4, 1 << 20, &o->steps)) return bench_usage_error(u, "--steps: '%s' is not a count >= 4", val);
    break;
  case O_NOREP: o->repeat = VD_REP_NONE; break;
  case O_REPEAT:
    if (!strcmp(val, "none")) o->repeat = VD_REP_NONE;
    else if (!strcmp(val, "ends")) o->repeat = VD_REP_ENDS;
    else if (!strcmp(val, "all")) o->repeat = VD_REP_ALL;
    else return bench_usage_error(u, "--repeat: '%s' is not ends, all or none", val);
    break;
  case O_NOMEAS: o->no_measure = 1; break;
  case O_ROUNDS:
    if (bench_parse_int(val, 1, 100, &o->rounds)) return bench_usage_error(u, "--rounds: '%s' is not a count from 1 to 100", val);
    break;
  case O_TO:
    if (bench_parse_int(val, 1, 86400, &o->timeout)) return bench_usage_error(u, "--timeout: '%s' is not seconds", val);
    break;
  case O_OUT: o->out = val; break;
  }
  return 0;
}

static int vd_parse(vd_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->repeat = VD_REP_ENDS;
  int rc = bench_flags_parse(&vd_cmd, argc, argv, vd_set, o, NULL);
  if (rc) return rc;
  uint64_t b;
  for (int i = 0; i < o->nrates; i++)
    if (launch_emu_parse_rate(o->rates[i], &b)) return bench_usage_error(vd_usage(), "--rates: '%s' is not a rate (1gbit, 500mbit)", o->rates[i]);
  for (int i = 0; i < o->ntrain; i++) {
    int in = 0;
    for (int k = 0; k < o->nrates; k++) in |= !strcmp(o->train_rates[i], o->rates[k]);
    if (!in) return bench_usage_error(vd_usage(), "--train-rates: '%s' is not one of --rates", o->train_rates[i]);
  }
  long v;
  for (int i = 0; i < o->nnodes; i++)
    if (bench_parse_int(o->nodes[i], 1, LAUNCH_EMU_MAX_NODES, &v)) return bench_usage_error(vd_usage(), "--nodes: '%s' is not a node count", o->nodes[i]);
  for (int i = 0; i < o->nppn; i++)
    if (bench_parse_int(o->ppn[i], 1, 64, &v)) return bench_usage_error(vd_usage(), "--ranks-per-node: '%s' is not a count from 1 to 64", o->ppn[i]);
  for (int i = 0; i < o->nalgos; i++)
    if (strcmp(o->algos[i], "ring") && strcmp(o->algos[i], "rhd") && strcmp(o->algos[i], "tree") &&
        strcmp(o->algos[i], "dtree") && strcmp(o->algos[i], "hier"))
      return bench_usage_error(vd_usage(), "--algo: '%s' is not ring, rhd, tree, dtree or hier", o->algos[i]);
  for (int i = 0; i < o->nmodels; i++)
    if (bench_parse_name(o->models[i], 32)) return bench_usage_error(vd_usage(), "--model: '%s' is not a model name", o->models[i]);
  return 0;
}

static void vd_opts_free(vd_opts *o) {
  for (int i = 0; i < 6; i++) free(o->store[i]);
}

/* ---- the grid ---- */

/* The fitted rates: --train-rates, else the lowest and the highest. */
static int vd_train_bps(const vd_opts *o, double *bps) {
  uint64_t b;
  if (o->ntrain) {
    for (int i = 0; i < o->ntrain; i++) launch_emu_parse_rate(o->train_rates[i], &b), bps[i] = (double)b;
    return o->ntrain;
  }
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < o->nrates; i++) {
    launch_emu_parse_rate(o->rates[i], &b);
    lo = fmin(lo, (double)b), hi = fmax(hi, (double)b);
  }
  bps[0] = lo, bps[1] = hi;
  return lo < hi ? 2 : 1;
}

/* The cells: training ones first (their all-reduce is what the fit reads), then the held-out
 * ones, then the repeat. 0, or the usage error's status. */
static int vd_plan(vd_job *x) {
  const vd_opts *o = &x->o;
  double tb[VD_LIST];
  int nt = vd_train_bps(o, tb), maxppn = 1;
  vd_cell *c = x->c = calloc(VD_MAX, sizeof *c);
  int n = 0;
  if (!c) return bench_error("out of memory");
  for (int pass = 0; pass < 2; pass++)
    for (int r = 0; r < o->nrates; r++)
      for (int nn = 0; nn < o->nnodes; nn++)
        for (int pp = 0; pp < o->nppn; pp++)
          for (int a = 0; a < o->nalgos; a++)
            for (int md = 0; md < o->nmodels; md++) {
              vd_cell k = {0};
              uint64_t b;
              launch_emu_parse_rate(o->rates[r], &b);
              snprintf(k.rate, sizeof k.rate, "%s", o->rates[r]);
              k.bps = (double)b, k.nodes = atoi(o->nodes[nn]), k.ppn = atoi(o->ppn[pp]);
              snprintf(k.algo, sizeof k.algo, "%s", o->algos[a]);
              snprintf(k.model, sizeof k.model, "%s", o->models[md]);
              if (k.nodes * k.ppn < 2 || (!strcmp(k.algo, "hier") && (k.ppn < 2 || k.nodes < 2))) continue;
              res_vcell vc = {k.bps, k.nodes, k.ppn};
              k.held = res_validate_held(&vc, tb, nt, (int)o->max_nodes);
              if ((pass == 0) != (*k.held == 0)) continue;
              if (n == VD_MAX) return bench_usage_error(vd_usage(), "the grid has over %d cells", VD_MAX);
              snprintf(k.key, sizeof k.key, "%s-%dx%d-%s", k.rate, k.nodes, k.ppn, k.algo);
              snprintf(k.id, sizeof k.id, "%s-%s", k.key, k.model);
              if (k.nodes > 1 && k.ppn > maxppn) maxppn = k.ppn;
              c[n++] = k;
            }
  int first_held = -1;
  for (int i = 0; i < n && first_held < 0; i++)
    if (*c[i].held) first_held = i;
  if (first_held < 0) return bench_usage_error(vd_usage(), "no cell is held out: every rate is in --train-rates and every node count under --train-max-nodes");
  /* the repeats, after every cell: the machine's own spread over the whole run */
  int crowded = first_held, ncells = n;
  for (int i = first_held; i < ncells; i++) {
    const vd_cell *a = &c[i], *b = &c[crowded];
    if (*a->held && (a->nodes * a->ppn > b->nodes * b->ppn || (a->nodes * a->ppn == b->nodes * b->ppn && a->bps > b->bps)))
      crowded = i;
  }
  for (int i = first_held; o->repeat != VD_REP_NONE && i < ncells; i++) {
    if (!*c[i].held || (o->repeat == VD_REP_ENDS && i != first_held && i != crowded)) continue;
    if (n == VD_MAX) return bench_usage_error(vd_usage(), "the grid and its repeats have over %d cells", VD_MAX);
    vd_cell k = c[i];
    k.repeat = 1, k.of = i;
    snprintf(k.key + strlen(k.key), sizeof k.key - strlen(k.key), "-repeat");
    snprintf(k.id + strlen(k.id), sizeof k.id - strlen(k.id), "-repeat");
    c[n++] = k;
  }
  /* the fit learns a link from flat rows (one rank a node): each fitted rate needs some */
  for (int i = 0; i < n; i++) {
    if (*c[i].held || c[i].repeat || c[i].ppn == 1) continue;
    int have = 0;
    for (int k = 0; k < n; k++) have |= !*c[k].held && c[k].ppn == 1 && c[k].bps == c[i].bps;
    if (have || n >= VD_MAX) continue;
    vd_cell k = c[i];
    k.ppn = 1, k.fit_only = 1, k.held = "";
    snprintf(k.algo, sizeof k.algo, "ring");
    snprintf(k.key, sizeof k.key, "%s-%dx1-ring", k.rate, k.nodes);
    snprintf(k.id, sizeof k.id, "%s", k.key);
    c[n++] = k;
  }
  if (maxppn > 1 && n < VD_MAX) { /* the intra-node level: the same transport on one host */
    vd_cell k = {.nodes = 1, .ppn = maxppn, .loopback = 1, .held = ""};
    snprintf(k.rate, sizeof k.rate, "loopback");
    snprintf(k.algo, sizeof k.algo, "ring");
    snprintf(k.key, sizeof k.key, "loopback-%d", maxppn);
    snprintf(k.id, sizeof k.id, "%s", k.key);
    c[n++] = k;
  }
  x->n = n;
  return 0;
}

/* ---- measuring ---- */

#define VD_ARGS 64
typedef struct {
  char *v[VD_ARGS];
  char buf[VD_ARGS][256];
  int n;
} vd_argv;

static void vd_arg(vd_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vd_arg(vd_argv *a, const char *fmt, ...) {
  if (a->n >= VD_ARGS - 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->buf[a->n], sizeof a->buf[0], fmt, ap);
  va_end(ap);
  a->v[a->n] = a->buf[a->n];
  a->v[++a->n] = NULL;
}

/* The largest all-reduce on an emulated link: 16 MiB (--quick 4), more where fewer than two
 * sizes from 1 MiB are of at least 8 of its shaper's bursts, which the fit needs. */
static uint64_t vd_max_bytes(double bps, int quick) {
  uint64_t max = quick ? 4u << 20 : 16u << 20;
  while (max < (256u << 20) && (double)max / 4 < 8.0 * (double)launch_emu_burst((uint64_t)bps)) max *= 4;
  return max;
}

static int vd_done(const char *dir) {
  char p[4500];
  struct stat st;
  snprintf(p, sizeof p, "%s/done", dir);
  return stat(p, &st) == 0;
}

/* Runs one measurement into dir (its log beside it) unless done there before. 1: measured. */
static int vd_measure(vd_job *x, const char *what, const char *dir, vd_argv *a) {
  if (vd_done(dir)) {
    printf("  %-44s done before (kept)\n", what);
    return 1;
  }
  char log[4500], parent[4500];
  snprintf(log, sizeof log, "%s.log", dir);
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash) *slash = '\0';
  if (mkdir(parent, 0755) && errno != EEXIST) return bench_error("cannot make %s: %s", parent, strerror(errno)), 0;
  vd_arg(a, "--out"), vd_arg(a, "%s", dir);
  double t0 = util_now();
  if (x->interrupted) return 0;
  int st = bench_child_run(x->self, a->v, log, 1800, &x->sg.set, &x->sg.old, &x->interrupted);
  printf("  %-44s %s (%.0f s)\n", what, st == 0 ? "measured" : "FAILED", util_now() - t0);
  fflush(stdout);
  if (st != 0) {
    fprintf(stderr, "fabench: validate: %s failed (exit %d): see %s\n", what, st, log);
    return 0;
  }
  char done[4500];
  snprintf(done, sizeof done, "%s/done", dir);
  FILE *f = fopen(done, "w");
  if (f) fclose(f);
  return 1;
}

static void vd_emulate(vd_argv *a, const vd_cell *c) {
  vd_arg(a, "--emulate"), vd_arg(a, "%dx%d:%s", c->nodes, c->ppn, c->rate);
  if (c->ppn > 1) vd_arg(a, "--intra-transport"), vd_arg(a, "tcp"); /* the fit's intra level */
}

static void vd_cell_measure(vd_job *x, vd_cell *c) {
  const vd_opts *o = &x->o;
  char dir[4400], what[256];
  vd_argv a = {0};
  snprintf(dir, sizeof dir, "%s/allreduce/%s", x->run.dir, c->key);
  snprintf(what, sizeof what, "all-reduce %s", c->key);
  vd_arg(&a, "allreduce"), vd_arg(&a, "--transport"), vd_arg(&a, "tcp"), vd_arg(&a, "--algo"), vd_arg(&a, "%s", c->algo);
  vd_arg(&a, "--min-bytes"), vd_arg(&a, "256K"), vd_arg(&a, "--step-factor"), vd_arg(&a, "2");
  /* asleep while they wait, as training's communication thread is (docs/cost-model.md) */
  vd_arg(&a, "--no-spin"), vd_arg(&a, "--timeout"), vd_arg(&a, "%ld", o->timeout);
  if (c->loopback) {
    vd_arg(&a, "-n"), vd_arg(&a, "%d", c->ppn), vd_arg(&a, "--max-bytes"), vd_arg(&a, "%s", o->quick ? "4M" : "16M");
    vd_arg(&a, "--time-per-size"), vd_arg(&a, "%s", o->quick ? "0.02" : "0.05");
  } else {
    vd_emulate(&a, c);
    vd_arg(&a, "--max-bytes"), vd_arg(&a, "%llu", (unsigned long long)vd_max_bytes(c->bps, o->quick));
    vd_arg(&a, "--warmup"), vd_arg(&a, "1"), vd_arg(&a, "--iters"), vd_arg(&a, "4"), vd_arg(&a, "--rounds"), vd_arg(&a, "1");
  }
  c->ok_ar = vd_measure(x, what, dir, &a);
  if (!*c->held && !c->repeat) return; /* fitted on: its all-reduce is all the fit reads */
  a = (vd_argv){0};
  snprintf(dir, sizeof dir, "%s/train/%s", x->run.dir, c->id);
  snprintf(what, sizeof what, "train %s", c->id);
  vd_arg(&a, "train"), vd_emulate(&a, c), vd_arg(&a, "--transport"), vd_arg(&a, "none,tcp");
  vd_arg(&a, "--algo"), vd_arg(&a, "%s", c->algo), vd_arg(&a, "--model"), vd_arg(&a, "%s", c->model);
  vd_arg(&a, "--data"), vd_arg(&a, "%s", o->data), vd_arg(&a, "--batch"), vd_arg(&a, "%ld", o->batch);
  vd_arg(&a, "--threads"), vd_arg(&a, "1"), vd_arg(&a, "--steps"), vd_arg(&a, "%ld", o->steps);
  vd_arg(&a, "--warmup-steps"), vd_arg(&a, "%ld", o->steps / 4), vd_arg(&a, "--eval-every"), vd_arg(&a, "0");
  vd_arg(&a, "--no-single"), vd_arg(&a, "--timeout"), vd_arg(&a, "%ld", o->timeout);
  vd_arg(&a, "--rounds"), vd_arg(&a, "%ld", o->rounds);
  c->ok_train = vd_measure(x, what, dir, &a);
}

/* fit over the training cells' all-reduce runs into DIR/model.json. 0, or -1 said. */
static int vd_fit(vd_job *x) {
  vd_argv a = {0};
  vd_arg(&a, "fit"), vd_arg(&a, "--out"), vd_arg(&a, "%s/model.json", x->run.dir);
  int n = 0;
  for (int i = 0; i < x->n; i++)
    if (!*x->c[i].held && !x->c[i].repeat && x->c[i].ok_ar) vd_arg(&a, "%s/allreduce/%s", x->run.dir, x->c[i].key), n++;
  if (!n) return bench_error("validate: no training cell was measured: nothing to fit"), -1;
  char log[4200];
  snprintf(log, sizeof log, "%s/fit.log", x->run.dir);
  if (x->interrupted) return -1;
  int st = bench_child_run(x->self, a.v, log, 600, &x->sg.set, &x->sg.old, &x->interrupted);
  if (st) return bench_error("validate: fit failed (exit %d): see %s", st, log), -1;
  return 0;
}

/* The cell's rows read back (all-reduce, train, buckets); a table not there stays empty. */
static void vd_read(vd_job *x, vd_cell *c) {
  char dir[4400], err[512];
  snprintf(dir, sizeof dir, "%s/allreduce/%s", x->run.dir, c->key);
  if (c->ok_ar && res_table_read(&c->ar, res_schema_allreduce(), dir, err, sizeof err))
    fprintf(stderr, "fabench: validate: %s\n", err), c->ok_ar = 0;
  snprintf(dir, sizeof dir, "%s/train/%s", x->run.dir, c->id);
  if (c->ok_train && (res_table_read(&c->train, res_schema_train(), dir, err, sizeof err) ||
                      res_table_read(&c->bk, res_schema_train_buckets(), dir, err, sizeof err)))
    fprintf(stderr, "fabench: validate: %s\n", err), c->ok_train = 0;
}

/* ---- pricing ---- */

#define VD_ROWS 24 /* figures a cell gives: its all-reduce sizes and the step */

/* The cell's figures priced by model m: all-reduce rows from 1 MiB, and the training step, each
 * with its two baselines. Returns how many rows were filled. */
static int vd_price(const res_costmodel *m, const vd_cell *c, res_validate_row *out) {
  int n = 0;
  res_vcell vc = {c->bps, c->nodes, c->ppn};
  int hier = !strcmp(c->algo, "hier");
  const res_allreduce_row *ar = c->ar.rows;
  for (size_t i = 0; i < c->ar.n && n < VD_ROWS - 1; i++) {
    const res_allreduce_row *r = &ar[i];
    if (r->bytes < (1 << 20) || !(r->t_p50_us > 0) || r->errors) continue;
    res_validate_row *v = &out[n++];
    res_row_init(res_schema_validate(), v);
    int learned = 0;
    v->what = "allreduce", v->bytes = r->bytes, v->fabric = r->fabric;
    v->t_meas = r->t_p50_us / 1e3;
    v->t_pred = res_allreduce_row_time(m, r, NULL, &learned) * 1e3;
    if (v->t_pred > 0) v->pred_kind = res_pred_kind_name(learned ? RES_PRED_REPLAY : RES_PRED_HELDOUT);
    v->t_bytes_link = c->loopback ? NAN : res_validate_bytes_s((double)r->bytes, &vc, hier) * 1e3;
  }
  const res_train_row *t = c->train.rows;
  for (size_t i = 0; i < c->train.n && n < VD_ROWS; i++) {
    if (!t[i].role || strcmp(t[i].role, "dp")) continue;
    res_train_row dp = t[i];
    const res_train_row *none = res_train_profile(&c->train, &t[i]);
    res_validate_row *v = &out[n++];
    res_row_init(res_schema_validate(), v);
    v->what = "step", v->bytes = t[i].grad_bytes, v->fabric = t[i].fabric;
    v->t_meas = isfinite(dp.step_ms_mean) ? dp.step_ms_mean : dp.step_ms;
    dp.step_ms_pred = NAN, dp.pred_kind = NULL;
    if (none && !res_predict_train_row(&dp, none, &c->bk, m)) v->t_pred = dp.step_ms_pred, v->pred_kind = dp.pred_kind;
    if (none) {
      v->t_compute = isfinite(none->step_ms_mean) ? none->step_ms_mean : none->step_ms;
      v->t_bytes_link = v->t_compute + res_validate_bytes_s((double)t[i].grad_bytes, &vc, hier) * 1e3;
      v->comm_share = v->t_meas > 0 ? (v->t_meas - v->t_compute) / v->t_meas : NAN;
    }
  }
  for (int i = 0; i < n; i++) {
    res_validate_row *v = &out[i];
    v->cell = c->id, v->split = c->repeat ? "repeat" : *c->held ? "held-out" : "train", v->held = c->held;
    v->nodes = c->nodes, v->ranks_per_node = c->ppn, v->ranks = c->nodes * c->ppn, v->algo = c->algo;
    v->model = c->loopback || c->fit_only ? "" : c->model;
    v->err = res_validate_err(v->t_pred, v->t_meas);
    v->err_compute = res_validate_err(v->t_compute, v->t_meas);
    v->err_bytes_link = res_validate_err(v->t_bytes_link, v->t_meas);
  }
  return n;
}

/* The same figure of another pricing of the cell (what, bytes). */
static const res_validate_row *vd_match(const res_validate_row *v, const res_validate_row *rows, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(rows[i].what, v->what) && rows[i].bytes == v->bytes) return &rows[i];
  return NULL;
}

/* ---- summaries ---- */

/* |err| over the held-out rows of `what` whose held matches (NULL: any) and, for the step, whose
 * communication is at least min_share of it: column 0 the model, 1 compute alone, 2 bytes over
 * the link, 3 the repeat. */
typedef struct {
  size_t n;
  double med[4], worst[4], within10;
} vd_stats;

static vd_stats vd_summarize(const res_validate_row *rows, int n, const char *what, const char *held, double min_share,
                             int steady) {
  double *e[4];
  vd_stats s = {0};
  for (int k = 0; k < 4; k++) e[k] = calloc((size_t)n + 1, sizeof **e);
  size_t m = 0, in10 = 0, counted = 0;
  for (int i = 0; e[0] && e[1] && e[2] && e[3] && i < n; i++) {
    const res_validate_row *v = &rows[i];
    if (strcmp(v->split, "held-out") || strcmp(v->what, what) || (held && strcmp(v->held, held))) continue;
    if (min_share > 0 && !(v->comm_share >= min_share)) continue;
    if (steady && !(fabs(v->err_repeat) <= 0.10)) continue; /* repeated, within 10% of itself */
    e[0][m] = v->err, e[1][m] = v->err_compute, e[2][m] = v->err_bytes_link, e[3][m] = v->err_repeat;
    if (isfinite(v->err)) counted++, in10 += fabs(v->err) <= 0.10;
    m++;
  }
  for (int k = 0; k < 4; k++) {
    size_t cnt;
    if (e[k]) res_validate_abs_stats(e[k], m, &s.med[k], &s.worst[k], &cnt);
    if (k == 0) s.n = cnt;
    free(e[k]);
  }
  s.within10 = counted ? (double)in10 / (double)counted : NAN;
  return s;
}

static void vd_pct(char *b, size_t cap, double v) {
  if (isfinite(v)) snprintf(b, cap, "%.1f%%", 100 * v);
  else snprintf(b, cap, "-");
}

/* One summary line, on stdout and in md. */
static void vd_summary_line(FILE *md, const char *label, const vd_stats *s) {
  char a[6][16];
  vd_pct(a[0], 16, s->med[0]), vd_pct(a[1], 16, s->worst[0]), vd_pct(a[2], 16, s->med[1]);
  vd_pct(a[3], 16, s->med[2]), vd_pct(a[4], 16, s->med[3]), vd_pct(a[5], 16, s->within10);
  printf("  %-34s %4zu %9s %9s %12s %12s %9s %9s\n", label, s->n, a[0], a[1], a[2], a[3], a[4], a[5]);
  if (md) fprintf(md, "| %s | %zu | %s | %s | %s | %s | %s | %s |\n", label, s->n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- the command ---- */

static int vd_write_rows(vd_job *x, res_validate_row *rows, int n) {
  char err[512];
  for (int i = 0; i < n; i++) {
    rows[i].run_id = x->run.run_id, rows[i].schema = RES_SCHEMA_VERSION;
    if (res_table_put(x->tab, &rows[i], err, sizeof err)) return bench_error("%s", err);
  }
  return 0;
}

/* The ablation: each term off in turn, the held-out cells priced again. */
static int vd_ablation(vd_job *x, FILE *md, const res_validate_row *with, int nwith, res_validate_row *rows) {
  char path[4200], err[512];
  res_table *t;
  snprintf(path, sizeof path, "%s/model.json", x->run.dir);
  if (res_table_open_schema(&t, x->run.dir, res_schema_validate_ablation(), err, sizeof err)) return bench_error("%s", err);
  static const char *whats[] = {"allreduce", "step"};
  printf("\n# ablation: held-out median |error| (worst) with every term, and with one turned off\n");
  printf("  %-8s %-10s %4s %20s %20s\n", "term", "figure", "n", "with", "without");
  fprintf(md, "\n### Ablation\n\nThe held-out cells priced again with one term of the model turned off "
              "(`FABENCH_MODEL_OFF`): median |error| (worst).\n\n| term | figure | n | with | without |\n|---|---|---|---|---|\n");
  int rc = 0;
  for (unsigned bit = 1; bit <= RES_TERMS_ALL && !rc; bit <<= 1) {
    res_costmodel m;
    if (bench_costmodel_load(&m, path, 1, err, sizeof err)) {
      rc = bench_error("validate: %s", err);
      break;
    }
    res_costmodel_ablate(&m, bit);
    int n = 0;
    for (int i = 0; i < x->n; i++)
      if (*x->c[i].held && !x->c[i].repeat) n += vd_price(&m, &x->c[i], rows + n);
    res_costmodel_free(&m);
    for (int w = 0; w < 2 && !rc; w++) {
      vd_stats a = vd_summarize(with, nwith, whats[w], NULL, 0, 0), b = vd_summarize(rows, n, whats[w], NULL, 0, 0);
      res_validate_ablation_row r;
      res_row_init(res_schema_validate_ablation(), &r);
      r.run_id = x->run.run_id, r.schema = RES_SCHEMA_VERSION, r.term = res_term_name(bit), r.what = whats[w];
      r.n = (int64_t)b.n, r.median_with = a.med[0], r.median_without = b.med[0];
      r.worst_with = a.worst[0], r.worst_without = b.worst[0];
      if (res_table_put(t, &r, err, sizeof err)) rc = bench_error("%s", err);
      char s[4][16];
      vd_pct(s[0], 16, a.med[0]), vd_pct(s[1], 16, a.worst[0]), vd_pct(s[2], 16, b.med[0]), vd_pct(s[3], 16, b.worst[0]);
      printf("  %-8s %-10s %4zu %10s (%7s) %10s (%7s)\n", r.term, whats[w], b.n, s[0], s[1], s[2], s[3]);
      fprintf(md, "| %s | %s | %zu | %s (%s) | %s (%s) |\n", r.term, whats[w], b.n, s[0], s[1], s[2], s[3]);
    }
  }
  res_table_close(t);
  return rc;
}

/* Prices every cell, writes validate.csv and validate.md, prints the tables. */
static int vd_report(vd_job *x) {
  char path[4200], err[512];
  snprintf(path, sizeof path, "%s/model.json", x->run.dir);
  res_costmodel m;
  if (bench_costmodel_load(&m, path, 1, err, sizeof err)) return bench_error("validate: %s", err);
  res_validate_row *rows = calloc((size_t)x->n * VD_ROWS, sizeof *rows), *scratch = calloc((size_t)x->n * VD_ROWS, sizeof *rows);
  if (!rows || !scratch) return free(rows), free(scratch), res_costmodel_free(&m), bench_error("out of memory");
  int n = 0, *at = calloc((size_t)x->n + 1, sizeof *at);
  for (int i = 0; at && i < x->n; i++) at[i] = n, n += vd_price(&m, &x->c[i], rows + n);
  if (at) at[x->n] = n;
  res_costmodel_free(&m);
  /* the repeat's measurements beside the cell it repeats */
  for (int i = 0; at && i < x->n; i++) {
    const vd_cell *c = &x->c[i];
    if (!c->repeat) continue;
    for (int k = at[c->of]; k < at[c->of + 1]; k++) {
      const res_validate_row *r = vd_match(&rows[k], rows + at[i], at[i + 1] - at[i]);
      if (r) rows[k].t_repeat = r->t_meas, rows[k].err_repeat = res_validate_err(r->t_meas, rows[k].t_meas);
    }
  }
  int rc = vd_write_rows(x, rows, n);
  snprintf(path, sizeof path, "%s/validate.md", x->run.dir);
  FILE *md = fopen(path, "w");
  if (!md) rc = bench_error("cannot write %s: %s", path, strerror(errno));
  if (!rc) {
    printf("\n# held-out cells: measured against the model fitted without them (ms)\n");
    printf("  %-36s %-9s %9s %9s %8s %9s %9s %9s %9s\n", "cell", "figure", "bytes", "measured", "model", "err",
           "compute", "bytes/link", "repeat");
    fprintf(md, "## Validation: the cost model on cells it was not fitted on\n\n"
                "Fitted on the all-reduce runs of the training cells (%s); every figure below is a held-out "
                "prediction unless marked replay. Errors are (predicted - measured) / measured. Baselines: "
                "compute alone (the no-communication step) and compute plus the ring's bytes at the link's rate, "
                "no overlap.\n\n| cell | figure | bytes | measured (ms) | model (ms) | error | compute alone | "
                "bytes over link | repeat |\n|---|---|---|---|---|---|---|---|---|\n",
            "validate.csv");
    for (int i = 0; i < n; i++) {
      const res_validate_row *v = &rows[i];
      if (!strcmp(v->split, "train")) continue;
      char e[4][16];
      vd_pct(e[0], 16, v->err), vd_pct(e[1], 16, v->err_compute), vd_pct(e[2], 16, v->err_bytes_link);
      vd_pct(e[3], 16, v->err_repeat);
      const char *k = v->pred_kind && !strcmp(v->pred_kind, "replay") ? " (replay)" : "";
      printf("  %-36s %-9s %9lld %9.2f %8.2f %9s %9s %9s %9s%s\n", v->cell, v->what, (long long)v->bytes, v->t_meas,
             v->t_pred, e[0], e[1], e[2], e[3], k);
      fprintf(md, "| %s | %s | %lld | %.2f | %.2f%s | %s | %s | %s | %s |\n", v->cell, v->what, (long long)v->bytes,
              v->t_meas, v->t_pred, k, e[0], e[1], e[2], e[3]);
    }
    printf("\n# summary: median |error| of the held-out cells\n");
    printf("  %-34s %4s %9s %9s %12s %12s %9s %9s\n", "", "n", "model", "worst", "compute", "bytes/link",
           "repeat", "in 10%");
    fprintf(md, "\n### Summary\n\nMedian |error| over the held-out cells (the model's worst beside it).\n\n"
                "| figure | n | model | worst | compute alone | bytes over link | repeat | model within 10%% |\n"
                "|---|---|---|---|---|---|---|---|\n");
    vd_stats s = vd_summarize(rows, n, "step", "rate", 0, 0);
    vd_summary_line(md, "step, held-out rate", &s);
    s = vd_summarize(rows, n, "step", "nodes", 0, 0);
    vd_summary_line(md, "step, held-out nodes", &s);
    s = vd_summarize(rows, n, "step", "both", 0, 0);
    vd_summary_line(md, "step, held-out rate and nodes", &s);
    vd_stats heavy = vd_summarize(rows, n, "step", NULL, 0.2, 0);
    vd_summary_line(md, "step, communication >= 20%", &heavy);
    s = vd_summarize(rows, n, "allreduce", NULL, 0, 0);
    vd_summary_line(md, "all-reduce from 1 MiB", &s);
    /* a miss the machine makes on itself is not the model's */
    s = vd_summarize(rows, n, "allreduce", NULL, 0, 1);
    vd_summary_line(md, "  where it repeats within 10%", &s);
    double better = fmin(heavy.med[1], heavy.med[2]);
    char verdict[256];
    if (!heavy.n)
      snprintf(verdict, sizeof verdict, "no held-out step spent 20%% of its time communicating: the baselines are not "
               "tested (a larger model's gradients do: --model resnet18 --batch 8 --ranks-per-node 1)");
    else
      snprintf(verdict, sizeof verdict, "where communication is >= 20%% of the step the model's median error is %s half "
               "the better baseline's", heavy.med[0] <= 0.5 * better ? "at most" : "MORE than");
    printf("  %s\n", verdict);
    fprintf(md, "\n%s.\n", verdict);
    rc = vd_ablation(x, md, rows, n, scratch);
    fclose(md);
    printf("# written: %s/validate.csv, validate_ablation.csv, validate.md\n", x->run.dir);
  }
  free(at), free(rows), free(scratch);
  return rc;
}

/* --no-measure: every cell of the plan measured in --out before (its all-reduce, and its
 * training where held out or a repeat). 0, or the usage error's status. */
static int vd_all_there(const vd_job *x) {
  const char *out = x->o.out;
  if (!out) return bench_usage_error(vd_usage(), "--no-measure: which run? (--out DIR)");
  char dir[4400];
  for (int i = 0; i < x->n; i++) {
    const vd_cell *c = &x->c[i];
    snprintf(dir, sizeof dir, "%s/allreduce/%s", out, c->key);
    int there = vd_done(dir);
    if (there && (*c->held || c->repeat)) {
      snprintf(dir, sizeof dir, "%s/train/%s", out, c->id);
      there = vd_done(dir);
    }
    if (!there)
      return bench_usage_error(vd_usage(), "--no-measure: %s holds no cell %s (%s): give the flags it was measured with",
                               out, c->id, dir);
  }
  return 0;
}

int bench_cmd_validate(int argc, char **argv) {
  vd_job *x = calloc(1, sizeof *x);
  if (!x) return bench_error("out of memory");
  int rc = vd_parse(&x->o, argc, argv);
  if (rc == 1) rc = -1; /* --help: exit 0 */
  if (rc || (rc = vd_plan(x))) {
    vd_opts_free(&x->o), free(x->c), free(x);
    return rc < 0 ? 0 : rc;
  }
  if (x->o.no_measure && (rc = vd_all_there(x))) {
    vd_opts_free(&x->o), free(x->c), free(x);
    return rc;
  }
  ssize_t sl = readlink("/proc/self/exe", x->self, sizeof x->self - 1);
  if (sl <= 0) rc = bench_error("cannot find this program (/proc/self/exe)");
  if (!rc && bench_run_begin(&x->run, x->o.out, "validate", argc, argv)) rc = 1;
  if (!rc) {
    int held = 0;
    for (int i = 0; i < x->n; i++) held += *x->c[i].held && !x->c[i].repeat;
    printf("# fabench validate: %d cells (%d held out), %s; into %s\n", x->n, held,
           x->o.quick ? "quick" : "the grid", x->run.dir);
    launch_sigs_take(&x->sg); /* signals go to the running measurement */
    for (int i = 0; i < x->n && !x->interrupted; i++) vd_cell_measure(x, &x->c[i]);
    int fit = x->interrupted ? -1 : vd_fit(x);
    launch_sigs_restore(&x->sg);
    char err[512];
    if (x->interrupted) {
      bench_error("interrupted: the cells measured so far are in %s (the same --out goes on)", x->run.dir);
      rc = 128 + x->interrupted;
    } else if (fit) {
      rc = 1;
    } else if (res_table_open_schema(&x->tab, x->run.dir, res_schema_validate(), err, sizeof err))
      rc = bench_error("%s", err);
    else {
      for (int i = 0; i < x->n; i++) vd_read(x, &x->c[i]);
      rc = vd_report(x);
      res_table_close(x->tab);
    }
    x->run.meta.status = rc ? "failed" : "done";
    bench_run_write(&x->run);
    res_run_desc_free(&x->run.meta);
  }
  for (int i = 0; i < x->n; i++) res_rows_free(&x->c[i].ar), res_rows_free(&x->c[i].train), res_rows_free(&x->c[i].bk);
  free(x->c);
  vd_opts_free(&x->o);
  free(x);
  return bench_stdout_check("validate") || rc;
}
