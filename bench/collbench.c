/* The collective harness: a verified sweep of sizes x transports x algorithms x dtypes (x ops)
 * of one collective (its descriptor, bench_coll). Every iteration is timed between barriers;
 * its time is the maximum over ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collbench_int.h"
#include "res.h"
#include "util.h"

typedef struct {
  const cb_opts *o;
  const bench_coll *d;
  bench_session s; /* the bootstrap, rank 0's run directory, the telemetry */
  coll_boot *boot; /* the session's, for short */
  int rank, size;
  int per_host;    /* the most ranks on one host (every row says it) */
  res_table *tab, *ranks_tab; /* the collective's rows; each rank's own times (coll_ranks.csv) */
  double *own_all;         /* every rank's median own time of a cell (rank 0) */
  int progress;
  res_costmodel model;     /* --model-from (n == 0 without) */
  unsigned model_missed;   /* transports (bit per kind) said to have no model of their fabric */
  cb_load *load;           /* --beside-compute's thread, else NULL */
  double alone_n, alone_s; /* this size: the load's products and seconds with no collective */
  bench_coll_shape sh;     /* this size's shape */
  void *rbuf;              /* the receive buffer where not in place (host memory) */
  size_t rcap;
  bench_tel_result bound;  /* the size's bound ("" without telemetry) */
} cb_ctx;

/* The load's pace alone, before a round of a size: 200 ms with no collective on any rank. The
 * barrier first, since a rank done with its calls while its peers still send to it would
 * measure their exchange as "alone". */
static int cb_load_alone(cb_ctx *x, coll_comm *c, coll_err *e) {
  if (!x->load) return 0;
  if (coll_barrier(c, e)) return -1;
  uint64_t c0 = cb_load_done(x->load);
  double t0 = util_now();
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  x->alone_n += (double)(cb_load_done(x->load) - c0);
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
  double *own;   /* this rank's own seconds of the same iterations (barrier timing) */
  size_t ntimes, cap;
  util_stats st;         /* of this size's samples */
  double spread;         /* the rounds' medians apart (util_round_spread; NaN: one round) */
  double load_n, load_s; /* --beside-compute: the load's products and seconds while timed */
  double loss;           /* the share of the load's pace lost, mean over ranks (NaN: no load) */
  int is_peer;
  double cpu_s; /* rank 0: its host's busy CPU seconds over this size's timed iterations */
  long cpu_n;   /* the iterations they cover; -1: not measurable (a rank spins, no /proc) */
  void *dbuf;   /* the device buffer of a device communicator (nccl), else NULL */
  void *drbuf;  /* its receive buffer where the collective is not in place, else NULL */
  void *mbuf;   /* host memory that this communicator's ranks map, where the run's buffer is
                   another's (ucx beside tcp with ucx inside hosts), else NULL */
  char gfabric[80]; /* device communicators (rank 0): what carries the data, then the widest
                       path class between neighbouring ranks' GPUs: "nccl:nvlink/NV18" */
} cb_cell;

static int cb_fail(const coll_err *e) { return bench_error("%s", e->msg); }

/* The maximum (or sum) over ranks of n doubles, in place: control traffic on the measured
 * comm, or through the bootstrap when the comm's buffers are on a GPU. */
