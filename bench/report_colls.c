/* fabench report's sections of the collectives beside all-reduce (colls.csv): busbw against
 * size per collective and rank count, the best of fabench's algorithms against the peer per
 * size from 64 KiB, and from coll_ranks.csv the rank the others waited for. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_int.h"
#include "util.h"

/* A collective's name in prose and its bus-bandwidth factor (nccl-tests' conventions), which
 * colls.csv's busbw_gbps already holds: the report states it, it does not apply it. */
static const struct {
  const char *cmd, *name, *factor;
} rp_coll_kinds[] = {
    {"allreduce", "all-reduce", "2(n-1)/n"},     {"reducescatter", "reduce-scatter", "(n-1)/n"},
    {"allgather", "all-gather", "(n-1)/n"},      {"bcast", "broadcast", "1"},
    {"alltoall", "all-to-all", "(n-1)/n"},
};
#define RP_NKINDS (sizeof rp_coll_kinds / sizeof *rp_coll_kinds)

/* The collective's name in prose; an unknown one (a newer fabench's) as colls.csv names it. */
static const char *rp_coll_name(const char *cmd) {
  for (size_t i = 0; i < RP_NKINDS; i++)
    if (!strcmp(rp_coll_kinds[i].cmd, cmd)) return rp_coll_kinds[i].name;
  return cmd;
}

#define RP_TABLE_FROM ((int64_t)64 << 10) /* the table's sizes: where a paper quotes bandwidth */
#define RP_TABLE_ROWS 256

/* A collective (an imbalanced all-to-all is another) on a rank count. */
static int rp_same_coll(const res_colls_row *a, const res_colls_row *b) {
  return !strcmp(a->coll, b->coll) && a->ranks == b->ranks && a->imbalance == b->imbalance;
}

/* A curve: one run's rows of a collective, rank count, fabric, algorithm, dtype, op and root
 * (other_run: the same key, another run's). */
static int rp_same_curve(const res_colls_row *a, const res_colls_row *b, int other_run) {
  return rp_same_coll(a, b) && !strcmp(a->fabric, b->fabric) && !strcmp(a->transport, b->transport) &&
         !strcmp(a->algo, b->algo) && !strcmp(a->dtype, b->dtype) && !strcmp(a->op, b->op) && a->root == b->root &&
         !strcmp(a->run_id, b->run_id) == !other_run;
}

/* The collective as the report names it: an all-to-allv says its imbalance. */
static void rp_coll_label(char *out, size_t cap, const res_colls_row *r) {
  if (r->imbalance > 0)
    snprintf(out, cap, "%s (imbalance %g)", rp_coll_name(r->coll), r->imbalance);
  else
    snprintf(out, cap, "%s", rp_coll_name(r->coll));
}

/* A plot of rp_colls_plots, drawn once colls.dat is written whole. */
typedef struct {
  char name[128], title[300];
  char *plots;
  size_t npts;
} rp_coll_plot;

/* One plot per collective and rank count: busbw against size, a curve per transport/algorithm
 * (and dtype, op, root and run where they differ), its data a block each of colls.dat (d).
 * The plots go to pl (R->n at most); returns how many. */
