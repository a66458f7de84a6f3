/* The collective commands' flags: one table that the parser and --help both read. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collbench_int.h"
#include "res.h"

enum {
  O_TRANSPORT = 256, O_ALGO, O_DTYPE, O_OP, O_MIN, O_MAX, O_STEP, O_WARMUP, O_ITERS, O_TPS,
  O_TIMING, O_CHECK, O_NOCHECK, O_CHUNK, O_UCXMAP, O_DEVICES, O_ROUNDS, O_PEER, O_SEED, O_MODEL,
  O_NOSPIN, O_BESIDE, O_ROOT, O_IMBALANCE, O_PAIRS, O_NODES
};

/* Which collectives take a flag. */
enum { F_ALL = 0, F_REDUCES = 1, F_ROOTED = 2, F_VARIES = 4, F_ALLREDUCE = 8 };

typedef struct {
  bench_flag f;
  int only; /* F_*: the collectives that take it (0: every one) */
} cb_flag;

static const cb_flag cb_flags[] = {
    {{"n", "N", NULL, "start N local ranks (default: the launcher's world, or 1)", 'n'}, 0},
    {{"transport", "LIST", FABENCH_HAVE_MPI ? "tcp,mpi" : "tcp", "tcp,mpi,ucx,nccl", O_TRANSPORT}, 0},
    {{"algo", "LIST", NULL, NULL, O_ALGO}, 0}, /* default and help: the collective's */
    {{"dtype", "LIST", "f32", "f32,f64,f16,bf16,i32,i64", O_DTYPE}, 0},
    {{"op", "LIST", "sum", "sum,prod,min,max", O_OP}, F_REDUCES},
    {{"root", "R", "0", "the broadcast's root rank", O_ROOT}, F_ROOTED},
    {{"imbalance", "F", "0", "all-to-allv: each sender's counts to its peers skewed by a seeded "
                             "log-normal of sigma 2F, as mixture-of-experts routing makes them "
                             "(0: all-to-all, every count equal; each sender's total stays the same)",
      O_IMBALANCE}, F_VARIES},
    {{"min-bytes", "SIZE", "8", "smallest size, K/M/G suffixes", O_MIN}, 0},
    {{"max-bytes", "SIZE", "32M", "largest size", O_MAX}, 0},
    {{"step-factor", "F", "2", "size multiplier between steps", O_STEP}, 0},
    {{"warmup", "N", "5", "warm-up iterations per size", O_WARMUP}, 0},
    {{"iters", "N", NULL, "fixed iteration count per size (default: adaptive)", O_ITERS}, 0},
    {{"time-per-size", "SEC", "0.5", "adaptive count: about SEC seconds per size", O_TPS}, 0},
    {{"peer", "T/A|none", NULL, "every row's busbw relative to this pair's at the same size, in the "
                                "same run (default: mpi/native when measured)", O_PEER}, 0},
    {{"rounds", "N", "5", "the transport/algorithm pairs take turns at each size, N rounds of "
                          "iters/N each, so drift in the machine's speed hits all alike (1: each "
                          "pair in one block); a row's round_spread says how far its rounds' "
                          "medians were apart", O_ROUNDS}, 0},
    {{"beside-compute", NULL, NULL, "a thread on each rank multiplies matrices without pause while "
                                    "the rank communicates (as a training step's compute runs "
                                    "beside its reduction): each row's compute_loss is the share "
                                    "of that thread's pace the collective took", O_BESIDE}, 0},
    {{"timing", "MODE", "barrier", "barrier (each iteration between barriers, max over ranks) or "
                                   "pipelined (back-to-back, mean per operation)", O_TIMING}, 0},
    {{"check", NULL, NULL, "verify every size element by element, on every rank (the default)", O_CHECK}, 0},
    {{"no-check", NULL, NULL, "do not verify", O_NOCHECK}, 0},
    {{"chunk", "SIZE", NULL, "pipelining unit of the algorithms (default: 256K; ucx over shared "
                             "memory or RDMA: 1M)", O_CHUNK}, 0},
    {{"no-spin", NULL, NULL, "waits sleep at once, as training's communication thread's do, "
                             "instead of spinning first; the host's busy CPU per call "
                             "(host_cpu_us) is then measured where every rank has a core too", O_NOSPIN}, 0},
    {BENCH_FLAG_TCP_STREAMS, 0},
    {BENCH_FLAG_TCP_CC, 0},
    {{"ucx-map", "on|off", "on", "ucx ranks on one host map each other's buffer (UCX shared memory, "
                                 "ucp_rkey_ptr) and read peers' data in place; off: UCX copies "
                                 "it", O_UCXMAP}, 0},
    {{"pairs", "S,D|all|rounds", NULL, "an all-reduce of two ranks per pair instead of all ranks: ranks S "
                                       "and D; all: every pair, one at a time; rounds: every pair, N/2 "
                                       "disjoint pairs at once in the N-1 rounds of a round-robin tournament "
                                       "(rows in allreduce_groups.csv; flat algorithms only)", O_PAIRS}, F_ALLREDUCE},
    {{"nodes", "alone|ref", NULL, "an all-reduce per node instead of all ranks: alone: each node's ranks "
                                  "by themselves, every node at once (its fabric inside); ref: each node's "
                                  "ranks with the first node's, one node at a time (rows in "
                                  "allreduce_groups.csv)", O_NODES}, F_ALLREDUCE},
    {{"devices", "LIST", NULL, "nccl: the CUDA device of each local rank, e.g. 0,1,2,3 (default: "
                               "local rank modulo the device count)", O_DEVICES}, F_ALLREDUCE},
    {{"mpirun-args", "ARGS", NULL, "extra mpirun arguments when -n starts ranks through mpirun",
      BENCH_O_MPIRUN}, 0},
    {BENCH_FLAG_EMULATE, 0},
    {BENCH_FLAG_EMULATE_SLOW, 0},
    {{"intra-transport", "T", NULL, "hier's phases inside hosts over T (tcp, ucx, mpi) (default: ucx "
                                    "where built and --transport is tcp or mpi, else "
                                    "--transport's own)", BENCH_O_INTRA}, F_ALLREDUCE},
    {{"bind", "HOW", "auto", "auto|none|core|numa|nic|gpu (auto: a core each where the host's ranks "
                             "fit its cores and no launcher bound them)", BENCH_O_BIND}, 0},
    {{"seed", "N", "1", "data seed", O_SEED}, 0},
    {BENCH_FLAG_TIMEOUT, 0},
    {{"model-from", "DIR|FILE", NULL, "every row gains the cost model's prediction (t_pred_us) and its "
                                      "error (pred_err); auto picks by this model. A model.json, a "
                                      "directory with one, or a run directory to fit (fabench fit)",
      O_MODEL}, 0},
    {BENCH_FLAG_TELEMETRY, 0},
    {{"out", "DIR", NULL, "run directory (default: results/<UTC>-<command>)", BENCH_O_OUT}, 0},
};
#define CB_NFLAGS (sizeof cb_flags / sizeof cb_flags[0])

