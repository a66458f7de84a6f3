/* allreduce --pairs and --nodes: the all-reduce inside groups of ranks, disjoint groups at once
 * (coll_allreduce_group), so that a slow link or node stands out against its peers: pairs of
 * ranks (S,D; every pair one at a time; every pair in the rounds of a round-robin tournament,
 * N/2 at once), each node's ranks alone (every node at once), each node's ranks with the first
 * node's (one node at a time). A step is the groups that run at once. Per transport, algorithm,
 * dtype, step and size: warm-up, timed iterations each behind a barrier of all ranks (a group's
 * time per iteration is its slowest member's), then a checked call; each group's figures reach
 * rank 0 through an all-reduce of all ranks, and rank 0 writes a row per group. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collbench_int.h"
#include "res.h"
#include "util.h"

#define CBG_MAX_ITERS 100000
enum { CBG_P50, CBG_P99, CBG_WRONG, CBG_ITERS, CBG_NFIG }; /* a group's figures */

typedef struct {
  const cb_groups_in *g;
  coll_comm *c;
  int rank, size, nhosts;
  int *host;     /* each rank's host, numbered by first appearance in rank order */
  int *grp, *other, *pa, *pb;
  double *times; /* CBG_MAX_ITERS */
  double *fig;   /* size x CBG_NFIG: a group's figures at its first rank's place */
  coll_err e;
} cbg_ctx;

/* The algorithms that run on a group view (the library's own and hier do not). */
static int cbg_flat(coll_algo_kind k) {
  return k == COLL_ALGO_RING || k == COLL_ALGO_RHD || k == COLL_ALGO_RD || k == COLL_ALGO_TREE || k == COLL_ALGO_DTREE ||
         k == COLL_ALGO_PS;
}

static const char *const cbg_mode_names[] = {"", "one", "all", "rounds", "alone", "ref"};

static int cbg_steps(const cbg_ctx *x) {
  int n = x->size;
  switch (x->g->o->groups) {
  case CB_G_ALL: return n * (n - 1) / 2;
  case CB_G_ROUNDS: return n - 1 + (n & 1);
  case CB_G_NODE_REF: return x->nhosts - 1;
  default: return 1;
  }
}

/* Rank r's group in step s, listed alike by every member (out; the count, 0: none). */
static int cbg_group(const cbg_ctx *x, int s, int r, int *out) {
  const cb_opts *o = x->g->o;
  int n = x->size, k = 0;
  switch (o->groups) {
  case CB_G_PAIR:
    if (r != o->pair_src && r != o->pair_dst) return 0;
    out[0] = (int)o->pair_src, out[1] = (int)o->pair_dst;
    return 2;
  case CB_G_ALL:
    for (int a = 0; a < n; a++)
      for (int b = a + 1; b < n; b++)
        if (k++ == s) {
          if (r != a && r != b) return 0;
          out[0] = a, out[1] = b;
          return 2;
        }
    return 0;
  case CB_G_ROUNDS: {
    int np = bench_round_pairs(n, s, x->pa, x->pb);
    for (int i = 0; i < np; i++)
      if (r == x->pa[i] || r == x->pb[i]) return out[0] = x->pa[i], out[1] = x->pb[i], 2;
    return 0;
  }
  case CB_G_NODES:
    for (int q = 0; q < n; q++)
      if (x->host[q] == x->host[r]) out[k++] = q;
    return k;
  case CB_G_NODE_REF:
    if (x->host[r] != 0 && x->host[r] != s + 1) return 0;
    for (int q = 0; q < n; q++)
      if (x->host[q] == 0 || x->host[q] == s + 1) out[k++] = q;
    return k;
  default: return 0;
  }
}

