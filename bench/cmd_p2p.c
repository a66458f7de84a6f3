/* fabench p2p: point-to-point latency (ping-pong, one-way = round trip / 2) and streaming
 * bandwidth, one way (a window in flight, then a small ack, as osu_bw) and both ways (as
 * osu_bibw), over sizes, for one ordered rank pair or every pair in turn (the N x N matrix finds
 * a slow link or host). Every rank runs this; rank 0 writes the run directory. Each (pair, test,
 * size) step: the source times, the receivers check the seeded pattern, the source sends its
 * figures to rank 0, and all ranks meet in a barrier, so ranks outside the pair wait one step at
 * most. --pairs rounds measures every pair too, N/2 disjoint pairs at once: the rounds of a
 * round-robin tournament (N-1 rounds cover every pair, each both ways), so a cluster's matrix
 * takes N-1 steps per size instead of N(N-1). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "coll.h"
#include "res.h"
#include "topo.h"
#include "util.h"

#define P2P_MAX_TRANSPORTS 4
#define P2P_MAX_WINDOW 4096
#define P2P_MAX_ITERS 200000
#define P2P_MIN_ITERS 3
#define P2P_WINDOW_BYTES_CAP ((uint64_t)64 << 20) /* in flight per bw iteration, at most */
#define P2P_SEED 0x70327021u
#define P2P_MAX_MSG_BYTES (1ull << 30)
#define P2P_MAX_COPY_BYTES (4ull << 30) /* a GPU copy's bytes: nvbandwidth's largest sizes too */

/* latency, bw, bibw: messages between ranks. d2d, h2d, d2h, peer: the GPU's copy ceilings
 * (--transport nccl), measured by rank 0 on its device, in coll_copy_kind's order; -sm: the
 * same copies by the SMs. */
enum {
  P2P_LAT, P2P_BW, P2P_BIBW, P2P_NMSG, P2P_D2D = P2P_NMSG, P2P_H2D, P2P_D2H, P2P_PEER, P2P_D2D_SM,
  P2P_H2D_SM, P2P_D2H_SM, P2P_NTESTS
};
_Static_assert(P2P_D2H_SM - P2P_D2D == COLL_COPY_D2H_SM - COLL_COPY_D2D, "copy tests follow coll_copy_kind");
static const char *const p2p_test_names[P2P_NTESTS] = {"latency", "bw",  "bibw",   "d2d",    "h2d",
                                                       "d2h",     "peer", "d2d-sm", "h2d-sm", "d2h-sm"};

/* Message tags, each checked by the transports against the posted receive. */
enum { TAG_DATA = 1, TAG_ACK, TAG_ITERS, TAG_ERRS, TAG_RESULT };

enum { O_TRANSPORT = 256, O_PAIRS, O_TESTS, O_MIN, O_MAX, O_STEP, O_ITERS, O_TIME, O_WARMUP, O_WINDOW, O_MATRIX };

/* Every flag once: getopt_long's options, --help, and the default (set through the same
 * parsing as a given value). */
static const bench_flag p2p_flags[] = {
    {"n", "N", NULL, "start N local ranks (default: the launcher's world)", 'n'},
    {"transport", "LIST", "tcp", "tcp,ucx,mpi,nccl", O_TRANSPORT},
    {"pairs", "S,D|all|rounds", "0,1", "the ordered pair measured; all: every ordered pair in turn; rounds: every "
                                       "pair, N/2 disjoint pairs at once in the N-1 rounds of a round-robin "
                                       "tournament, each pair both ways (all and rounds write p2p_matrix.csv)",
     O_PAIRS},
    {"tests", "LIST", "latency,bw,bibw", "latency,bw,bibw; with --transport nccl also the GPU's copy ceilings: d2d "
                                         "(within its memory; GB/s counts bytes read plus written), h2d, d2h "
                                         "(pinned host memory), peer (to the next GPU of the host); d2d-sm, "
                                         "h2d-sm, d2h-sm: the same copies by a kernel instead of the copy engines",
     O_TESTS},
    {"min-bytes", "B", "1", "smallest message, K/M/G suffixes", O_MIN},
    {"max-bytes", "B", "4M", "largest message (at most 1G, GPU copies 4G)", O_MAX},
    {"step-factor", "F", "2", "size multiplier between steps, 1.01 to 1024", O_STEP},
    {"iters", "N", NULL, "iterations per size (default: adapt to --time-per-size)", O_ITERS},
    {"time-per-size", "S", "0.2", "seconds measured per size", O_TIME},
    {"warmup", "N", NULL, "warm-up iterations per size (default: 10 latency, 2 bw/bibw)", O_WARMUP},
    {"window", "N", "64", "messages in flight per bw/bibw iteration (capped so at most 64 MiB are in flight)",
     O_WINDOW},
    {"matrix-bytes", "B", NULL, "message size of the bw and bibw matrices: the largest size swept up to B (default: "
                                "the largest)", O_MATRIX},
    BENCH_FLAG_TCP_STREAMS,
    BENCH_FLAG_TCP_CC,
    BENCH_FLAG_TIMEOUT,
    BENCH_FLAG_TELEMETRY,
    BENCH_FLAG_EMULATE,
    BENCH_FLAG_EMULATE_SLOW,
    {"bind", "HOW", NULL, "auto|none|core|numa|nic|gpu (default: auto, a core each where the host's ranks fit its "
                          "cores and no launcher bound them)", BENCH_O_BIND},
    {"mpirun-args", "ARGS", NULL, "extra mpirun arguments (with -n and --transport mpi)", BENCH_O_MPIRUN},
    {"intra-transport", "T", NULL, "refused: p2p runs no hier", BENCH_O_INTRA},
    {"out", "DIR", NULL, "run directory (default: results/<UTC>-p2p)", BENCH_O_OUT},
};
#define P2P_NFLAGS (sizeof p2p_flags / sizeof p2p_flags[0])

static const char *p2p_usage(void) {
  static char *text; /* made once from the table; the process's for its life */
  if (!text) text = bench_flags_usage("usage: fabench p2p [options]\n", p2p_flags, P2P_NFLAGS);
  return text ? text : "usage: fabench p2p [options] (--help: out of memory)\n";
}

