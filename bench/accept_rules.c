/* accept: the rules file (YAML, read with libyaml). Everything is checked as it is read: an
 * unknown key, a value that does not parse or a unit not known is refused with the file, the
 * line and the key, so that a typo never turns a rule off. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "accept.h"
#include "bench.h"
#include "util.h"

static const struct {
  const char *name, *command;
  acc_quantity q;
} acc_metrics[] = {
    [ACC_M_BUSBW] = {"busbw", "allreduce", ACC_Q_RATE},     [ACC_M_ALGBW] = {"algbw", "allreduce", ACC_Q_RATE},
    [ACC_M_TIME_P50] = {"time", "allreduce", ACC_Q_TIME},   [ACC_M_TIME_P99] = {"time_p99", "allreduce", ACC_Q_TIME},
    [ACC_M_BW] = {"bw", "p2p", ACC_Q_RATE},                 [ACC_M_BIBW] = {"bibw", "p2p", ACC_Q_RATE},
    [ACC_M_LATENCY] = {"latency", "p2p", ACC_Q_TIME},       [ACC_M_LATENCY_P99] = {"latency_p99", "p2p", ACC_Q_TIME},
    [ACC_M_IMAGES] = {"images_per_s", "train", ACC_Q_IMAGES}, [ACC_M_NONE] = {"", "topo", ACC_Q_RATE},
};

const char *acc_metric_name(acc_metric m) { return acc_metrics[m].name; }
acc_quantity acc_metric_quantity(acc_metric m) { return acc_metrics[m].q; }
const char *acc_quantity_unit(acc_quantity q) {
  return q == ACC_Q_RATE ? "GB/s" : q == ACC_Q_TIME ? "us" : "images/s";
}

/* Units per quantity and their factor to its unit (GB/s, us, images/s). */
static const struct {
  const char *unit;
  acc_quantity q;
  double f;
} acc_units[] = {
    {"GB/s", ACC_Q_RATE, 1},      {"MB/s", ACC_Q_RATE, 1e-3},     {"Gbit/s", ACC_Q_RATE, 0.125},
    {"Mbit/s", ACC_Q_RATE, 1.25e-4}, {"gbit", ACC_Q_RATE, 0.125}, {"mbit", ACC_Q_RATE, 1.25e-4},
    {"ns", ACC_Q_TIME, 1e-3},     {"us", ACC_Q_TIME, 1},          {"ms", ACC_Q_TIME, 1e3},
    {"s", ACC_Q_TIME, 1e6},       {"images/s", ACC_Q_IMAGES, 1},
};

/* A finite number >= 0 at the start of s: its end in *end. */
static int acc_number(const char *s, double *v, const char **end) {
  char *e;
  if (!isdigit((unsigned char)*s) && *s != '.') return -1;
  *v = strtod(s, &e);
  if (e == s || !isfinite(*v) || *v < 0) return -1;
  *end = e;
  return 0;
}

int acc_parse_quantity(const char *s, acc_quantity q, double *out) {
  double v;
  const char *u;
  if (acc_number(s, &v, &u)) return -1;
  while (*u == ' ') u++;
  for (size_t i = 0; i < sizeof acc_units / sizeof *acc_units; i++)
    if (acc_units[i].q == q && !strcmp(u, acc_units[i].unit)) {
      *out = v * acc_units[i].f;
      return 0;
    }
  return -1;
}

/* ---- reading: errors name the file, the line and the key ---- */

typedef struct {
  acc_rules *r;
  yaml_document_t doc;
  char *err;
  size_t cap;
} acc_reader;

static int acc_fail(acc_reader *x, const yaml_node_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int acc_fail(acc_reader *x, const yaml_node_t *n, const char *key, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  snprintf(x->err, x->cap, "%s:%zu: %s%s%s%s", x->r->path, n ? n->start_mark.line + 1 : 0, key ? "key '" : "",
           key ? key : "", key ? "': " : "", why);
  return -1;
}

static const char *acc_scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of a scalar key, or an error naming it. */
static int acc_want_scalar(acc_reader *x, const yaml_node_t *v, const char *key, const char **out) {
  *out = acc_scalar(v);
  if (!*out) return acc_fail(x, v, key, "wants a single value, not a list or mapping");
  if (!**out) return acc_fail(x, v, key, "is empty");
  return 0;
}

/* Each key of a mapping once: a key twice is refused (the second would silently win). */
static int acc_dup_keys(acc_reader *x, const yaml_node_t *map) {
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const yaml_node_t *k = yaml_document_get_node(&x->doc, p->key);
    const char *ks = acc_scalar(k);
    if (!ks) return acc_fail(x, k, NULL, "a key must be a plain name");
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++)
      if (!strcmp(ks, acc_scalar(yaml_document_get_node(&x->doc, q->key)) ?: ""))
        return acc_fail(x, k, ks, "given twice");
  }
  return 0;
}