static int cb_takes(const bench_coll *d, int only) {
  return !only || ((only & F_REDUCES) && d->reduces) || ((only & F_ROOTED) && d->rooted) ||
         ((only & F_VARIES) && d->varies) || ((only & F_ALLREDUCE) && d->kind < 0);
}

/* The collective's flags: the table's, with --algo's default and help its own. */
static size_t cb_table(const bench_coll *d, bench_flag *out) {
  size_t n = 0;
  for (size_t i = 0; i < CB_NFLAGS; i++) {
    if (!cb_takes(d, cb_flags[i].only)) continue;
    out[n] = cb_flags[i].f;
    if (out[n].code == O_ALGO) out[n].def = d->algos, out[n].help = d->algo_help;
    n++;
  }
  return n;
}

int cb_algo_eq(coll_algo a, coll_algo b) { return a.kind == b.kind && a.param == b.param; }

static int cb_algo_parse(const cb_opts *o, const char *s, coll_algo *a) {
  return o->d->algo_parse ? o->d->algo_parse(s, a) : coll_algo_parse(s, a);
}

/* A comma list of at most CB_MAX_LIST items, each parsed by at(): 0 with the count in *n, or 2
 * after a usage error naming the flag and the item. */
static int cb_list(const cb_opts *o, const char *list, const char *flag, const char *what,
                   int (*at)(const cb_opts *, const char *, void *, int), void *out, int *n) {
  char *items[CB_MAX_LIST], *store = NULL;
  int got = bench_split_list(list, items, CB_MAX_LIST, &store), rc = 0;
  if (got <= 0) rc = bench_usage_error(o->usage, "%s: '%s' is empty, has an empty item or is too long", flag, list);
  for (int i = 0; i < got && !rc; i++)
    if (at(o, items[i], out, i)) rc = bench_usage_error(o->usage, "%s: unknown %s '%s'", flag, what, items[i]);
  free(store);
  if (!rc) *n = got;
  return rc;
}
static int cb_algo_at(const cb_opts *o, const char *s, void *v, int i) { return cb_algo_parse(o, s, &((coll_algo *)v)[i]); }
static int cb_dtype_at(const cb_opts *o, const char *s, void *v, int i) { return (void)o, coll_dtype_parse(s, &((coll_dtype *)v)[i]); }
static int cb_op_at(const cb_opts *o, const char *s, void *v, int i) { return (void)o, coll_op_parse(s, &((coll_op *)v)[i]); }

