/* accept: a rule judged on its run directories. Each directory gives points (a row, or with
 * `x median of nodes` a host), each point a value and its threshold; the directory's figure is
 * its worst point, and over repeats the median of the figures. Fail-closed: a directory that is
 * missing, unreadable, failed, without matching rows or with a wrong element fails the rule. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "res.h"
#include "util.h"

void acc_say(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

acc_pt *acc_pts_add(acc_pts *p) {
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 16;
    acc_pt *n = realloc(p->pt, sizeof *n * (size_t)cap);
    if (!n) return NULL;
    p->pt = n;
    p->cap = cap;
  }
  acc_pt *q = &p->pt[p->n++];
  memset(q, 0, sizeof *q);
  q->pred = q->thr = NAN;
  q->src_rank = q->dst_rank = -1;
  return q;
}

void acc_pts_free(acc_pts *p) {
  free(p->pt);
  memset(p, 0, sizeof *p);
}

int acc_host_excluded(const acc_ctx *c, const char *host) {
  for (int i = 0; i < c->nexclude; i++)
    if (!strcmp(c->exclude[i], host)) return 1;
  return 0;
}

/* run.json's verdict on the run: 0 when it ended ok, else -1 with why. */
static int acc_run_ok(const char *dir, const char *command, char *why, size_t cap) {
  char path[ACC_PATH_MAX + 32];
  cJSON *o = NULL;
  if (!strcmp(command, "topo")) {
    snprintf(path, sizeof path, "%s/topo.json", dir);
    if (util_json_read_file(path, &o, why, cap)) return -1;
    cJSON_Delete(o);
    return 0;
  }
  snprintf(path, sizeof path, "%s/run.json", dir);
  if (util_json_read_file(path, &o, why, cap)) return -1;
  const cJSON *cmd = cJSON_GetObjectItem(o, "command"), *st = cJSON_GetObjectItem(o, "status");
  const cJSON *p2p = cJSON_GetObjectItem(o, "p2p");
  if (!cJSON_IsString(st) && cJSON_IsObject(p2p)) st = cJSON_GetObjectItem(p2p, "status");
  int rc = -1;
  if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, command))
    acc_say(why, cap, "%s: not a %s run", path, command);
  else if (!cJSON_IsString(st))
    acc_say(why, cap, "%s: the run did not end (no status)", path);
  else if (strcmp(st->valuestring, "ok")) {
    acc_say(why, cap, "%s: the run's status is '%s'", path, st->valuestring);
    if (strstr(st->valuestring, "wrong")) rc = -2; /* measured, and it fails */
  } else
    rc = 0;
  cJSON_Delete(o);
  return rc;
}

/* The link's rate a run recorded, in GB/s: the emulated rate, else the fastest NIC of rank 0's
 * host (topology.summary); NaN where neither is known. */
double acc_link_gbs(const char *dir) {
  char path[ACC_PATH_MAX + 32];
  cJSON *o = NULL;
  double g = NAN;
  snprintf(path, sizeof path, "%s/run.json", dir);
  if (util_json_read_file(path, &o, NULL, 0)) return NAN;
  const cJSON *er = cJSON_GetObjectItem(o, "emulated_rate");
  if (cJSON_IsString(er) && !acc_parse_quantity(er->valuestring, ACC_Q_RATE, &g)) {
    cJSON_Delete(o);
    return g;
  }
  const cJSON *nics = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "topology"), "summary"), "nics");
  const cJSON *n;
  cJSON_ArrayForEach(n, nics) {
    const cJSON *s = cJSON_GetObjectItem(n, "speed_gbps");
    if (cJSON_IsNumber(s) && s->valuedouble > 0 && !(g >= s->valuedouble / 8)) g = s->valuedouble / 8;
  }
  cJSON_Delete(o);
  return g;
}

/* ---- points: one per selected row ---- */

static int acc_worse(int at_least, double a, double b) { return at_least ? a < b : a > b; }