static int cb_ctl(cb_ctx *x, coll_comm *c, double *v, size_t n, coll_op op, coll_err *e) {
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
static int cb_max(cb_ctx *x, coll_comm *c, double *v, size_t n, coll_err *e) {
  return cb_ctl(x, c, v, n, COLL_MAX, e);
}

/* The cell's send buffer: its device buffer, its mapped one, or the run's host one. */
static void *cb_buf(const cb_cell *k, void *hbuf) { return k->dbuf ? k->dbuf : k->mbuf ? k->mbuf : hbuf; }

/* One call of the collective on the cell's buffers. */
static int cb_call(cb_ctx *x, cb_cell *k, void *buf, coll_algo *ran, coll_err *e) {
  void *recv = x->d->in_place ? buf : k->drbuf ? k->drbuf : x->rbuf;
  return x->d->call(k->c, &x->sh, buf, recv, k->algo, ran, e);
}

/* Device communicators run asynchronously: wait for what was enqueued. */
static int cb_sync(cb_cell *k, coll_err *e) {
  char none = 0; /* a copy of 0 bytes: the stream's point to wait for */
  return k->dbuf ? coll_mem_copy(k->c, &none, &none, 0, e) : 0;
}

/* n timed calls (seconds): CUDA events around them on a device communicator. */
static int cb_timed(cb_ctx *x, cb_cell *k, void *buf, long n, double *sec, coll_err *e) {
  if (k->dbuf) {
    if (coll_timer_start(k->c, e)) return -1;
    for (long i = 0; i < n; i++)
      if (cb_call(x, k, buf, &k->ran, e)) return -1;
    return coll_timer_stop(k->c, sec, e);
  }
  double t0 = util_now();
  for (long i = 0; i < n; i++)
    if (cb_call(x, k, buf, &k->ran, e)) return -1;
  *sec = util_now() - t0;
  return 0;
}

static int cb_cell_grow(cb_cell *k, size_t n) {
  if (n <= k->cap) return 0;
  double *t = realloc(k->times, n * sizeof *t);
  if (!t) return -1;
  k->times = t;
  double *o = realloc(k->own, n * sizeof *o);
  if (!o) return -1;
  k->own = o;
  k->cap = n;
  return 0;
}

/* Warm-up, then the iteration count: --iters, or what fills --time-per-size at the slowest
 * rank's pace (every rank must run the same count). */
static int cb_prepare(cb_ctx *x, cb_cell *k, void *hbuf, coll_err *e) {
  const cb_opts *o = x->o;
  void *buf = cb_buf(k, hbuf);
  k->ntimes = 0;
  k->ran = k->algo;
  k->cpu_s = 0;
  /* the load's CPU would count as the call's */
  k->cpu_n = x->rank == 0 && !k->dbuf && !x->load && coll_comm_sleeps(k->c) ? 0 : -1;
  k->load_n = k->load_s = 0;
  double w0 = util_now();
  for (long i = 0; i < o->warmup; i++) {
    if (!o->pipelined && coll_barrier(k->c, e)) return -1;
    if (cb_call(x, k, buf, &k->ran, e)) return -1;
  }
  if (cb_sync(k, e)) return -1;
  k->iters = o->iters;
  if (!k->iters) {
    double per = o->warmup ? (util_now() - w0) / (double)o->warmup : 0;
    if (!o->warmup) {
      double t0 = util_now();
      if (coll_barrier(k->c, e) || cb_call(x, k, buf, &k->ran, e) || cb_sync(k, e)) return -1;
      per = util_now() - t0;
    }
    if (cb_max(x, k->c, &per, 1, e)) return -1;
    double want = o->time_per_size / (per > 1e-7 ? per : 1e-7);
    k->iters = want < 5 ? 5 : want > 200000 ? 200000 : (long)want;
  }
  if (cb_cell_grow(k, (size_t)k->iters)) {
    snprintf(e->msg, sizeof e->msg, "rank %d: out of memory for %ld samples", x->rank, k->iters);
    return -1;
  }
  return 0;
}

/* The host's busy CPU since cpu0 into the cell's account of n more iterations (where it keeps
 * one: rank 0, no rank spinning); an unreadable /proc/stat ends the account. */
static void cb_cpu_add(cb_cell *k, double cpu0, long n) {
  if (k->cpu_n < 0) return;
  double cpu = bench_host_cpu_s() - cpu0;
  k->cpu_s += cpu;
  k->cpu_n = isfinite(cpu) ? k->cpu_n + n : -1;
}

/* n more timed iterations, appended to the cell's samples. */
static int cb_measure(cb_ctx *x, cb_cell *k, void *hbuf, long n, coll_err *e) {
  double *t = k->times + k->ntimes;
  void *buf = cb_buf(k, hbuf);
  double cpu0 = k->cpu_n >= 0 ? bench_host_cpu_s() : NAN, l0 = util_now();
  uint64_t c0 = cb_load_done(x->load);
  if (x->o->pipelined) {
    double mean;
    if (coll_barrier(k->c, e) || cb_timed(x, k, buf, n, &mean, e)) return -1;
    cb_cpu_add(k, cpu0, n);
    mean /= (double)n;
    if (cb_max(x, k->c, &mean, 1, e)) return -1;
    for (long i = 0; i < n; i++) t[i] = mean;
  } else {
    for (long i = 0; i < n; i++)
      if (coll_barrier(k->c, e) || cb_timed(x, k, buf, 1, &t[i], e)) return -1;
    memcpy(k->own + k->ntimes, t, (size_t)n * sizeof *t);
    cb_cpu_add(k, cpu0, n);
    if (cb_max(x, k->c, t, (size_t)n, e)) return -1;
  }
  k->load_n += (double)(cb_load_done(x->load) - c0);
  k->load_s += util_now() - l0;
  for (long i = 0; i < n; i++) t[i] *= 1e6;
  k->ntimes += (size_t)n;
  return 0;
}

/* Fresh inputs, one call, every element checked; returns wrong elements over all ranks. */
static int cb_verify(cb_ctx *x, cb_cell *k, void *hbuf, int64_t *wrong, coll_err *e) {
  const bench_coll *d = x->d;
  coll_comm *c = k->c;
  bench_coll_shape *s = &x->sh;
  size_t es = coll_dtype_size(s->dt), sbytes = s->send_elems * es;
  void *recv = d->in_place ? hbuf : x->rbuf;
  d->fill(s, hbuf, recv);
  if (k->dbuf) { /* the device's data, copied back after the call */
    if (coll_mem_copy(c, k->dbuf, hbuf, sbytes, e)) return -1;
    memset(hbuf, 0xa5, sbytes); /* a result that was never copied back cannot pass */
  } else if (k->mbuf) {
    memcpy(k->mbuf, hbuf, sbytes);
    if (d->in_place) memset(hbuf, 0xa5, sbytes);
  }
  void *send = cb_buf(k, hbuf);
  if (k->drbuf) { /* the scribbled receive buffer, on the device too */
    if (coll_mem_copy(c, k->drbuf, recv, s->recv_elems * es, e)) return -1;
    memset(recv, 0x5a, s->recv_elems * es);
  }
  if (d->call(c, s, send, d->in_place ? send : k->drbuf ? k->drbuf : recv, k->algo, NULL, e)) return -1;
  if (k->dbuf && d->in_place && coll_mem_copy(c, hbuf, k->dbuf, sbytes, e)) return -1;
  if (k->drbuf && coll_mem_copy(c, recv, k->drbuf, s->recv_elems * es, e)) return -1;
  if (k->mbuf && d->in_place) memcpy(hbuf, k->mbuf, sbytes);
  size_t first = 0;
  double bad = (double)d->check(s, recv, &first);
  if (bad > 0)
    fprintf(stderr, "fabench: rank %d (%s): %s %s %s %s x %zu: %.0f wrong elements, first at %zu\n", x->rank,
            coll_boot_host(x->boot, x->rank), d->what, coll_comm_fabric(c), coll_dtype_name(s->dt),
            d->reduces ? coll_op_name(s->op) : "", s->count, bad, first);
  if (cb_ctl(x, c, &bad, 1, COLL_SUM, e)) return -1;
  *wrong = (int64_t)bad;
  return 0;
}

static void cb_header(const cb_ctx *x) {
  const cb_opts *o = x->o;
  printf("# fabench %s: %d rank(s) on %d host(s), timing %s, check %s, %ld round(s)", x->d->name, x->size,
         coll_boot_host_count(x->boot), o->pipelined ? "pipelined" : "barrier", o->check ? "on" : "off",
         o->rounds);
  if (x->d->rooted) printf(", root %ld", o->root);
  if (x->d->varies) printf(", imbalance %g", o->imbalance);
  printf("\n");
  if (o->has_peer) {
    char a[32];
    coll_algo_format(a, sizeof a, o->peer_algo);
    printf("# vs peer: busbw / %s/%s's busbw at the same size, in this run\n", coll_transport_name(o->peer_tk), a);
  }
  printf("# %12s %11s %5s %5s %-22s %-8s %10s %10s %10s %7s %8s\n", "size(B)", "count", "type", "redop",
         "fabric", "algo", "p50(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "vs peer");
  fflush(stdout);
}

/* The model's time for the row (microseconds; NaN: no model of its fabric) and whether it is a
 * replay (the all-reduce's learned curve at this fabric, host count, rank count and algorithm)
 * or held out (the formulas alone; an unfitted emulated rate scaled from a fitted one; the other
 * collectives, which the model was never fitted on). */
static double cb_predict(cb_ctx *x, const cb_cell *k, const res_allreduce_row *row, const char **kind) {
  const char *fabric = row->fabric;
  const res_fabric_cost *fm = res_costmodel_find(&x->model, fabric, coll_transport_name(k->tk),
                                                 coll_boot_host_count(x->boot), row->topo_hash);
  int learned = 0;
  double tp = NAN;
  if (x->d->kind < 0 && x->model.n)
    tp = res_allreduce_row_time(&x->model, row, NULL, &learned) * 1e6;
  else if (fm)
    tp = coll_colls_time(&fm->m, (coll_kind)x->d->kind, k->ran, x->size, (size_t)row->bytes, coll_comm_chunk(k->c)) * 1e6;
  *kind = res_pred_kind_name(learned ? RES_PRED_REPLAY : RES_PRED_HELDOUT);
  if (fm || (isfinite(tp) && tp > 0)) return tp; /* one fabric, a cluster's two levels, or a scaled rate */
  if (x->model.n && !(x->model_missed & (1u << k->tk))) {
    /* said once per transport: rows without t_pred_us would pass for a run checked against it */
    x->model_missed |= 1u << k->tk;
    fprintf(stderr, "fabench: --model-from %s: no model of fabric %s (%s), so its rows have no t_pred_us; the model has:",
            x->o->model_from, fabric, coll_transport_name(k->tk));
    for (size_t i = 0; i < x->model.n; i++) {
      char l[256];
      fprintf(stderr, "%s %s (%s)", i ? "," : "", res_costmodel_label(&x->model, &x->model.f[i], l, sizeof l),
              x->model.f[i].transport);
    }
    fprintf(stderr, "\n");
  }
  return NAN;
}

/* Writes the row into the collective's table: allreduce.csv, or colls.csv with its name. */
static int cb_put(cb_ctx *x, const res_allreduce_row *row) {
  char err[256];
  if (x->d->kind < 0) return res_table_put(x->tab, row, err, sizeof err) ? bench_error("%s", err) : 0;
  res_colls_row c;
  res_colls_row_of(&c, row, x->d->name, x->d->rooted ? x->o->root : 0, x->d->varies ? x->o->imbalance : 0);
  return res_table_put(x->tab, &c, err, sizeof err) ? bench_error("%s", err) : 0;
}

/* Each rank's median own time of the cell's size, gathered to rank 0, which writes a row per
 * rank (barrier timing, several ranks). 0, or 1 after saying why. */
static int cb_ranks(cb_ctx *x, const cb_cell *k) {
  if (x->o->pipelined || x->size < 2 || !k->ntimes) return 0;
  double mine = util_median(k->own, k->ntimes) * 1e6;
  coll_err e = {{0}};
  if (coll_boot_allgather(x->boot, x->own_all, &mine, sizeof mine, &e)) return cb_fail(&e);
  if (x->rank != 0) return 0;
  double least = x->own_all[0];
  for (int r = 1; r < x->size; r++) least = x->own_all[r] < least ? x->own_all[r] : least;
  const bench_coll_shape *s = &x->sh;
  for (int r = 0; r < x->size; r++) {
    res_coll_ranks_row row = {.run_id = x->s.run.run_id, .schema = RES_SCHEMA_VERSION, .coll = x->d->name,
                              .transport = coll_transport_name(k->tk), .algo = k->aname,
                              .dtype = coll_dtype_name(s->dt), .op = x->d->reduces ? coll_op_name(s->op) : "-",
                              .bytes = (int64_t)(s->count * coll_dtype_size(s->dt)), .ranks = x->size, .rank = r,
                              .host = coll_boot_host(x->boot, r), .t_p50_us = x->own_all[r],
                              .wait_us = x->own_all[r] - least};
    char err[256];
    if (res_table_put(x->ranks_tab, &row, err, sizeof err)) return bench_error("%s", err);
  }
  return 0;
}

/* Prints and writes one measured row (rank 0). */
static int cb_report(cb_ctx *x, const cb_cell *k, const cb_cell *peer, int64_t wrong) {
  const cb_opts *o = x->o;
  const bench_coll_shape *s = &x->sh;
  const char *fabric = getenv("FABENCH_FABRIC") ? getenv("FABENCH_FABRIC")
                       : k->gfabric[0]                    ? k->gfabric
                                                          : coll_comm_fabric(k->c);
  size_t nbytes = s->count * coll_dtype_size(s->dt);
  util_stats st = k->st;
  /* busbw ratio = the peer's median time over this one's (same bytes, same ranks) */
  double vs = peer && st.p50 > 0 ? peer->st.p50 / st.p50 : NAN;
  char vss[16] = "-";
  if (isfinite(vs)) snprintf(vss, sizeof vss, "%.2fx", vs);
  double t = st.p50 * 1e-6;
  double algbw = t > 0 ? (double)nbytes / t / 1e9 : 0;
  double busbw = algbw * x->d->busbw(x->size);
  char rname[32];
  coll_algo_format(rname, sizeof rname, k->ran);
  if (x->progress) fprintf(stderr, "\r%-60s\r", "");
  char wrongs[24] = "-"; /* not checked (--no-check): no count to give */
  if (o->check) snprintf(wrongs, sizeof wrongs, "%lld", (long long)wrong);
  const char *opn = x->d->reduces ? coll_op_name(s->op) : "-";
  printf("  %12zu %11zu %5s %5s %-22s %-8s %10.2f %10.3f %10.3f %7s %8s\n", nbytes, s->count,
         coll_dtype_name(s->dt), opn, fabric, k->aname, st.p50, algbw, busbw, wrongs, vss);
  fflush(stdout);
  res_allreduce_row row;
  res_row_init(res_schema_allreduce(), &row);
  char pname[48] = "";
  if (peer) snprintf(pname, sizeof pname, "%s/%s", coll_transport_name(peer->tk), peer->aname);
  row.run_id = x->s.run.run_id;
  row.schema = RES_SCHEMA_VERSION;
  row.host_count = coll_boot_host_count(x->boot);
  row.ranks_per_host = x->per_host;
  row.ranks = x->size;
  row.fabric = fabric;
  row.transport = coll_transport_name(k->tk);
  row.algo = k->aname;
  row.dtype = coll_dtype_name(s->dt);
  row.op = opn;
  row.bytes = (int64_t)nbytes;
  row.count = (int64_t)s->count;
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
  row.host = x->s.run.host;
  row.topo_hash = x->s.run.topo_hash;
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
  if (x->bound.bound[0]) {
    row.bound = x->bound.bound;
    row.link_util = x->bound.link_util;
    row.cpu_busy = x->bound.cpu_busy;
    row.tcp_retrans = x->bound.retrans;
  }
  const char *kind = NULL;
  double pred = cb_predict(x, k, &row, &kind);
  if (isfinite(pred) && pred > 0) {
    row.t_pred_us = pred;
    row.pred_err = (st.p50 - pred) / pred;
    row.pred_kind = kind;
  }
  return cb_put(x, &row);
}

/* The shape of a size of count elements: its buffers, grown where they must. 0, or -1 after
 * saying why. */
static int cb_shape(cb_ctx *x, size_t count, coll_dtype dt, coll_op op) {
  bench_coll_shape *s = &x->sh;
  s->count = count;
  s->block = x->d->blocks ? count / (size_t)x->size : count;
  s->dt = dt;
  s->op = op;
  s->seed = (uint64_t)x->o->seed + count * coll_dtype_size(dt);
  if (x->d->shape(s, x->o->imbalance)) return bench_error("rank %d: out of memory", x->rank);
  size_t need = s->recv_elems * coll_dtype_size(dt) + 8;
  if (!x->d->in_place && need > x->rcap) {
    void *r = NULL;
    if (posix_memalign(&r, 64, need)) return bench_error("rank %d: cannot allocate %zu bytes", x->rank, need);
    free(x->rbuf);
    x->rbuf = r;
    x->rcap = need;
  }
  return 0;
}

/* One size of one dtype/op over every cell. The cells take turns in rounds (each round runs
 * iters/rounds of every cell), so that a machine whose speed drifts during the run (a noisy
 * neighbour, the scheduler moving ranks) slows every cell alike and the ratios between them
 * in one run stay fair; rounds=1 measures each cell in one block. */
static int cb_size(cb_ctx *x, cb_cell *cells, int ncells, void *buf, size_t count, coll_dtype dt,
                   coll_op op, int *wrong_total) {
  const cb_opts *o = x->o;
  coll_err e = {{0}};
  if (cb_shape(x, count, dt, op)) return 1;
  const bench_coll_shape *s = &x->sh;
  size_t sbytes = s->send_elems * coll_dtype_size(dt);
  if (x->progress)
    fprintf(stderr, "\r%-60s", ""), fprintf(stderr, "\r[%s %s %zu B]", coll_dtype_name(dt), coll_op_name(op),
                                             count * coll_dtype_size(dt));
  for (int i = 0; i < ncells; i++) {
    x->d->fill(s, buf, x->d->in_place ? buf : x->rbuf);
    if (cells[i].dbuf && coll_mem_copy(cells[i].c, cells[i].dbuf, buf, sbytes, &e)) return cb_fail(&e);
    if (cells[i].mbuf) memcpy(cells[i].mbuf, buf, sbytes);
    if (cb_prepare(x, &cells[i], buf, &e)) return cb_fail(&e);
  }
  x->alone_n = x->alone_s = 0;
  char label[64];
  snprintf(label, sizeof label, "%s %s %zu", coll_dtype_name(dt), x->d->reduces ? coll_op_name(op) : "-",
           count * coll_dtype_size(dt));
  bench_tel_begin(&x->s.tel, label);
  for (long r = 0; r < o->rounds; r++)
    for (int i = 0; i < ncells; i++) {
      cb_cell *k = &cells[i];
      /* the load's pace alone, in each round: the machine drifts */
      if (i == 0 && cb_load_alone(x, k->c, &e)) return cb_fail(&e);
      long n = k->iters * (r + 1) / o->rounds - k->iters * r / o->rounds;
      if (n <= 0) continue;
      /* one untimed call: the first after another cell pays for its caches and pages */
      if (r > 0 && o->warmup && cb_call(x, k, cb_buf(k, buf), &k->ran, &e)) return cb_fail(&e);
      if (cb_measure(x, k, buf, n, &e)) return cb_fail(&e);
    }
  /* every rank is here: the size's bound over every host (none where telemetry failed) */
  if (bench_tel_end(&x->s.tel, x->boot, &x->bound)) x->bound.bound[0] = '\0';
  const cb_cell *peer = NULL;
  for (int i = 0; i < ncells; i++) {
    cells[i].spread = util_round_spread(cells[i].times, cells[i].ntimes, (int)o->rounds);
    util_stats_compute(&cells[i].st, cells[i].times, cells[i].ntimes);
    if (cells[i].is_peer) peer = &cells[i];
  }
  for (int i = 0; i < ncells && x->load; i++) { /* every rank: the loss is the ranks' mean */
    cb_cell *k = &cells[i];
    double alone = x->alone_s > 0 ? x->alone_n / x->alone_s : 0, during = k->load_s > 0 ? k->load_n / k->load_s : 0;
    double loss = alone > 0 ? 1 - during / alone : NAN;
    if (cb_ctl(x, k->c, &loss, 1, COLL_SUM, &e)) return cb_fail(&e);
    k->loss = loss / x->size;
  }
  for (int i = 0; i < ncells; i++) {
    cb_cell *k = &cells[i];
    int64_t wrong = 0;
    if (o->check && cb_verify(x, k, buf, &wrong, &e)) return cb_fail(&e);
    *wrong_total += wrong > 0;
    if (x->rank == 0 && cb_report(x, k, peer, wrong)) return 1;
    if (cb_ranks(x, k)) return 1;
  }
  return 0;
}

static int cb_sweep(cb_ctx *x, cb_cell *cells, int ncells, void *buf, int *wrong_total) {
  const cb_opts *o = x->o;
  int rc = 0;
  for (int d = 0; d < o->ndtypes && !rc; d++)
    for (int p = 0; p < o->nops && !rc; p++) {
      coll_dtype dt = o->dtypes[d];
      size_t es = coll_dtype_size(dt), unit = x->d->blocks ? es * (size_t)x->size : es;
      uint64_t *sizes = NULL;
      int nsizes = bench_sizes(o->min_bytes, o->max_bytes, o->step, unit, &sizes);
      if (nsizes < 0) {
        rc = bench_error("out of memory");
        break;
      }
      if (nsizes == 0 && x->rank == 0)
        printf("# %s: no size from %llu to %llu B holds %zu whole blocks of %zu-byte elements\n",
               coll_dtype_name(dt), (unsigned long long)o->min_bytes, (unsigned long long)o->max_bytes,
               (size_t)x->size, es);
      for (int si = 0; si < nsizes && !rc; si++)
        rc = cb_size(x, cells, ncells, buf, (size_t)sizes[si] / es, dt, o->ops[p], wrong_total);
      free(sizes);
    }
  if (x->progress) fprintf(stderr, "\r%-60s\r", "");
  return rc;
}

/* auto's model for a transport: the fitted fabric of that transport on this many hosts (the
 * fabric string itself is known only once the communicator is open). */
static const coll_model *cb_model_for(const cb_ctx *x, coll_transport_kind tk) {
  const char *emu = getenv("FABENCH_FABRIC"), *name = coll_transport_name(tk);
  const res_fabric_cost *any = NULL;
  for (size_t i = 0; i < x->model.n; i++) {
    const res_fabric_cost *f = &x->model.f[i];
    if (strcmp(f->transport, name)) continue;
    if (emu && *emu && !strcmp(f->fabric, emu)) return &f->m;
    /* this machine's fit before another's */
    if (f->host_count == coll_boot_host_count(x->boot) &&
        (!any || (strcmp(any->topo, x->s.run.topo_hash) && !strcmp(f->topo, x->s.run.topo_hash))))
      any = f;
  }
  return any ? &any->m : NULL;
}

/* Which pairs run is known only once the communicators are open (native needs a library that
 * has one), and every rank built the same cells: 0, or 2 on every rank (a usage error, said
 * once by rank 0) when no pair is left to measure or the --peer asked for was skipped. */
static int cb_cells_check(const cb_ctx *x, const cb_cell *cells, int ncells) {
  const cb_opts *o = x->o;
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
  coll_comm *comms[CB_MAX_LIST], *buf_owner;
  void *buf, *dbufs[CB_MAX_LIST], *drbufs[CB_MAX_LIST], *mbufs[CB_MAX_LIST];
  cb_cell cells[CB_MAX_LIST * CB_MAX_LIST];
  int ncells;
} cb_run;

/* Rank 0's tables and run.json's fields, once the run directory is made (a
 * bench_session_files_fn). 0, or 1 after saying why. */
static int cb_files(void *ctx, bench_run *run) {
  cb_ctx *x = ctx;
  const cb_opts *o = x->o;
  char err[512];
  x->progress = isatty(2);
  const res_schema *schema = o->groups ? res_schema_allreduce_groups()
                             : x->d->kind < 0 ? res_schema_allreduce() : res_schema_colls();
  if (res_table_open_schema(&x->tab, run->dir, schema, err, sizeof err) ||
      (x->size > 1 && !o->pipelined && !o->groups &&
       res_table_open_schema(&x->ranks_tab, run->dir, res_schema_coll_ranks(), err, sizeof err)))
    return bench_error("%s", err);
  run->meta.has_rounds = 1;
  run->meta.rounds = (long)o->rounds;
  run->meta.check = o->check != 0;
  run->meta.beside_compute = o->beside != 0;
  if (!o->groups) cb_header(x);
  return 0;
}

/* This rank's binding, rank 0's run directory and table (every rank stops alike where rank 0
 * cannot make them, rank 0 having said why), and the world in run.json. 0, or 1 after saying
 * why. */
static int cb_begin(cb_ctx *x, int argc, char **argv) {
  const cb_opts *o = x->o;
  if (bench_session_bind(&x->s, 1)) return 1;
  if (x->d->rooted && o->root >= x->size) {
    if (x->rank == 0) bench_error("--root %ld: there are %d ranks", o->root, x->size);
    return 1;
  }
  return bench_session_begin(&x->s, x->d->name, argc, argv, 1, cb_files, x);
}

/* Can the cell's communicator run its algorithm? NULL, or why not. */
static const char *cb_unsupported(const cb_ctx *x, const cb_cell *k) {
  if (x->d->kind < 0)
    return coll_algo_supported(k->c, k->algo) ? NULL
           : k->algo.kind == COLL_ALGO_NATIVE ? "this transport has no native all-reduce"
                                              : "not available in this build";
  const char *why = x->d->unsupported ? x->d->unsupported(k->algo, x->o->imbalance) : NULL;
  if (why) return why;
  if (coll_colls_supported(k->c, (coll_kind)x->d->kind, k->algo)) return NULL;
  return coll_comm_device(k->c) >= 0 ? "ranks sharing a GPU go by CUDA IPC, without NCCL's own (native) calls"
                                     : "this transport has no native one";
}

/* Every transport's communicator, open for the whole run so that the cells can take turns, and
 * its cells (an algorithm the transport or build cannot run is said and skipped). 0, or 1 after
 * saying why. */
static int cb_open(cb_ctx *x, cb_run *u) {
  const cb_opts *o = x->o;
  coll_err e = {{0}};
  for (int t = 0; t < o->ntransports; t++) {
    coll_comm_opts co = {.transport = o->transports[t], .timeout_ms = (int)o->r.timeout_s * 1000,
                         .tcp_streams = (int)o->r.tcp_streams, .chunk_bytes = (size_t)o->chunk,
                         .tcp_cc = o->r.tcp_cc, .no_peer_map = o->no_peer_map,
                         .no_spin = o->no_spin || o->beside, /* a spinning wait would take the load's core */
                         .model = cb_model_for(x, o->transports[t]), .devices = o->devices};
    /* hier's phases inside hosts over another transport: for hier, and for auto where it may
     * pick hier (the all-reduce's, the broadcast's and the all-to-all's) */
    int may_hier = 0, auto_hier = x->d->kind < 0 || x->d->kind == COLL_BCAST || x->d->kind == COLL_ALLTOALL;
    for (int a = 0; a < o->nalgos; a++)
      may_hier |= o->algos[a].kind == COLL_ALGO_HIER || (auto_hier && o->algos[a].kind == COLL_ALGO_AUTO);
    bench_comm_intra(&o->r, &co, may_hier);
    if (coll_comm_open(&u->comms[t], x->boot, &co, &e)) return cb_fail(&e);
    /* the run's buffer from a communicator whose ranks map it: ucx's own, else one inside hosts */
    if (coll_comm_maps(u->comms[t]) && (!u->buf_owner || o->transports[t] == COLL_UCX)) u->buf_owner = u->comms[t];
    /* a GPU communicator has its own buffers on the device; the host ones stage their data. A
     * skewed all-to-allv's receive may reach every sender's whole total. */
    size_t rmax = ((size_t)o->max_bytes + 8) * (x->d->varies && o->imbalance > 0 ? (size_t)x->size : 1);
    if (coll_comm_device(u->comms[t]) >= 0 &&
        (!(u->dbufs[t] = coll_mem_alloc(u->comms[t], (size_t)o->max_bytes + 8, &e)) ||
         (!x->d->in_place && !(u->drbufs[t] = coll_mem_alloc(u->comms[t], rmax, &e)))))
      return cb_fail(&e);
    char gfabric[80] = "";
    if (u->dbufs[t] && x->rank == 0) cb_gpu_fabric(u->comms[t], gfabric, sizeof gfabric);
    for (int a = 0; a < o->nalgos; a++) {
      cb_cell *k = &u->cells[u->ncells];
      k->c = u->comms[t];
      k->dbuf = u->dbufs[t];
      k->drbuf = u->drbufs[t];
      snprintf(k->gfabric, sizeof k->gfabric, "%s", gfabric);
      k->tk = o->transports[t];
      k->algo = o->algos[a];
      coll_algo_format(k->aname, sizeof k->aname, k->algo);
      const char *why = cb_unsupported(x, k);
      if (!why) {
        k->is_peer = o->has_peer && k->tk == o->peer_tk && cb_algo_eq(k->algo, o->peer_algo);
        u->ncells++;
      } else if (x->rank == 0) {
        printf("# skipping %s/%s: %s\n", coll_transport_name(k->tk), k->aname, why);
        fflush(stdout);
      }
    }
  }
  return 0;
}

/* The run's one send buffer: from the ucx communicator when there is one (ucx ranks on one host
 * then map each other's copy: coll_mem_alloc); other transports use it as plain memory. 0, or 1
 * after saying why. */
static int cb_buffer(cb_ctx *x, cb_run *u) {
  coll_err e = {{0}};
  size_t maxbytes = (size_t)x->o->max_bytes + 8;
  /* every other communicator whose ranks map memory gets its own (a region is one context's) */
  for (int t = 0; t < x->o->ntransports; t++) {
    if (u->comms[t] == u->buf_owner || !coll_comm_maps(u->comms[t]) || u->dbufs[t]) continue;
    if (!(u->mbufs[t] = coll_mem_alloc(u->comms[t], maxbytes, &e))) return cb_fail(&e);
    for (int i = 0; i < u->ncells; i++)
      if (u->cells[i].c == u->comms[t]) u->cells[i].mbuf = u->mbufs[t];
  }
  if (u->buf_owner) return (u->buf = coll_mem_alloc(u->buf_owner, maxbytes, &e)) ? 0 : cb_fail(&e);
  if (!posix_memalign(&u->buf, 64, maxbytes)) return 0;
  u->buf = NULL;
  return bench_error("rank %d: cannot allocate %zu bytes", x->rank, maxbytes);
}

static void cb_run_close(const cb_opts *o, cb_run *u) {
  if (u->buf_owner)
    coll_mem_free(u->buf_owner, u->buf);
  else
    free(u->buf);
  for (int t = 0; t < o->ntransports; t++) {
    if (u->dbufs[t]) coll_mem_free(u->comms[t], u->dbufs[t]);
    if (u->drbufs[t]) coll_mem_free(u->comms[t], u->drbufs[t]);
    if (u->mbufs[t]) coll_mem_free(u->comms[t], u->mbufs[t]);
    if (u->comms[t]) coll_comm_close(u->comms[t]);
  }
  for (int i = 0; i < CB_MAX_LIST * CB_MAX_LIST; i++) free(u->cells[i].times), free(u->cells[i].own);
}

/* The shape's arrays: all-to-all's counts (n x n) and this rank's four lists. */
static int cb_shape_alloc(cb_ctx *x) {
  size_t n = (size_t)x->size;
  bench_coll_shape *s = &x->sh;
  s->rank = x->rank;
  s->size = x->size;
  s->root = (int)x->o->root;
  if (!(x->own_all = calloc((size_t)x->size, sizeof *x->own_all))) return bench_error("rank %d: out of memory", x->rank);
  if (!x->d->varies) return 0;
  s->matrix = calloc(n * n, sizeof *s->matrix);
  s->sc = calloc(n, sizeof *s->sc), s->sd = calloc(n, sizeof *s->sd);
  s->rc = calloc(n, sizeof *s->rc), s->rd = calloc(n, sizeof *s->rd);
  return s->matrix && s->sc && s->sd && s->rc && s->rd ? 0 : bench_error("rank %d: out of memory", x->rank);
}

static void cb_shape_free(bench_coll_shape *s) {
  free(s->matrix), free(s->sc), free(s->sd), free(s->rc), free(s->rd);
}

/* The measured part of a rank's run: the model, the communicators and cells, the buffers, the
 * sweep. 0, 1 (failed) or 2 (agreed usage error: *agreed set). */
static int cb_body(cb_ctx *x, cb_run *u, int *wrong, int *agreed) {
  const cb_opts *o = x->o;
  int rc = 0;
  /* every rank reads the model: auto must pick alike everywhere */
  if (o->model_from) {
    char err[1024];
    if (bench_costmodel_load(&x->model, o->model_from, x->rank != 0, err, sizeof err))
      return bench_error("rank %d: --model-from: %s", x->rank, err);
  }
  if ((rc = cb_open(x, u))) return rc;
  if ((rc = cb_cells_check(x, u->cells, u->ncells))) return *agreed = 1, rc;
  if ((rc = cb_buffer(x, u)) || (rc = cb_shape_alloc(x))) return rc;
  for (int t = 0; t < o->ntransports && x->rank == 0; t++) { /* after the buffer: +rkey_ptr */
    res_run_add_fabric(&x->s.run.meta, coll_transport_name(o->transports[t]), coll_comm_fabric(u->comms[t]));
    bench_record_intra(&x->s.run, o->transports[t], u->comms[t]);
    bench_run_write(&x->s.run);
  }
  if (bench_session_telemetry(&x->s)) return 1;
  if (o->beside && !(x->load = cb_load_start()))
    return bench_error("rank %d: cannot start the --beside-compute thread", x->rank);
  if (o->groups) {
    cb_groups_in g = {.o = o, .comms = u->comms, .buf = u->buf, .tab = x->tab, .run_id = x->s.run.run_id,
                      .topo_hash = x->s.run.topo_hash, .busbw = x->d->busbw};
    rc = cb_groups_run(&g, wrong);
  } else {
    rc = cb_sweep(x, u->cells, u->ncells, u->buf, wrong);
  }
  cb_load_stop(x->load);
  x->load = NULL;
  return rc;
}

static int cb_rank_main(const cb_opts *o, int argc, char **argv) {
  cb_ctx x = {.o = o, .d = o->d};
  coll_err e = {{0}};
  if (bench_session_open(&x.s, &o->r, o->want_mpi)) return 1;
  x.boot = x.s.boot;
  x.rank = x.s.rank;
  x.size = x.s.size;
  x.per_host = bench_ranks_per_host(x.boot);
  cb_run *u = calloc(1, sizeof *u);
  int rc = u ? cb_begin(&x, argc, argv) : bench_error("out of memory");
  int failed = 1, agreed = 0; /* agreed: every rank stops alike */
  if (!rc) {
    int wrong = 0;
    rc = cb_body(&x, u, &wrong, &agreed);
    if (x.rank == 0 && x.tab) {
      x.s.run.meta.status = rc ? "failed" : wrong ? "wrong results" : "ok";
      bench_run_write(&x.s.run);
      printf("# %s: %s\n",
             wrong ? "FAILED: wrong results at some sizes" : rc ? "FAILED" : o->check ? "all results verified" : "done, results not checked (--no-check)",
             x.s.run.dir);
    }
    failed = rc != 0 && !agreed;
    /* rank 0 has said why and written run.json before any rank exits: the launcher stops the
     * others at the first that ends */
    if (agreed && coll_boot_barrier(x.boot, &e)) failed = 1;
    if (!rc && wrong) rc = 1;
  }
  if (u) cb_run_close(o, u);
  free(u);
  cb_shape_free(&x.sh);
  free(x.rbuf);
  free(x.own_all);
  if (x.rank == 0) {
    res_table_close(x.tab);
    res_table_close(x.ranks_tab);
  }
  res_costmodel_free(&x.model);
  /* a failure (not wrong results) may leave a rank dead or stopped: MPI must not wait for it */
  if (failed) bench_session_abort(&x.s);
  else bench_session_close(&x.s);
  return rc;
}

int bench_coll_main(const bench_coll *d, int argc, char **argv) {
  cb_opts o;
  int rc = cb_parse(&o, d, argc, argv);
  if (!rc) rc = o.r.nranks > 0 ? bench_rank_relaunch(&o.r, argc, argv, o.want_mpi) : cb_rank_main(&o, argc, argv);
  else if (rc == 1) rc = 0; /* --help */
  cb_opts_free(&o);
  return rc;
}
