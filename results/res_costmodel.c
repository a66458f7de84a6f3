/* results: the cost model as a value: finding a fabric's model for a row, its label, its link
 * rate, and model.json written and read back. The fit that makes one is res_fit.c's. */
#include "res.h"
#include "res_internal.h"
#include "util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const res_fabric_cost *res_costmodel_find(const res_costmodel *m, const char *fabric,
                                       const char *transport, int host_count, const char *topo) {
  const res_fabric_cost *best = NULL;
  int best_score = -1;
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    if (strcmp(f->fabric, fabric) || (transport && strcmp(f->transport, transport))) continue;
    int score = 2 * (f->host_count == host_count) + (topo && *topo && !strcmp(f->topo, topo));
    if (score > best_score) best = f, best_score = score;
  }
  return best;
}

double res_node_cores(double machine_cores, int emulated, int nodes) {
  if (!(machine_cores > 0)) return 0;
  return emulated && nodes > 1 ? machine_cores / nodes : machine_cores;
}

int res_fabric_emulated(const res_fabric_cost *f) { return !strncmp(f->fabric, "emu-", 4); }

double res_machine_cores(const res_fabric_cost *f) {
  /* the fit divided an emulated cluster's machine among its nodes (res_node_cores) */
  int nodes = f->m.hosts > 1 ? f->m.hosts : 1;
  return res_fabric_emulated(f) ? f->m.cores * nodes : f->m.cores;
}

void res_fabric_on_hosts(res_fabric_cost *f, int host_count) {
  if (host_count < 1) return;
  f->m.cores = res_node_cores(res_machine_cores(f), res_fabric_emulated(f), host_count);
  f->m.hosts = host_count;
  f->host_count = host_count;
}

/* Ranks on a host: the row's ranks_per_host, or for a row without one its ranks spread evenly. */
static int64_t rcm_per_host(int64_t host_count, int64_t ranks_per_host, int64_t ranks) {
  return ranks_per_host > 0 ? ranks_per_host : host_count > 0 ? (ranks + host_count - 1) / host_count : ranks;
}

int res_row_one_fabric(coll_algo a, int64_t host_count, int64_t ranks_per_host, int64_t ranks) {
  if (a.kind == COLL_ALGO_NATIVE || a.kind == COLL_ALGO_AUTO || a.kind == COLL_ALGO_HIER) return 0;
  int64_t ppn = rcm_per_host(host_count, ranks_per_host, ranks);
  return host_count <= 1 || ppn <= 1;
}

int res_costmodel_levels(const res_costmodel *m, const char *fabric, const char *transport, int host_count,
                     int ranks_per_host, int ranks, const char *topo, const res_fabric_cost **intra,
                     const res_fabric_cost **inter) {
  *intra = NULL;
  *inter = m && fabric ? res_costmodel_find(m, fabric, transport, host_count, topo) : NULL;
  if (!*inter) return -1;
  int ppn = (int)rcm_per_host(host_count, ranks_per_host, ranks);
  if (host_count <= 1 || ppn <= 1) return 0;
  int best = -1;
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    if (f->host_count > 1 || !strncmp(f->fabric, "emu-", 4) || (transport && strcmp(f->transport, transport)))
      continue;
    int score = 2 * (topo && *topo && !strcmp(f->topo, topo)) + !f->m.mapped;
    if (score > best) *intra = f, best = score;
  }
  return *intra ? 0 : -1;
}

int res_ar_spec_for(res_ar_spec *s, const res_fabric_cost *intra, const res_fabric_cost *inter, coll_algo a,
                    int ranks, int host_count, int ranks_per_host) {
  if (a.kind == COLL_ALGO_NATIVE || a.kind == COLL_ALGO_AUTO || !inter) return -1;
  int hier = a.kind == COLL_ALGO_HIER;
  coll_algo across = hier ? (coll_algo){(coll_algo_kind)a.param, 0} : a;
  int ppn = (int)rcm_per_host(host_count, ranks_per_host, ranks);
  *s = (res_ar_spec){.intra = intra ? &intra->m : &inter->m, .inter = intra ? &inter->m : NULL, .algo = across,
                     .hier = hier && intra, .ranks = ranks, .ranks_per_node = host_count > 1 ? ppn : ranks,
                     .chunk_bytes = inter->chunk_bytes > 0 ? (size_t)inter->chunk_bytes : 0};
  /* hier on one host is the ring's two halves; across hosts of one rank, its algorithm alone */
  if (hier && host_count <= 1) s->algo = (coll_algo){COLL_ALGO_RING, 0};
  return 0;
}