/* Size selection: the rule's bytes, else the largest (rates, images) or smallest (times). */
static int64_t acc_pick_bytes(const acc_rule *r, const int64_t *bytes, const int *keep, size_t n) {
  if (r->bytes) return r->bytes;
  int64_t b = -1;
  int largest = acc_metric_quantity(r->metric) != ACC_Q_TIME;
  for (size_t i = 0; i < n; i++)
    if (keep[i] && (b < 0 || (largest ? bytes[i] > b : bytes[i] < b))) b = bytes[i];
  return b;
}

static int acc_points_allreduce(const acc_rule *r, const res_rows *t, const res_costmodel *m, acc_pts *p) {
  const res_allreduce_row *rows = t->rows;
  int *keep = calloc(t->n + 1, sizeof *keep);
  int64_t *bytes = calloc(t->n + 1, sizeof *bytes);
  if (!keep || !bytes) return free(keep), free(bytes), -1;
  for (size_t i = 0; i < t->n; i++) {
    bytes[i] = rows[i].bytes;
    keep[i] = (!r->transport[0] || !strcmp(rows[i].transport, r->transport)) && (!r->algo[0] || !strcmp(rows[i].algo, r->algo));
  }
  int64_t b = acc_pick_bytes(r, bytes, keep, t->n);
  for (size_t i = 0; i < t->n; i++) {
    if (!keep[i] || rows[i].bytes != b) continue;
    const res_allreduce_row *w = &rows[i];
    double v = r->metric == ACC_M_BUSBW ? w->busbw_gbps : r->metric == ACC_M_ALGBW ? w->algbw_gbps
             : r->metric == ACC_M_TIME_P50 ? w->t_p50_us : w->t_p99_us;
    acc_pt *q = acc_pts_add(p);
    if (!q) break;
    q->value = v;
    acc_say(q->where, sizeof q->where, "%s %s %lld bytes", w->transport, w->algo, (long long)w->bytes);
    if (m) {
      double s = res_allreduce_row_time(m, w, NULL, NULL);
      if (isfinite(s) && s > 0)
        q->pred = acc_metric_quantity(r->metric) == ACC_Q_TIME ? s * 1e6 : v * w->t_p50_us / (s * 1e6);
    }
  }
  free(keep);
  free(bytes);
  return 0;
}

static int acc_points_p2p(const acc_ctx *c, const acc_rule *r, const res_rows *t, const res_costmodel *m, acc_pts *p) {
  const res_p2p_row *rows = t->rows;
  const char *test = r->metric == ACC_M_BW ? "bw" : r->metric == ACC_M_BIBW ? "bibw" : "latency";
  int *keep = calloc(t->n + 1, sizeof *keep);
  int64_t *bytes = calloc(t->n + 1, sizeof *bytes);
  if (!keep || !bytes) return free(keep), free(bytes), -1;
  for (size_t i = 0; i < t->n; i++) {
    bytes[i] = rows[i].bytes;
    keep[i] = !strcmp(rows[i].test, test) && (!r->transport[0] || !strcmp(rows[i].transport, r->transport)) &&
              !acc_host_excluded(c, rows[i].src_host) && !acc_host_excluded(c, rows[i].dst_host);
  }
  int64_t b = acc_pick_bytes(r, bytes, keep, t->n);
  for (size_t i = 0; i < t->n; i++) {
    if (!keep[i] || rows[i].bytes != b) continue;
    const res_p2p_row *w = &rows[i];
    acc_pt *q = acc_pts_add(p);
    if (!q) break;
    q->value = r->metric == ACC_M_BW || r->metric == ACC_M_BIBW ? w->gbps : r->metric == ACC_M_LATENCY ? w->t_p50_us : w->t_p99_us;
    snprintf(q->src, sizeof q->src, "%s", w->src_host);
    snprintf(q->dst, sizeof q->dst, "%s", w->dst_host);
    q->src_rank = (int)w->src;
    q->dst_rank = (int)w->dst;
    acc_say(q->where, sizeof q->where, "%s %s %lld->%lld (%s->%s) %lld bytes", w->transport, w->test, (long long)w->src,
            (long long)w->dst, w->src_host, w->dst_host, (long long)w->bytes);
    if (m) {
      const res_fabric_cost *f = res_costmodel_find(m, w->fabric, w->transport, strcmp(w->src_host, w->dst_host) ? 2 : 1, w->topo_hash);
      if (f) {
        double us = (f->m.alpha + (double)w->bytes * f->m.beta) * 1e6;
        q->pred = acc_metric_quantity(r->metric) == ACC_Q_TIME ? us : (r->metric == ACC_M_BIBW ? 2 : 1) * (double)w->bytes / (us * 1e3);
      }
    }
  }
  free(keep);
  free(bytes);
  return 0;
}

