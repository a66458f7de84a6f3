/* accept: naming the bad host or link from the p2p rules' per-link figures. Robust outliers
 * (the median and the median absolute deviation) among the hosts first, each host's figure the
 * median of its links to other hosts, so that one slow node is named and not its peers (each
 * of whom has one slow link among several); then among the links that no named host explains;
 * then each host's links inside itself (its own fabric) against the other hosts'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "util.h"

/* An outlier lies beyond max(ACC_K robust sigmas, a share of the median): a clean run's noise
 * moves figures by a few percent, a fault by far more. */
#define ACC_K 3.0
#define ACC_MIN_REL_RATE 0.25 /* rates: below 0.75 of the median */
#define ACC_MIN_REL_TIME 1.0  /* latencies: above twice the median */

static int acc_cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double acc_outlier_limit(const double *x, int n, int higher_worse, double *med) {
  *med = NAN;
  if (n < 3) return NAN; /* two figures cannot tell which of them is off */
  double *s = malloc(sizeof *s * (size_t)n);
  if (!s) return NAN;
  memcpy(s, x, sizeof *s * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, acc_cmp_d);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  for (int i = 0; i < n; i++) s[i] = fabs(x[i] - m);
  qsort(s, (size_t)n, sizeof *s, acc_cmp_d);
  double mad = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  *med = m;
  return fmax(ACC_K * 1.4826 * mad, (higher_worse ? ACC_MIN_REL_TIME : ACC_MIN_REL_RATE) * m);
}

int acc_outliers(const double *x, int n, int higher_worse, double *med, int *out) {
  double lim = acc_outlier_limit(x, n, higher_worse, med);
  if (isnan(lim)) return 0;
  int k = 0;
  for (int i = 0; i < n; i++) {
    out[i] = higher_worse ? x[i] - *med > lim : *med - x[i] > lim;
    k += out[i];
  }
  return k;
}

static int acc_sus_cmp(const void *a, const void *b) {
  const acc_suspect *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? 1 : -1;
  return strcmp(x->host, y->host);
}

void acc_suspects_sort(acc_suspect *s, int n) {
  if (n > 1) qsort(s, (size_t)n, sizeof *s, acc_sus_cmp);
}

/* ---- the links of the p2p rules ---- */

typedef struct {
  char src[256], dst[256];
  int src_rank, dst_rank;
  double v[ACC_DIRS_MAX];
  int nv;
} acc_link;

typedef struct {
  acc_link *l;
  int n, cap;
} acc_links;

static acc_link *acc_link_get(acc_links *L, const char *src, const char *dst) {
  for (int i = 0; i < L->n; i++)
    if (!strcmp(L->l[i].src, src) && !strcmp(L->l[i].dst, dst)) return &L->l[i];
  if (L->n == L->cap) {
    int cap = L->cap ? 2 * L->cap : 32;
    acc_link *n = realloc(L->l, sizeof *n * (size_t)cap);
    if (!n) return NULL;
    L->l = n;
    L->cap = cap;
  }
  acc_link *k = &L->l[L->n++];
  memset(k, 0, sizeof *k);
  snprintf(k->src, sizeof k->src, "%s", src);
  snprintf(k->dst, sizeof k->dst, "%s", dst);
  k->src_rank = k->dst_rank = -1;
  return k;
}

/* Per host pair the worst pair of ranks' figure in each run (a host pair of several ranks has
 * several rank pairs). */
static void acc_links_add(acc_links *L, const acc_pts *p, int dir, int higher_worse) {
  for (int i = 0; i < p->n; i++) {
    const acc_pt *q = &p->pt[i];
    if (!q->src[0]) continue; /* a row of all ranks: no link */
    acc_link *k = acc_link_get(L, q->src, q->dst);
    if (!k) return;
    if (k->nv == dir + 1) {
      if (higher_worse ? q->value > k->v[dir] : q->value < k->v[dir]) k->v[dir] = q->value;
    } else if (k->nv == dir) {
      k->v[k->nv++] = q->value;
      if (k->src_rank < 0) k->src_rank = q->src_rank, k->dst_rank = q->dst_rank;
    }
  }
}

static double acc_link_value(const acc_link *k) {
  double v[ACC_DIRS_MAX];
  memcpy(v, k->v, sizeof *v * (size_t)k->nv);
  return util_median(v, (size_t)k->nv);
}

int acc_suspect_add(acc_suspect **sus, int *nsus, const char *kind, const char *host, const char *link, int rank,
                       double ratio, double score, const char *evidence) {
  acc_suspect *n = realloc(*sus, sizeof *n * (size_t)(*nsus + 1));
  if (!n) return -1;
  *sus = n;
  acc_suspect *s = &n[(*nsus)++];
  memset(s, 0, sizeof *s);
  snprintf(s->kind, sizeof s->kind, "%s", kind);
  snprintf(s->host, sizeof s->host, "%s", host);
  snprintf(s->link, sizeof s->link, "%s", link);
  s->rank = rank;
  s->ratio = ratio;
  s->score = score;
  s->pair_src = s->pair_dst = -1;
  s->median = s->limit = NAN;
  snprintf(s->evidence, sizeof s->evidence, "%s", evidence);
  return 0;
}