/* Rank 0: the row of the group led by rank lead (its figures in fig). */
static int cbg_row(cbg_ctx *x, int s, int lead, const char *fabric, const char *tname, const char *aname,
                   coll_dtype dt, uint64_t bytes) {
  const cb_opts *o = x->g->o;
  const double *f = &x->fig[(size_t)lead * CBG_NFIG];
  int n = cbg_group(x, s, lead, x->other);
  res_allreduce_groups_row row;
  res_row_init(res_schema_allreduce_groups(), &row);
  row.run_id = x->g->run_id;
  row.schema = RES_SCHEMA_VERSION;
  row.fabric = fabric;
  row.transport = tname;
  row.algo = aname;
  row.dtype = coll_dtype_name(dt);
  row.mode = cbg_mode_names[o->groups];
  row.round = s;
  row.ranks = n;
  row.bytes = (int64_t)bytes;
  row.iters = (int64_t)f[CBG_ITERS];
  row.t_p50_us = f[CBG_P50];
  row.t_p99_us = f[CBG_P99];
  row.algbw_gbps = f[CBG_P50] > 0 ? (double)bytes / (f[CBG_P50] * 1e3) : 0;
  row.busbw_gbps = row.algbw_gbps * x->g->busbw(n);
  row.errors = (int64_t)f[CBG_WRONG];
  row.topo_hash = x->g->topo_hash;
  char gname[40];
  if (o->groups == CB_G_NODES) {
    row.group = "node";
    row.src = lead, row.dst = -1;
    row.src_host = row.dst_host = coll_comm_host(x->c, lead);
    snprintf(gname, sizeof gname, "node %d", x->host[lead]);
  } else if (o->groups == CB_G_NODE_REF) {
    int first = -1; /* the node's first rank (the reference's come first in the group) */
    for (int i = 0; i < n && first < 0; i++)
      if (x->host[x->other[i]] != 0) first = x->other[i];
    row.group = "node-ref";
    row.src = first, row.dst = lead;
    row.src_host = coll_comm_host(x->c, first);
    row.dst_host = coll_comm_host(x->c, lead);
    snprintf(gname, sizeof gname, "node %d+ref", x->host[first]);
  } else {
    row.group = "pair";
    row.src = x->other[0], row.dst = x->other[1];
    row.src_host = coll_comm_host(x->c, x->other[0]);
    row.dst_host = coll_comm_host(x->c, x->other[1]);
    snprintf(gname, sizeof gname, "pair %d-%d", x->other[0], x->other[1]);
  }
  printf("  %-14s %-10s %-10s %5lld %12llu %10.2f %10.3f %10.3f %6lld\n", gname, row.src_host, row.dst_host,
         (long long)n, (unsigned long long)bytes, row.t_p50_us, row.algbw_gbps, row.busbw_gbps, (long long)row.errors);
  fflush(stdout);
  char err[512];
  if (res_table_put(x->g->tab, &row, err, sizeof err)) return bench_error("%s", err), -1;
  return 0;
}