static size_t rp_colls_plots(rp_ctx *x, FILE *d, rp_coll_plot *pl) {
  const res_rows *R = &x->rec[RP_COLLS];
  const res_colls_row *rows = R->rows;
  char *done = calloc(R->n, 1);
  int blk = 0;
  size_t np = 0;
  for (size_t i = 0; done && i < R->n; i++) {
    if (done[i]) continue;
    const res_colls_row *k = &rows[i];
    /* the plot's rows hold more than one dtype, op or root, or fabric: the titles name them */
    int mixed = 0, fabrics = 0;
    for (size_t j = i; j < R->n; j++)
      if (rp_same_coll(&rows[j], k)) {
        mixed |= strcmp(rows[j].dtype, k->dtype) || strcmp(rows[j].op, k->op) || rows[j].root != k->root;
        fabrics |= strcmp(rows[j].fabric, k->fabric) != 0;
      }
    char *plots = NULL;
    size_t plen = 0, npts = 0, ncurves = 0;
    FILE *p = open_memstream(&plots, &plen);
    if (!p) break;
    for (size_t c = i; c < R->n; c++) {
      if (done[c] || !rp_same_coll(&rows[c], k)) continue;
      const res_colls_row *h = &rows[c];
      fprintf(d, "# %s %s %s %s %s %s p%lld root %lld\nbytes,busbw\n", h->coll, h->fabric, h->transport, h->algo,
              h->dtype, h->op, (long long)h->ranks, (long long)h->root);
      for (size_t j = c; j < R->n; j++) {
        const res_colls_row *r = &rows[j];
        if (done[j] || !rp_same_curve(r, h, 0)) continue;
        done[j] = 1;
        fprintf(d, "%lld,%.6g\n", (long long)r->bytes, r->busbw_gbps);
        npts += r->bytes > 0 && r->busbw_gbps > 0; /* a log-log plot's: one rank's busbw is 0 */
      }
      fprintf(d, "\n\n");
      int elsewhere = 0;
      for (size_t j = 0; j < R->n && !elsewhere; j++) elsewhere = rp_same_curve(&rows[j], h, 1);
      char who[96], title[384];
      rp_run_suffix(who, sizeof who, elsewhere, h->run_id);
      snprintf(title, sizeof title, "%s/%s%s%s", h->transport, h->algo, fabrics ? " " : "", fabrics ? h->fabric : "");
      if (mixed) {
        size_t l = strlen(title);
        snprintf(title + l, sizeof title - l, " %s %s root %lld", h->dtype, h->op, (long long)h->root);
      }
      size_t l = strlen(title);
      snprintf(title + l, sizeof title - l, "%s", who);
      rp_label(title, 0);
      fprintf(p, "%s'colls.dat' index %d using 1:2 with linespoints title '%s' noenhanced", ncurves++ ? ", " : "",
              blk++, title);
    }
    if (fclose(p) != 0) {
      free(plots);
      break;
    }
    char *name = pl[np].name, what[160], *ptitle = pl[np].title;
    snprintf(name, sizeof pl->name, RP_COLL_PLOT_PREFIX "%s_p%lld", k->coll, (long long)k->ranks);
    for (char *s = name; *s; s++) /* a file name of letters, digits and _ whatever the csv said */
      if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9'))) *s = '_';
    if (k->imbalance > 0) {
      size_t l = strlen(name);
      snprintf(name + l, sizeof pl->name - l, "_imb%d", (int)lround(k->imbalance * 100));
    }
    rp_coll_label(what, sizeof what, k);
    const char *f = "?";
    for (size_t q = 0; q < RP_NKINDS; q++)
      if (!strcmp(rp_coll_kinds[q].cmd, k->coll)) f = rp_coll_kinds[q].factor;
    snprintf(ptitle, sizeof pl->title, "%s busbw (algbw x %s), %lld ranks", what, f, (long long)k->ranks);
    rp_label(ptitle, 0);
    pl[np].plots = plots;
    pl[np++].npts = npts;
  }
  free(done);
  return np;
}

/* A row of the table and what orders it: its collective (by the collective's first row, their
 * order in the runs), rank count, imbalance, fabric, transport and size. */
typedef struct {
  size_t idx, coll;
  int64_t ranks, bytes;
  double imbalance;
  const char *fabric, *transport;
} rp_cand;