typedef struct {
  bench_rank_opts r; /* -n, --emulate, --timeout, --out, --tcp-*, ... */
  coll_transport_kind transports[P2P_MAX_TRANSPORTS];
  int ntransports;
  int want_mpi;
  int pairs_all, src, dst;
  int rounds;            /* --pairs rounds: every pair (pairs_all), N/2 at once */
  int tests[P2P_NTESTS]; /* which are on */
  int messages;          /* latency, bw or bibw over a host transport: messages of max_bytes */
  uint64_t min_bytes, max_bytes, matrix_bytes;
  double step_factor;
  long iters;     /* 0: adaptive */
  double time_per_size;
  long warmup;    /* -1: per test default */
  long window;
} p2p_opts;

/* What the source sends rank 0 for one step. */
typedef struct {
  util_stats t;            /* us per message, one way */
  double gbps, gbps_mean; /* GB/s (1e9 B/s) */
  int64_t iters, window, errors;
  char fabric[128];
} p2p_result;

typedef struct {
  const p2p_opts *o;
  coll_comm *c;
  int rank, size;
  unsigned char *sbuf, *rbuf, *expect; /* max_bytes each */
  coll_req *reqs;                      /* 2 * window + 2 */
  double *samples;                     /* P2P_MAX_ITERS */
  int64_t bad_bytes;                   /* rank 0: bytes that arrived wrong, over the run */
  int corrupt;                         /* test hook: damage what arrived before checking */
  bench_session *s;                    /* rank 0's run directory; the telemetry: a mark per
                                          transport, its bound said */
  coll_err e;
} p2p_ctx;

/* Rank 0's side: the tables, the matrices. */
typedef struct {
  res_table *tab, *matrix;
  double *bw, *bibw, *lat; /* size x size, per transport */
  uint64_t bw_bytes, bibw_bytes, lat_bytes;
} p2p_out;

/* ---- flags ---- */

/* --pairs S,D or all. 0, or the exit status of a usage error. */
static int p2p_parse_pairs(p2p_opts *o, const char *v) {
  char *items[2], *store = NULL;
  if (!strcmp(v, "all") || !strcmp(v, "rounds")) {
    o->pairs_all = 1;
    o->rounds = !strcmp(v, "rounds");
  } else {
    long s, d;
    int n = bench_split_list(v, items, 2, &store);
    int ok = n == 2 && !bench_parse_int(items[0], 0, 1 << 20, &s) &&
             !bench_parse_int(items[1], 0, 1 << 20, &d) && s != d;
    free(store);
    if (!ok) return bench_usage_error(p2p_usage(), "bad --pairs '%s' (S,D with S != D, all or rounds)", v);
    o->pairs_all = o->rounds = 0;
    o->src = (int)s;
    o->dst = (int)d;
  }
  return 0;
}

/* --tests LIST: the tests to run, by name. 0, or the exit status of a usage error. */
static int p2p_parse_tests(p2p_opts *o, const char *v) {
  char *items[16], *store = NULL;
  int n = bench_split_list(v, items, 16, &store);
  if (n <= 0) {
    free(store);
    return bench_usage_error(p2p_usage(), "bad --tests '%s'", v);
  }
  memset(o->tests, 0, sizeof o->tests);
  for (int i = 0; i < n; i++) {
    int t = 0;
    while (t < P2P_NTESTS && strcmp(items[i], p2p_test_names[t])) t++;
    if (t == P2P_NTESTS) {
      int rc = bench_usage_error(p2p_usage(), "unknown test '%s' (latency, bw, bibw, d2d, h2d, d2h, peer, "
                                 "d2d-sm, h2d-sm, d2h-sm)", items[i]);
      free(store);
      return rc;
    }
    o->tests[t] = 1;
  }
  free(store);
  return 0;
}

/* What the flags ask together, once read: bounds that hold a size, a test that can run on the
 * transports given, and a pair within -n's ranks. 0, or the exit status of a usage error. */
static int p2p_parse_check(p2p_opts *o) {
  if (o->min_bytes > o->max_bytes)
    return bench_usage_error(p2p_usage(), "--min-bytes is larger than --max-bytes");
  /* messages run on host buffers, the copy tests on a GPU's: a run that measures nothing is
   * refused here, not ended with an empty table and status 0 */
  int msg = o->tests[P2P_LAT] || o->tests[P2P_BW] || o->tests[P2P_BIBW], copies = 0, host = 0, gpu = 0;
  for (int t = P2P_NMSG; t < P2P_NTESTS; t++) copies |= o->tests[t];
  for (int i = 0; i < o->ntransports; i++) {
    gpu |= o->transports[i] == COLL_NCCL;
    host |= o->transports[i] != COLL_NCCL;
  }
  if (!(msg && host) && !(copies && gpu))
    return bench_usage_error(p2p_usage(), copies ? "--tests: the GPU copy tests need --transport nccl, and latency, "
                                                 "bw and bibw a host transport: nothing to measure"
                                               : "--tests: latency, bw and bibw run on host buffers, not over "
                                                 "nccl: nothing to measure");
  o->messages = msg && host;
  if (o->messages && o->max_bytes > P2P_MAX_MSG_BYTES)
    return bench_usage_error(p2p_usage(), "--max-bytes: latency, bw and bibw send messages of 1G at most (the GPU "
                                        "copy tests go to 4G)");
  if (o->pairs_all == 0 && o->r.nranks && (o->src >= o->r.nranks || o->dst >= o->r.nranks))
    return bench_usage_error(p2p_usage(), "--pairs %d,%d needs at least %d ranks", o->src, o->dst,
                             (o->src > o->dst ? o->src : o->dst) + 1);
  return 0;
}

/* One flag's value (given, or its default). 0; 2 after a usage error; -1: a flag every rank
 * command shares. */