/* allreduce --pairs/--nodes rows (allreduce_groups.csv): a point per group, with its hosts (a
 * node alone: its host at both ends) and, for a pair, its ranks (to retest it alone). */
static int acc_points_groups(const acc_ctx *c, const acc_rule *r, const res_rows *t, acc_pts *p) {
  const res_allreduce_groups_row *rows = t->rows;
  int *keep = calloc(t->n + 1, sizeof *keep);
  int64_t *bytes = calloc(t->n + 1, sizeof *bytes);
  if (!keep || !bytes) return free(keep), free(bytes), -1;
  for (size_t i = 0; i < t->n; i++) {
    bytes[i] = rows[i].bytes;
    keep[i] = (!r->transport[0] || !strcmp(rows[i].transport, r->transport)) && (!r->algo[0] || !strcmp(rows[i].algo, r->algo)) &&
              !acc_host_excluded(c, rows[i].src_host) && !acc_host_excluded(c, rows[i].dst_host);
  }
  int64_t b = acc_pick_bytes(r, bytes, keep, t->n);
  for (size_t i = 0; i < t->n; i++) {
    if (!keep[i] || rows[i].bytes != b) continue;
    const res_allreduce_groups_row *w = &rows[i];
    acc_pt *q = acc_pts_add(p);
    if (!q) break;
    q->value = r->metric == ACC_M_BUSBW ? w->busbw_gbps : r->metric == ACC_M_ALGBW ? w->algbw_gbps
             : r->metric == ACC_M_TIME_P50 ? w->t_p50_us : w->t_p99_us;
    snprintf(q->src, sizeof q->src, "%s", w->src_host);
    snprintf(q->dst, sizeof q->dst, "%s", w->dst_host);
    if (!strcmp(w->group, "pair")) q->src_rank = (int)w->src, q->dst_rank = (int)w->dst;
    if (!strcmp(w->group, "node")) q->src_rank = (int)w->src; /* its rank named; no pair to retest */
    if (!strcmp(w->group, "pair"))
      acc_say(q->where, sizeof q->where, "%s %s pair %lld-%lld (%s-%s) %lld bytes", w->transport, w->algo,
              (long long)w->src, (long long)w->dst, w->src_host, w->dst_host, (long long)w->bytes);
    else if (!strcmp(w->group, "node"))
      acc_say(q->where, sizeof q->where, "%s %s node %s alone (%lld ranks) %lld bytes", w->transport, w->algo,
              w->src_host, (long long)w->ranks, (long long)w->bytes);
    else
      acc_say(q->where, sizeof q->where, "%s %s node %s with %s (%lld ranks) %lld bytes", w->transport, w->algo,
              w->src_host, w->dst_host, (long long)w->ranks, (long long)w->bytes);
  }
  free(keep);
  free(bytes);
  return 0;
}

/* train rows: the data-parallel ones (not the no-exchange profile); the model's figure is the
 * row priced under it as `train --model-from` prices it (its profile and bucket rows, bk may be
 * NULL). */