/* "<n> <unit>" or "<f> x link|model|reference|median of nodes". */
static int acc_threshold(acc_reader *x, acc_rule *rule, const yaml_node_t *kn, const char *key, const char *s) {
  acc_quantity q = acc_metric_quantity(rule->metric);
  snprintf(rule->threshold_text, sizeof rule->threshold_text, "%s", s);
  const char *xp = strstr(s, " x ");
  if (xp) {
    double f;
    const char *e;
    if (acc_number(s, &f, &e) || e != xp || f <= 0 || f > 1000)
      return acc_fail(x, kn, key, "bad factor in '%s' (a number above 0, then ' x ')", s);
    const char *what = xp + 3;
    if (!strcmp(what, "link")) rule->ref = ACC_REF_LINK;
    else if (!strcmp(what, "model")) rule->ref = ACC_REF_MODEL;
    else if (!strcmp(what, "reference")) rule->ref = ACC_REF_REFERENCE;
    else if (!strcmp(what, "median of nodes")) rule->ref = ACC_REF_NODES;
    else return acc_fail(x, kn, key, "unknown reference '%s' (link, model, reference, median of nodes)", what);
    if (rule->ref == ACC_REF_LINK && q != ACC_Q_RATE)
      return acc_fail(x, kn, key, "'x link' compares a rate (busbw, algbw, bw, bibw), not %s", acc_metric_name(rule->metric));
    rule->value = f;
    return 0;
  }
  if (acc_parse_quantity(s, q, &rule->value)) {
    const char *units = q == ACC_Q_RATE ? "GB/s, MB/s, Gbit/s, Mbit/s" : q == ACC_Q_TIME ? "ns, us, ms, s" : "images/s";
    return acc_fail(x, kn, key, "bad value or unit '%s' for %s (a number and one of %s)", s,
                    acc_metric_name(rule->metric), units);
  }
  rule->ref = ACC_REF_ABS;
  return 0;
}

/* The run: a measuring command and its flags, split at spaces; accept gives --out itself. */
static int acc_run(acc_reader *x, acc_rule *rule, const yaml_node_t *kn, const char *s) {
  if (strlen(s) >= sizeof rule->argstore) return acc_fail(x, kn, "run", "longer than %zu characters", sizeof rule->argstore - 1);
  if (strpbrk(s, "'\"\\`$;|&<>"))
    return acc_fail(x, kn, "run", "'%s': words are split at spaces, without quotes or shell characters", s);
  snprintf(rule->run, sizeof rule->run, "%s", s);
  snprintf(rule->argstore, sizeof rule->argstore, "%s", s);
  rule->argc = 0;
  for (char *sv, *w = strtok_r(rule->argstore, " \t", &sv); w; w = strtok_r(NULL, " \t", &sv)) {
    if (rule->argc == ACC_ARGS_MAX - 1) return acc_fail(x, kn, "run", "more than %d words", ACC_ARGS_MAX - 2);
    rule->argv[rule->argc++] = w;
  }
  rule->argv[rule->argc] = NULL;
  if (!rule->argc) return acc_fail(x, kn, "run", "is empty");
  const char *c = rule->argv[0];
  if (strcmp(c, "allreduce") && strcmp(c, "p2p") && strcmp(c, "train") && strcmp(c, "topo"))
    return acc_fail(x, kn, "run", "unknown measurement '%s' (allreduce, p2p, train, topo)", c);
  for (int i = 1; i < rule->argc; i++)
    if (!strcmp(rule->argv[i], "--out") || !strncmp(rule->argv[i], "--out=", 6))
      return acc_fail(x, kn, "run", "no --out: accept puts each measurement in its own folder");
  return 0;
}