static int p2p_set(p2p_opts *o, int ch, const char *v, const char **tl) {
  switch (ch) {
  case O_TRANSPORT: *tl = v; return 0;
  case O_PAIRS: return p2p_parse_pairs(o, v);
  case O_TESTS: return p2p_parse_tests(o, v);
  case O_MIN:
    if (bench_parse_size(v, &o->min_bytes) || o->min_bytes < 1) return bench_usage_error(p2p_usage(), "bad --min-bytes '%s'", v);
    return 0;
  case O_MAX:
    if (bench_parse_size(v, &o->max_bytes) || o->max_bytes < 1 || o->max_bytes > P2P_MAX_COPY_BYTES)
      return bench_usage_error(p2p_usage(), "bad --max-bytes '%s' (1 to 1G; the GPU copy tests to 4G)", v);
    return 0;
  case O_MATRIX:
    if (bench_parse_size(v, &o->matrix_bytes) || o->matrix_bytes < 1)
      return bench_usage_error(p2p_usage(), "bad --matrix-bytes '%s'", v);
    return 0;
  case O_STEP:
    if (bench_parse_double(v, 1.01, 1024, &o->step_factor))
      return bench_usage_error(p2p_usage(), "bad --step-factor '%s' (1.01 to 1024)", v);
    return 0;
  case O_ITERS:
    if (bench_parse_int(v, 1, P2P_MAX_ITERS, &o->iters))
      return bench_usage_error(p2p_usage(), "bad --iters '%s' (1 to %d)", v, P2P_MAX_ITERS);
    return 0;
  case O_TIME:
    if (bench_parse_double(v, 0.0001, 3600, &o->time_per_size)) return bench_usage_error(p2p_usage(), "bad --time-per-size '%s'", v);
    return 0;
  case O_WARMUP:
    if (bench_parse_int(v, 0, 100000, &o->warmup)) return bench_usage_error(p2p_usage(), "bad --warmup '%s'", v);
    return 0;
  case O_WINDOW:
    if (bench_parse_int(v, 1, P2P_MAX_WINDOW, &o->window))
      return bench_usage_error(p2p_usage(), "bad --window '%s' (1 to %d)", v, P2P_MAX_WINDOW);
    return 0;
  default: return -1;
  }
}

