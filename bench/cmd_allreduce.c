/* fabench allreduce: a verified sweep of sizes x transports x algorithms x dtypes x ops.
 * Every iteration is timed between barriers; its time is the maximum over ranks. */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "coll.h"
#include "res.h"
#include "topo.h"
#include "util.h"

static const char ar_usage[] =
    "usage: fabench allreduce [options]\n"
    "  -n N                  start N local ranks (default: the launcher's world, or 1)\n"
    "  --transport LIST      tcp,mpi,ucx,nccl (default: tcp,mpi when MPI is built, else tcp)\n"
    "  --algo LIST           ring,rhd,rd,tree,dtree,ps,ps:K,native,auto,hier,hier:ALG\n"
    "                        (hier: within hosts, ALG across them; default: ring,native)\n"
    "  --dtype LIST          f32,f64,f16,bf16,i32,i64 (default: f32)\n"
    "  --op LIST             sum,prod,min,max (default: sum)\n"
    "  --min-bytes SIZE      smallest buffer, K/M/G suffixes (default: 8)\n"
    "  --max-bytes SIZE      largest buffer (default: 32M)\n"
    "  --step-factor F       size multiplier between steps (default: 2)\n"
    "  --warmup N            warm-up iterations per size (default: 5)\n"
    "  --iters N             fixed iteration count per size (default: adaptive)\n"
    "  --time-per-size SEC   adaptive count: about SEC seconds per size (default: 0.5)\n"
    "  --peer T/A | none     every row's busbw relative to this pair's at the same size, in\n"
    "                        the same run (default: mpi/native when measured)\n"
    "  --rounds N            the transport/algorithm pairs take turns at each size, N rounds\n"
    "                        of iters/N each, so drift in the machine's speed hits all alike\n"
    "                        (default: 5; 1: each pair in one block); a row's round_spread\n"
    "                        says how far its rounds' medians were apart\n"
    "  --beside-compute      a thread on each rank multiplies matrices without pause while the\n"
    "                        rank all-reduces (as a training step's compute runs beside its\n"
    "                        reduction): each row's compute_loss is the share of that\n"
    "                        thread's pace the all-reduce took (ranks sleep while they wait;\n"
    "                        fit takes these rows for the training step's share of the cores)\n"
    "  --timing MODE         barrier (each iteration between barriers, max over ranks) or\n"
    "                        pipelined (back-to-back, mean per operation) (default: barrier)\n"
    "  --check / --no-check  verify every size element by element (default: on)\n"
    "  --chunk SIZE          pipelining unit of the algorithms (default: 256K; ucx\n"
    "                        over shared memory or RDMA: 1M)\n"
    "  --no-spin             waits sleep at once, as training's communication thread's do,\n"
    "                        instead of spinning first; the host's busy CPU per call\n"
    "                        (host_cpu_us, what fit's cost per byte comes from) is then\n"
    "                        measured where every rank has a core too\n"
    "  --tcp-streams N       tcp connections per peer (default: 1)\n"
    "  --tcp-cc NAME         congestion control of the tcp sockets, or 'system' for the\n"
    "                        kernel's default (default: " COLL_TCP_CC_DEFAULT "); with --emulate\n"
    "                        also the namespaces' default, which ucx's and mpi's sockets take\n"
    "  --ucx-map on|off      ucx ranks on one host map each other's buffer (UCX shared\n"
    "                        memory, ucp_rkey_ptr) and the ring reads its neighbour's\n"
    "                        partial sums in place; off: UCX copies them (default: on)\n"
    "  --devices LIST        nccl: the CUDA device of each local rank, e.g. 0,1,2,3; ranks\n"
    "                        on one device share it through CUDA IPC (default: local rank\n"
    "                        modulo the device count)\n"
    "  --mpirun-args ARGS    extra mpirun arguments when -n starts ranks through mpirun\n"
    "  --emulate RATE        with -n: each rank in its own network namespace, links shaped\n"
    "                        to RATE (e.g. 1gbit); needs root and iproute2\n"
    "  --emulate NxR:RATE    an emulated cluster of N hosts of R ranks (e.g. 2x2:1gbit):\n"
    "                        each host a namespace with a hostname of its own, its ranks\n"
    "                        sharing its memory and loopback, hosts linked at RATE\n"
    "  --emulate-slow K=RATE with NxR: host K's link at RATE instead (repeatable)\n"
    "  --intra-transport T   hier's phases inside hosts over T (tcp, ucx, mpi) and only\n"
    "                        between hosts over --transport (default: ucx, whose ranks\n"
    "                        on a host map each other's buffer, where it is built and\n"
    "                        --transport is tcp or mpi; else --transport's own)\n"
    "  --bind HOW            auto|none|core|numa|nic|gpu (default: auto, a core each\n"
    "                        where the host's ranks fit its cores and no launcher bound them)\n"
    "  --seed N              data seed (default: 1)\n"
    "  --timeout SEC         every network wait (default: 60)\n"
    "  --model-from DIR|FILE every row gains the cost model's prediction (t_pred_us) and\n"
    "                        its error (pred_err); auto picks by this model. A model.json,\n"
    "                        a directory with one, or a run directory to fit (fabench fit)\n"
    "  --out DIR             run directory (default: results/<UTC>-allreduce)\n";

#define AR_MAX_LIST 16

typedef struct {
  bench_rank_opts r; /* -n, --emulate, --timeout, --out, --tcp-*, ... */
  coll_transport_kind transports[AR_MAX_LIST];
  int ntransports, want_mpi;
  coll_algo algos[AR_MAX_LIST];
  int nalgos;
  coll_dtype dtypes[AR_MAX_LIST];
  int ndtypes;
  coll_op ops[AR_MAX_LIST];
  int nops;
  uint64_t min_bytes, max_bytes, chunk;
  double step, time_per_size;
  long warmup, iters, seed, rounds;
  int pipelined, check, no_peer_map, no_spin, beside;
  const char *model_from, *devices;
  int has_peer;                   /* rows carry busbw relative to this pair, when measured */
  int peer_given;                 /* --peer named it: it must run, not just be asked for */
  coll_transport_kind peer_tk;
  coll_algo peer_algo;
} ar_opts;

static int ar_algo_eq(coll_algo a, coll_algo b) { return a.kind == b.kind && a.param == b.param; }

/* One item of a list flag into element i of its array: 0, or -1 when it is unknown. */
static int ar_algo_at(const char *s, void *v, int i) { return coll_algo_parse(s, &((coll_algo *)v)[i]); }
static int ar_dtype_at(const char *s, void *v, int i) { return coll_dtype_parse(s, &((coll_dtype *)v)[i]); }
static int ar_op_at(const char *s, void *v, int i) { return coll_op_parse(s, &((coll_op *)v)[i]); }