static int acc_points_train(const acc_rule *r, const res_rows *t, const res_rows *bk, const res_costmodel *m, acc_pts *p,
                            char *why, size_t cap) {
  const res_train_row *rows = t->rows;
  for (size_t i = 0; i < t->n; i++) {
    const res_train_row *w = &rows[i];
    if (!strcmp(w->role, "none")) continue; /* the no-exchange profile is not the job */
    if (r->transport[0] && strcmp(w->transport, r->transport)) continue;
    if (r->algo[0] && strcmp(w->algo, r->algo)) continue;
    if (!strcmp(w->status, "failed")) {
      acc_say(why, cap, "training %s %s failed", w->transport, w->algo);
      return -2;
    }
    acc_pt *q = acc_pts_add(p);
    if (!q) return -1;
    q->value = w->images_per_s;
    if (m) {
      res_train_row priced = *w;
      if (!res_predict_train_row(&priced, res_train_profile(t, w), bk, m)) q->pred = priced.images_per_s_pred;
    }
    acc_say(q->where, sizeof q->where, "%s %s %s x%lld", w->role, w->transport, w->algo, (long long)w->ranks);
  }
  return 0;
}

/* Wrong elements in any row of the run (its schema s): their count (0 for none). */
static int64_t acc_wrong(const res_rows *t, const res_schema *s) {
  int64_t n = 0;
  for (size_t i = 0; i < t->n; i++)
    n += s == res_schema_p2p() ? ((const res_p2p_row *)t->rows)[i].errors
       : s == res_schema_allreduce_groups() ? ((const res_allreduce_groups_row *)t->rows)[i].errors
                                            : ((const res_allreduce_row *)t->rows)[i].errors;
  return n;
}

/* The points of one directory. 0; -1 with why (unreadable, wrong elements, no rows). */
int acc_dir_points(const acc_ctx *c, const acc_rule *r, const char *dir, const res_costmodel *m, acc_pts *p,
                   char *why, size_t cap) {
  const char *cmd = r->argv[0];
  int ok = acc_run_ok(dir, cmd, why, cap);
  if (ok) return ok;
  const res_schema *s = !strcmp(cmd, "allreduce") ? res_schema_allreduce() : !strcmp(cmd, "p2p") ? res_schema_p2p()
                                                                                                   : res_schema_train();
  /* allreduce --pairs/--nodes writes its rows per group */
  if (s == res_schema_allreduce() && res_table_exists(res_schema_allreduce_groups(), dir)) s = res_schema_allreduce_groups();
  res_rows t = {0};
  char err[600];
  if (res_table_read(&t, s, dir, err, sizeof err)) {
    acc_say(why, cap, "%s", err);
    return -1;
  }
  int rc = 0;
  int64_t wrong = strcmp(cmd, "train") ? acc_wrong(&t, s) : 0;
  if (wrong) {
    acc_say(why, cap, "%lld wrong element%s in %s", (long long)wrong, wrong == 1 ? "" : "s", dir);
    rc = -2;
  } else if (s == res_schema_allreduce_groups()) {
    rc = acc_points_groups(c, r, &t, p);
  } else if (!strcmp(cmd, "allreduce")) {
    rc = acc_points_allreduce(r, &t, m, p);
  } else if (!strcmp(cmd, "p2p")) {
    rc = acc_points_p2p(c, r, &t, m, p);
  } else {
    res_rows bk = {0};
    int have_bk = m && res_table_exists(res_schema_train_buckets(), dir) &&
                  !res_table_read(&bk, res_schema_train_buckets(), dir, err, sizeof err);
    rc = acc_points_train(r, &t, have_bk ? &bk : NULL, m, p, why, cap);
    if (have_bk) res_rows_free(&bk);
  }
  if (rc == -1) acc_say(why, cap, "out of memory");
  if (!rc && p->n == 0) {
    acc_say(why, cap, "no %s rows match the rule in %s", cmd, dir);
    rc = -2;
  }
  for (int i = 0; !rc && i < p->n; i++)
    if (!isfinite(p->pt[i].value)) {
      acc_say(why, cap, "%s: %s not measured", dir, p->pt[i].where);
      rc = -2;
    }
  res_rows_free(&t);
  return rc;
}