const char *res_costmodel_label(const res_costmodel *m, const res_fabric_cost *f, char *buf, size_t cap) {
  int twin = 0;
  for (size_t i = 0; i < m->n; i++)
    twin |= &m->f[i] != f && !strcmp(m->f[i].fabric, f->fabric) &&
            !strcmp(m->f[i].transport, f->transport) && m->f[i].host_count == f->host_count;
  if (twin) snprintf(buf, cap, "%s [%.8s]", f->fabric, *f->topo ? f->topo : "?");
  else snprintf(buf, cap, "%s", f->fabric);
  return buf;
}

void res_costmodel_free(res_costmodel *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) free(m->f[i].resid);
  free(m->f);
  m->f = NULL;
  m->n = 0;
}

double res_costmodel_link_gbps(const coll_model *m, int ranks) {
  /* the ring's: a rank sends 2 (p-1)/p n on its link, its host 2 (p-1) n / hosts with
   * min(local, cores) cores */
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (ranks + hosts - 1) / hosts;
  double senders = m->cores > 0 && local > m->cores ? m->cores : local;
  double cpu = m->beta_cpu * local / senders, b = m->beta > cpu ? m->beta : cpu;
  return b > 0 ? 1e-9 / b : NAN;
}

/* ---- model.json ---- */

static cJSON *rcm_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

int res_costmodel_write(const res_costmodel *m, const char *path, char *err, size_t errcap) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "schema", RES_SCHEMA_VERSION);
  cJSON_AddStringToObject(o, "kind", "fabench-cost-model");
  cJSON_AddItemToObject(o, "gamma_kernel_s_per_byte", rcm_num(m->gamma_kernel));
  cJSON *arr = cJSON_AddArrayToObject(o, "fabrics");
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *f = &m->f[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "fabric", f->fabric);
    cJSON_AddStringToObject(j, "transport", f->transport);
    cJSON_AddNumberToObject(j, "host_count", f->host_count);
    if (*f->topo) cJSON_AddStringToObject(j, "topo_hash", f->topo);
    cJSON_AddStringToObject(j, "source", f->source);
    cJSON_AddItemToObject(j, "alpha_us", rcm_num(f->m.alpha * 1e6));
    cJSON_AddItemToObject(j, "beta_s_per_byte", rcm_num(f->m.beta));
    cJSON_AddItemToObject(j, "gamma_s_per_byte", rcm_num(f->m.gamma));
    cJSON_AddItemToObject(j, "beta_cpu_s_per_byte", rcm_num(f->m.beta_cpu));
    cJSON_AddItemToObject(j, "burst_bytes", rcm_num(f->m.burst));
    cJSON_AddNumberToObject(j, "cores", f->m.cores);
    cJSON_AddBoolToObject(j, "mapped", f->m.mapped);
    cJSON_AddBoolToObject(j, "reduce_hidden", f->m.red_hidden);
    cJSON_AddItemToObject(j, "link_gbps", rcm_num(res_costmodel_link_gbps(&f->m, 2) ));
    cJSON_AddItemToObject(j, "reduce_gbps", rcm_num(f->m.gamma > 0 ? 1e-9 / f->m.gamma : NAN));
    cJSON_AddBoolToObject(j, "gamma_fixed", f->gamma_fixed);
    cJSON_AddItemToObject(j, "r2", rcm_num(f->r2));
    cJSON_AddItemToObject(j, "rms_rel", rcm_num(f->rms_rel));
    cJSON_AddNumberToObject(j, "n", (double)f->n);
    cJSON_AddNumberToObject(j, "n_used", (double)f->n_used);
    cJSON_AddNumberToObject(j, "chunk_bytes", (double)f->chunk_bytes);
    cJSON_AddItemToObject(j, "cpu_s_per_byte", rcm_num(f->cpu_byte));
    /* predictions carry the residuals' misses (rcm_learn): rebuilt from them on reading */
    cJSON_AddBoolToObject(j, "learned", f->learned);
    if (f->nbusy) { /* [ranks, bytes, loss, pace] */
      cJSON *bz = cJSON_AddArrayToObject(j, "compute_loss");
      for (int q = 0; q < f->nbusy; q++) {
        cJSON *x = cJSON_CreateArray();
        cJSON_AddItemToArray(x, cJSON_CreateNumber(f->busy[q].ranks));
        cJSON_AddItemToArray(x, cJSON_CreateNumber(f->busy[q].bytes));
        cJSON_AddItemToArray(x, rcm_num(f->busy[q].loss));
        cJSON_AddItemToArray(x, rcm_num(f->busy[q].pace));
        cJSON_AddItemToArray(bz, x);
      }
    }
    cJSON *rs = cJSON_AddArrayToObject(j, "residuals");
    for (size_t q = 0; q < f->nresid; q++) {
      const res_resid *r = &f->resid[q];
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "algo", r->algo);
      cJSON_AddNumberToObject(x, "ranks", r->ranks);
      cJSON_AddNumberToObject(x, "bytes", (double)r->bytes);
      cJSON_AddItemToObject(x, "t_us", rcm_num(r->t_us));
      cJSON_AddItemToObject(x, "pred_us", rcm_num(r->pred_us));
      cJSON_AddItemToObject(x, "resid", rcm_num(r->resid));
      cJSON_AddBoolToObject(x, "outlier", r->outlier);
      cJSON_AddItemToArray(rs, x);
    }
    cJSON_AddItemToArray(arr, j);
  }
  int rc = util_json_write_file(path, o, err, errcap);
  cJSON_Delete(o);
  return rc;
}