static int acc_rule_read(acc_reader *x, const yaml_node_t *m, acc_rule *rule) {
  memset(rule, 0, sizeof *rule);
  rule->line = (int)m->start_mark.line + 1;
  rule->metric = ACC_M_NONE;
  rule->repeat = 1;
  if (m->type != YAML_MAPPING_NODE) return acc_fail(x, m, "rules", "each rule is a mapping (name, run, metric, ...)");
  if (acc_dup_keys(x, m)) return -1;
  const yaml_node_t *th = NULL, *metric = NULL, *runv = NULL;
  const char *metric_s = NULL, *th_s = NULL;
  const char *thkey = NULL;
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    const yaml_node_t *kn = yaml_document_get_node(&x->doc, p->key), *v = yaml_document_get_node(&x->doc, p->value);
    const char *k = acc_scalar(kn), *s;
    if (acc_want_scalar(x, v, k, &s)) return -1;
    if (!strcmp(k, "name")) {
      if (bench_parse_name(s, ACC_NAME_MAX - 1)) return acc_fail(x, kn, k, "'%s' is not a name ([a-z0-9_-], at most 63)", s);
      snprintf(rule->name, sizeof rule->name, "%s", s);
    } else if (!strcmp(k, "run")) {
      if (acc_run(x, rule, kn, s)) return -1;
      runv = v;
    } else if (!strcmp(k, "metric")) {
      metric = kn;
      metric_s = s;
    } else if (!strcmp(k, "at_least") || !strcmp(k, "at_most")) {
      if (th) return acc_fail(x, kn, k, "a rule has one threshold (at_least or at_most)");
      th = kn;
      thkey = k;
      th_s = s;
      rule->at_least = !strcmp(k, "at_least");
    } else if (!strcmp(k, "transport") || !strcmp(k, "algo")) {
      if (bench_parse_name(s, 31)) return acc_fail(x, kn, k, "'%s' is not a name", s);
      snprintf(!strcmp(k, "algo") ? rule->algo : rule->transport, 32, "%s", s);
    } else if (!strcmp(k, "bytes")) {
      uint64_t b;
      if (bench_parse_size(s, &b) || b < 1) return acc_fail(x, kn, k, "bad size '%s' (8, 64K, 64M, ...)", s);
      rule->bytes = (int64_t)b;
    } else if (!strcmp(k, "repeat")) {
      long n;
      if (bench_parse_int(s, 1, ACC_REPEAT_MAX, &n)) return acc_fail(x, kn, k, "bad count '%s' (1 to %d)", s, ACC_REPEAT_MAX);
      rule->repeat = (int)n;
    } else {
      return acc_fail(x, kn, k, "unknown key (name, run, metric, at_least, at_most, transport, algo, bytes, repeat)");
    }
  }
  if (!rule->name[0]) return acc_fail(x, m, "name", "missing");
  if (!runv) return acc_fail(x, m, "run", "missing in rule '%s'", rule->name);
  int topo = !strcmp(rule->argv[0], "topo");
  if (topo) {
    if (metric || th) return acc_fail(x, metric ? metric : th, metric ? "metric" : thkey,
                                      "a topo rule checks the topology's expectations; it has no metric or threshold");
    return 0;
  }
  if (!metric) return acc_fail(x, m, "metric", "missing in rule '%s'", rule->name);
  const char *ms = metric_s;
  int found = 0;
  for (int i = 0; i < ACC_M_NONE; i++)
    if (!strcmp(ms, acc_metrics[i].name)) {
      found = 1;
      if (strcmp(acc_metrics[i].command, rule->argv[0]))
        return acc_fail(x, metric, "metric", "'%s' is %s's, not %s's", ms, acc_metrics[i].command, rule->argv[0]);
      rule->metric = (acc_metric)i;
    }
  if (!found)
    return acc_fail(x, metric, "metric", "unknown metric '%s' (busbw, algbw, time, time_p99, bw, bibw, latency, "
                                         "latency_p99, images_per_s)", ms);
  if (!th) return acc_fail(x, m, "at_least", "missing in rule '%s' (at_least or at_most)", rule->name);
  return acc_threshold(x, rule, th, thkey, th_s);
}

/* model: and reference: are paths from the rules file's folder. */
static void acc_resolve(const acc_rules *r, const char *s, char *out, size_t cap) {
  char dir[ACC_PATH_MAX];
  if (s[0] == '/' || util_path_dir(dir, sizeof dir, r->path)) snprintf(out, cap, "%s", s);
  else acc_say(out, cap, "%s/%s", dir, s);
}

static int acc_topology(acc_reader *x, const yaml_node_t *m) {
  if (m->type != YAML_MAPPING_NODE) return acc_fail(x, m, "topology", "wants a mapping (gpus, nic_speed, pcie_width)");
  if (acc_dup_keys(x, m)) return -1;
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    const yaml_node_t *kn = yaml_document_get_node(&x->doc, p->key), *v = yaml_document_get_node(&x->doc, p->value);
    const char *k = acc_scalar(kn), *s;
    long n;
    double g;
    if (acc_want_scalar(x, v, k, &s)) return -1;
    if (!strcmp(k, "gpus")) {
      if (bench_parse_int(s, 0, 1024, &n)) return acc_fail(x, kn, k, "bad count '%s'", s);
      x->r->gpus = (int)n;
    } else if (!strcmp(k, "pcie_width")) {
      if (bench_parse_int(s, 1, 32, &n) || (n & (n - 1))) return acc_fail(x, kn, k, "bad width '%s' (1, 2, 4, 8, 16, 32)", s);
      x->r->pcie_width = (int)n;
    } else if (!strcmp(k, "nic_speed")) {
      if (acc_parse_quantity(s, ACC_Q_RATE, &g) || g <= 0)
        return acc_fail(x, kn, k, "bad speed or unit '%s' (e.g. 100 Gbit/s)", s);
      x->r->nic_gbit = g * 8;
    } else {
      return acc_fail(x, kn, k, "unknown key (gpus, nic_speed, pcie_width)");
    }
  }
  return 0;
}

