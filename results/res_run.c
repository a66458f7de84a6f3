/* results: run.json rendered from the run its command described (res_run_desc), so that every
 * command's run.json is assembled here and the commands build no JSON of their own. */
#include "res.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int res_run_desc_init(res_run_desc *d, const char *run_id, const char *command, int argc, char **argv) {
  memset(d, 0, sizeof *d);
  d->check = -1;
  d->p2p.data_ok = -1;
  d->base = res_meta_new(run_id, command, argc, argv);
  return d->base ? 0 : -1;
}

void res_run_desc_free(res_run_desc *d) {
  cJSON_Delete(d->base);
  cJSON_Delete(d->topo_summary);
  for (int i = 0; i < d->nhosts; i++) free(d->hosts[i].ranks);
  free(d->hosts);
  res_run_world *w = &d->world;
  for (int k = 0; k < w->ranks; k++) {
    if (w->rank_hosts) free(w->rank_hosts[k]);
    if (w->binding) free(w->binding[k]);
  }
  free(w->rank_hosts);
  free(w->binding);
  free(w->bootstrap);
  free(w->library_versions);
  free(w->emulated_fabric);
  free(w->emulated_rate);
  free(w->emulated_layout);
  free(w->emulated_slow);
  free(d->results);
  memset(d, 0, sizeof *d);
}

void res_run_add_fabric(res_run_desc *d, const char *key, const char *fabric) {
  if (d->nfabrics >= RES_RUN_FABRICS) return;
  snprintf(d->fabrics[d->nfabrics].key, sizeof d->fabrics[0].key, "%s", key);
  snprintf(d->fabrics[d->nfabrics].fabric, sizeof d->fabrics[0].fabric, "%s", fabric);
  d->nfabrics++;
}

int res_run_add_result(res_run_desc *d, const res_run_train_result *r) {
  res_run_train_result *n = realloc(d->results, (size_t)(d->nresults + 1) * sizeof *n);
  if (!n) return -1;
  d->results = n;
  d->results[d->nresults++] = *r;
  return 0;
}

static void rr_str(cJSON *o, const char *key, const char *v) {
  if (v && *v) cJSON_AddStringToObject(o, key, v);
}

static cJSON *rr_strings(char *const *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; a && k < n; k++) cJSON_AddItemToArray(a, cJSON_CreateString(v && v[k] ? v[k] : ""));
  return a;
}

/* The topology and the hosts: what every command with a run directory records at its start. */
static void rr_hosts(cJSON *m, const res_run_desc *d) {
  if (d->topo_host[0]) {
    cJSON *t = cJSON_AddObjectToObject(m, "topology");
    cJSON_AddStringToObject(t, "host", d->topo_host);
    cJSON_AddStringToObject(t, "topo_hash", d->topo_hash);
    cJSON_AddStringToObject(t, "hwloc_backend", d->topo_backend);
    if (d->topo_summary) cJSON_AddItemToObject(t, "summary", cJSON_Duplicate(d->topo_summary, 1));
  } else if (d->topology_error[0]) {
    cJSON_AddStringToObject(m, "topology_error", d->topology_error);
  }
  if (!d->has_hosts) return;
  cJSON *hosts = cJSON_AddArrayToObject(m, "hosts");
  for (int i = 0; i < d->nhosts; i++) {
    const res_run_host *h = &d->hosts[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "host", h->host);
    cJSON_AddStringToObject(o, "topo_hash", h->topo_hash);
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int k = 0; k < h->nranks; k++) cJSON_AddItemToArray(ranks, cJSON_CreateNumber(h->ranks[k]));
    cJSON_AddItemToArray(hosts, o);
  }
}

/* The world of a multi-rank command: its ranks, hosts, libraries, emulation and fabrics. */
static void rr_world(cJSON *m, const res_run_desc *d) {
  const res_run_world *w = &d->world;
  cJSON_AddNumberToObject(m, "ranks", w->ranks);
  cJSON_AddNumberToObject(m, "host_count", w->host_count);
  cJSON_AddStringToObject(m, "bootstrap", w->bootstrap ? w->bootstrap : "");
  cJSON_AddItemToObject(m, "rank_hosts", rr_strings(w->rank_hosts, w->ranks));
  cJSON_AddStringToObject(m, "library_versions", w->library_versions ? w->library_versions : "");
  if (w->reduce_gbps > 0 && isfinite(w->reduce_gbps)) cJSON_AddNumberToObject(m, "reduce_gbps", w->reduce_gbps);
  rr_str(m, "emulated_fabric", w->emulated_fabric);
  rr_str(m, "emulated_rate", w->emulated_rate);
  rr_str(m, "emulated_layout", w->emulated_layout);
  rr_str(m, "emulated_slow", w->emulated_slow);
  cJSON *fj = cJSON_AddObjectToObject(m, "fabrics");
  for (int i = 0; i < d->nfabrics; i++) cJSON_AddStringToObject(fj, d->fabrics[i].key, d->fabrics[i].fabric);
  cJSON_AddItemToObject(m, "binding", rr_strings(w->binding, w->ranks));
}