/* `x median of nodes`: the points become hosts, each the median of its links to other hosts. */
static int acc_points_to_hosts(acc_pts *p, char *why, size_t cap) {
  acc_pts h = {0};
  double *v = malloc(sizeof *v * (size_t)(p->n + 1));
  if (!v) return -1;
  for (int i = 0; i < p->n; i++) {
    for (int e = 0; e < 2; e++) {
      const char *host = e ? p->pt[i].dst : p->pt[i].src;
      if (!host[0] || !strcmp(p->pt[i].src, p->pt[i].dst)) continue;
      int seen = 0;
      for (int k = 0; k < h.n; k++) seen |= !strcmp(h.pt[k].src, host);
      if (seen) continue;
      int nv = 0;
      for (int j = 0; j < p->n; j++)
        if (strcmp(p->pt[j].src, p->pt[j].dst) && (!strcmp(p->pt[j].src, host) || !strcmp(p->pt[j].dst, host)))
          v[nv++] = p->pt[j].value;
      acc_pt *q = acc_pts_add(&h);
      if (!q) break;
      snprintf(q->src, sizeof q->src, "%s", host);
      q->value = util_median(v, (size_t)nv);
      q->pred = NAN;
      acc_say(q->where, sizeof q->where, "host %s (median of its %d links)", host, nv);
    }
  }
  free(v);
  acc_pts_free(p);
  *p = h;
  if (p->n < 2) {
    acc_say(why, cap, "no per-node figures: the measurement spans %d host%s (p2p between hosts gives them)", p->n,
            p->n == 1 ? "" : "s");
    return -1;
  }
  return 0;
}

/* Each point's threshold. 0; -1 with why where one cannot be had. */
static int acc_thresholds(const acc_ctx *c, const acc_rule *r, const char *dir, acc_pts *p, char *why, size_t cap) {
  double t = r->value;
  if (r->ref == ACC_REF_LINK) {
    double g = acc_link_gbs(dir);
    if (!isfinite(g)) {
      acc_say(why, cap, "%s: the link's rate is unknown (no emulated rate, no NIC speed in run.json)", dir);
      return -1;
    }
    t = r->value * g;
  } else if (r->ref == ACC_REF_REFERENCE) {
    acc_ctx rc = *c;
    acc_rule ar = *r;
    acc_pts ref = {0};
    char w2[ACC_TEXT_MAX];
    ar.ref = ACC_REF_ABS;
    if (acc_dir_points(&rc, &ar, c->rules->reference, NULL, &ref, w2, sizeof w2) || ref.n == 0) {
      acc_say(why, cap, "reference: %s", w2);
      acc_pts_free(&ref);
      return -1;
    }
    double worst = ref.pt[0].value;
    for (int i = 1; i < ref.n; i++)
      if (acc_worse(r->at_least, ref.pt[i].value, worst)) worst = ref.pt[i].value;
    acc_pts_free(&ref);
    t = r->value * worst;
  } else if (r->ref == ACC_REF_NODES) {
    if (acc_points_to_hosts(p, why, cap)) return -1;
    double *v = malloc(sizeof *v * (size_t)p->n);
    if (!v) return -1;
    for (int i = 0; i < p->n; i++) v[i] = p->pt[i].value;
    t = r->value * util_median(v, (size_t)p->n);
    free(v);
  }
  for (int i = 0; i < p->n; i++) {
    if (r->ref != ACC_REF_MODEL) {
      p->pt[i].thr = t;
    } else if (!(p->pt[i].pred > 0)) {
      acc_say(why, cap, "the model prices no %s (%s)", p->pt[i].where, c->rules->model);
      return -1;
    } else {
      p->pt[i].thr = r->value * p->pt[i].pred;
    }
  }
  return 0;
}