static double rcm_get(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A whole-number field within [lo, hi], def when absent or null; -1 when it holds anything else
 * (converting a NaN or an out-of-range double is undefined: a fuzz finding). */
static int rcm_getint(const cJSON *o, const char *k, double lo, double hi, double def, double *v) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!j || cJSON_IsNull(j)) {
    *v = def;
    return 0;
  }
  *v = cJSON_IsNumber(j) ? j->valuedouble : NAN;
  return *v >= lo && *v <= hi && *v == floor(*v) ? 0 : -1;
}

/* A cost parameter of a fabric entry (or the file's, fab NULL): 0 with *v a finite number from
 * 0, or NaN where an optional one is absent or null (written so when not fitted); -1 with err
 * naming the file, fabric and field where it is missing but required, not a number, negative
 * or not finite. A negative or infinite cost is no model: a prediction of a negative beta went
 * into allreduce's t_pred_us and predict's rates without a word. */
static int rcm_param(const cJSON *o, const char *k, int required, const char *file, const char *fab, double *v,
                    char *err, size_t cap) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
  *v = NAN;
  const char *why = NULL;
  if (!j || cJSON_IsNull(j))
    why = required ? "is missing" : NULL;
  else if (!cJSON_IsNumber(j))
    why = "is not a number";
  else if (!isfinite(j->valuedouble) || j->valuedouble < 0)
    why = "is negative or not finite: a cost is a finite number from 0";
  else
    *v = j->valuedouble;
  if (!why) return 0;
  if (fab)
    res_errf(err, cap, "%s: fabric %s: %s %s", file, fab, k, why);
  else
    res_errf(err, cap, "%s: %s %s", file, k, why);
  return -1;
}