/* A comma list flag of at most AR_MAX_LIST items, each parsed by at() into out: 0 with the
 * count in *n, or 2 after a usage error naming the flag and the item. */
static int ar_list(const char *list, const char *flag, const char *what,
                   int (*at)(const char *, void *, int), void *out, int *n) {
  char *items[AR_MAX_LIST], *store = NULL;
  int got = bench_split_list(list, items, AR_MAX_LIST, &store), rc = 0;
  if (got <= 0) rc = bench_usage_error(ar_usage, "%s: '%s' is empty, has an empty item or is too long", flag, list);
  for (int i = 0; i < got && !rc; i++)
    if (at(items[i], out, i)) rc = bench_usage_error(ar_usage, "%s: unknown %s '%s'", flag, what, items[i]);
  free(store);
  if (!rc) *n = got;
  return rc;
}

/* What the flags ask together, once read: the sizes' bounds, --model-from (loaded once, so that
 * a bad path fails before any rank starts), and the transport, algorithm, type and reduction
 * lists. 0, or the exit status of a usage error. */
static int ar_parse_lists(ar_opts *o, const char *tl, const char *al, const char *dl, const char *ol) {
  int rc;
  if (o->min_bytes > o->max_bytes) return bench_usage_error(ar_usage, "--min-bytes is larger than --max-bytes");
  if (o->model_from) {
    res_costmodel m;
    char err[1024];
    if (bench_costmodel_load(&m, o->model_from, 1, err, sizeof err))
      return bench_usage_error(ar_usage, "--model-from: %s", err);
    res_costmodel_free(&m);
  }
  if ((rc = bench_parse_transports(tl, o->transports, AR_MAX_LIST, &o->ntransports, &o->want_mpi, ar_usage)))
    return rc;
  if ((rc = ar_list(al, "--algo", "algorithm", ar_algo_at, o->algos, &o->nalgos)) ||
      (rc = ar_list(dl, "--dtype", "type", ar_dtype_at, o->dtypes, &o->ndtypes)) ||
      (rc = ar_list(ol, "--op", "reduction", ar_op_at, o->ops, &o->nops)))
    return rc;
  /* a type whose elements do not fit between the bounds would leave its sweep empty */
  for (int d = 0; d < o->ndtypes; d++) {
    uint64_t *sizes = NULL;
    size_t es = coll_dtype_size(o->dtypes[d]);
    int n = bench_sizes(o->min_bytes, o->max_bytes, o->step, es, &sizes);
    free(sizes);
    if (n == 0) /* (-1, no memory, is the sweep's to report) */
      return bench_usage_error(ar_usage, "--dtype %s: no size from --min-bytes %llu to --max-bytes %llu holds a whole %zu-byte element",
                               coll_dtype_name(o->dtypes[d]), (unsigned long long)o->min_bytes,
                               (unsigned long long)o->max_bytes, es);
  }
  return 0;
}

/* --peer: a transport/algorithm pair of this run that every row is compared with (NULL: mpi/native
 * where the run measures it; "none": no peer). 0, or the exit status of a usage error. */
static int ar_parse_peer(ar_opts *o, const char *peer) {
  if (peer && !strcmp(peer, "none")) return 0;
  coll_transport_kind ptk = COLL_MPI;
  coll_algo pa = {COLL_ALGO_NATIVE, 0};
  if (peer) {
    char t[32];
    const char *slash = strchr(peer, '/');
    size_t tlen = slash ? (size_t)(slash - peer) : 0;
    if (!slash || tlen == 0 || tlen >= sizeof t)
      return bench_usage_error(ar_usage, "--peer: '%s' is not TRANSPORT/ALGO (e.g. mpi/native) or none", peer);
    memcpy(t, peer, tlen);
    t[tlen] = '\0';
    if (coll_transport_parse(t, &ptk) || coll_algo_parse(slash + 1, &pa))
      return bench_usage_error(ar_usage, "--peer: '%s' is not TRANSPORT/ALGO (e.g. mpi/native) or none", peer);
  }
  int in_t = 0, in_a = 0;
  for (int i = 0; i < o->ntransports; i++) in_t |= o->transports[i] == ptk;
  for (int i = 0; i < o->nalgos; i++) in_a |= ar_algo_eq(o->algos[i], pa);
  if (in_t && in_a) {
    o->has_peer = 1;
    o->peer_given = peer != NULL;
    o->peer_tk = ptk;
    o->peer_algo = pa;
  } else if (peer) {
    return bench_usage_error(ar_usage, "--peer: '%s' is not among the --transport and --algo of this run", peer);
  }
  return 0;
}