void acc_judge_rule(const acc_ctx *c, acc_result *res) {
  const acc_rule *r = res->rule;
  snprintf(res->name, sizeof res->name, "%s", r->name);
  res->value = res->threshold = res->spread = NAN;
  res->nvalues = 0;
  res->pass = 0;
  if (res->ndirs == 0) {
    res->error = 1;
    acc_say(res->evidence, sizeof res->evidence, "no measurement");
    return;
  }
  if (!strcmp(r->argv[0], "topo")) { /* judged with the topology's testcase */
    char why[ACC_TEXT_MAX];
    res->measured = acc_run_ok(res->dirs[0], "topo", why, sizeof why) == 0;
    res->pass = res->measured;
    res->error = !res->measured;
    acc_say(res->evidence, sizeof res->evidence, "%s", res->measured ? "topology recorded (judged under 'topology')" : why);
    return;
  }
  res_costmodel model = {0}, *m = NULL;
  if (r->ref == ACC_REF_MODEL) {
    char err[600];
    if (res_costmodel_read(&model, c->rules->model, err, sizeof err)) {
      acc_say(res->evidence, sizeof res->evidence, "%s", err);
      return;
    }
    m = &model;
  }
  double thr[ACC_DIRS_MAX];
  char where[ACC_DIRS_MAX][ACC_TEXT_MAX];
  for (int d = 0; d < res->ndirs; d++) {
    acc_pts p = {0};
    char why[ACC_TEXT_MAX];
    int prc = acc_dir_points(c, r, res->dirs[d], m, &p, why, sizeof why);
    if (prc || acc_thresholds(c, r, res->dirs[d], &p, why, sizeof why)) {
      acc_say(res->evidence, sizeof res->evidence, "%s", why);
      res->measured = prc != -1;
      res->error = prc == -1;
      acc_pts_free(&p);
      res_costmodel_free(&model);
      return;
    }
    int w = 0; /* the worst point: the lowest (highest) value over its threshold */
    for (int i = 1; i < p.n; i++)
      if (acc_worse(r->at_least, p.pt[i].value / p.pt[i].thr, p.pt[w].value / p.pt[w].thr)) w = i;
    res->values[d] = p.pt[w].value;
    thr[d] = p.pt[w].thr;
    acc_say(where[d], sizeof where[d], "%s", p.pt[w].where);
    acc_pts_free(&p);
  }
  res_costmodel_free(&model);
  res->measured = 1;
  res->nvalues = res->ndirs;
  /* the median of the figures, and the threshold and row of the run that gave it */
  double v[ACC_DIRS_MAX];
  memcpy(v, res->values, sizeof *v * (size_t)res->ndirs);
  double med = util_median(v, (size_t)res->ndirs);
  int k = 0;
  for (int d = 1; d < res->ndirs; d++)
    if (fabs(res->values[d] - med) < fabs(res->values[k] - med)) k = d;
  res->value = med;
  memcpy(v, thr, sizeof *v * (size_t)res->ndirs);
  res->threshold = util_median(v, (size_t)res->ndirs);
  acc_say(res->where, sizeof res->where, "%s", where[k]);
  if (res->ndirs > 1) {
    double lo = res->values[0], hi = lo;
    for (int d = 1; d < res->ndirs; d++) lo = fmin(lo, res->values[d]), hi = fmax(hi, res->values[d]);
    res->spread = med > 0 ? (hi - lo) / med : NAN;
  }
  res->pass = r->at_least ? res->value >= res->threshold : res->value <= res->threshold;
  const char *unit = acc_quantity_unit(acc_metric_quantity(r->metric));
  char runs[96] = "";
  if (res->ndirs > 1) snprintf(runs, sizeof runs, ", median of %d runs, spread %.0f%%", res->ndirs, 100 * res->spread);
  acc_say(res->evidence, sizeof res->evidence, "%s %.5g %s %s %.5g %s (%s) at %s%s", acc_metric_name(r->metric),
           res->value, unit, res->pass ? (r->at_least ? ">=" : "<=") : (r->at_least ? "<" : ">"), res->threshold, unit,
           r->threshold_text, res->where, runs);
}