static const char *rcm_gets(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A fabric's compute_loss points: [ranks, bytes, loss, pace]. 0, or -1 with err. */
static int rcm_read_busy(res_fabric_cost *f, const cJSON *j, const char *file, const char *fab, char *err, size_t errcap) {
  const cJSON *bz = cJSON_GetObjectItemCaseSensitive(j, "compute_loss"), *bp;
  cJSON_ArrayForEach(bp, bz) {
    const cJSON *q0 = cJSON_GetArrayItem(bp, 0), *q1 = cJSON_GetArrayItem(bp, 1), *q2 = cJSON_GetArrayItem(bp, 2);
    if (f->nbusy == RES_BUSY_MAX || !cJSON_IsNumber(q0) || !cJSON_IsNumber(q1) || !cJSON_IsNumber(q2) ||
        !(q0->valuedouble >= 2 && q0->valuedouble <= 1 << 20) || !(q1->valuedouble > 0) ||
        !(q2->valuedouble >= -1 && q2->valuedouble <= 1)) {
      res_errf(err, errcap, "%s: fabric %s: compute_loss holds a point that is not [ranks >= 2, bytes > 0, loss in -1..1] (at most %d)",
               file, fab, RES_BUSY_MAX);
      return -1;
    }
    /* the pace (a fourth item, a number above 0) is newer: a model without it prices the
     * all-reduce beside the compute by the share of the cores alone */
    const cJSON *q3 = cJSON_GetArrayItem(bp, 3);
    double pace = cJSON_IsNumber(q3) && q3->valuedouble > 0 ? q3->valuedouble : NAN;
    f->busy[f->nbusy++] = (res_busy){(int)q0->valuedouble, q1->valuedouble, q2->valuedouble, pace};
  }
  return 0;
}

/* A fabric's residuals (none kept where there is no memory for them). 0, or -1 with err. */
static int rcm_read_resid(res_fabric_cost *f, const cJSON *j, const char *file, const char *fab, char *err,
                         size_t errcap) {
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "residuals"), *x;
  int nr = cJSON_GetArraySize(rs);
  if (nr > 0 && (f->resid = calloc((size_t)nr, sizeof *f->resid))) {
    cJSON_ArrayForEach(x, rs) {
      res_resid *r = &f->resid[f->nresid++];
      const char *al = rcm_gets(x, "algo");
      snprintf(r->algo, sizeof r->algo, "%s", al ? al : "");
      double rk, by;
      if (rcm_getint(x, "ranks", 0, INT_MAX, 0, &rk) || rcm_getint(x, "bytes", 0, 0x1p53, 0, &by)) {
        res_errf(err, errcap, "%s: fabric %s: a residual's ranks or bytes is not a whole number in range", file, fab);
        return -1;
      }
      r->ranks = (int)rk;
      r->bytes = (int64_t)by;
      r->t_us = rcm_get(x, "t_us");
      r->pred_us = rcm_get(x, "pred_us");
      r->resid = rcm_get(x, "resid");
      r->outlier = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "outlier"));
    }
  }
  return 0;
}

/* One entry of model.json's fabrics into a new fabric of m: its parameters, required then optional
 * ones (absent: 0), what the fit measured beside a load, and its residuals. 0, or -1 with err. */