static int ar_parse(ar_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  bench_rank_opts_init(&o->r);
  o->min_bytes = 8;
  o->max_bytes = 32u << 20;
  o->step = 2;
  o->time_per_size = 0.5;
  o->warmup = 5;
  o->rounds = 5;
  o->seed = 1;
  o->check = 1;
  const char *tl = FABENCH_HAVE_MPI ? "tcp,mpi" : "tcp", *al = "ring,native", *dl = "f32", *ol = "sum";
  const char *peer = NULL; /* NULL: mpi/native when the run measures it */
  enum { O_TRANSPORT = 256, O_ALGO, O_DTYPE, O_OP, O_MIN, O_MAX, O_STEP, O_WARMUP, O_ITERS, O_TPS,
         O_TIMING, O_CHECK, O_NOCHECK, O_CHUNK, O_UCXMAP, O_DEVICES, O_ROUNDS, O_PEER, O_SEED, O_MODEL,
         O_NOSPIN, O_BESIDE };
  static const struct option lo[] = {
      {"transport", 1, 0, O_TRANSPORT}, {"algo", 1, 0, O_ALGO},       {"dtype", 1, 0, O_DTYPE},
      {"op", 1, 0, O_OP},               {"min-bytes", 1, 0, O_MIN},   {"max-bytes", 1, 0, O_MAX},
      {"step-factor", 1, 0, O_STEP},    {"warmup", 1, 0, O_WARMUP},   {"iters", 1, 0, O_ITERS},
      {"time-per-size", 1, 0, O_TPS},   {"timing", 1, 0, O_TIMING},   {"check", 0, 0, O_CHECK},
      {"no-check", 0, 0, O_NOCHECK},    {"chunk", 1, 0, O_CHUNK},     {"seed", 1, 0, O_SEED},
      {"rounds", 1, 0, O_ROUNDS},       {"peer", 1, 0, O_PEER},       {"ucx-map", 1, 0, O_UCXMAP},
      {"model-from", 1, 0, O_MODEL},    {"devices", 1, 0, O_DEVICES}, {"no-spin", 0, 0, O_NOSPIN},
      {"beside-compute", 0, 0, O_BESIDE}, BENCH_RANK_OPTIONS,
      BENCH_TCP_OPTIONS,                {0, 0, 0, 0}};
  opterr = 0;
  optind = 1;
  int ch, rc;
  while ((ch = getopt_long(argc, argv, ":n:h", lo, NULL)) != -1) {
    switch (ch) {
    case O_TRANSPORT: tl = optarg; break;
    case O_ALGO: al = optarg; break;
    case O_DTYPE: dl = optarg; break;
    case O_OP: ol = optarg; break;
    case O_MIN:
      if (bench_parse_size(optarg, &o->min_bytes)) return bench_usage_error(ar_usage, "--min-bytes: '%s' is not a size", optarg);
      break;
    case O_MAX:
      if (bench_parse_size(optarg, &o->max_bytes)) return bench_usage_error(ar_usage, "--max-bytes: '%s' is not a size", optarg);
      break;
    case O_STEP:
      if (bench_parse_double(optarg, 1.01, 1024, &o->step)) return bench_usage_error(ar_usage, "--step-factor: '%s' must be a number > 1", optarg);
      break;
    case O_WARMUP:
      if (bench_parse_int(optarg, 0, 1000000, &o->warmup)) return bench_usage_error(ar_usage, "--warmup: '%s' is not a count", optarg);
      break;
    case O_ITERS:
      if (bench_parse_int(optarg, 1, 100000000, &o->iters)) return bench_usage_error(ar_usage, "--iters: '%s' is not a count >= 1", optarg);
      break;
    case O_TPS:
      if (bench_parse_double(optarg, 0.001, 3600, &o->time_per_size)) return bench_usage_error(ar_usage, "--time-per-size: '%s' is not a duration in seconds", optarg);
      break;
    case O_TIMING:
      if (!strcmp(optarg, "barrier")) o->pipelined = 0;
      else if (!strcmp(optarg, "pipelined")) o->pipelined = 1;
      else return bench_usage_error(ar_usage, "--timing: '%s' is not barrier or pipelined", optarg);
      break;
    case O_CHECK: o->check = 1; break;
    case O_NOCHECK: o->check = 0; break;
    case O_CHUNK:
      if (bench_parse_size(optarg, &o->chunk) || o->chunk < 64) return bench_usage_error(ar_usage, "--chunk: '%s' is not a size >= 64", optarg);
      break;
    case O_PEER: peer = optarg; break;
    case O_ROUNDS:
      if (bench_parse_int(optarg, 1, 1000, &o->rounds)) return bench_usage_error(ar_usage, "--rounds: '%s' is not 1..1000", optarg);
      break;
    case O_UCXMAP:
      if (!strcmp(optarg, "on")) o->no_peer_map = 0;
      else if (!strcmp(optarg, "off")) o->no_peer_map = 1;
      else return bench_usage_error(ar_usage, "--ucx-map: '%s' is not on or off", optarg);
      break;
    case O_DEVICES:
      if (!*optarg || strspn(optarg, "0123456789,") != strlen(optarg))
        return bench_usage_error(ar_usage, "--devices: '%s' is not a list of CUDA device numbers", optarg);
      o->devices = optarg;
      break;
    case O_SEED:
      if (bench_parse_int(optarg, 0, 1L << 62, &o->seed)) return bench_usage_error(ar_usage, "--seed: '%s' is not a number", optarg);
      break;
    case O_MODEL: o->model_from = optarg; break;
    case O_NOSPIN: o->no_spin = 1; break;
    case O_BESIDE: o->beside = 1; break;
    default:
      if ((rc = bench_rank_flag(&o->r, ch, argv, ar_usage))) return rc;
    }
  }
  if ((rc = bench_rank_check(&o->r, argc, argv, ar_usage))) return rc;
  if ((rc = ar_parse_lists(o, tl, al, dl, ol))) return rc;
  return ar_parse_peer(o, peer);
}

/* ---- one rank's run ---- */

/* What carries a GPU communicator's data, as NCCL would choose it from the path between the
 * GPUs (rank 0's topology; NCCL's own choice is in its NCCL_DEBUG=INFO log): NVLink, PCIe
 * peer-to-peer up to a host bridge, shared memory across host bridges or sockets, and between
 * hosts InfiniBand/RoCE when this host has it, else sockets. Ranks sharing one GPU: CUDA IPC
 * (path X). The widest path class between neighbouring ranks' GPUs follows a slash
 * ("nccl:pcie/PXB"); none between hosts. */
static void ar_gpu_fabric(coll_comm *c, char *fabric, size_t fcap) {
  char path[16];
  size_t pcap = sizeof path;
  static const char *const order[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"};
  const char *base = coll_comm_fabric(c);
  int n = coll_comm_size(c), worst = -1, hosts_apart = 0;
  char err[256], cls[16];
  topo_info *ti = NULL;
  path[0] = '\0';
  snprintf(fabric, fcap, "%s", base);
  if (topo_load(&ti, NULL, err, sizeof err) != 0) return;
  for (int r = 0; r < n; r++) {
    int q = (r + 1) % n;
    if (strcmp(coll_comm_host(c, r), coll_comm_host(c, q))) {
      hosts_apart = 1;
      continue;
    }
    if (topo_gpu_path(ti, coll_comm_gpu(c, r), coll_comm_gpu(c, q), cls, sizeof cls)) continue;
    for (int i = 0; i < 7; i++)
      if (!strncmp(cls, order[i], strlen(order[i])) && i > worst) {
        snprintf(path, pcap, "%s", cls);
        worst = i;
      }
  }
  const char *p2p_off = getenv("NCCL_P2P_DISABLE"), *ib_off = getenv("NCCL_IB_DISABLE");
  if (!strncmp(base, "nccl:", 5) && n > 1) {
    const char *what = hosts_apart ? (topo_has_ib(ti) && !(ib_off && atoi(ib_off)) ? "ib" : "socket")
                       : worst == 1 && !(p2p_off && atoi(p2p_off)) ? "nvlink"
                       : worst >= 2 && worst <= 4 && !(p2p_off && atoi(p2p_off)) ? "pcie"
                       : worst >= 0 ? "shm" : "p2p";
    snprintf(fabric, fcap, "nccl:%s", what);
  }
  if (path[0]) snprintf(fabric + strlen(fabric), fcap - strlen(fabric), "/%s", path);
  topo_free(ti);
}

typedef struct {
  const ar_opts *o;
  coll_boot *boot;
  int rank, size;
  int per_host; /* the most ranks on one host (every row says it) */
  bench_run run; /* rank 0 only */
  res_table *tab;
  int progress;
  res_costmodel model; /* --model-from (n == 0 without) */
  unsigned model_missed; /* transports (bit per kind) said to have no model of their fabric */
  struct ar_load *load;  /* --beside-compute's thread, else NULL */
  double alone_n, alone_s; /* this size: the load's products and seconds with no all-reduce */
} ar_ctx;

/* --beside-compute: a thread that multiplies 64x64 matrices without pause, counting them. The
 * host's CPU per byte measured with idle cores understates what a training step's compute loses
 * to its reduction, so the loss is measured directly (docs/measurements.md, "What the cores
 * lose beside the all-reduce"). */
typedef struct ar_load {
  pthread_t th;
  atomic_int stop;
  atomic_uint_fast64_t done;
} ar_load;

static void *ar_load_main(void *arg) {
  ar_load *l = arg;
  enum { N = 64 };
  float a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f;
  volatile float sink = 0;
  while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++)
      for (int k = 0; k < N; k++)
        for (int j = 0; j < N; j++) c[i * N + j] += a[i * N + k] * b[k * N + j];
    sink += c[N * N - 1];
    atomic_fetch_add_explicit(&l->done, 1, memory_order_relaxed);
  }
  (void)sink;
  return NULL;
}