/* --pairs S,D|all|rounds. 0, or 2 after a usage error. */
static int cb_parse_pairs(cb_opts *o, const char *v) {
  if (!strcmp(v, "all") || !strcmp(v, "rounds")) return o->groups = v[0] == 'a' ? CB_G_ALL : CB_G_ROUNDS, 0;
  char *items[2], *store = NULL;
  int n = bench_split_list(v, items, 2, &store);
  int ok = n == 2 && !bench_parse_int(items[0], 0, 1 << 20, &o->pair_src) &&
           !bench_parse_int(items[1], 0, 1 << 20, &o->pair_dst) && o->pair_src != o->pair_dst;
  free(store);
  if (!ok) return bench_usage_error(o->usage, "--pairs: '%s' is not S,D (two ranks), all or rounds", v);
  o->groups = CB_G_PAIR;
  return 0;
}

/* What --pairs and --nodes cannot go with: one reduction, barrier timing, host transports. 0,
 * or 2 after a usage error. */
static int cb_parse_groups(const cb_opts *o, int pairs, int nodes) {
  const char *u = o->usage, *f = pairs ? "--pairs" : "--nodes";
  if (pairs && nodes) return bench_usage_error(u, "--pairs and --nodes exclude each other");
  if (!o->groups) return 0;
  if (o->nops > 1) return bench_usage_error(u, "%s: one --op at a time", f);
  if (o->pipelined) return bench_usage_error(u, "%s: barrier timing only", f);
  if (o->beside || o->model_from) return bench_usage_error(u, "%s: not with --beside-compute or --model-from", f);
  for (int i = 0; i < o->ntransports; i++)
    if (o->transports[i] == COLL_NCCL) return bench_usage_error(u, "%s: host transports only (not nccl)", f);
  if (o->groups == CB_G_PAIR && o->r.nranks > 0 && (o->pair_src >= o->r.nranks || o->pair_dst >= o->r.nranks))
    return bench_usage_error(u, "--pairs %ld,%ld: there are %d ranks", o->pair_src, o->pair_dst, o->r.nranks);
  return 0;
}