/* A host's first rank among the links' ends (-1: none). */
static int acc_host_rank(const acc_links *L, const char *host) {
  int r = -1;
  for (int i = 0; i < L->n; i++)
    for (int e = 0; e < 2; e++) {
      int k = e ? L->l[i].dst_rank : L->l[i].src_rank;
      if (!strcmp(e ? L->l[i].dst : L->l[i].src, host) && k >= 0 && (r < 0 || k < r)) r = k;
    }
  return r;
}

/* One rule's names. runs: how many runs the figures are medians over. */
/* The last suspect added: where to retest it alone and the bound it lies beyond. */
static void acc_sus_from(acc_suspect *sus, int nsus, const char *rule, int src, int dst, double med, double lim, int hw,
                         int runs) {
  if (!nsus) return;
  acc_suspect *s = &sus[nsus - 1];
  s->runs = runs;
  snprintf(s->rule, sizeof s->rule, "%s", rule);
  s->pair_src = src;
  s->pair_dst = dst;
  s->median = med;
  s->limit = lim;
  s->higher_worse = hw;
}

static void acc_name_links(const acc_links *L, const char *rule, const char *what, int higher_worse, int runs,
                           acc_suspect **sus, int *nsus) {
  int n = L->n;
  if (n == 0) return;
  double *lv = malloc(sizeof *lv * (size_t)n), *hv = malloc(sizeof *hv * (size_t)(2 * n)),
         *tmp = malloc(sizeof *tmp * (size_t)n);
  int *out = calloc((size_t)(2 * n), sizeof *out), *named = calloc((size_t)(2 * n), sizeof *named);
  const char **hosts = calloc((size_t)(2 * n), sizeof *hosts);
  if (!lv || !hv || !tmp || !out || !named || !hosts) goto done;
  for (int i = 0; i < n; i++) lv[i] = acc_link_value(&L->l[i]);
  const char *q = higher_worse ? "latency" : what;
  char ev[ACC_TEXT_MAX], over[32];
  snprintf(over, sizeof over, "%d run%s", runs, runs == 1 ? "" : "s");
  /* the hosts: the median of each one's links to other hosts */
  int nh = 0;
  for (int i = 0; i < n; i++)
    for (int e = 0; e < 2; e++) {
      const char *h = e ? L->l[i].dst : L->l[i].src;
      int seen = 0;
      for (int j = 0; j < nh; j++) seen |= !strcmp(hosts[j], h);
      if (!seen && strcmp(L->l[i].src, L->l[i].dst)) hosts[nh++] = h;
    }
  for (int j = 0; j < nh; j++) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (strcmp(L->l[i].src, L->l[i].dst) && (!strcmp(L->l[i].src, hosts[j]) || !strcmp(L->l[i].dst, hosts[j])))
        tmp[k++] = lv[i];
    hv[j] = util_median(tmp, (size_t)k);
  }
  double med, lim;
  acc_outliers(hv, nh, higher_worse, &med, named);
  lim = acc_outlier_limit(hv, nh, higher_worse, &med);
  for (int j = 0; j < nh; j++) {
    if (!named[j]) continue;
    double ratio = hv[j] / med;
    acc_say(ev, sizeof ev, "host %s: its links at %.2f of the median %s (%.4g vs %.4g %s) over %s", hosts[j], ratio, q,
             hv[j], med, higher_worse ? "us" : "GB/s", over);
    acc_suspect_add(sus, nsus, "host", hosts[j], "", acc_host_rank(L, hosts[j]), ratio,
                higher_worse ? 1 - 1 / ratio : 1 - ratio, ev);
    acc_sus_from(*sus, *nsus, rule, -1, -1, med, lim, higher_worse, runs);
    /* retested alone: its link to a host not named, from it where there is one (p2p), else to
     * it (an all-reduce pair is listed once, from its lower rank) */
    int found = 0;
    for (int way = 0; way < 2 && !found; way++)
      for (int i = 0; i < n && !found; i++) {
        const acc_link *l = &L->l[i];
        const char *me = way ? l->dst : l->src, *peer = way ? l->src : l->dst;
        int other = -1;
        for (int h = 0; h < nh; h++)
          if (!strcmp(peer, hosts[h])) other = h;
        if (!strcmp(me, hosts[j]) && other >= 0 && !named[other] && l->src_rank >= 0) {
          acc_sus_from(*sus, *nsus, rule, l->src_rank, l->dst_rank, med, lim, higher_worse, runs);
          found = 1;
        }
      }
  }
  /* the links between hosts that no named host explains, against each other */
  int m = 0;
  int *idx = malloc(sizeof *idx * (size_t)n);
  if (!idx) goto done;
  for (int i = 0; i < n; i++) {
    if (!strcmp(L->l[i].src, L->l[i].dst)) continue;
    int explained = 0;
    for (int j = 0; j < nh; j++)
      explained |= named[j] && (!strcmp(L->l[i].src, hosts[j]) || !strcmp(L->l[i].dst, hosts[j]));
    if (!explained) idx[m] = i, tmp[m++] = lv[i];
  }
  acc_outliers(tmp, m, higher_worse, &med, out);
  lim = acc_outlier_limit(tmp, m, higher_worse, &med);
  for (int k = 0; k < m; k++) {
    if (!out[k]) continue;
    const acc_link *l = &L->l[idx[k]];
    char link[520];
    double ratio = tmp[k] / med;
    acc_say(link, sizeof link, "%s->%s", l->src, l->dst);
    acc_say(ev, sizeof ev, "link %s: %.2f of the median %s (%.4g vs %.4g %s) over %s", link, ratio, q, tmp[k], med,
             higher_worse ? "us" : "GB/s", over);
    acc_suspect_add(sus, nsus, "link", l->src, link, l->src_rank, ratio, higher_worse ? 1 - 1 / ratio : 1 - ratio, ev);
    acc_sus_from(*sus, *nsus, rule, l->src_rank, l->dst_rank, med, lim, higher_worse, runs);
  }
  /* inside hosts: each host's own fabric against the other hosts' */
  m = 0;
  for (int i = 0; i < n; i++)
    if (!strcmp(L->l[i].src, L->l[i].dst)) idx[m] = i, tmp[m++] = lv[i];
  acc_outliers(tmp, m, higher_worse, &med, out);
  for (int k = 0; k < m; k++) {
    if (!out[k]) continue;
    const acc_link *l = &L->l[idx[k]];
    double ratio = tmp[k] / med;
    acc_say(ev, sizeof ev, "host %s: inside it %.2f of the median %s between ranks of one host (%.4g vs %.4g %s) over %s",
             l->src, ratio, q, tmp[k], med, higher_worse ? "us" : "GB/s", over);
    acc_suspect_add(sus, nsus, "host", l->src, "", l->src_rank, ratio, higher_worse ? 1 - 1 / ratio : 1 - ratio, ev);
    acc_sus_from(*sus, *nsus, rule, -1, -1, med, lim, higher_worse, runs); /* not retested: no pair of ranks alone */
  }
  free(idx);
