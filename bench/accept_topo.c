/* accept: the topology's testcase. The rules' expectations (GPUs, NIC speed, PCIe width) are
 * checked on every topology the runs recorded; every host's topo_hash (run.json's hosts) against
 * the majority's, and a host that differs is named with what differs, read from the hwloc XML
 * its run kept (topo-<host>.xml). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept.h"
#include "topo.h"
#include "util.h"

typedef struct {
  char host[256], hash[32], dir[ACC_PATH_MAX];
} acc_host;

/* A topology summary (topo.json's form) against the expectations: appends what fails to why. */
static int acc_expect(const acc_rules *r, const cJSON *sum, const char *where, char *why, size_t cap) {
  int bad = 0;
  size_t len = strlen(why);
  if (r->gpus >= 0) {
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(sum, "gpus"));
    if (n != r->gpus) bad = 1, len += (size_t)snprintf(why + len, len < cap ? cap - len : 0, "%s: %d GPUs, expected %d; ", where, n, r->gpus);
  }
  if (r->nic_gbit > 0) {
    double best = NAN;
    const cJSON *n;
    cJSON_ArrayForEach(n, cJSON_GetObjectItem(sum, "nics")) {
      const cJSON *s = cJSON_GetObjectItem(n, "speed_gbps");
      if (cJSON_IsNumber(s) && !(best >= s->valuedouble)) best = s->valuedouble;
    }
    if (!(best >= r->nic_gbit * 0.999))
      bad = 1, len += (size_t)snprintf(why + len, len < cap ? cap - len : 0, "%s: fastest NIC %s%.4g Gbit/s, expected %.4g; ", where,
                                        isnan(best) ? "unknown " : "", isnan(best) ? 0.0 : best, r->nic_gbit);
  }
  if (r->pcie_width > 0) {
    int known = 0, low = 0;
    const char *lists[2] = {"gpus", "nics"};
    for (int l = 0; l < 2; l++) {
      const cJSON *d;
      cJSON_ArrayForEach(d, cJSON_GetObjectItem(sum, lists[l])) {
        const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "pcie"), "cur_width");
        if (!cJSON_IsNumber(w)) continue;
        known++;
        if (w->valueint < r->pcie_width) {
          const cJSON *nm = cJSON_GetObjectItem(d, "name");
          low = 1;
          len += (size_t)snprintf(why + len, len < cap ? cap - len : 0, "%s: %s at PCIe x%d, expected x%d; ", where,
                                  cJSON_IsString(nm) ? nm->valuestring : "a device", w->valueint, r->pcie_width);
        }
      }
    }
    if (!known) len += (size_t)snprintf(why + len, len < cap ? cap - len : 0, "%s: no PCIe link width known; ", where);
    bad |= low || !known;
  }
  return bad;
}

/* The topology summary of one host from its run's hwloc XML (NULL: none). */
static cJSON *acc_host_summary(const acc_host *h) {
  char xml[ACC_PATH_MAX + 300], err[256];
  acc_say(xml, sizeof xml, "%s/topo-%s.xml", h->dir, h->host);
  topo_opts o = {.xml = xml, .nvml = TOPO_NVML_OFF};
  topo_info *ti = NULL;
  if (topo_load(&ti, &o, err, sizeof err)) return NULL;
  cJSON *j = topo_json(ti);
  topo_free(ti);
  return j;
}

static double acc_num(const cJSON *o, const char *a, const char *b) {
  const cJSON *v = cJSON_GetObjectItem(o, a);
  if (b) v = cJSON_GetObjectItem(v, b);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* What differs between two hosts' summaries, in words ("" where none of the compared parts). */
static void acc_topo_diff(const cJSON *a, const cJSON *b, char *out, size_t cap) {
  static const struct {
    const char *a, *b, *what;
  } f[] = {{"cpu", "packages", "CPU packages"}, {"cpu", "cores", "cores"}, {"cpu", "pus", "hardware threads"},
           {"cpu", "numa_nodes", "NUMA nodes"}};
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    double x = acc_num(a, f[i].a, f[i].b), y = acc_num(b, f[i].a, f[i].b);
    if (x != y && !(isnan(x) && isnan(y)))
      len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%.0f %s (majority %.0f)", len ? ", " : "", x,
                              f[i].what, y);
  }
  const char *lists[2] = {"gpus", "nics"}, *names[2] = {"GPUs", "NICs"};
  for (int l = 0; l < 2; l++) {
    int x = cJSON_GetArraySize(cJSON_GetObjectItem(a, lists[l])), y = cJSON_GetArraySize(cJSON_GetObjectItem(b, lists[l]));
    if (x != y)
      len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%d %s (majority %d)", len ? ", " : "", x, names[l], y);
  }
}