static uint64_t ar_load_done(const ar_ctx *x) {
  return x->load ? atomic_load_explicit(&x->load->done, memory_order_relaxed) : 0;
}

/* The load's pace alone, before a round of a size: 200 ms with no all-reduce on any rank. The
 * barrier first, since a rank done with its calls while its peers still send to it would
 * measure their exchange as "alone"; a shorter window gave a loss that varied from run to run
 * (docs/measurements.md, "What the cores lose beside the all-reduce"). */
static int ar_load_alone(ar_ctx *x, coll_comm *c, coll_err *e) {
  if (!x->load) return 0;
  if (coll_barrier(c, e)) return -1;
  uint64_t c0 = ar_load_done(x);
  double t0 = util_now();
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  x->alone_n += (double)(ar_load_done(x) - c0);
  x->alone_s += util_now() - t0;
  return 0;
}

/* One (transport, algorithm) pair being measured; its samples are those of the current size. */
typedef struct {
  coll_comm *c; /* shared by the cells of one transport */
  coll_transport_kind tk;
  coll_algo algo, ran;
  char aname[32];
  long iters;
  double *times; /* microseconds, each the maximum over ranks */
  size_t ntimes, cap;
  util_stats st;  /* of this size's samples */
  double spread; /* the rounds' medians apart (util_round_spread; NaN: one round) */
  double load_n, load_s; /* --beside-compute: the load's products and seconds while timed */
  double loss;   /* the share of the load's pace lost, mean over ranks (NaN: no load) */
  int is_peer;
  double cpu_s;  /* rank 0: its host's busy CPU seconds over this size's timed iterations */
  long cpu_n;    /* the iterations they cover; -1: not measurable (a rank spins, no /proc) */
  void *dbuf;    /* the device buffer of a device communicator (nccl), else NULL */
  void *mbuf;    /* host memory that this communicator's ranks map, where the run's buffer is
                    another's (ucx beside tcp with ucx inside hosts), else NULL */
  char gfabric[80]; /* device communicators (rank 0): what carries the data, then the widest
                       path class between neighbouring ranks' GPUs: "nccl:nvlink/NV18" */
} ar_cell;

static int ar_fail(const coll_err *e) { return bench_error("%s", e->msg); }

/* The maximum (or sum) over ranks of n doubles, in place: control traffic on the measured
 * comm, or through the bootstrap when the comm's buffers are on a GPU. */
static int ar_ctl(ar_ctx *x, coll_comm *c, double *v, size_t n, coll_op op, coll_err *e) {
  if (coll_comm_device(c) < 0) {
    coll_algo ring = {COLL_ALGO_RING, 0};
    return coll_allreduce(c, v, n, COLL_F64, op, ring, NULL, e);
  }
  double *all = malloc(n * (size_t)x->size * sizeof *all);
  if (!all) return snprintf(e->msg, sizeof e->msg, "rank %d: out of memory", x->rank), -1;
  int rc = coll_boot_allgather(x->boot, all, v, n * sizeof *v, e);
  for (size_t i = 0; !rc && i < n; i++) {
    v[i] = all[i];
    for (int r = 1; r < x->size; r++) {
      double w = all[(size_t)r * n + i];
      v[i] = op == COLL_SUM ? v[i] + w : w > v[i] ? w : v[i];
    }
  }
  free(all);
  return rc;
}
static int ar_max(ar_ctx *x, coll_comm *c, double *v, size_t n, coll_err *e) {
  return ar_ctl(x, c, v, n, COLL_MAX, e);
}

/* The cell's buffer: its device buffer, its mapped one, or the run's host one. */
static void *ar_buf(const ar_cell *k, void *hbuf) { return k->dbuf ? k->dbuf : k->mbuf ? k->mbuf : hbuf; }

/* Device communicators run asynchronously: wait for what was enqueued. */
static int ar_sync(ar_cell *k, coll_err *e) {
  char none = 0; /* a copy of 0 bytes: the stream's point to wait for */
  return k->dbuf ? coll_mem_copy(k->c, &none, &none, 0, e) : 0;
}

/* One timed all-reduce (seconds): CUDA events around it on a device communicator. */
static int ar_timed(ar_cell *k, void *buf, size_t count, coll_dtype dt, coll_op op, long n,
                    double *sec, coll_err *e) {
  if (k->dbuf) {
    if (coll_timer_start(k->c, e)) return -1;
    for (long i = 0; i < n; i++)
      if (coll_allreduce(k->c, buf, count, dt, op, k->algo, &k->ran, e)) return -1;
    return coll_timer_stop(k->c, sec, e);
  }
  double t0 = util_now();
  for (long i = 0; i < n; i++)
    if (coll_allreduce(k->c, buf, count, dt, op, k->algo, &k->ran, e)) return -1;
  *sec = util_now() - t0;
  return 0;
}

static int ar_cell_grow(ar_cell *k, size_t n) {
  if (n <= k->cap) return 0;
  double *t = realloc(k->times, n * sizeof *t);
  if (!t) return -1;
  k->times = t;
  k->cap = n;
  return 0;
}

/* Warm-up, then the iteration count: --iters, or what fills --time-per-size at the slowest
 * rank's pace (every rank must run the same count). */