done:
  free(lv);
  free(hv);
  free(tmp);
  free(out);
  free(named);
  free(hosts);
}

void acc_name_suspects(const acc_ctx *c, const acc_result *res, int nres, acc_suspect **sus, int *nsus) {
  for (int i = 0; i < nres; i++) {
    const acc_rule *r = res[i].rule;
    /* p2p, and allreduce --pairs/--nodes (a plain all-reduce's rows name no link) */
    if (!r || (strcmp(r->argv[0], "p2p") && strcmp(r->argv[0], "allreduce")) || !res[i].measured || res[i].error) continue;
    acc_rule lr = *r;
    lr.ref = ACC_REF_ABS; /* the rows alone: no threshold is needed to compare them */
    int hw = acc_metric_quantity(r->metric) == ACC_Q_TIME;
    acc_links L = {0};
    int runs = 0;
    for (int d = 0; d < res[i].ndirs; d++) {
      acc_pts p = {0};
      char why[ACC_TEXT_MAX];
      if (!acc_dir_points(c, &lr, res[i].dirs[d], NULL, &p, why, sizeof why)) acc_links_add(&L, &p, runs++, hw);
      acc_pts_free(&p);
    }
    /* a link missing from some run is left out: its median would mix fewer runs */
    int k = 0;
    for (int j = 0; j < L.n; j++)
      if (L.l[j].nv == runs) L.l[k++] = L.l[j];
    L.n = k;
    if (runs) acc_name_links(&L, r->name, acc_metric_name(r->metric), hw, runs, sus, nsus);
    free(L.l);
  }
  /* one host or link named by several rules: keep the evidence over the most runs, then the
   * strongest */
  for (int i = 0; i < *nsus; i++)
    for (int j = i + 1; j < *nsus; j++) {
      acc_suspect *a = &(*sus)[i], *b = &(*sus)[j];
      if (strcmp(a->kind, b->kind) || strcmp(a->host, b->host) || strcmp(a->link, b->link)) continue;
      if (b->runs > a->runs || (b->runs == a->runs && b->score > a->score)) *a = *b;
      (*sus)[j--] = (*sus)[--(*nsus)];
    }
  acc_suspects_sort(*sus, *nsus);
}
