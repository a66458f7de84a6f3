/* accept: stragglers, the ranks the others wait for. In a data-parallel step every rank waits for
 * the slowest, at the gradients' all-reduce or where the ranks meet between steps; the straggler
 * arrives last and waits least. From a train rule's train_steps.csv (each rank's time not spent
 * computing: its step less forward, backward and the optimizer, over the measured steps) and an
 * all-reduce rule's coll_ranks.csv (each rank's wait behind the fastest), a rank is named where
 * the others' median wait is a real share of the step and its own is a small part of theirs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "res.h"

#define STRAG_SHARE 0.10 /* the others' wait, at least this share of the step (or all-reduce) */
#define STRAG_OWN 0.33   /* the straggler's own wait, at most this share of the others' */
#define STRAG_MAX_RANKS 4096

static int strag_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double strag_median(double *v, int n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, strag_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One group's ranks: their median waits and what they are a share of. */
typedef struct {
  double wait[STRAG_MAX_RANKS], whole[STRAG_MAX_RANKS]; /* medians per rank */
  char host[STRAG_MAX_RANKS][64];
  int n;
} strag_group;

/* Names the group's straggler where there is one: the rank that waited least, where the others'
 * wait is a real share of the step (call) and its own a small part of theirs. */
static void strag_judge(const strag_group *g, const char *rule, const char *what, const char *unit,
                        acc_suspect **sus, int *nsus) {
  if (g->n < 2) return;
  int s = 0;
  for (int r = 1; r < g->n; r++)
    if (g->wait[r] < g->wait[s]) s = r;
  double others[STRAG_MAX_RANKS], whole[STRAG_MAX_RANKS];
  int k = 0;
  for (int r = 0; r < g->n; r++)
    if (r != s) others[k] = g->wait[r], whole[k++] = g->whole[r];
  double w = strag_median(others, k), step = strag_median(whole, k);
  if (!(w > STRAG_SHARE * step) || !(g->wait[s] <= STRAG_OWN * w)) return;
  char ev[ACC_TEXT_MAX];
  acc_say(ev, sizeof ev, "rank %d (%s): the other ranks waited %.3g %s for it each %s (median; %.3g %s a %s), it "
          "waited %.3g",
          s, g->host[s], w, unit, what, step, unit, what, g->wait[s]);
  if (acc_suspect_add(sus, nsus, "rank", g->host[s], "", s, NAN, w / (step > 0 ? step : 1), ev) == 0)
    snprintf((*sus)[*nsus - 1].rule, sizeof (*sus)[0].rule, "%s", rule);
}

/* train_steps.csv of one run: per (transport, algorithm) pair, each rank's median time not
 * computing over its measured steps against its median step. */
static void strag_train(const char *dir, const char *rule, acc_suspect **sus, int *nsus) {
  res_rows rows = {0};
  char err[512];
  if (res_table_read(&rows, res_schema_train_steps(), dir, err, sizeof err)) return;
  const res_train_steps_row *t = rows.rows;
  size_t cap = rows.n ? rows.n : 1;
  char *seen = calloc(cap, 1);
  double *w = malloc(cap * sizeof *w), *st = malloc(cap * sizeof *st);
  strag_group *g = malloc(sizeof *g);
  for (size_t i = 0; seen && w && st && g && i < rows.n; i++) {
    if (seen[i] || t[i].warmup || !strcmp(t[i].transport, "none")) continue;
    int64_t most = 0; /* the pair's ranks: 0 .. most */
    for (size_t j = i; j < rows.n; j++)
      if (!strcmp(t[j].transport, t[i].transport) && !strcmp(t[j].algo, t[i].algo) && t[j].rank > most) most = t[j].rank;
    g->n = most + 1 < STRAG_MAX_RANKS ? (int)most + 1 : STRAG_MAX_RANKS;
    for (int r = 0; r < g->n; r++) {
      int nw = 0;
      g->host[r][0] = '\0';
      for (size_t j = i; j < rows.n; j++) {
        if (strcmp(t[j].transport, t[i].transport) || strcmp(t[j].algo, t[i].algo)) continue;
        seen[j] = 1;
        if (t[j].rank != r || t[j].warmup) continue;
        /* the time the rank did not compute: its waits at the all-reduce and where the ranks
         * meet between steps (data_ms holds that) */
        double idle = t[j].step_ms - t[j].fwd_ms - t[j].bwd_ms - (isfinite(t[j].opt_ms) ? t[j].opt_ms : 0);
        w[nw] = idle > 0 ? idle : 0, st[nw++] = t[j].step_ms;
        snprintf(g->host[r], sizeof g->host[0], "%s", t[j].host ? t[j].host : "");
      }
      g->wait[r] = strag_median(w, nw);
      g->whole[r] = strag_median(st, nw);
    }
    strag_judge(g, rule, "step", "ms", sus, nsus);
  }
  free(seen), free(w), free(st), free(g);
  res_rows_free(&rows);
}

/* coll_ranks.csv of one run: per (collective, transport, algorithm), each rank's median wait
 * behind the fastest over the sizes against its median time. */
static void strag_colls(const char *dir, const char *rule, acc_suspect **sus, int *nsus) {
  res_rows rows = {0};
  char err[512];
  if (res_table_read(&rows, res_schema_coll_ranks(), dir, err, sizeof err)) return;
  const res_coll_ranks_row *t = rows.rows;
  char *seen = calloc(rows.n ? rows.n : 1, 1);
  double *w = malloc((rows.n ? rows.n : 1) * sizeof *w), *tt = malloc((rows.n ? rows.n : 1) * sizeof *tt);
  strag_group *g = malloc(sizeof *g);
  for (size_t i = 0; seen && w && tt && g && i < rows.n; i++) {
    if (seen[i]) continue;
    int ranks = (int)t[i].ranks;
    g->n = ranks < STRAG_MAX_RANKS ? ranks : STRAG_MAX_RANKS;
    for (int r = 0; r < g->n; r++) {
      int nw = 0;
      for (size_t j = i; j < rows.n; j++) {
        if (strcmp(t[j].coll, t[i].coll) || strcmp(t[j].transport, t[i].transport) || strcmp(t[j].algo, t[i].algo))
          continue;
        seen[j] = 1;
        if (t[j].rank != r) continue;
        w[nw] = t[j].wait_us, tt[nw++] = t[j].t_p50_us;
        snprintf(g->host[r], sizeof g->host[0], "%s", t[j].host ? t[j].host : "");
      }
      g->wait[r] = strag_median(w, nw);
      g->whole[r] = strag_median(tt, nw);
    }
    strag_judge(g, rule, "call", "us", sus, nsus);
  }
  free(seen), free(w), free(tt), free(g);
  res_rows_free(&rows);
}

void acc_name_stragglers(const acc_result *res, int nres, acc_suspect **sus, int *nsus) {
  for (int i = 0; i < nres; i++) {
    const acc_rule *r = res[i].rule;
    if (!r || !res[i].measured || res[i].error || !res[i].ndirs) continue;
    const char *dir = res[i].dirs[res[i].ndirs - 1]; /* the last run: a retest's, where repeated */
    if (!strcmp(r->argv[0], "train")) strag_train(dir, r->name, sus, nsus);
    else strag_colls(dir, r->name, sus, nsus);
  }
}