/* Hosts with their hash from a run's run.json (hosts, else its own topology). */
static void acc_hosts_of(const char *dir, acc_host **hs, int *n) {
  char path[ACC_PATH_MAX + 32];
  cJSON *o = NULL;
  snprintf(path, sizeof path, "%s/run.json", dir);
  if (util_json_read_file(path, &o, NULL, 0)) return;
  const cJSON *hosts = cJSON_GetObjectItem(o, "hosts"), *h;
  cJSON *single = NULL;
  if (!cJSON_IsArray(hosts) || !cJSON_GetArraySize(hosts)) {
    single = cJSON_CreateArray();
    cJSON_AddItemToArray(single, cJSON_Duplicate(cJSON_GetObjectItem(o, "topology"), 1));
    hosts = single;
  }
  cJSON_ArrayForEach(h, hosts) {
    const cJSON *name = cJSON_GetObjectItem(h, "host"), *hash = cJSON_GetObjectItem(h, "topo_hash");
    if (!cJSON_IsString(name) || !cJSON_IsString(hash) || !hash->valuestring[0]) continue;
    int seen = 0;
    for (int i = 0; i < *n; i++) seen |= !strcmp((*hs)[i].host, name->valuestring);
    if (seen) continue;
    acc_host *nh = realloc(*hs, sizeof *nh * (size_t)(*n + 1));
    if (!nh) break;
    *hs = nh;
    snprintf(nh[*n].host, sizeof nh[*n].host, "%s", name->valuestring);
    snprintf(nh[*n].hash, sizeof nh[*n].hash, "%s", hash->valuestring);
    snprintf(nh[*n].dir, sizeof nh[*n].dir, "%s", dir);
    (*n)++;
  }
  cJSON_Delete(single);
  cJSON_Delete(o);
}

/* The topology summary a run recorded: run.json's topology.summary, or a topo run's topo.json. */
static cJSON *acc_dir_summary(const char *dir) {
  char path[ACC_PATH_MAX + 32];
  cJSON *o = NULL;
  snprintf(path, sizeof path, "%s/topo.json", dir);
  if (!util_json_read_file(path, &o, NULL, 0)) return o;
  snprintf(path, sizeof path, "%s/run.json", dir);
  if (util_json_read_file(path, &o, NULL, 0)) return NULL;
  cJSON *s = cJSON_DetachItemFromObject(cJSON_GetObjectItem(o, "topology"), "summary");
  cJSON_Delete(o);
  return s;
}

void acc_judge_topology(const acc_ctx *c, const acc_result *res, int nres, acc_result *t, acc_suspect **sus,
                        int *nsus) {
  const acc_rules *r = c->rules;
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "topology");
  t->value = t->threshold = t->spread = NAN;
  char why[ACC_TEXT_MAX] = "";
  int bad = 0, seen = 0, expect = r->gpus >= 0 || r->nic_gbit > 0 || r->pcie_width > 0;
  acc_host *hs = NULL;
  int nh = 0, nchecked = 0;
  char checked[64][256];
  for (int i = 0; i < nres; i++)
    for (int d = 0; d < res[i].ndirs; d++) {
      cJSON *s = acc_dir_summary(res[i].dirs[d]);
      if (s) {
        seen++;
        const cJSON *h = cJSON_GetObjectItem(s, "host");
        const char *host = cJSON_IsString(h) ? h->valuestring : res[i].dirs[d];
        int again = 0; /* each host's summary is checked once */
        for (int j = 0; j < nchecked; j++) again |= !strcmp(checked[j], host);
        if (expect && !again && !acc_host_excluded(c, host)) {
          bad |= acc_expect(r, s, host, why, sizeof why);
          if (nchecked < 64) acc_say(checked[nchecked++], sizeof checked[0], "%s", host);
        }
        cJSON_Delete(s);
      }
      acc_hosts_of(res[i].dirs[d], &hs, &nh);
    }
  int k = 0;
  for (int i = 0; i < nh; i++)
    if (!acc_host_excluded(c, hs[i].host)) hs[k++] = hs[i];
  nh = k;
  if (!seen && expect) {
    snprintf(why, sizeof why, "no run recorded a topology to check the expectations against");
    bad = 1;
  }
  /* the majority's hash: the most hosts share it (strictly more than any other) */
  int best = -1, bestn = 0, tie = 0;
  for (int i = 0; i < nh; i++) {
    int m = 0;
    for (int j = 0; j < nh; j++) m += !strcmp(hs[i].hash, hs[j].hash);
    if (m > bestn) best = i, bestn = m, tie = 0;
    else if (m == bestn && strcmp(hs[i].hash, hs[best].hash)) tie = 1;
  }
  if (nh > 1 && bestn < nh) {
    size_t len = strlen(why);
    if (tie) {
      snprintf(why + len, sizeof why - len, "hosts' topologies differ with no majority; ");
      bad = 1;
    } else {
      cJSON *maj = acc_host_summary(&hs[best]);
      for (int i = 0; i < nh; i++) {
        if (!strcmp(hs[i].hash, hs[best].hash)) continue;
        char diff[300] = "", ev[ACC_TEXT_MAX];
        cJSON *mine = acc_host_summary(&hs[i]);
        if (mine && maj) acc_topo_diff(mine, maj, diff, sizeof diff);
        cJSON_Delete(mine);
        acc_say(ev, sizeof ev, "host %s: topology %s differs from the majority's %s (%d of %d hosts)%s%s", hs[i].host,
                 hs[i].hash, hs[best].hash, bestn, nh, diff[0] ? ": " : "", diff);
        acc_suspect_add(sus, nsus, "host", hs[i].host, "", -1, NAN, 1.0, ev);
        len = strlen(why);
        acc_say(why + len, sizeof why - len, "%s; ", ev);
        bad = 1;
      }
      cJSON_Delete(maj);
    }
  }
  free(hs);
  t->measured = seen > 0 || nh > 0;
  t->pass = !bad && t->measured;
  t->error = !t->measured;
  if (!t->measured) acc_say(t->evidence, sizeof t->evidence, "no run recorded a topology");
  else if (bad) acc_say(t->evidence, sizeof t->evidence, "%.*s", (int)(strlen(why) > 2 ? strlen(why) - 2 : 0), why);
  else acc_say(t->evidence, sizeof t->evidence, "%d host%s%s%s", nh, nh == 1 ? "" : "s",
                nh > 1 ? " share one topology" : "", expect ? ", as the rules expect" : "");
}