static int ar_prepare(ar_ctx *x, ar_cell *k, void *hbuf, size_t count, coll_dtype dt, coll_op op,
                      coll_err *e) {
  const ar_opts *o = x->o;
  void *buf = ar_buf(k, hbuf);
  k->ntimes = 0;
  k->ran = k->algo;
  k->cpu_s = 0;
  /* the load's CPU would count as the call's */
  k->cpu_n = x->rank == 0 && !k->dbuf && !x->load && coll_comm_sleeps(k->c) ? 0 : -1;
  k->load_n = k->load_s = 0;
  double w0 = util_now();
  for (long i = 0; i < o->warmup; i++) {
    if (!o->pipelined && coll_barrier(k->c, e)) return -1;
    if (coll_allreduce(k->c, buf, count, dt, op, k->algo, &k->ran, e)) return -1;
  }
  if (ar_sync(k, e)) return -1;
  k->iters = o->iters;
  if (!k->iters) {
    double per = o->warmup ? (util_now() - w0) / (double)o->warmup : 0;
    if (!o->warmup) {
      double t0 = util_now();
      if (coll_barrier(k->c, e) || coll_allreduce(k->c, buf, count, dt, op, k->algo, &k->ran, e) ||
          ar_sync(k, e))
        return -1;
      per = util_now() - t0;
    }
    if (ar_max(x, k->c, &per, 1, e)) return -1;
    double want = o->time_per_size / (per > 1e-7 ? per : 1e-7);
    k->iters = want < 5 ? 5 : want > 200000 ? 200000 : (long)want;
  }
  if (ar_cell_grow(k, (size_t)k->iters)) {
    snprintf(e->msg, sizeof e->msg, "rank %d: out of memory for %ld samples", x->rank, k->iters);
    return -1;
  }
  return 0;
}

/* The host's busy CPU since cpu0 into the cell's account of n more iterations (where it keeps
 * one: rank 0, no rank spinning); an unreadable /proc/stat ends the account. */
static void ar_cpu_add(ar_cell *k, double cpu0, long n) {
  if (k->cpu_n < 0) return;
  double cpu = bench_host_cpu_s() - cpu0;
  k->cpu_s += cpu;
  k->cpu_n = isfinite(cpu) ? k->cpu_n + n : -1;
}

/* n more timed iterations, appended to the cell's samples. */
static int ar_measure(ar_ctx *x, ar_cell *k, void *hbuf, size_t count, coll_dtype dt, coll_op op,
                      long n, coll_err *e) {
  double *t = k->times + k->ntimes;
  void *buf = ar_buf(k, hbuf);
  double cpu0 = k->cpu_n >= 0 ? bench_host_cpu_s() : NAN, l0 = util_now();
  uint64_t c0 = ar_load_done(x);
  if (x->o->pipelined) {
    double mean;
    if (coll_barrier(k->c, e) || ar_timed(k, buf, count, dt, op, n, &mean, e)) return -1;
    ar_cpu_add(k, cpu0, n);
    mean /= (double)n;
    if (ar_max(x, k->c, &mean, 1, e)) return -1;
    for (long i = 0; i < n; i++) t[i] = mean;
  } else {
    for (long i = 0; i < n; i++)
      if (coll_barrier(k->c, e) || ar_timed(k, buf, count, dt, op, 1, &t[i], e)) return -1;
    ar_cpu_add(k, cpu0, n);
    if (ar_max(x, k->c, t, (size_t)n, e)) return -1;
  }
  k->load_n += (double)(ar_load_done(x) - c0);
  k->load_s += util_now() - l0;
  for (long i = 0; i < n; i++) t[i] *= 1e6;
  k->ntimes += (size_t)n;
  return 0;
}

/* Fresh pattern, one all-reduce, every element checked; returns wrong elements over all ranks. */
static int ar_verify(ar_ctx *x, const ar_cell *k, void *buf, size_t count, coll_dtype dt, coll_op op,
                     coll_algo algo, uint64_t seed, int64_t *wrong, coll_err *e) {
  coll_comm *c = k->c;
  size_t nbytes = count * coll_dtype_size(dt);
  coll_pattern_fill(buf, count, dt, op, x->rank, seed);
  if (k->dbuf) { /* the device's data, copied back after the all-reduce */
    if (coll_mem_copy(c, k->dbuf, buf, nbytes, e)) return -1;
    memset(buf, 0xa5, nbytes); /* a result that was never copied back cannot pass */
  } else if (k->mbuf) {
    memcpy(k->mbuf, buf, nbytes);
    memset(buf, 0xa5, nbytes);
  }
  if (coll_allreduce(c, ar_buf(k, buf), count, dt, op, algo, NULL, e)) return -1;
  if (k->dbuf && coll_mem_copy(c, buf, k->dbuf, nbytes, e)) return -1;
  if (k->mbuf) memcpy(buf, k->mbuf, nbytes);
  size_t first = 0;
  double bad = (double)coll_pattern_check(buf, count, dt, op, x->size, seed, &first);
  if (bad > 0)
    fprintf(stderr, "fabench: rank %d (%s): %s %s %s x %zu: %.0f wrong elements, first at %zu\n",
            x->rank, coll_boot_host(x->boot, x->rank), coll_comm_fabric(c), coll_dtype_name(dt),
            coll_op_name(op), count, bad, first);
  if (ar_ctl(x, c, &bad, 1, COLL_SUM, e)) return -1;
  *wrong = (int64_t)bad;
  return 0;
}