static int rcm_read_fabric(res_costmodel *m, const cJSON *j, const char *file, char *err, size_t errcap) {
  const char *fab = rcm_gets(j, "fabric");
  if (!fab) {
    res_errf(err, errcap, "%s: a fabric entry lacks fabric, alpha_us, beta_s_per_byte or gamma_s_per_byte", file);
    return -1;
  }
  /* keys of terms the model no longer has (delta_us, wake_us, mem_s_per_byte, ...) are passed
   * over: an older model.json still prices with the terms it shares */
  double a, b, g, bc, bu, cpu;
  if (rcm_param(j, "alpha_us", 1, file, fab, &a, err, errcap) || rcm_param(j, "beta_s_per_byte", 1, file, fab, &b, err, errcap) ||
      rcm_param(j, "gamma_s_per_byte", 1, file, fab, &g, err, errcap) ||
      rcm_param(j, "beta_cpu_s_per_byte", 0, file, fab, &bc, err, errcap) ||
      rcm_param(j, "burst_bytes", 0, file, fab, &bu, err, errcap) ||
      rcm_param(j, "cpu_s_per_byte", 0, file, fab, &cpu, err, errcap))
    return -1;
  double hc, ch, n, nu;
  if (rcm_getint(j, "host_count", 1, INT_MAX, 1, &hc) || rcm_getint(j, "chunk_bytes", 0, 0x1p53, 0, &ch) ||
      rcm_getint(j, "n", 0, 0x1p53, 0, &n) || rcm_getint(j, "n_used", 0, 0x1p53, 0, &nu)) {
    res_errf(err, errcap, "%s: fabric %s: host_count, chunk_bytes, n or n_used is not a whole number in range", file, fab);
    return -1;
  }
  const char *tr = rcm_gets(j, "transport"), *src = rcm_gets(j, "source"), *th = rcm_gets(j, "topo_hash");
  res_fabric_cost *f = res_fabric_add(m, fab, tr ? tr : "", src ? src : "", (int)hc, th, err, errcap);
  if (!f) return -1;
  f->chunk_bytes = (int64_t)ch;
  /* a node's cores: an emulated node's share of the machine may be a fraction */
  double co;
  if (rcm_param(j, "cores", 0, file, fab, &co, err, errcap)) return -1;
  if (!(co <= 1 << 20)) co = 0;
  f->m = (coll_model){.alpha = a * 1e-6, .beta = b, .gamma = g, .beta_cpu = isfinite(bc) ? bc : 0,
                      .burst = bu > 0 ? bu : 0, .cores = co, .hosts = f->host_count,
                      .mapped = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "mapped")),
                      .red_hidden = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "reduce_hidden"))};
  f->gamma_fixed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "gamma_fixed"));
  f->r2 = rcm_get(j, "r2");
  f->cpu_byte = cpu > 0 ? cpu : 0;
  if (rcm_read_busy(f, j, file, fab, err, errcap)) return -1;
  f->rms_rel = rcm_get(j, "rms_rel");
  f->n = (size_t)n;
  f->n_used = (size_t)nu;
  if (rcm_read_resid(f, j, file, fab, err, errcap)) return -1;
  f->learned = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "learned"));
  res_fabric_learn(f);
  return 0;
}

int res_costmodel_read(res_costmodel *m, const char *path, char *err, size_t errcap) {
  memset(m, 0, sizeof *m);
  char file[4200];
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(file, sizeof file, "%s/model.json", path);
  else
    snprintf(file, sizeof file, "%s", path);
  cJSON *o;
  int jr = util_json_read_file(file, &o, err, errcap);
  if (jr == -2) {
    res_errf(err, errcap, "no cost model at '%s' (a model.json, or a directory with one: run fabench fit)", path);
    return -1;
  }
  if (jr) return -1;
  const char *kind = rcm_gets(o, "kind");
  if (!kind || strcmp(kind, "fabench-cost-model")) {
    cJSON_Delete(o);
    res_errf(err, errcap, "%s: not a fabench cost model (model.json)", file);
    return -1;
  }
  double ver = rcm_get(o, "schema");
  if (!(ver <= RES_SCHEMA_VERSION)) {
    cJSON_Delete(o);
    res_errf(err, errcap, "%s: schema version %g is newer than this fabench's %d", file, ver, RES_SCHEMA_VERSION);
    return -1;
  }
  if (rcm_param(o, "gamma_kernel_s_per_byte", 0, file, NULL, &m->gamma_kernel, err, errcap)) {
    cJSON_Delete(o);
    return -1;
  }
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "fabrics"), *j;
  int rc = 0;
  cJSON_ArrayForEach(j, arr) {
    if ((rc = rcm_read_fabric(m, j, file, err, errcap))) break;
  }
  cJSON_Delete(o);
  if (!rc && m->n == 0) {
    res_errf(err, errcap, "%s: the cost model has no fabrics", file);
    rc = -1;
  }
  if (rc) res_costmodel_free(m);
  return rc;
}