static int p2p_parse(p2p_opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  bench_rank_opts_init(&o->r);
  o->warmup = -1; /* per test */
  const char *tl = NULL;
  int rc = 0;
  for (size_t i = 0; i < P2P_NFLAGS && !rc; i++) { /* the defaults, as given values parse */
    const bench_flag *f = &p2p_flags[i];
    if (!f->def || !f->arg) continue;
    optarg = (char *)f->def;
    rc = p2p_set(o, f->code, f->def, &tl);
    if (rc < 0) rc = bench_rank_flag(&o->r, f->code, argv, p2p_usage());
  }
  if (rc) return bench_error("internal: a default of p2p's flags does not parse");
  static const struct option extra[] = {{"ranks", 1, 0, 'n'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  struct option *longs = bench_flags_options(p2p_flags, P2P_NFLAGS, extra);
  if (!longs) return bench_error("out of memory");
  opterr = 0;
  optind = 1;
  int ch;
  while (!rc && (ch = getopt_long(argc, argv, "+:n:h", longs, NULL)) != -1) {
    rc = p2p_set(o, ch, optarg, &tl);
    if (rc < 0) rc = bench_rank_flag(&o->r, ch, argv, p2p_usage());
  }
  free(longs);
  if (rc) return rc;
  rc = bench_rank_check(&o->r, argc, argv, p2p_usage());
  if (!rc && o->r.has_intra) /* accepted and dropped, it would look applied */
    return bench_usage_error(p2p_usage(), "--intra-transport: p2p runs no hier (allreduce and train do)");
  if (!rc) rc = bench_parse_transports(tl, o->transports, P2P_MAX_TRANSPORTS, &o->ntransports, &o->want_mpi, p2p_usage());
  if (rc) return rc;
  return p2p_parse_check(o);
}

/* ---- the data: a seeded pattern per (sender, receiver, size), checked by the receiver ---- */

static void p2p_pattern(unsigned char *buf, uint64_t bytes, int from, int to) {
  uint64_t x = P2P_SEED ^ ((uint64_t)from << 40) ^ ((uint64_t)to << 20) ^ bytes;
  x = x * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < bytes; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
    uint64_t k = bytes - i < 8 ? bytes - i : 8;
    memcpy(buf + i, &x, k);
  }
}

/* Receive buffer set so that every byte differs from what should arrive. */
static void p2p_poison(unsigned char *rbuf, const unsigned char *expect, uint64_t bytes) {
  for (uint64_t i = 0; i < bytes; i++) rbuf[i] = (unsigned char)~expect[i];
}

static int64_t p2p_check(const unsigned char *rbuf, const unsigned char *expect, uint64_t bytes) {
  if (!memcmp(rbuf, expect, bytes)) return 0;
  int64_t bad = 0;
  for (uint64_t i = 0; i < bytes; i++) bad += rbuf[i] != expect[i];
  return bad;
}

/* ---- one iteration of each test, on either side of the pair ---- */

/* latency: the source sends and waits for the echo; the destination echoes. */
static int p2p_iter_lat(p2p_ctx *x, int src, int peer, uint64_t bytes) {
  coll_req *r = x->reqs;
  if (x->rank == src) {
    if (coll_irecv(x->c, peer, x->rbuf, bytes, TAG_DATA, &r[0], &x->e) ||
        coll_isend(x->c, peer, x->sbuf, bytes, TAG_DATA, &r[1], &x->e) ||
        coll_waitall(x->c, r, 2, &x->e))
      return -1;
  } else {
    if (coll_irecv(x->c, peer, x->rbuf, bytes, TAG_DATA, &r[0], &x->e) ||
        coll_waitall(x->c, r, 1, &x->e) ||
        coll_isend(x->c, peer, x->sbuf, bytes, TAG_DATA, &r[1], &x->e) ||
        coll_waitall(x->c, &r[1], 1, &x->e))
      return -1;
  }
  return 0;
}

/* bw: the source streams `window` messages and waits for a one-byte ack of the last one. */
static int p2p_iter_bw(p2p_ctx *x, int src, int peer, uint64_t bytes, int window) {
  coll_req *r = x->reqs;
  unsigned char ack = 0;
  if (x->rank == src) {
    if (coll_irecv(x->c, peer, &ack, 1, TAG_ACK, &r[window], &x->e)) return -1;
    for (int i = 0; i < window; i++)
      if (coll_isend(x->c, peer, x->sbuf, bytes, TAG_DATA, &r[i], &x->e)) return -1;
    return coll_waitall(x->c, r, window + 1, &x->e);
  }
  for (int i = 0; i < window; i++)
    if (coll_irecv(x->c, peer, x->rbuf, bytes, TAG_DATA, &r[i], &x->e)) return -1;
  if (coll_waitall(x->c, r, window, &x->e)) return -1;
  if (coll_isend(x->c, peer, &ack, 1, TAG_ACK, &r[0], &x->e)) return -1;
  return coll_waitall(x->c, r, 1, &x->e);
}

/* bibw: both sides stream a window at once. */
static int p2p_iter_bibw(p2p_ctx *x, int peer, uint64_t bytes, int window) {
  coll_req *r = x->reqs;
  for (int i = 0; i < window; i++)
    if (coll_irecv(x->c, peer, x->rbuf, bytes, TAG_DATA, &r[i], &x->e)) return -1;
  for (int i = 0; i < window; i++)
    if (coll_isend(x->c, peer, x->sbuf, bytes, TAG_DATA, &r[window + i], &x->e)) return -1;
  return coll_waitall(x->c, r, 2 * window, &x->e);
}

static int p2p_iter(p2p_ctx *x, int test, int src, int peer, uint64_t bytes, int window) {
  switch (test) {
  case P2P_LAT: return p2p_iter_lat(x, src, peer, bytes);
  case P2P_BW: return p2p_iter_bw(x, src, peer, bytes, window);
  default: return p2p_iter_bibw(x, peer, bytes, window);
  }
}

static int p2p_window(const p2p_opts *o, int test, uint64_t bytes) {
  if (test == P2P_LAT) return 1;
  uint64_t cap = P2P_WINDOW_BYTES_CAP / bytes;
  if (cap < 1) cap = 1;
  return (int)((uint64_t)o->window < cap ? (uint64_t)o->window : cap);
}

/* One step on a rank of the pair. The source fills *res. */
static int p2p_step(p2p_ctx *x, int test, int src, int dst, uint64_t bytes, p2p_result *res) {
  const p2p_opts *o = x->o;
  int me = x->rank, peer = me == src ? dst : src;
  int window = p2p_window(o, test, bytes);
  int receives = test != P2P_BW || me == dst; /* does this side receive data? */
  long warm = o->warmup >= 0 ? o->warmup : test == P2P_LAT ? 10 : 2;
  coll_req *r = x->reqs;

  p2p_pattern(x->sbuf, bytes, me, peer);
  if (receives) p2p_pattern(x->expect, bytes, peer, me);

  double t0 = util_now();
  for (long i = 0; i < warm; i++)
    if (p2p_iter(x, test, src, peer, bytes, window)) return -1;
  double warm_s = util_now() - t0;

  /* the source chooses the count from the warm-up and tells the destination */
  int64_t iters = o->iters;
  if (!iters) {
    if (me == src) {
      double per = warm > 0 ? warm_s / (double)warm : 0;
      if (warm == 0) { /* time one iteration to have a figure */
        t0 = util_now();
        if (p2p_iter(x, test, src, peer, bytes, window)) return -1;
        per = util_now() - t0;
      }
      double want = per > 0 ? o->time_per_size / per : P2P_MAX_ITERS;
      iters = want < P2P_MIN_ITERS ? P2P_MIN_ITERS : want > P2P_MAX_ITERS ? P2P_MAX_ITERS : (int64_t)want;
      if (coll_isend(x->c, peer, &iters, sizeof iters, TAG_ITERS, &r[0], &x->e)) return -1;
    } else {
      if (warm == 0 && p2p_iter(x, test, src, peer, bytes, window)) return -1;
      if (coll_irecv(x->c, peer, &iters, sizeof iters, TAG_ITERS, &r[0], &x->e)) return -1;
    }
    if (coll_waitall(x->c, r, 1, &x->e)) return -1;
    if (iters < 1 || iters > P2P_MAX_ITERS)
      return bench_error("rank %d: bad iteration count %lld from rank %d", me, (long long)iters,
                         peer),
             -1;
  }

  if (receives) p2p_poison(x->rbuf, x->expect, bytes);
  double total = 0;
  for (int64_t i = 0; i < iters; i++) {
    double a = util_now();
    if (p2p_iter(x, test, src, peer, bytes, window)) return -1;
    double t = util_now() - a;
    total += t;
    x->samples[i] = t;
  }
  /* FABENCH_TEST_CORRUPT: the tests' proof that the check can fail (one byte flipped) */
  if (receives && x->corrupt) x->rbuf[bytes / 2] ^= 0x40;
  int64_t errors = receives ? p2p_check(x->rbuf, x->expect, bytes) : 0;

  /* the destination's count of bad bytes goes to the source, which reports the step */
  if (me == dst) {
    if (coll_isend(x->c, peer, &errors, sizeof errors, TAG_ERRS, &r[0], &x->e) ||
        coll_waitall(x->c, r, 1, &x->e))
      return -1;
    return 0;
  }
  int64_t theirs = 0;
  if (coll_irecv(x->c, peer, &theirs, sizeof theirs, TAG_ERRS, &r[0], &x->e) ||
      coll_waitall(x->c, r, 1, &x->e))
    return -1;

  /* per-message one-way times in us: a round trip is two messages; a window is `window`
   * messages one after another (in each direction at once for bibw) */
  double div = test == P2P_LAT ? 2.0 : (double)window;
  for (int64_t i = 0; i < iters; i++) x->samples[i] = x->samples[i] * 1e6 / div;
  util_stats st;
  util_stats_compute(&st, x->samples, (size_t)iters);
  double dirs = test == P2P_BIBW ? 2.0 : 1.0;
  memset(res, 0, sizeof *res);
  res->t = st;
  res->gbps = st.p50 > 0 ? dirs * (double)bytes / (st.p50 * 1e3) : 0;
  res->gbps_mean = total > 0 ? dirs * (double)bytes * div * (double)iters / total / 1e9 : 0;
  res->iters = iters;
  res->window = window;
  res->errors = errors + theirs;
  snprintf(res->fabric, sizeof res->fabric, "%s", coll_comm_fabric(x->c));
  return 0;
}

/* ---- rank 0's output ---- */

static void p2p_print_header(const char *transport, const char *fabric) {
  printf("# transport %s, fabric %s (latency: one-way; bw, bibw: GB/s = 1e9 B/s)\n", transport,
         fabric);
  printf("%-8s %4s %4s %11s %8s %6s %10s %10s %10s %9s %6s\n", "test", "src", "dst", "bytes",
         "iters", "window", "t_min_us", "t_p50_us", "t_p99_us", "GB/s", "errors");
}

static int p2p_row(p2p_out *po, const p2p_ctx *x, const char *fabric, coll_transport_kind tk,
                   int test, int src, int dst, uint64_t bytes, const p2p_result *res) {
  char err[512];
  res_p2p_row row;
  res_row_init(res_schema_p2p(), &row);
  row.run_id = x->s->run.run_id;
  row.schema = RES_SCHEMA_VERSION;
  row.ranks = x->size;
  row.fabric = fabric;
  row.transport = coll_transport_name(tk);
  row.test = p2p_test_names[test];
  row.src = src;
  row.dst = dst;
  row.bytes = (int64_t)bytes;
  row.iters = res->iters;
  row.t_min_us = res->t.min;
  row.t_p50_us = res->t.p50;
  row.t_p99_us = res->t.p99;
  row.t_max_us = res->t.max;
  row.gbps = res->gbps;
  row.host = x->s->run.host;
  row.topo_hash = x->s->run.topo_hash;
  row.window = res->window;
  row.t_mean_us = res->t.mean;
  row.t_stddev_us = res->t.stddev;
  row.gbps_mean = res->gbps_mean;
  row.gbit_s = res->gbps * 8;
  row.errors = res->errors;
  row.src_host = coll_comm_host(x->c, src);
  row.dst_host = coll_comm_host(x->c, dst);
  row.link = res->fabric;
  if (res_table_put(po->tab, &row, err, sizeof err)) return bench_error("%s", err), -1;
  printf("%-8s %4d %4d %11llu %8lld %6lld %10.2f %10.2f %10.2f %9.3f %6lld\n",
         p2p_test_names[test], src, dst, (unsigned long long)bytes, (long long)res->iters,
         (long long)res->window, res->t.min, res->t.p50, res->t.p99, res->gbps,
         (long long)res->errors);
  fflush(stdout);
  return 0;
}

/* Appends the N x N matrices to p2p_matrix.csv, one row per metric and ordered pair (the
 * diagonal has none; a pair not measured has an empty value). */
static int p2p_matrix_write(p2p_out *po, const p2p_ctx *x, const char *transport,
                            const char *fabric, int n) {
  const struct {
    const char *metric;
    const double *m;
    uint64_t bytes;
  } blocks[3] = {{"bw_gbps", po->bw, po->bw_bytes},
                 {"bibw_gbps", po->bibw, po->bibw_bytes},
                 {"latency_us", po->lat, po->lat_bytes}};
  char err[512];
  for (int k = 0; k < 3; k++) {
    if (!blocks[k].bytes) continue;
    for (int s = 0; s < n; s++)
      for (int d = 0; d < n; d++) {
        if (s == d) continue;
        res_p2p_matrix_row row;
        res_row_init(res_schema_p2p_matrix(), &row);
        row.run_id = x->s->run.run_id;
        row.schema = RES_SCHEMA_VERSION;
        row.ranks = n;
        row.transport = transport;
        row.fabric = fabric;
        row.metric = blocks[k].metric;
        row.bytes = (int64_t)blocks[k].bytes;
        row.src = s;
        row.dst = d;
        row.value = blocks[k].m[s * n + d];
        row.src_host = coll_comm_host(x->c, s);
        row.dst_host = coll_comm_host(x->c, d);
        if (res_table_put(po->matrix, &row, err, sizeof err)) return bench_error("%s", err), -1;
      }
  }
  return 0;
}

static void p2p_matrix_print1(const char *what, const double *m, uint64_t bytes, int n) {
  if (!bytes) return;
  printf("# %s matrix at %llu bytes, GB/s (row: source, column: destination)\n", what,
         (unsigned long long)bytes);
  printf("%6s", "src\\dst");
  for (int d = 0; d < n; d++) printf(" %8d", d);
  printf("\n");
  for (int s = 0; s < n; s++) {
    printf("%7d", s);
    for (int d = 0; d < n; d++) {
      double v = m[s * n + d];
      if (s == d || isnan(v))
        printf(" %8s", "-");
      else
        printf(" %8.3f", v);
    }
    printf("\n");
  }
}

static void p2p_matrix_print(const p2p_out *po, int n) {
  p2p_matrix_print1("bandwidth", po->bw, po->bw_bytes, n);
  p2p_matrix_print1("bidirectional bandwidth", po->bibw, po->bibw_bytes, n);
}

/* ---- the GPU's copy ceilings (rank 0) ---- */

/* The host copies' best GB/s (best[test], 0 for the others) against what the GPU's PCIe link carries (from topo/). */
static void p2p_pcie_share(p2p_ctx *x, const double *best) {
  char err[256];
  topo_info *ti = NULL;
  int gen = -1, width = -1;
  double link = -1;
  if (topo_load(&ti, NULL, err, sizeof err) == 0)
    link = topo_gpu_pcie_gbs(ti, coll_comm_gpu(x->c, 0), &gen, &width);
  topo_free(ti);
  if (link <= 0) {
    printf("# the GPU's PCIe link is unknown to topo/ (%s): no share of it\n", coll_comm_gpu(x->c, 0));
    return;
  }
  printf("# PCIe Gen%d x%d carries %.1f GB/s each way; best of the sizes:", gen, width, link);
  for (int t = P2P_D2D; t < P2P_NTESTS; t++)
    if (best[t] > 0) printf(" %s %.1f (%.0f%%)", p2p_test_names[t], best[t], 100 * best[t] / link);
  printf("\n");
}

static int p2p_copies(p2p_ctx *x, p2p_out *po, const char *fabric, coll_transport_kind tk, int dev,
                      const uint64_t *sizes, int nsizes) {
  const p2p_opts *o = x->o;
  double best[P2P_NTESTS] = {0}; /* the host copies' */
  int host = 0;
  for (int test = P2P_NMSG; test < P2P_NTESTS; test++) {
    if (!o->tests[test]) continue;
    coll_copy_kind k = (coll_copy_kind)(COLL_COPY_D2D + (test - P2P_D2D));
    int within = k == COLL_COPY_D2D || k == COLL_COPY_D2D_SM, sm = k >= COLL_COPY_D2D_SM;
    int peer = dev + 1;
    for (int i = 0; i < nsizes; i++) {
      int64_t bad = 0;
      double per;
      /* a first short run sets the count for about --time-per-size */
      if (coll_copy_bench(x->c, k, peer, sizes[i], 3, x->samples, &bad, &x->e)) {
        if (k == COLL_COPY_PEER) { /* one GPU: nothing to copy to */
          printf("# peer skipped: %s\n", x->e.msg);
          x->e.msg[0] = '\0';
          break;
        }
        return -1;
      }
      per = (x->samples[0] + x->samples[1] + x->samples[2]) / 3;
      double want = per > 0 ? o->time_per_size / per : P2P_MAX_ITERS;
      int64_t iters = o->iters ? o->iters : want < P2P_MIN_ITERS ? P2P_MIN_ITERS : want > 10000 ? 10000 : (int64_t)want;
      if (coll_copy_bench(x->c, k, peer, sizes[i], (int)iters, x->samples, &bad, &x->e)) return -1;
      double total = 0;
      for (int64_t j = 0; j < iters; j++) total += x->samples[j], x->samples[j] *= 1e6;
      util_stats st;
      util_stats_compute(&st, x->samples, (size_t)iters);
      double traffic = within ? 2.0 : 1.0; /* a copy within one memory reads and writes */
      p2p_result res;
      memset(&res, 0, sizeof res);
      res.t = st;
      res.gbps = st.p50 > 0 ? traffic * (double)sizes[i] / (st.p50 * 1e3) : 0;
      res.gbps_mean = total > 0 ? traffic * (double)sizes[i] * (double)iters / total / 1e9 : 0;
      res.iters = iters;
      res.window = 1;
      res.errors = bad;
      if (k == COLL_COPY_PEER)
        snprintf(res.fabric, sizeof res.fabric, "gpu%d->gpu%d", dev, peer);
      else
        snprintf(res.fabric, sizeof res.fabric, "gpu%d %s%s", dev, within ? "memory" : "pcie pinned",
                 sm ? " by SMs" : "");
      if (p2p_row(po, x, fabric, tk, test, 0, 0, sizes[i], &res)) return -1;
      x->bad_bytes += bad;
      if (!within && k != COLL_COPY_PEER && res.gbps > best[test]) best[test] = res.gbps, host = 1;
    }
  }
  if (host) p2p_pcie_share(x, best);
  return 0;
}

/* The sources' figures to rank 0: src[k] sent res[k] (rank 0's own step is already there).
 * Collective over the step's sources and rank 0. */
static int p2p_gather(p2p_ctx *x, const int *src, p2p_result *res, int n) {
  coll_req one, *r = n > 1 ? calloc((size_t)n, sizeof *r) : &one;
  if (!r) return bench_error("rank %d: out of memory", x->rank), -1;
  int nr = 0, rc = 0;
  for (int k = 0; k < n && !rc; k++) {
    if (src[k] == 0) continue;
    if (x->rank == src[k]) rc = coll_isend(x->c, 0, &res[k], sizeof res[k], TAG_RESULT, &r[nr++], &x->e);
    if (x->rank == 0) rc = coll_irecv(x->c, src[k], &res[k], sizeof res[k], TAG_RESULT, &r[nr++], &x->e);
  }
  if (!rc && nr) rc = coll_waitall(x->c, r, nr, &x->e);
  if (r != &one) free(r);
  return rc;
}

/* Rank 0: one step's row, its matrices' entry and its wrong bytes. */
static int p2p_note(p2p_ctx *x, p2p_out *po, const char *fabric, coll_transport_kind tk, int test, int s, int d,
                    uint64_t bytes, p2p_result *res) {
  int n = x->size;
  res->fabric[sizeof res->fabric - 1] = '\0';
  if (p2p_row(po, x, fabric, tk, test, s, d, bytes, res)) return -1;
  if (test == P2P_BW && bytes == po->bw_bytes) po->bw[s * n + d] = res->gbps;
  if (test == P2P_BIBW && bytes == po->bibw_bytes) po->bibw[s * n + d] = res->gbps;
  if (test == P2P_LAT && bytes == po->lat_bytes) po->lat[s * n + d] = res->t.p50;
  x->bad_bytes += res->errors;
  if (res->errors)
    bench_error("%s %s %d->%d at %llu bytes: %lld bytes arrived wrong", coll_transport_name(tk), p2p_test_names[test], s, d,
                (unsigned long long)bytes, (long long)res->errors);
  return 0;
}

static int p2p_rounds_run(p2p_ctx *x, p2p_out *po, const char *fabric, coll_transport_kind tk, const uint64_t *sizes,
                          int nsizes, int *a, int *b, int *src, int *dst, p2p_result *res);

/* --pairs rounds: per round, each way, test and size, every pair of the round at once; then the
 * sources' figures go to rank 0, which writes them in pair order, and all ranks meet. */
static int p2p_rounds(p2p_ctx *x, p2p_out *po, const char *fabric, coll_transport_kind tk, const uint64_t *sizes,
                      int nsizes) {
  int n = x->size, me = x->rank;
  size_t m = (size_t)n / 2 + 1;
  int *a = calloc(m, sizeof *a), *b = calloc(m, sizeof *b), *src = calloc(m, sizeof *src), *dst = calloc(m, sizeof *dst);
  p2p_result *res = calloc(m, sizeof *res);
  int rc = a && b && src && dst && res ? p2p_rounds_run(x, po, fabric, tk, sizes, nsizes, a, b, src, dst, res)
                                       : (bench_error("rank %d: out of memory", me), -1);
  free(a);
  free(b);
  free(src);
  free(dst);
  free(res);
  return rc;
}

static int p2p_rounds_run(p2p_ctx *x, p2p_out *po, const char *fabric, coll_transport_kind tk, const uint64_t *sizes,
                          int nsizes, int *a, int *b, int *src, int *dst, p2p_result *res) {
  const p2p_opts *o = x->o;
  int n = x->size, me = x->rank;
  for (int r = 0; r < n - 1 + (n & 1); r++) {
    int np = bench_round_pairs(n, r, a, b);
    for (int way = 0; way < 2; way++) {
      int mine = -1;
      for (int k = 0; k < np; k++) {
        src[k] = way ? b[k] : a[k];
        dst[k] = way ? a[k] : b[k];
        if (me == src[k] || me == dst[k]) mine = k;
      }
      for (int test = 0; test < P2P_NMSG; test++) {
        if (!o->tests[test]) continue;
        for (int i = 0; i < nsizes; i++) {
          memset(res, 0, sizeof *res * (size_t)np);
          if (mine >= 0 && p2p_step(x, test, src[mine], dst[mine], sizes[i], &res[mine])) return -1;
          if (p2p_gather(x, src, res, np)) return -1;
          for (int k = 0; k < np && me == 0; k++)
            if (p2p_note(x, po, fabric, tk, test, src[k], dst[k], sizes[i], &res[k])) return -1;
          if (coll_barrier(x->c, &x->e)) return -1;
        }
      }
    }
  }
  return 0;
}

/* ---- the run on every rank ---- */

static int p2p_run_transport(p2p_ctx *x, p2p_out *po, coll_transport_kind tk, const uint64_t *sizes,
                             int nsizes) {
  const p2p_opts *o = x->o;
  int n = x->size, me = x->rank;
  const char *emu = getenv("FABENCH_FABRIC");
  char fabric[160];
  snprintf(fabric, sizeof fabric, "%s", emu && *emu ? emu : coll_comm_fabric(x->c));

  /* the sizes of the matrices: the largest swept size up to --matrix-bytes, and the smallest */
  uint64_t mat_bytes = sizes[nsizes - 1];
  if (o->matrix_bytes) {
    mat_bytes = sizes[0];
    for (int i = 0; i < nsizes; i++)
      if (sizes[i] <= o->matrix_bytes) mat_bytes = sizes[i];
  }
  int dev = coll_comm_device(x->c), copy_tests = 0, msg_tests = 1;
  for (int t = P2P_NMSG; t < P2P_NTESTS; t++) copy_tests |= o->tests[t];
  if (dev >= 0) { /* messages in GPU memory are all-reduce's business here (allreduce --transport nccl) */
    msg_tests = 0;
    if (me == 0 && (o->tests[P2P_LAT] || o->tests[P2P_BW] || o->tests[P2P_BIBW]))
      printf("# %s: latency, bw and bibw run on host buffers only; skipped\n", coll_transport_name(tk));
  } else if (copy_tests && me == 0) {
    printf("# %s: d2d, h2d, d2h and peer need GPU buffers (--transport nccl); skipped\n", coll_transport_name(tk));
  }
  if (me == 0) {
    p2p_print_header(coll_transport_name(tk), fabric);
    for (int i = 0; i < n * n; i++) po->bw[i] = po->bibw[i] = po->lat[i] = NAN;
    po->bw_bytes = o->tests[P2P_BW] ? mat_bytes : 0;
    po->bibw_bytes = o->tests[P2P_BIBW] ? mat_bytes : 0;
    if (o->pairs_all && o->matrix_bytes && o->matrix_bytes != mat_bytes && (po->bw_bytes || po->bibw_bytes))
      printf("# --matrix-bytes %llu is not a size of the sweep: the matrix is at %llu, the largest swept up to it\n",
             (unsigned long long)o->matrix_bytes, (unsigned long long)mat_bytes);
    po->lat_bytes = o->tests[P2P_LAT] ? sizes[0] : 0;
  }

  if (dev >= 0 && copy_tests) {
    if (me == 0 && p2p_copies(x, po, fabric, tk, dev, sizes, nsizes)) return -1;
    if (coll_barrier(x->c, &x->e)) return -1;
  }
  if (msg_tests && o->rounds && p2p_rounds(x, po, fabric, tk, sizes, nsizes)) return -1;
  for (int s = 0; s < n && msg_tests && !o->rounds; s++) {
    for (int d = 0; d < n; d++) {
      if (s == d) continue;
      if (!o->pairs_all && (s != o->src || d != o->dst)) continue;
      for (int test = 0; test < P2P_NMSG && msg_tests; test++) {
        if (!o->tests[test]) continue;
        for (int i = 0; i < nsizes; i++) {
          p2p_result res;
          if ((me == s || me == d) && p2p_step(x, test, s, d, sizes[i], &res)) return -1;
          int src = s;
          if (p2p_gather(x, &src, &res, 1) || (me == 0 && p2p_note(x, po, fabric, tk, test, s, d, sizes[i], &res)))
            return -1;
          /* the others wait here, one step at a time (so never longer than the timeout) */
          if (coll_barrier(x->c, &x->e)) return -1;
        }
      }
    }
  }
  if (me == 0 && o->pairs_all) {
    if (p2p_matrix_write(po, x, coll_transport_name(tk), fabric, n)) return -1;
    p2p_matrix_print(po, n);
  }
  return 0;
}

/* The message buffers, as large as the largest message (a run of GPU copies alone needs none
 * of its size). 0, or -1 after saying why. */
static int p2p_buffers(p2p_ctx *x, uint64_t largest) {
  uint64_t maxb = x->o->messages ? largest : 64;
  size_t nreq = 2 * (size_t)x->o->window + 2;
  x->sbuf = aligned_alloc(64, (maxb + 63) & ~(uint64_t)63);
  x->rbuf = aligned_alloc(64, (maxb + 63) & ~(uint64_t)63);
  x->expect = malloc(maxb);
  x->reqs = calloc(nreq, sizeof *x->reqs);
  x->samples = malloc(sizeof *x->samples * P2P_MAX_ITERS);
  if (x->sbuf && x->rbuf && x->expect && x->reqs && x->samples) return 0;
  bench_error("rank %d: cannot allocate buffers for %llu-byte messages", x->rank, (unsigned long long)maxb);
  return -1;
}

/* The command's rank 0 tables (bench_session_begin's files): p2p.csv, and p2p_matrix.csv for
 * --pairs all and rounds. */
typedef struct {
  p2p_out *po;
  int matrix;
} p2p_files_ctx;

static int p2p_files(void *ctx, bench_run *run) {
  p2p_files_ctx *f = ctx;
  char err[512];
  if (res_table_open_schema(&f->po->tab, run->dir, res_schema_p2p(), err, sizeof err) ||
      (f->matrix && res_table_open_schema(&f->po->matrix, run->dir, res_schema_p2p_matrix(), err, sizeof err)))
    return bench_error("%s", err);
  return 0;
}

/* Rank 0 makes the run directory, its matrices and tables; every rank learns whether that
 * worked, and the world goes into run.json. 0, or 1 (rank 0 said why). */
static int p2p_begin(p2p_out *po, const p2p_ctx *x, int argc, char **argv) {
  int ready = 1;
  if (x->rank == 0) {
    size_t n = (size_t)x->size * (size_t)x->size;
    po->bw = malloc(sizeof *po->bw * n);
    po->bibw = malloc(sizeof *po->bibw * n);
    po->lat = malloc(sizeof *po->lat * n);
    ready = po->bw && po->bibw && po->lat;
  }
  p2p_files_ctx f = {po, x->o->pairs_all};
  return bench_session_begin(x->s, "p2p", argc, argv, ready, p2p_files, &f);
}

/* run.json's p2p object (rank 0), status "running" until the end. */
static void p2p_meta(bench_run *run, const p2p_opts *o, const uint64_t *sizes, int nsizes) {
  run->meta.p2p = (res_run_p2p){.on = 1,
                                .pairs = o->rounds ? "rounds" : o->pairs_all ? "all" : "one",
                                .src = o->src,
                                .dst = o->dst,
                                .min_bytes = (double)sizes[0],
                                .max_bytes = (double)sizes[nsizes - 1],
                                .step_factor = o->step_factor,
                                .window = (double)o->window,
                                .iters = (double)o->iters,
                                .time_per_size_s = o->time_per_size,
                                .status = "running",
                                .data_ok = -1};
  bench_run_write(run);
}

/* Every transport in turn, each on its own communicator. 0, or -1 after saying why (run.json's
 * status then "failed"). */
static int p2p_transports(p2p_ctx *x, p2p_out *po, const uint64_t *sizes, int nsizes) {
  const p2p_opts *o = x->o;
  coll_boot *b = x->s->boot;
  bench_run *run = &x->s->run;
  coll_err e = {{0}};
  for (int t = 0; t < o->ntransports; t++) {
    coll_comm_opts co = {.transport = o->transports[t],
                         .timeout_ms = (int)(o->r.timeout_s * 1000),
                         .tcp_streams = (int)o->r.tcp_streams,
                         .tcp_cc = o->r.tcp_cc};
    if (coll_comm_open(&x->c, b, &co, &e)) {
      bench_error("%s", e.msg);
      return -1;
    }
    if (x->rank == 0) {
      res_run_add_fabric(&run->meta, coll_transport_name(o->transports[t]), coll_comm_fabric(x->c));
      bench_run_write(run);
    }
    x->e.msg[0] = '\0';
    bench_tel_result tr;
    bench_tel_begin(&x->s->tel, coll_transport_name(o->transports[t]));
    int trc = p2p_run_transport(x, po, o->transports[t], sizes, nsizes);
    if (!trc && !bench_tel_end(&x->s->tel, b, &tr) && x->rank == 0)
      bench_tel_print(&tr, coll_transport_name(o->transports[t]));
    if (trc) bench_error("%s", x->e.msg[0] ? x->e.msg : "p2p step failed");
    coll_comm_close(x->c);
    x->c = NULL;
    if (trc) {
      if (x->rank == 0) {
        run->meta.p2p.status = "failed";
        bench_run_write(run);
      }
      return -1;
    }
  }
  return 0;
}

static int p2p_rank_main(const p2p_opts *o, int argc, char **argv) {
  bench_session s;
  if (bench_session_open(&s, &o->r, o->want_mpi)) return 1;
  int rc = 1, failed = 1;
  uint64_t *sizes = NULL;
  p2p_out po;
  memset(&po, 0, sizeof po);
  p2p_ctx x;
  memset(&x, 0, sizeof x);
  x.o = o;
  x.s = &s;
  x.rank = s.rank;
  x.size = s.size;
  x.corrupt = getenv("FABENCH_TEST_CORRUPT") != NULL;
  int nsizes = 0, only_copies = !o->tests[P2P_LAT] && !o->tests[P2P_BW] && !o->tests[P2P_BIBW];
  if (x.size < 2 && !only_copies) {
    bench_error("p2p needs at least 2 ranks (use -n 2, or start it with a launcher)");
  } else if (!o->pairs_all && !only_copies && (o->src >= x.size || o->dst >= x.size)) {
    bench_error("--pairs %d,%d: there are only %d ranks", o->src, o->dst, x.size);
    rc = 2;
    failed = 0; /* every rank refuses alike */
  } else if (bench_session_bind(&s, 1) == 0) {
    nsizes = bench_sizes(o->min_bytes, o->max_bytes, o->step_factor, 1, &sizes);
    if (nsizes <= 0) bench_error("out of memory");
  }
  /* every host's topology and every rank's binding, recorded by rank 0 (collective) */
  if (nsizes > 0 && !p2p_buffers(&x, sizes[nsizes - 1]) && !p2p_begin(&po, &x, argc, argv)) {
    if (x.rank == 0) p2p_meta(&s.run, o, sizes, nsizes);
    if (!bench_session_telemetry(&s) && !p2p_transports(&x, &po, sizes, nsizes)) {
      int bad_data = x.bad_bytes != 0;
      if (x.rank == 0) {
        s.run.meta.p2p.data_ok = !bad_data;
        s.run.meta.p2p.status = bad_data ? "wrong data" : "ok";
        bench_run_write(&s.run);
        printf("# results in %s\n", s.run.dir);
      }
      rc = bad_data ? 1 : 0;
      failed = 0;
      if (bad_data && x.rank == 0) bench_error("data arrived wrong (see the errors column)");
    }
  }
  if (po.tab) res_table_close(po.tab);
  if (po.matrix) res_table_close(po.matrix);
  free(po.bw);
  free(po.bibw);
  free(po.lat);
  free(sizes);
  free(x.sbuf);
  free(x.rbuf);
  free(x.expect);
  free(x.reqs);
  free(x.samples);
  /* a failure may leave a rank dead or stopped: MPI must not wait for it */
  if (failed) bench_session_abort(&s);
  else bench_session_close(&s);
  return rc;
}

int bench_cmd_p2p(int argc, char **argv) {
  p2p_opts o;
  int prc = p2p_parse(&o, argc, argv);
  if (prc == 1) return 0; /* --help */
  if (prc) return prc;

  /* -n N: start the ranks here (unless we are one of them already) */
  if (o.r.nranks)
    return bench_rank_relaunch(&o.r, argc, argv, o.want_mpi);
  return p2p_rank_main(&o, argc, argv);
}