static void ar_header(const ar_ctx *x) {
  const ar_opts *o = x->o;
  printf("# fabench allreduce: %d rank(s) on %d host(s), timing %s, check %s, %ld round(s)\n", x->size,
         coll_boot_host_count(x->boot), o->pipelined ? "pipelined" : "barrier", o->check ? "on" : "off",
         o->rounds);
  if (o->has_peer) {
    char a[32];
    coll_algo_format(a, sizeof a, o->peer_algo);
    printf("# vs peer: busbw / %s/%s's busbw at the same size, in this run\n", coll_transport_name(o->peer_tk), a);
  }
  printf("# %12s %11s %5s %5s %-22s %-8s %10s %10s %10s %7s %8s\n", "size(B)", "count", "type", "redop",
         "fabric", "algo", "p50(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "vs peer");
  fflush(stdout);
}

/* Prints and writes one measured row (rank 0). */
static int ar_report(ar_ctx *x, const ar_cell *k, const ar_cell *peer, size_t nbytes, size_t count,
                     coll_dtype dt, coll_op op, int64_t wrong) {
  const ar_opts *o = x->o;
  const char *fabric = getenv("FABENCH_FABRIC") ? getenv("FABENCH_FABRIC")
                       : k->gfabric[0]                    ? k->gfabric
                                                          : coll_comm_fabric(k->c);
  util_stats st = k->st;
  /* busbw ratio = the peer's median time over this one's (same bytes, same ranks) */
  double vs = peer && st.p50 > 0 ? peer->st.p50 / st.p50 : NAN;
  char vss[16] = "-";
  if (isfinite(vs)) snprintf(vss, sizeof vss, "%.2fx", vs);
  double t = st.p50 * 1e-6;
  double algbw = t > 0 ? (double)nbytes / t / 1e9 : 0;
  double busbw = algbw * 2.0 * (x->size - 1) / x->size;
  char rname[32];
  coll_algo_format(rname, sizeof rname, k->ran);
  if (x->progress) fprintf(stderr, "\r%-60s\r", "");
  char wrongs[24] = "-"; /* not checked (--no-check): no count to give */
  if (x->o->check) snprintf(wrongs, sizeof wrongs, "%lld", (long long)wrong);
  printf("  %12zu %11zu %5s %5s %-22s %-8s %10.2f %10.3f %10.3f %7s %8s\n", nbytes, count,
         coll_dtype_name(dt), coll_op_name(op), fabric, k->aname, st.p50, algbw, busbw, wrongs, vss);
  fflush(stdout);
  res_allreduce_row row;
  res_row_init(res_schema_allreduce(), &row);
  char pname[48] = "";
  if (peer) snprintf(pname, sizeof pname, "%s/%s", coll_transport_name(peer->tk), peer->aname);
  row.run_id = x->run.run_id;
  row.schema = RES_SCHEMA_VERSION;
  row.host_count = coll_boot_host_count(x->boot);
  row.ranks_per_host = x->per_host;
  row.ranks = x->size;
  row.fabric = fabric;
  row.transport = coll_transport_name(k->tk);
  row.algo = k->aname;
  row.dtype = coll_dtype_name(dt);
  row.op = coll_op_name(op);
  row.bytes = (int64_t)nbytes;
  row.count = (int64_t)count;
  row.iters = (int64_t)k->ntimes;
  row.timing = o->pipelined ? "pipelined" : "barrier";
  row.t_min_us = st.min;
  row.t_p50_us = st.p50;
  row.t_p90_us = st.p90;
  row.t_p99_us = st.p99;
  row.t_max_us = st.max;
  row.t_mean_us = st.mean;
  row.t_std_us = st.stddev;
  row.algbw_gbps = algbw;
  row.busbw_gbps = busbw;
  row.errors = wrong;
  row.algo_ran = rname;
  row.host = x->run.host;
  row.topo_hash = x->run.topo_hash;
  row.warmup = o->warmup;
  row.chunk_bytes = (int64_t)coll_comm_chunk(k->c);
  row.tcp_streams = o->r.tcp_streams;
  row.boot = coll_boot_kind_name(x->boot);
  row.rounds = o->rounds;
  row.peer = pname;
  row.busbw_vs_peer = vs;
  if (k->cpu_n > 0) row.host_cpu_us = k->cpu_s / (double)k->cpu_n * 1e6;
  row.round_spread = k->spread;
  if (x->load) row.compute_loss = k->loss;
  const res_fabric_cost *fm = res_costmodel_find(&x->model, fabric, coll_transport_name(k->tk),
                                              coll_boot_host_count(x->boot), row.topo_hash);
  int learned = 0;
  double tp = x->model.n ? res_allreduce_row_time(&x->model, &row, NULL, &learned) * 1e6 : NAN;
  if (fm || tp > 0) { /* one fabric, on a cluster both levels, or an unfitted emulated rate (held out) */
    row.t_pred_us = tp;
    if (isfinite(tp) && tp > 0)
      row.pred_err = (st.p50 - tp) / tp, row.pred_kind = res_pred_kind_name(learned ? RES_PRED_REPLAY : RES_PRED_HELDOUT);
  } else if (x->model.n && !(x->model_missed & (1u << k->tk))) {
    /* said once per transport: rows without t_pred_us would pass for a run checked against it */
    x->model_missed |= 1u << k->tk;
    fprintf(stderr, "fabench: --model-from %s: no model of fabric %s (%s), so its rows have no t_pred_us; the model has:",
            o->model_from, fabric, coll_transport_name(k->tk));
    for (size_t i = 0; i < x->model.n; i++) {
      char l[256];
      fprintf(stderr, "%s %s (%s)", i ? "," : "", res_costmodel_label(&x->model, &x->model.f[i], l, sizeof l),
              x->model.f[i].transport);
    }
    fprintf(stderr, "\n");
  }
  char err[256];
  if (res_table_put(x->tab, &row, err, sizeof err)) return bench_error("%s", err);
  return 0;
}

/* One size of one dtype/op over every cell. The cells take turns in rounds (each round runs
 * iters/rounds of every cell), so that a machine whose speed drifts during the run (a noisy
 * neighbour, the scheduler moving ranks) slows every cell alike and the ratios between them
 * in one run stay fair; rounds=1 measures each cell in one block. */
static int ar_size(ar_ctx *x, ar_cell *cells, int ncells, void *buf, size_t count, coll_dtype dt,
                   coll_op op, int *wrong_total) {
  const ar_opts *o = x->o;
  coll_err e = {{0}};
  size_t nbytes = count * coll_dtype_size(dt);
  if (x->progress)
    fprintf(stderr, "\r%-60s", ""), fprintf(stderr, "\r[%s %s %zu B]", coll_dtype_name(dt), coll_op_name(op), nbytes);
  for (int i = 0; i < ncells; i++) {
    coll_pattern_fill(buf, count, dt, op, x->rank, (uint64_t)o->seed);
    if (cells[i].dbuf && coll_mem_copy(cells[i].c, cells[i].dbuf, buf, nbytes, &e)) return ar_fail(&e);
    if (cells[i].mbuf) memcpy(cells[i].mbuf, buf, nbytes);
    if (ar_prepare(x, &cells[i], buf, count, dt, op, &e)) return ar_fail(&e);
  }
  x->alone_n = x->alone_s = 0;
  for (long r = 0; r < o->rounds; r++)
    for (int i = 0; i < ncells; i++) {
      ar_cell *k = &cells[i];
      /* the load's pace alone, in each round: the machine drifts */
      if (i == 0 && ar_load_alone(x, k->c, &e)) return ar_fail(&e);
      long n = k->iters * (r + 1) / o->rounds - k->iters * r / o->rounds;
      if (n <= 0) continue;
      /* one untimed call: the first after another cell pays for its caches and pages */
      if (r > 0 && o->warmup && coll_allreduce(k->c, ar_buf(k, buf), count, dt, op, k->algo, &k->ran, &e))
        return ar_fail(&e);
      if (ar_measure(x, k, buf, count, dt, op, n, &e)) return ar_fail(&e);
    }
  const ar_cell *peer = NULL;
  for (int i = 0; i < ncells; i++) {
    cells[i].spread = util_round_spread(cells[i].times, cells[i].ntimes, (int)o->rounds);
    util_stats_compute(&cells[i].st, cells[i].times, cells[i].ntimes);
    if (cells[i].is_peer) peer = &cells[i];
  }
  for (int i = 0; i < ncells && x->load; i++) { /* every rank: the loss is the ranks' mean */
    ar_cell *k = &cells[i];
    double alone = x->alone_s > 0 ? x->alone_n / x->alone_s : 0, during = k->load_s > 0 ? k->load_n / k->load_s : 0;
    double loss = alone > 0 ? 1 - during / alone : NAN;
    if (ar_ctl(x, k->c, &loss, 1, COLL_SUM, &e)) return ar_fail(&e);
    k->loss = loss / x->size;
  }
  for (int i = 0; i < ncells; i++) {
    ar_cell *k = &cells[i];
    int64_t wrong = 0;
    if (o->check && ar_verify(x, k, buf, count, dt, op, k->algo, (uint64_t)o->seed + nbytes, &wrong, &e))
      return ar_fail(&e);
    *wrong_total += wrong > 0;
    if (x->rank == 0 && ar_report(x, k, peer, nbytes, count, dt, op, wrong)) return 1;
  }
  return 0;
}

static int ar_sweep(ar_ctx *x, ar_cell *cells, int ncells, void *buf, int *wrong_total) {
  const ar_opts *o = x->o;
  int rc = 0;
  for (int d = 0; d < o->ndtypes && !rc; d++)
    for (int p = 0; p < o->nops && !rc; p++) {
      coll_dtype dt = o->dtypes[d];
      size_t es = coll_dtype_size(dt);
      uint64_t *sizes = NULL;
      int nsizes = bench_sizes(o->min_bytes, o->max_bytes, o->step, es, &sizes);
      if (nsizes < 0) {
        rc = bench_error("out of memory");
        break;
      }
      for (int si = 0; si < nsizes && !rc; si++)
        rc = ar_size(x, cells, ncells, buf, (size_t)sizes[si] / es, dt, o->ops[p], wrong_total);
      free(sizes);
    }
  if (x->progress) fprintf(stderr, "\r%-60s\r", "");
  return rc;
}

/* auto's model for a transport: the fitted fabric of that transport on this many hosts (the
 * fabric string itself is known only once the communicator is open). */
static const coll_model *ar_model_for(const ar_ctx *x, coll_transport_kind tk) {
  const char *emu = getenv("FABENCH_FABRIC"), *name = coll_transport_name(tk);
  const res_fabric_cost *any = NULL;
  for (size_t i = 0; i < x->model.n; i++) {
    const res_fabric_cost *f = &x->model.f[i];
    if (strcmp(f->transport, name)) continue;
    if (emu && *emu && !strcmp(f->fabric, emu)) return &f->m;
    /* this machine's fit before another's */
    if (f->host_count == coll_boot_host_count(x->boot) &&
        (!any || (strcmp(any->topo, x->run.topo_hash) && !strcmp(f->topo, x->run.topo_hash))))
      any = f;
  }
  return any ? &any->m : NULL;
}

/* Which pairs run is known only once the communicators are open (native needs a library that
 * has one), and every rank built the same cells: 0, or 2 on every rank (a usage error, said
 * once by rank 0) when no pair is left to measure or the --peer asked for was skipped. */
static int ar_cells_check(const ar_ctx *x, const ar_cell *cells, int ncells) {
  const ar_opts *o = x->o;
  int peer = 0;
  for (int i = 0; i < ncells; i++) peer |= cells[i].is_peer;
  if (ncells && (peer || !o->peer_given)) return 0;
  if (x->rank == 0 && !ncells) {
    bench_error("nothing to measure: every --transport/--algo pair was skipped");
  } else if (x->rank == 0) {
    char a[32];
    coll_algo_format(a, sizeof a, o->peer_algo);
    bench_error("--peer: %s/%s was skipped, so no row could be compared with it: name a pair that runs, or none",
                coll_transport_name(o->peer_tk), a);
  }
  return 2;
}

/* What a run holds: a communicator per transport (and a device buffer for a GPU one), the
 * cells, and the run's one host buffer. */
typedef struct {
  coll_comm *comms[AR_MAX_LIST], *buf_owner;
  void *buf, *dbufs[AR_MAX_LIST], *mbufs[AR_MAX_LIST];
  ar_cell cells[AR_MAX_LIST * AR_MAX_LIST];
  int ncells;
} ar_run;

/* This rank's binding, rank 0's run directory and table (every rank stops alike where rank 0
 * cannot make them, rank 0 having said why), and the world in run.json. 0, or 1 after saying
 * why. */
static int ar_begin(ar_ctx *x, int argc, char **argv) {
  const ar_opts *o = x->o;
  char bind_desc[256];
  int rc = 0;
  if (bench_bind_rank(x->boot, o->r.bind, 1, bind_desc, sizeof bind_desc)) return 1;
  if (x->rank == 0) {
    char err[512];
    x->progress = isatty(2);
    if (bench_run_begin(&x->run, o->r.out, "allreduce", argc, argv)) {
      rc = 1;
    } else if (res_table_open_schema(&x->tab, x->run.dir, res_schema_allreduce(), err, sizeof err)) {
      rc = bench_error("%s", err);
    } else {
      x->run.meta.has_rounds = 1;
      x->run.meta.rounds = (long)o->rounds;
      x->run.meta.check = o->check != 0;
      x->run.meta.beside_compute = o->beside != 0;
      ar_header(x);
    }
  }
  if (!bench_rank0_ok(x->boot, !rc)) return 1;
  return bench_run_world(&x->run, x->boot, bind_desc) ? 1 : 0;
}

/* Every transport's communicator, open for the whole run so that the cells can take turns, and
 * its cells (an algorithm the transport or build cannot run is said and skipped). 0, or 1 after
 * saying why. */
static int ar_open(ar_ctx *x, ar_run *u) {
  const ar_opts *o = x->o;
  coll_err e = {{0}};
  for (int t = 0; t < o->ntransports; t++) {
    coll_comm_opts co = {.transport = o->transports[t], .timeout_ms = (int)o->r.timeout_s * 1000,
                         .tcp_streams = (int)o->r.tcp_streams, .chunk_bytes = (size_t)o->chunk,
                         .tcp_cc = o->r.tcp_cc, .no_peer_map = o->no_peer_map,
                         .no_spin = o->no_spin || o->beside, /* a spinning wait would take the load's core */
                         .model = ar_model_for(x, o->transports[t]), .devices = o->devices};
    int may_hier = 0;
    for (int a = 0; a < o->nalgos; a++)
      may_hier |= o->algos[a].kind == COLL_ALGO_HIER || o->algos[a].kind == COLL_ALGO_AUTO;
    bench_comm_intra(&o->r, &co, may_hier);
    if (coll_comm_open(&u->comms[t], x->boot, &co, &e)) return ar_fail(&e);
    /* the run's buffer from a communicator whose ranks map it: ucx's own, else one inside hosts */
    if (coll_comm_maps(u->comms[t]) && (!u->buf_owner || o->transports[t] == COLL_UCX)) u->buf_owner = u->comms[t];
    /* a GPU communicator has its own buffer on the device; the host one stages its data */
    if (coll_comm_device(u->comms[t]) >= 0 &&
        !(u->dbufs[t] = coll_mem_alloc(u->comms[t], (size_t)o->max_bytes + 8, &e)))
      return ar_fail(&e);
    char gfabric[80] = "";
    if (u->dbufs[t] && x->rank == 0) ar_gpu_fabric(u->comms[t], gfabric, sizeof gfabric);
    for (int a = 0; a < o->nalgos; a++) {
      ar_cell *k = &u->cells[u->ncells];
      k->c = u->comms[t];
      k->dbuf = u->dbufs[t];
      snprintf(k->gfabric, sizeof k->gfabric, "%s", gfabric);
      k->tk = o->transports[t];
      k->algo = o->algos[a];
      coll_algo_format(k->aname, sizeof k->aname, k->algo);
      if (coll_algo_supported(k->c, k->algo)) {
        k->is_peer = o->has_peer && k->tk == o->peer_tk && ar_algo_eq(k->algo, o->peer_algo);
        u->ncells++;
      } else if (x->rank == 0) {
        printf("# skipping %s/%s: %s\n", coll_transport_name(k->tk), k->aname,
               k->algo.kind == COLL_ALGO_NATIVE ? "this transport has no native all-reduce"
                                                : "not available in this build");
        fflush(stdout);
      }
    }
  }
  return 0;
}

/* The run's one buffer: from the ucx communicator when there is one (ucx ranks on one host then
 * map each other's copy: coll_mem_alloc); other transports use it as plain memory. 0, or 1
 * after saying why. */
static int ar_buffer(ar_ctx *x, ar_run *u) {
  coll_err e = {{0}};
  size_t maxbytes = (size_t)x->o->max_bytes + 8;
  /* every other communicator whose ranks map memory gets its own (a region is one context's) */
  for (int t = 0; t < x->o->ntransports; t++) {
    if (u->comms[t] == u->buf_owner || !coll_comm_maps(u->comms[t]) || u->dbufs[t]) continue;
    if (!(u->mbufs[t] = coll_mem_alloc(u->comms[t], maxbytes, &e))) return ar_fail(&e);
    for (int i = 0; i < u->ncells; i++)
      if (u->cells[i].c == u->comms[t]) u->cells[i].mbuf = u->mbufs[t];
  }
  if (u->buf_owner) return (u->buf = coll_mem_alloc(u->buf_owner, maxbytes, &e)) ? 0 : ar_fail(&e);
  if (!posix_memalign(&u->buf, 64, maxbytes)) return 0;
  u->buf = NULL;
  return bench_error("rank %d: cannot allocate %zu bytes", x->rank, maxbytes);
}

static void ar_run_close(const ar_opts *o, ar_run *u) {
  if (u->buf_owner)
    coll_mem_free(u->buf_owner, u->buf);
  else
    free(u->buf);
  for (int t = 0; t < o->ntransports; t++) {
    if (u->dbufs[t]) coll_mem_free(u->comms[t], u->dbufs[t]);
    if (u->mbufs[t]) coll_mem_free(u->comms[t], u->mbufs[t]);
    if (u->comms[t]) coll_comm_close(u->comms[t]);
  }
  for (int i = 0; i < AR_MAX_LIST * AR_MAX_LIST; i++) free(u->cells[i].times);
}

static int ar_rank_main(const ar_opts *o, int argc, char **argv) {
  ar_ctx x = {.o = o};
  coll_err e = {{0}};
  if (coll_boot_open(&x.boot, COLL_BOOT_AUTO, o->want_mpi, (int)o->r.timeout_s * 1000, &e)) return ar_fail(&e);
  x.rank = coll_boot_rank(x.boot);
  x.size = coll_boot_size(x.boot);
  x.per_host = bench_ranks_per_host(x.boot);
  ar_run *u = calloc(1, sizeof *u);
  int rc = u ? ar_begin(&x, argc, argv) : bench_error("out of memory");
  int failed = 1, agreed = 0; /* agreed: every rank stops alike */
  if (!rc) {
    /* every rank reads the model: auto must pick alike everywhere */
    if (o->model_from) {
      char err[1024];
      if (bench_costmodel_load(&x.model, o->model_from, x.rank != 0, err, sizeof err))
        rc = bench_error("rank %d: --model-from: %s", x.rank, err);
    }
    if (!rc) rc = ar_open(&x, u);
    if (!rc && (rc = ar_cells_check(&x, u->cells, u->ncells))) agreed = 1;
    if (!rc) rc = ar_buffer(&x, u);
    for (int t = 0; t < o->ntransports && !rc && x.rank == 0; t++) { /* after the buffer: +rkey_ptr */
      res_run_add_fabric(&x.run.meta, coll_transport_name(o->transports[t]), coll_comm_fabric(u->comms[t]));
      bench_record_intra(&x.run, o->transports[t], u->comms[t]);
      bench_run_write(&x.run);
    }
    int wrong = 0;
    ar_load load = {0};
    if (!rc && o->beside) {
      if (pthread_create(&load.th, NULL, ar_load_main, &load))
        rc = bench_error("rank %d: cannot start the --beside-compute thread", x.rank);
      else
        x.load = &load;
    }
    if (!rc) rc = ar_sweep(&x, u->cells, u->ncells, u->buf, &wrong);
    if (x.load) {
      atomic_store(&load.stop, 1);
      pthread_join(load.th, NULL);
      x.load = NULL;
    }
    if (x.rank == 0 && x.tab) {
      x.run.meta.status = rc ? "failed" : wrong ? "wrong results" : "ok";
      bench_run_write(&x.run);
      printf("# %s: %s\n",
             wrong ? "FAILED: wrong results at some sizes" : rc ? "FAILED" : o->check ? "all results verified" : "done, results not checked (--no-check)",
             x.run.dir);
    }
    failed = rc != 0 && !agreed;
    /* rank 0 has said why and written run.json before any rank exits: the launcher stops the
     * others at the first that ends */
    if (agreed && coll_boot_barrier(x.boot, &e)) failed = 1;
    if (!rc && wrong) rc = 1;
  }
  if (u) ar_run_close(o, u);
  free(u);
  if (x.rank == 0) {
    res_table_close(x.tab);
    if (x.run.meta.base) bench_run_end(&x.run);
  }
  res_costmodel_free(&x.model);
  /* a failure (not wrong results) may leave a rank dead or stopped: MPI must not wait for it */
  if (failed) coll_boot_abort(x.boot);
  else coll_boot_close(x.boot);
  return rc;
}

int bench_cmd_allreduce(int argc, char **argv) {
  ar_opts o;
  int rc = ar_parse(&o, argc, argv);
  if (rc) return rc == 1 ? 0 : rc; /* 1: --help */
  if (o.r.nranks > 0) return bench_rank_relaunch(&o.r, argc, argv, o.want_mpi);
  return ar_rank_main(&o, argc, argv);
}