/* One flag's value (a given one or its default). 0, or 2 after a usage error. */
static int cb_set(cb_opts *o, int code, const char *v, const char **lists, const char **peer) {
  const char *u = o->usage;
  switch (code) {
  case O_TRANSPORT: lists[0] = v; return 0;
  case O_ALGO: lists[1] = v; return 0;
  case O_DTYPE: lists[2] = v; return 0;
  case O_OP: lists[3] = v; return 0;
  case O_MIN: return bench_parse_size(v, &o->min_bytes) ? bench_usage_error(u, "--min-bytes: '%s' is not a size", v) : 0;
  case O_MAX: return bench_parse_size(v, &o->max_bytes) ? bench_usage_error(u, "--max-bytes: '%s' is not a size", v) : 0;
  case O_STEP:
    return bench_parse_double(v, 1.01, 1024, &o->step) ? bench_usage_error(u, "--step-factor: '%s' must be a number from 1.01 to 1024", v) : 0;
  case O_WARMUP: return bench_parse_int(v, 0, 1000000, &o->warmup) ? bench_usage_error(u, "--warmup: '%s' is not a count", v) : 0;
  case O_ITERS: return bench_parse_int(v, 1, 100000000, &o->iters) ? bench_usage_error(u, "--iters: '%s' is not a count >= 1", v) : 0;
  case O_TPS:
    return bench_parse_double(v, 0.001, 3600, &o->time_per_size) ? bench_usage_error(u, "--time-per-size: '%s' is not a duration in seconds", v) : 0;
  case O_TIMING:
    if (!strcmp(v, "barrier") || !strcmp(v, "pipelined")) return o->pipelined = v[0] == 'p', 0;
    return bench_usage_error(u, "--timing: '%s' is not barrier or pipelined", v);
  case O_CHECK: o->check = 1; return 0;
  case O_NOCHECK: o->check = 0; return 0;
  case O_CHUNK:
    return bench_parse_size(v, &o->chunk) || o->chunk < 64 ? bench_usage_error(u, "--chunk: '%s' is not a size >= 64", v) : 0;
  case O_PEER: *peer = v; return 0;
  case O_ROUNDS: return bench_parse_int(v, 1, 1000, &o->rounds) ? bench_usage_error(u, "--rounds: '%s' is not 1..1000", v) : 0;
  case O_UCXMAP:
    if (!strcmp(v, "on") || !strcmp(v, "off")) return o->no_peer_map = !strcmp(v, "off"), 0;
    return bench_usage_error(u, "--ucx-map: '%s' is not on or off", v);
  case O_DEVICES:
    if (!*v || strspn(v, "0123456789,") != strlen(v))
      return bench_usage_error(u, "--devices: '%s' is not a list of CUDA device numbers", v);
    o->devices = v;
    return 0;
  case O_SEED: return bench_parse_int(v, 0, 1L << 62, &o->seed) ? bench_usage_error(u, "--seed: '%s' is not a number", v) : 0;
  case O_ROOT: return bench_parse_int(v, 0, 4095, &o->root) ? bench_usage_error(u, "--root: '%s' is not a rank", v) : 0;
  case O_IMBALANCE:
    return bench_parse_double(v, 0, 4, &o->imbalance) ? bench_usage_error(u, "--imbalance: '%s' is not a number from 0 to 4", v) : 0;
  case O_PAIRS: return cb_parse_pairs(o, v);
  case O_NODES:
    if (!strcmp(v, "alone") || !strcmp(v, "ref")) return o->groups = v[0] == 'a' ? CB_G_NODES : CB_G_NODE_REF, 0;
    return bench_usage_error(u, "--nodes: '%s' is not alone or ref", v);
  case O_MODEL: o->model_from = v; return 0;
  case O_NOSPIN: o->no_spin = 1; return 0;
  case O_BESIDE: o->beside = 1; return 0;
  default: return -1; /* not the command's own: a shared flag */
  }
}

/* The lists, the sizes' bounds and --model-from (loaded once, so that a bad path fails before any
 * rank starts). 0, or the exit status of a usage error. */
static int cb_parse_lists(cb_opts *o, const char *const *l) {
  int rc;
  if (o->min_bytes > o->max_bytes) return bench_usage_error(o->usage, "--min-bytes is larger than --max-bytes");
  if (o->model_from) {
    res_costmodel m;
    char err[1024];
    if (bench_costmodel_load(&m, o->model_from, 1, err, sizeof err))
      return bench_usage_error(o->usage, "--model-from: %s", err);
    res_costmodel_free(&m);
  }
  if ((rc = bench_parse_transports(l[0], o->transports, CB_MAX_LIST, &o->ntransports, &o->want_mpi, o->usage)))
    return rc;
  if ((rc = cb_list(o, l[1], "--algo", "algorithm", cb_algo_at, o->algos, &o->nalgos)) ||
      (rc = cb_list(o, l[2], "--dtype", "type", cb_dtype_at, o->dtypes, &o->ndtypes)) ||
      (rc = cb_list(o, l[3], "--op", "reduction", cb_op_at, o->ops, &o->nops)))
    return rc;
  /* a type whose elements do not fit between the bounds would leave its sweep empty */
  for (int d = 0; d < o->ndtypes; d++) {
    uint64_t *sizes = NULL;
    size_t es = coll_dtype_size(o->dtypes[d]);
    int n = bench_sizes(o->min_bytes, o->max_bytes, o->step, es, &sizes);
    free(sizes);
    if (n == 0) /* (-1, no memory, is the sweep's to report) */
      return bench_usage_error(o->usage, "--dtype %s: no size from --min-bytes %llu to --max-bytes %llu holds a whole %zu-byte element",
                               coll_dtype_name(o->dtypes[d]), (unsigned long long)o->min_bytes,
                               (unsigned long long)o->max_bytes, es);
  }
  if (o->d->rooted && o->r.nranks > 0 && o->root >= o->r.nranks)
    return bench_usage_error(o->usage, "--root %ld: there are %d ranks", o->root, o->r.nranks);
  return 0;
}