static int rp_cand_cmp(const void *pa, const void *pb) {
  const rp_cand *a = pa, *b = pb;
  if (a->coll != b->coll) return a->coll < b->coll ? -1 : 1;
  if (a->ranks != b->ranks) return a->ranks < b->ranks ? -1 : 1;
  if (a->imbalance != b->imbalance) return a->imbalance < b->imbalance ? -1 : 1;
  int c = strcmp(a->fabric, b->fabric);
  if (c) return c;
  if ((c = strcmp(a->transport, b->transport))) return c;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Per collective, rank count, fabric, transport and size from 64 KiB (the largest where a sweep
 * ended below): fabench's best algorithm (native, the library's own, is the peer's) and its
 * busbw against the peer. Rows with wrong elements are not candidates. */
static void rp_colls_table(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_COLLS];
  const res_colls_row *rows = R->rows;
  rp_cand *c = malloc((R->n ? R->n : 1) * sizeof *c);
  if (!c) return;
  size_t n = 0, wrong = 0;
  int below = 0;
  for (size_t i = 0; i < R->n; i++) {
    const res_colls_row *r = &rows[i];
    if (r->errors) {
      wrong++;
      continue;
    }
    if (!strcmp(r->algo, "native")) continue;
    /* the largest size of its collective, ranks, fabric and transport, where none reaches 64 KiB */
    int64_t top = 0;
    for (size_t j = 0; j < R->n; j++)
      if (rp_same_coll(&rows[j], r) && !strcmp(rows[j].fabric, r->fabric) && !strcmp(rows[j].transport, r->transport) &&
          rows[j].bytes > top)
        top = rows[j].bytes;
    if (r->bytes < RP_TABLE_FROM && !(top < RP_TABLE_FROM && r->bytes == top)) continue;
    size_t first = 0;
    while (strcmp(rows[first].coll, r->coll)) first++;
    c[n++] = (rp_cand){.idx = i, .coll = first, .ranks = r->ranks, .bytes = r->bytes, .imbalance = r->imbalance,
                       .fabric = r->fabric, .transport = r->transport};
  }
  qsort(c, n, sizeof *c, rp_cand_cmp);
  fprintf(x->md, "\n### Best algorithm against the peer (from 64 KiB)\n\n");
  if (!n) {
    fprintf(x->md, "No row of fabench's own algorithms without wrong elements to compare.\n");
  } else {
    fprintf(x->md, "| collective | ranks | bytes | fabric | transport | best algorithm | busbw (GB/s) | peer | busbw vs "
                   "peer |\n|---|---|---|---|---|---|---|---|---|\n");
  }
  size_t shown = 0, more = 0;
  for (size_t a = 0; a < n;) {
    const res_colls_row *k = &rows[c[a].idx], *best = k;
    size_t b = a;
    for (; b < n; b++) {
      const res_colls_row *r = &rows[c[b].idx];
      if (!rp_same_coll(r, k) || strcmp(r->fabric, k->fabric) || strcmp(r->transport, k->transport) ||
          r->bytes != k->bytes)
        break;
      if (r->busbw_gbps > best->busbw_gbps) best = r;
    }
    a = b;
    if (shown == RP_TABLE_ROWS) {
      more++;
      continue;
    }
    shown++;
    char what[160], c0[320], c1[64], c2[200], c3[64], c4[200], c5[640], algo[160];
    rp_coll_label(what, sizeof what, best);
    if (*best->algo_ran && strcmp(best->algo_ran, best->algo))
      snprintf(algo, sizeof algo, "%s (ran %s)", best->algo, best->algo_ran);
    else
      snprintf(algo, sizeof algo, "%s", best->algo);
    int lo = best->bytes < RP_TABLE_FROM;
    below |= lo;
    char vs[32] = "-";
    if (isfinite(best->busbw_vs_peer)) snprintf(vs, sizeof vs, "%.2fx", best->busbw_vs_peer);
    fprintf(x->md, "| %s | %lld | %lld%s | %s | %s | %s | %.3f | %s | %s |\n", rp_md(c0, sizeof c0, what),
            (long long)best->ranks, (long long)best->bytes, lo ? "*" : "", rp_md(c5, sizeof c5, best->fabric),
            rp_md(c1, sizeof c1, best->transport), rp_md(c2, sizeof c2, algo), best->busbw_gbps,
            rp_md(c4, sizeof c4, *best->peer ? best->peer : "-"), rp_md(c3, sizeof c3, vs));
  }
  if (more) fprintf(x->md, "\n%zu more in colls.csv.\n", more);
  if (below) fprintf(x->md, "\n\\* the sweep ended below 64 KiB: its largest size.\n");
  if (wrong) fprintf(x->md, "\n%zu rows with wrong elements are left out of this table.\n", wrong);
  fprintf(x->md, "\nbusbw = algbw x a factor of the rank count n, as nccl-tests reckons it, so that it compares with a "
                 "link's rate at any n: reduce-scatter (n-1)/n, all-gather (n-1)/n, broadcast 1, all-to-all (n-1)/n "
                 "(all-reduce 2(n-1)/n). busbw vs peer is this row's busbw over the peer's (e.g. MPI's own) at the "
                 "same size in the same run.\n");
  free(c);
}

void rp_colls(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_COLLS];
  if (!R->n) return;
  rp_coll_plot *pl = calloc(R->n, sizeof *pl);
  FILE *d = pl ? rp_open(x, "colls.dat") : NULL;
  if (!d) {
    free(pl);
    return;
  }
  fprintf(x->md, "\n## Other collectives\n\n%zu rows of colls.csv (reduce-scatter, all-gather, broadcast, "
                 "all-to-all): busbw against size per collective and rank count.\n", R->n);
  size_t np = rp_colls_plots(x, d, pl);
  /* gnuplot reads colls.dat: written whole before the first plot */
  int ok = rp_close(x, d, "colls.dat") == 0;
  for (size_t i = 0; i < np; i++) {
    if (ok) rp_against_size(x, pl[i].name, pl[i].title, "busbw (GB/s)", "", pl[i].plots, pl[i].npts);
    free(pl[i].plots);
  }
  free(pl);
  rp_colls_table(x);
}

/* A group of coll_ranks.csv: one run's rows of a collective, rank count and transport/algorithm. */
static int rp_same_wait(const res_coll_ranks_row *a, const res_coll_ranks_row *b) {
  return !strcmp(a->run_id, b->run_id) && !strcmp(a->coll, b->coll) && a->ranks == b->ranks &&
         !strcmp(a->transport, b->transport) && !strcmp(a->algo, b->algo);
}

/* A broadcast's root for a group of coll_ranks.csv: its colls.csv rows say; 0 (--root's default)
 * where the runs hold none. */