static int acc_top(acc_reader *x) {
  const yaml_node_t *root = yaml_document_get_root_node(&x->doc);
  if (!root) return acc_fail(x, NULL, NULL, "empty: no rules");
  if (root->type != YAML_MAPPING_NODE) return acc_fail(x, root, NULL, "the file is a mapping with a 'rules' list");
  if (acc_dup_keys(x, root)) return -1;
  const yaml_node_t *rules = NULL;
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
    const yaml_node_t *kn = yaml_document_get_node(&x->doc, p->key), *v = yaml_document_get_node(&x->doc, p->value);
    const char *k = acc_scalar(kn), *s;
    if (!strcmp(k, "rules")) {
      rules = v;
    } else if (!strcmp(k, "model") || !strcmp(k, "reference")) {
      if (acc_want_scalar(x, v, k, &s)) return -1;
      acc_resolve(x->r, s, !strcmp(k, "model") ? x->r->model : x->r->reference, ACC_PATH_MAX);
    } else if (!strcmp(k, "topology")) {
      if (acc_topology(x, v)) return -1;
    } else {
      return acc_fail(x, kn, k, "unknown key (rules, model, reference, topology)");
    }
  }
  if (!rules) return acc_fail(x, root, "rules", "missing");
  if (rules->type != YAML_SEQUENCE_NODE) return acc_fail(x, rules, "rules", "wants a list of rules");
  int n = (int)(rules->data.sequence.items.top - rules->data.sequence.items.start);
  if (n == 0) return acc_fail(x, rules, "rules", "no rules");
  x->r->rules = calloc((size_t)n, sizeof *x->r->rules);
  if (!x->r->rules) return acc_fail(x, rules, NULL, "out of memory");
  for (int i = 0; i < n; i++) {
    acc_rule *rule = &x->r->rules[i];
    if (acc_rule_read(x, yaml_document_get_node(&x->doc, rules->data.sequence.items.start[i]), rule)) return -1;
    x->r->n = i + 1;
    for (int j = 0; j < i; j++)
      if (!strcmp(x->r->rules[j].name, rule->name)) {
        const yaml_node_t *rn = yaml_document_get_node(&x->doc, rules->data.sequence.items.start[i]);
        return acc_fail(x, rn, "name", "'%s' names two rules (it is the folder of its measurement)", rule->name);
      }
    if (!strcmp(rule->name, "topology"))
      return acc_fail(x, yaml_document_get_node(&x->doc, rules->data.sequence.items.start[i]), "name",
                      "'topology' is the name of accept's own topology check");
    if (rule->ref == ACC_REF_MODEL && !x->r->model[0])
      return acc_fail(x, yaml_document_get_node(&x->doc, rules->data.sequence.items.start[i]), "model",
                      "rule '%s' is relative to the model: name a model.json at the top (model: FILE)", rule->name);
    if (rule->ref == ACC_REF_REFERENCE && !x->r->reference[0])
      return acc_fail(x, yaml_document_get_node(&x->doc, rules->data.sequence.items.start[i]), "reference",
                      "rule '%s' is relative to a reference: name its run directory at the top (reference: DIR)",
                      rule->name);
  }
  return 0;
}

int acc_rules_load(acc_rules *r, const char *path, char *err, size_t cap) {
  memset(r, 0, sizeof *r);
  r->gpus = -1;
  snprintf(r->path, sizeof r->path, "%s", path);
  char *text = NULL;
  size_t len = 0;
  int rc = util_file_read(path, 1 << 20, &text, &len, err, cap);
  if (rc) return -1;
  yaml_parser_t p;
  acc_reader x = {.r = r, .err = err, .cap = cap};
  if (!yaml_parser_initialize(&p)) {
    free(text);
    snprintf(err, cap, "%s: out of memory", path);
    return -1;
  }
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, &x.doc)) {
    snprintf(err, cap, "%s:%zu: not YAML: %s", path, p.problem_mark.line + 1, p.problem ? p.problem : "parse error");
    rc = -1;
  } else {
    rc = acc_top(&x);
    yaml_document_delete(&x.doc);
  }
  yaml_parser_delete(&p);
  free(text);
  if (rc) acc_rules_free(r);
  return rc;
}

void acc_rules_free(acc_rules *r) {
  free(r->rules);
  r->rules = NULL;
  r->n = 0;
}