/* --peer: a transport/algorithm pair of this run that every row is compared with (NULL: mpi/native
 * where the run measures it; "none": no peer). 0, or the exit status of a usage error. */
static int cb_parse_peer(cb_opts *o, const char *peer) {
  if (peer && !strcmp(peer, "none")) return 0;
  coll_transport_kind ptk = COLL_MPI;
  coll_algo pa = {COLL_ALGO_NATIVE, 0};
  if (peer) {
    char t[32];
    const char *slash = strchr(peer, '/');
    size_t tlen = slash ? (size_t)(slash - peer) : 0;
    if (!slash || tlen == 0 || tlen >= sizeof t)
      return bench_usage_error(o->usage, "--peer: '%s' is not TRANSPORT/ALGO (e.g. mpi/native) or none", peer);
    memcpy(t, peer, tlen);
    t[tlen] = '\0';
    if (coll_transport_parse(t, &ptk) || cb_algo_parse(o, slash + 1, &pa))
      return bench_usage_error(o->usage, "--peer: '%s' is not TRANSPORT/ALGO (e.g. mpi/native) or none", peer);
  }
  int in_t = 0, in_a = 0;
  for (int i = 0; i < o->ntransports; i++) in_t |= o->transports[i] == ptk;
  for (int i = 0; i < o->nalgos; i++) in_a |= cb_algo_eq(o->algos[i], pa);
  if (in_t && in_a) {
    o->has_peer = 1;
    o->peer_given = peer != NULL;
    o->peer_tk = ptk;
    o->peer_algo = pa;
  } else if (peer) {
    return bench_usage_error(o->usage, "--peer: '%s' is not among the --transport and --algo of this run", peer);
  }
  return 0;
}

void cb_opts_free(cb_opts *o) {
  free(o->usage);
  o->usage = NULL;
}

int cb_parse(cb_opts *o, const bench_coll *d, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  o->d = d;
  bench_rank_opts_init(&o->r);
  o->check = 1;
  bench_flag table[CB_NFLAGS];
  size_t nt = cb_table(d, table);
  char head[128];
  snprintf(head, sizeof head, "usage: fabench %s [options]\n", d->name);
  if (!(o->usage = bench_flags_usage(head, table, nt))) return bench_error("out of memory");
  const char *lists[4] = {NULL, NULL, NULL, "sum"}, *peer = NULL;
  for (size_t i = 0; i < nt; i++) /* the defaults, through the parsing a given value takes */
    if (table[i].def && table[i].arg && cb_set(o, table[i].code, table[i].def, lists, &peer) > 0)
      return bench_error("internal: the default of --%s does not parse", table[i].name);
  static const struct option extra[] = {{"ranks", 1, 0, 'n'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  struct option *lo = bench_flags_options(table, nt, extra);
  if (!lo) return bench_error("out of memory");
  opterr = 0;
  optind = 1;
  int ch, rc = 0;
  int pairs = 0, nodes = 0;
  while (!rc && (ch = getopt_long(argc, argv, ":n:h", lo, NULL)) != -1) {
    pairs |= ch == O_PAIRS, nodes |= ch == O_NODES;
    rc = cb_set(o, ch, optarg, lists, &peer);
    if (rc < 0) rc = bench_rank_flag(&o->r, ch, argv, o->usage);
  }
  free(lo);
  if (rc) return rc;
  if ((rc = bench_rank_check(&o->r, argc, argv, o->usage))) return rc;
  if ((rc = cb_parse_lists(o, lists))) return rc;
  if ((rc = cb_parse_groups(o, pairs, nodes))) return rc;
  return cb_parse_peer(o, peer);
}