/* One step at one size: every rank takes part (a rank in no group only keeps the calls' count). */
static int cbg_size(cbg_ctx *x, int s, coll_algo a, coll_dtype dt, coll_op op, uint64_t bytes, int64_t *wrong) {
  const cb_opts *o = x->g->o;
  coll_comm *c = x->c;
  size_t count = bytes / coll_dtype_size(dt);
  int n = cbg_group(x, s, x->rank, x->grp), idx = 0;
  if (n < 2) n = 0; /* a node of one rank has no fabric inside */
  for (int i = 0; i < n; i++)
    if (x->grp[i] == x->rank) idx = i;
  coll_algo ring = {COLL_ALGO_RING, 0};
  coll_pattern_fill(x->g->buf, count, dt, op, idx, (uint64_t)o->seed);
  for (long w = 0; w < o->warmup; w++)
    if (coll_allreduce_group(c, x->grp, n, x->g->buf, count, dt, op, a, &x->e)) return -1;
  long iters = o->iters;
  if (!iters) { /* about --time-per-size: the slowest group's call, agreed by all ranks */
    double t0 = 0, t = 0;
    if (coll_barrier(c, &x->e)) return -1;
    t0 = util_now();
    if (coll_allreduce_group(c, x->grp, n, x->g->buf, count, dt, op, a, &x->e)) return -1;
    t = util_now() - t0;
    if (coll_allreduce(c, &t, 1, COLL_F64, COLL_MAX, ring, NULL, &x->e)) return -1;
    iters = t > 0 ? (long)(o->time_per_size / t) : CBG_MAX_ITERS;
    iters = iters < 3 ? 3 : iters;
  }
  if (iters > CBG_MAX_ITERS) iters = CBG_MAX_ITERS;
  for (long i = 0; i < iters; i++) {
    if (coll_barrier(c, &x->e)) return -1;
    double t0 = util_now();
    if (coll_allreduce_group(c, x->grp, n, x->g->buf, count, dt, op, a, &x->e)) return -1;
    x->times[i] = (util_now() - t0) * 1e6;
  }
  /* the group's time per iteration: its slowest member's */
  if (coll_allreduce_group(c, x->grp, n, x->times, (size_t)iters, COLL_F64, COLL_MAX, ring, &x->e)) return -1;
  double bad = 0;
  if (o->check) {
    coll_pattern_fill(x->g->buf, count, dt, op, idx, (uint64_t)o->seed);
    size_t first = 0;
    if (coll_allreduce_group(c, x->grp, n, x->g->buf, count, dt, op, a, &x->e)) return -1;
    if (n) bad = (double)coll_pattern_check(x->g->buf, count, dt, op, n, (uint64_t)o->seed, &first);
  }
  if (coll_allreduce_group(c, x->grp, n, &bad, 1, COLL_F64, COLL_SUM, ring, &x->e)) return -1;
  memset(x->fig, 0, sizeof *x->fig * (size_t)x->size * CBG_NFIG);
  int lead = x->rank;
  for (int i = 0; i < n; i++) lead = x->grp[i] < lead ? x->grp[i] : lead;
  if (n && lead == x->rank) {
    util_stats st;
    util_stats_compute(&st, x->times, (size_t)iters);
    double *f = &x->fig[(size_t)x->rank * CBG_NFIG];
    f[CBG_P50] = st.p50, f[CBG_P99] = st.p99, f[CBG_WRONG] = bad, f[CBG_ITERS] = (double)iters;
  }
  if (coll_allreduce(c, x->fig, (size_t)x->size * CBG_NFIG, COLL_F64, COLL_SUM, ring, NULL, &x->e)) return -1;
  for (int r = 0; r < x->size; r++) *wrong += (int64_t)x->fig[(size_t)r * CBG_NFIG + CBG_WRONG];
  return 0;
}

/* Every step, dtype and size of one transport and algorithm. */
static int cbg_cell(cbg_ctx *x, coll_transport_kind tk, coll_algo a, int64_t *wrong) {
  const cb_opts *o = x->g->o;
  char aname[32];
  coll_algo_format(aname, sizeof aname, a);
  const char *fabric = getenv("FABENCH_FABRIC") ? getenv("FABENCH_FABRIC") : coll_comm_fabric(x->c);
  if (cbg_steps(x) < 1) return 0;
  if (x->rank == 0) {
    printf("# %s/%s, %s: %s\n  %-14s %-10s %-10s %5s %12s %10s %10s %10s %6s\n", coll_transport_name(tk), aname,
           cbg_mode_names[o->groups], fabric, "group", "host", "with", "ranks", "bytes", "p50_us", "algbw", "busbw",
           "wrong");
    fflush(stdout);
  }
  for (int d = 0; d < o->ndtypes; d++) {
    uint64_t *sizes = NULL;
    int ns = bench_sizes(o->min_bytes, o->max_bytes, o->step, coll_dtype_size(o->dtypes[d]), &sizes);
    if (ns < 0) return bench_error("rank %d: out of memory", x->rank), -1;
    for (int s = 0; s < cbg_steps(x); s++)
      for (int i = 0; i < ns; i++) {
        if (cbg_size(x, s, a, o->dtypes[d], o->ops[0], sizes[i], wrong)) return free(sizes), -1;
        for (int r = 0; r < x->size && x->rank == 0; r++)
          if (x->fig[(size_t)r * CBG_NFIG + CBG_ITERS] > 0 &&
              cbg_row(x, s, r, fabric, coll_transport_name(tk), aname, o->dtypes[d], sizes[i]))
            return free(sizes), -1;
      }
    free(sizes);
  }
  return 0;
}