static void rr_p2p(cJSON *m, const res_run_p2p *p) {
  cJSON *o = cJSON_AddObjectToObject(m, "p2p");
  cJSON_AddStringToObject(o, "pairs", p->pairs);
  if (!strcmp(p->pairs, "one")) {
    cJSON_AddNumberToObject(o, "src", p->src);
    cJSON_AddNumberToObject(o, "dst", p->dst);
  }
  cJSON_AddNumberToObject(o, "min_bytes", p->min_bytes);
  cJSON_AddNumberToObject(o, "max_bytes", p->max_bytes);
  cJSON_AddNumberToObject(o, "step_factor", p->step_factor);
  cJSON_AddNumberToObject(o, "window", p->window);
  if (p->iters)
    cJSON_AddNumberToObject(o, "iters", p->iters);
  else
    cJSON_AddNumberToObject(o, "time_per_size_s", p->time_per_size_s);
  cJSON_AddStringToObject(o, "gbps_unit", "GB/s (1e9 bytes/s), bytes / one-way time");
  if (p->data_ok >= 0) cJSON_AddBoolToObject(o, "data_ok", p->data_ok);
  cJSON_AddStringToObject(o, "status", p->status ? p->status : "running");
}

static void rr_train(cJSON *m, const res_run_train *t) {
  cJSON *o = cJSON_AddObjectToObject(m, "train");
  cJSON_AddStringToObject(o, "model", t->model);
  cJSON_AddNumberToObject(o, "params", t->params);
  cJSON_AddNumberToObject(o, "bn_buffers", t->bn_buffers);
  cJSON_AddStringToObject(o, "backend", t->backend);
  cJSON_AddStringToObject(o, "data", t->data);
  cJSON_AddNumberToObject(o, "train_images", t->train_images);
  cJSON_AddNumberToObject(o, "test_images", t->test_images);
  cJSON_AddStringToObject(o, "input", t->input);
  cJSON_AddNumberToObject(o, "classes", t->classes);
  cJSON_AddNumberToObject(o, "ranks", t->ranks);
  cJSON_AddNumberToObject(o, "batch", t->batch);
  cJSON_AddNumberToObject(o, "global_batch", t->global_batch);
  cJSON_AddNumberToObject(o, "threads", t->threads);
  cJSON_AddNumberToObject(o, "rounds", t->rounds);
  cJSON_AddNumberToObject(o, "seed", t->seed);
  cJSON_AddNumberToObject(o, "bucket_mb", t->bucket_mb);
  cJSON_AddNumberToObject(o, "first_bucket_mb", t->first_bucket_mb);
  cJSON_AddBoolToObject(o, "overlap", t->overlap);
  cJSON_AddStringToObject(o, "overlap_step", t->overlap_step);
  cJSON_AddStringToObject(o, "grad_dtype", t->grad_dtype);
  cJSON_AddStringToObject(o, "gradients", t->gradients);
  cJSON_AddStringToObject(o, "batch_norm", t->batch_norm);
  if (t->resumed_from) cJSON_AddStringToObject(o, "resumed_from", t->resumed_from);
}

static void rr_results(cJSON *m, const res_run_train_result *r, int n) {
  cJSON *rs = cJSON_AddArrayToObject(m, "results");
  for (int i = 0; i < n; i++, r++) {
    cJSON *rj = cJSON_CreateObject();
    cJSON_AddStringToObject(rj, "role", r->role);
    cJSON_AddStringToObject(rj, "transport", r->transport);
    cJSON_AddStringToObject(rj, "algo", r->algo);
    cJSON_AddStringToObject(rj, "status", r->status);
    cJSON_AddNumberToObject(rj, "steps", r->steps);
    cJSON_AddNumberToObject(rj, "end_step", r->end_step);
    cJSON_AddNumberToObject(rj, "images_per_s", r->images_per_s);
    cJSON_AddNumberToObject(rj, "step_ms_p50", r->step_ms_p50);
    if (isfinite(r->test_acc)) cJSON_AddNumberToObject(rj, "test_acc", r->test_acc);
    if (r->time_to_target_s >= 0) cJSON_AddNumberToObject(rj, "time_to_target_s", r->time_to_target_s);
    cJSON_AddNumberToObject(rj, "train_time_s", r->train_time_s);
    cJSON_AddItemToArray(rs, rj);
  }
}

int res_run_write(const char *dir, const res_run_desc *d, char *err, size_t errcap) {
  cJSON *m = cJSON_Duplicate(d->base, 1);
  if (!m) {
    snprintf(err, errcap, "%s/run.json: out of memory", dir);
    return -1;
  }
  rr_str(m, "run_dir", d->run_dir);
  rr_hosts(m, d);
  if (d->has_world) rr_world(m, d);
  if (d->has_rounds) cJSON_AddNumberToObject(m, "rounds", (double)d->rounds);
  /* the rows' errors column counts wrong elements only where the run checked them */
  if (d->check >= 0) cJSON_AddBoolToObject(m, "check", d->check);
  if (d->beside_compute) cJSON_AddBoolToObject(m, "beside_compute", 1);
  if (d->p2p.on) rr_p2p(m, &d->p2p);
  if (d->train.on) rr_train(m, &d->train);
  if (d->nresults) rr_results(m, d->results, d->nresults);
  if (d->intra) cJSON_AddStringToObject(m, "intra", d->intra);
  if (d->inter) cJSON_AddStringToObject(m, "inter", d->inter);
  if (d->compute) cJSON_AddStringToObject(m, "compute", d->compute);
  rr_str(m, "status", d->status);
  int rc = res_meta_write(dir, m, err, errcap);
  cJSON_Delete(m);
  return rc;
}

int res_run_command(const char *dir, char *cmd, size_t cap) {
  char path[4200];
  cJSON *o = NULL;
  snprintf(path, sizeof path, "%s/run.json", dir);
  if (util_json_read_file(path, &o, NULL, 0)) return -1;
  const cJSON *c = cJSON_GetObjectItem(o, "command");
  int rc = cJSON_IsString(c) ? 0 : -1;
  if (!rc) snprintf(cmd, cap, "%s", c->valuestring);
  cJSON_Delete(o);
  return rc;
}