static int64_t rp_bcast_root(const rp_ctx *x, const res_coll_ranks_row *k) {
  const res_colls_row *c = x->rec[RP_COLLS].rows;
  for (size_t i = 0; i < x->rec[RP_COLLS].n; i++)
    if (!strcmp(c[i].run_id, k->run_id) && !strcmp(c[i].coll, k->coll) && !strcmp(c[i].transport, k->transport) &&
        !strcmp(c[i].algo, k->algo))
      return c[i].root;
  return 0;
}

/* Who the others waited for: per group, the rank at wait 0 most often across sizes (it arrives
 * last, so waits least: the straggler), shown where the other ranks' median wait exceeds 10% of
 * the group's median time. */
void rp_waits(rp_ctx *x) {
  const res_rows *R = &x->rec[RP_COLL_RANKS];
  if (!R->n) return;
  const res_coll_ranks_row *rows = R->rows;
  char *done = calloc(R->n, 1);
  double *w = malloc(R->n * sizeof *w), *t = malloc(R->n * sizeof *t);
  int64_t maxr = 0;
  for (size_t i = 0; i < R->n; i++)
    if (rows[i].ranks > maxr) maxr = rows[i].ranks;
  size_t *zeros = maxr > 0 && maxr <= 1 << 20 ? calloc((size_t)maxr, sizeof *zeros) : NULL;
  if (!done || !w || !t || !zeros) {
    free(done), free(w), free(t), free(zeros);
    return;
  }
  fprintf(x->md, "\n## Who the others waited for\n\nFrom coll_ranks.csv: per run, collective and transport/algorithm, "
                 "the rank at wait 0 most often across sizes (it arrived last, so it waited least while the others "
                 "waited for it), where the other ranks' median wait exceeds 10%% of the median time.\n\n");
  size_t groups = 0, shown = 0, roots = 0;
  for (size_t i = 0; i < R->n; i++) {
    if (done[i]) continue;
    const res_coll_ranks_row *k = &rows[i];
    memset(zeros, 0, (size_t)maxr * sizeof *zeros);
    size_t nt = 0, sizes = 0;
    for (size_t j = i; j < R->n; j++) {
      if (done[j] || !rp_same_wait(&rows[j], k)) continue;
      done[j] = 2; /* 2: this group's, until it is summed up */
      t[nt++] = rows[j].t_p50_us;
      if (rows[j].wait_us == 0 && rows[j].rank >= 0 && rows[j].rank < maxr) zeros[rows[j].rank]++;
      sizes += rows[j].rank == k->rank;
    }
    int64_t s = 0;
    for (int64_t r = 1; r < maxr; r++)
      if (zeros[r] > zeros[s]) s = r;
    size_t nw = 0;
    const char *host = "";
    for (size_t j = i; j < R->n; j++) {
      if (done[j] != 2) continue;
      done[j] = 1;
      if (rows[j].rank == s) host = rows[j].host;
      else w[nw++] = rows[j].wait_us;
    }
    groups++;
    double mw = util_median(w, nw), mt = util_median(t, nt);
    if (!(nw && mw > 0.1 * mt)) continue;
    if (!shown++)
      fprintf(x->md, "| run | collective | transport/algo | ranks | straggler (host) | at wait 0 | others' median wait (us) "
                     "| median time (us) |\n|---|---|---|---|---|---|---|---|\n");
    char c0[200], c1[200], c2[320], c3[200], ta[320], hs[240];
    snprintf(ta, sizeof ta, "%s/%s", k->transport, k->algo);
    int root = !strcmp(k->coll, "bcast") && s == rp_bcast_root(x, k);
    roots += root;
    snprintf(hs, sizeof hs, "%s%s", host, root ? ", the root" : "");
    fprintf(x->md, "| %s | %s | %s | %lld | %lld (%s) | %zu of %zu sizes | %.1f | %.1f |\n", rp_md(c0, sizeof c0, k->run_id),
            rp_md(c1, sizeof c1, rp_coll_name(k->coll)), rp_md(c2, sizeof c2, ta), (long long)k->ranks, (long long)s,
            rp_md(c3, sizeof c3, hs), zeros[s], sizes, mw, mt);
  }
  if (roots)
    fprintf(x->md, "\nA broadcast's root is done once its data has left, the others only when it has come down to "
                   "them: the root at wait 0 is the broadcast's shape, not a straggler.\n");
  if (!shown)
    fprintf(x->md, "No straggler stands out: in each of the %zu groups the other ranks' median wait is within 10%% of "
                   "the median time.\n", groups);
  else if (shown < groups)
    fprintf(x->md, "\nIn the other %zu groups no straggler stands out (the others' median wait is within 10%% of the "
                   "median time).\n", groups - shown);
  free(done), free(w), free(t), free(zeros);
}