static int cbg_alloc(cbg_ctx *x) {
  size_t n = (size_t)x->size;
  x->host = calloc(n, sizeof *x->host), x->grp = calloc(n, sizeof *x->grp), x->other = calloc(n, sizeof *x->other);
  x->pa = calloc(n / 2 + 1, sizeof *x->pa), x->pb = calloc(n / 2 + 1, sizeof *x->pb);
  x->times = calloc(CBG_MAX_ITERS, sizeof *x->times), x->fig = calloc(n * CBG_NFIG, sizeof *x->fig);
  if (!x->host || !x->grp || !x->other || !x->pa || !x->pb || !x->times || !x->fig) return -1;
  for (int r = 0; r < x->size; r++) { /* hosts by first appearance */
    x->host[r] = x->nhosts;
    for (int q = 0; q < r; q++)
      if (!strcmp(coll_comm_host(x->c, q), coll_comm_host(x->c, r))) {
        x->host[r] = x->host[q];
        break;
      }
    if (x->host[r] == x->nhosts) x->nhosts++;
  }
  return 0;
}

int cb_groups_run(const cb_groups_in *g, int *wrong) {
  const cb_opts *o = g->o;
  int rc = 0, ran = 0;
  int64_t bad = 0;
  for (int t = 0; t < o->ntransports && !rc; t++) {
    cbg_ctx x = {.g = g, .c = g->comms[t]};
    x.rank = coll_comm_rank(x.c), x.size = coll_comm_size(x.c);
    if (cbg_alloc(&x)) rc = bench_error("rank %d: out of memory", x.rank);
    if (!rc && o->groups == CB_G_PAIR && (o->pair_src >= x.size || o->pair_dst >= x.size))
      rc = x.rank == 0 ? bench_error("--pairs %ld,%ld: there are %d ranks", o->pair_src, o->pair_dst, x.size) : 1;
    if (!rc && x.rank == 0 && cbg_steps(&x) < 1)
      printf("# --nodes ref: one node, nothing to measure it against\n");
    if (!rc && x.rank == 0 && o->groups == CB_G_NODES && x.nhosts == x.size)
      printf("# --nodes alone: every node has one rank, no fabric inside to measure\n");
    for (int a = 0; a < o->nalgos && !rc; a++) {
      if (!cbg_flat(o->algos[a].kind)) {
        char an[32];
        coll_algo_format(an, sizeof an, o->algos[a]);
        if (x.rank == 0 && coll_algo_supported(x.c, o->algos[a])) /* else the harness said why */
          printf("# skipping %s/%s: groups run the flat algorithms only\n", coll_transport_name(o->transports[t]), an);
        continue;
      }
      ran = 1;
      if (cbg_cell(&x, o->transports[t], o->algos[a], &bad)) {
        rc = bench_error("rank %d: %s", x.rank, x.e.msg[0] ? x.e.msg : "group all-reduce failed");
        coll_comm_mark_failed(x.c);
      }
    }
    free(x.host), free(x.grp), free(x.other), free(x.pa), free(x.pb), free(x.times), free(x.fig);
  }
  if (!rc && !ran) rc = bench_error("--pairs/--nodes: no flat algorithm among --algo (ring, rhd, rd, tree, dtree, ps)");
  *wrong = bad != 0;
  return rc ? 1 : 0;
}
