/* accept: what it says. The table on stdout, accept.json (each rule's verdict with its value,
 * threshold and evidence; the suspects, most suspect first), accept.xml (JUnit: a testsuite of
 * a testcase per rule, as Jenkins and GitLab read it) and suspects.txt (the suspect hosts as a
 * Slurm hostlist, for `scontrol update nodename=... state=drain`). Every file is replaced whole. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "accept.h"
#include "util.h"

/* ---- hostlists ---- */

/* A name's prefix and trailing number: "node03" -> "node", 3, width 2. No digits: num -1. */
typedef struct {
  const char *name;
  size_t plen;
  long num;
  int width;
  int key; /* the group: the width of zero-padded numbers it shares, 0 for plain numbers */
} acc_hname;

static void acc_hname_split(acc_hname *h, const char *s) {
  size_t n = strlen(s), i = n;
  while (i > 0 && isdigit((unsigned char)s[i - 1])) i--;
  h->name = s;
  h->plen = i;
  h->num = -1;
  h->width = 0;
  if (i < n && n - i <= 9) {
    h->num = strtol(s + i, NULL, 10);
    h->width = (int)(n - i);
  } else {
    h->plen = n;
  }
}

static int acc_padded(const acc_hname *h) { return h->width > 1 && h->name[h->plen] == '0'; }

/* Groups: zero-padded numbers by their width, joined by plain numbers of that width ("node03"
 * and "node17" are node[03,17]); other plain numbers together ("node2", "node10": node[2,10]). */
static void acc_hname_keys(acc_hname *h, int n) {
  for (int i = 0; i < n; i++) {
    h[i].key = acc_padded(&h[i]) ? h[i].width : 0;
    for (int j = 0; j < n && !h[i].key; j++)
      if (h[j].num >= 0 && acc_padded(&h[j]) && h[j].width == h[i].width && h[j].plen == h[i].plen &&
          !strncmp(h[j].name, h[i].name, h[i].plen))
        h[i].key = h[i].width;
  }
}

static int acc_same_group(const acc_hname *a, const acc_hname *b) {
  return a->num >= 0 && b->num >= 0 && a->plen == b->plen && !strncmp(a->name, b->name, a->plen) && a->key == b->key;
}

static int acc_hname_cmp(const void *x, const void *y) {
  const acc_hname *a = x, *b = y;
  size_t p = a->plen < b->plen ? a->plen : b->plen;
  int c = strncmp(a->name, b->name, p);
  if (c) return c;
  if (a->plen != b->plen) return a->plen < b->plen ? -1 : 1;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  if (a->num != b->num) return a->num < b->num ? -1 : 1;
  return strcmp(a->name, b->name);
}

int acc_hostlist_compress(char *const *hosts, int n, char *out, size_t cap) {
  acc_hname *h = calloc((size_t)n + 1, sizeof *h);
  if (!h) return -1;
  for (int i = 0; i < n; i++) acc_hname_split(&h[i], hosts[i]);
  acc_hname_keys(h, n);
  qsort(h, (size_t)n, sizeof *h, acc_hname_cmp);
  size_t len = 0;
  if (cap) out[0] = '\0';
#define ACC_PUT(...) (len += (size_t)snprintf(out + (len < cap ? len : cap), len < cap ? cap - len : 0, __VA_ARGS__))
  for (int i = 0; i < n;) {
    if (i > 0 && !strcmp(h[i].name, h[i - 1].name)) { i++; continue; } /* a duplicate */
    if (len) ACC_PUT(",");
    int j = i + 1;
    while (j < n && acc_same_group(&h[i], &h[j])) j++;
    if (h[i].num < 0 || j == i + 1) {
      ACC_PUT("%s", h[i].name);
      i = j;
      continue;
    }
    ACC_PUT("%.*s[", (int)h[i].plen, h[i].name);
    int first = 1;
    for (int k = i; k < j;) {
      int e = k;
      while (e + 1 < j && h[e + 1].num <= h[e].num + 1) e++; /* a run, duplicates inside it */
      ACC_PUT("%s%s", first ? "" : ",", h[k].name + h[k].plen);
      if (h[e].num != h[k].num) ACC_PUT("-%s", h[e].name + h[e].plen);
      first = 0;
      k = e + 1;
    }
    ACC_PUT("]");
    i = j;
  }
#undef ACC_PUT
  free(h);
  if (len >= cap && cap) out[cap - 1] = '\0';
  return (int)len;
}

static int acc_push(char ***hosts, int *n, const char *s, size_t len) {
  char **nh = realloc(*hosts, sizeof *nh * (size_t)(*n + 1));
  if (!nh) return -1;
  *hosts = nh;
  if (!(nh[*n] = strndup(s, len))) return -1;
  (*n)++;
  return 0;
}

int acc_hostlist_expand(const char *list, char ***hosts, char *err, size_t cap) {
  *hosts = NULL;
  int n = 0;
  const char *p = list;
  while (*p) {
    const char *s = p;
    while (*p && *p != ',' && *p != '[') p++;
    size_t plen = (size_t)(p - s);
    if (*p == '[') {
      const char *close = strchr(p, ']');
      if (!close || plen == 0) goto bad;
      const char *q = p + 1;
      while (q < close) {
        char *e;
        const char *a = q;
        long lo = strtol(q, &e, 10), hi = lo;
        if (e == q || !isdigit((unsigned char)*q)) goto bad;
        int width = (int)(e - a);
        q = e;
        if (*q == '-') {
          const char *b = ++q;
          hi = strtol(q, &e, 10);
          if (e == b || !isdigit((unsigned char)*b) || hi < lo || hi - lo > 100000) goto bad;
          q = e;
        }
        if (*q == ',') q++;
        else if (q != close) goto bad;
        for (long v = lo; v <= hi; v++) {
          char name[512];
          snprintf(name, sizeof name, "%.*s%0*ld", (int)plen, s, width, v);
          if (acc_push(hosts, &n, name, strlen(name))) goto oom;
        }
      }
      p = close + 1;
      if (*p && *p != ',') goto bad; /* a suffix after the brackets is not taken */
    } else {
      if (plen == 0) goto bad;
      if (acc_push(hosts, &n, s, plen)) goto oom;
    }
    if (*p == ',') {
      p++;
      if (!*p) goto bad;
    }
  }
  if (n == 0) goto bad;
  return n;
bad:
  snprintf(err, cap, "bad hostlist '%s' at '%s' (e.g. node[01-03,07],login1)", list, p);
  acc_hostlist_free(*hosts, n);
  *hosts = NULL;
  return -1;
oom:
  snprintf(err, cap, "out of memory");
  acc_hostlist_free(*hosts, n);
  *hosts = NULL;
  return -1;
}

void acc_hostlist_free(char **hosts, int n) {
  for (int i = 0; i < n; i++) free(hosts[i]);
  free(hosts);
}

/* ---- stdout ---- */

void acc_print(const acc_result *res, int nres, const acc_suspect *sus, int nsus) {
  printf("%-24s %-6s %12s %12s  %s\n", "rule", "result", "value", "threshold", "evidence");
  for (int i = 0; i < nres; i++) {
    const acc_result *r = &res[i];
    const char *verdict = r->pass ? "pass" : r->error ? "ERROR" : "FAIL";
    char v[32] = "-", t[32] = "-";
    if (isfinite(r->value)) snprintf(v, sizeof v, "%.5g", r->value);
    if (isfinite(r->threshold)) snprintf(t, sizeof t, "%.5g", r->threshold);
    printf("%-24s %-6s %12s %12s  %s\n", r->name, verdict, v, t, r->evidence);
  }
  if (nsus) printf("# suspects, most suspect first:\n");
  for (int i = 0; i < nsus; i++) printf("%2d. %s\n", i + 1, sus[i].evidence);
  fflush(stdout);
}

/* ---- files ---- */

static cJSON *acc_num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *acc_json(const acc_rules *rules, const acc_result *res, int nres, const acc_suspect *sus, int nsus,
                       int status, double seconds) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "schema", 1);
  cJSON_AddStringToObject(o, "rules_file", rules->path);
  cJSON_AddStringToObject(o, "result", status == 0 ? "pass" : status == 1 ? "fail" : "could not measure");
  cJSON_AddNumberToObject(o, "exit_status", status);
  cJSON_AddNumberToObject(o, "seconds", seconds);
  cJSON *ra = cJSON_AddArrayToObject(o, "rules");
  for (int i = 0; i < nres; i++) {
    const acc_result *r = &res[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", r->name);
    cJSON_AddStringToObject(j, "result", r->pass ? "pass" : r->error ? "could not measure" : "fail");
    cJSON_AddBoolToObject(j, "pass", r->pass);
    if (r->rule) {
      cJSON_AddStringToObject(j, "run", r->rule->run);
      if (r->rule->metric != ACC_M_NONE) {
        cJSON_AddStringToObject(j, "metric", acc_metric_name(r->rule->metric));
        cJSON_AddStringToObject(j, "unit", acc_quantity_unit(acc_metric_quantity(r->rule->metric)));
        cJSON_AddStringToObject(j, r->rule->at_least ? "at_least" : "at_most", r->rule->threshold_text);
      }
    }
    cJSON_AddItemToObject(j, "value", acc_num_or_null(r->value));
    cJSON_AddItemToObject(j, "threshold", acc_num_or_null(r->threshold));
    if (r->nvalues > 1) {
      cJSON *vs = cJSON_AddArrayToObject(j, "values");
      for (int k = 0; k < r->nvalues; k++) cJSON_AddItemToArray(vs, acc_num_or_null(r->values[k]));
      cJSON_AddItemToObject(j, "spread", acc_num_or_null(r->spread));
    }
    if (r->where[0]) cJSON_AddStringToObject(j, "where", r->where);
    cJSON_AddStringToObject(j, "evidence", r->evidence);
    cJSON *ds = cJSON_AddArrayToObject(j, "runs");
    for (int k = 0; k < r->ndirs; k++) cJSON_AddItemToArray(ds, cJSON_CreateString(r->dirs[k]));
    cJSON_AddNumberToObject(j, "seconds", r->seconds);
    cJSON_AddItemToArray(ra, j);
  }
  cJSON *sa = cJSON_AddArrayToObject(o, "suspects");
  for (int i = 0; i < nsus; i++) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "order", i + 1);
    cJSON_AddStringToObject(j, "kind", sus[i].kind);
    cJSON_AddStringToObject(j, "host", sus[i].host);
    if (sus[i].link[0]) cJSON_AddStringToObject(j, "link", sus[i].link);
    else cJSON_AddNullToObject(j, "link");
    if (sus[i].rank >= 0) cJSON_AddNumberToObject(j, "rank", sus[i].rank);
    else cJSON_AddNullToObject(j, "rank");
    cJSON_AddItemToObject(j, "ratio", acc_num_or_null(sus[i].ratio));
    cJSON_AddStringToObject(j, "evidence", sus[i].evidence);
    cJSON_AddItemToArray(sa, j);
  }
  return o;
}

/* XML text with &, <, >, " and ' escaped, and control characters (XML 1.0 has none) left out. */
static void acc_xml_text(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '&') fputs("&amp;", f);
    else if (c == '<') fputs("&lt;", f);
    else if (c == '>') fputs("&gt;", f);
    else if (c == '"') fputs("&quot;", f);
    else if (c == '\'') fputs("&apos;", f);
    else if (c < 0x20 && c != '\n' && c != '\t') continue;
    else fputc(c, f);
  }
}

static char *acc_junit(const acc_result *res, int nres, const acc_suspect *sus, int nsus, double seconds, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) return NULL;
  int fails = 0, errors = 0;
  for (int i = 0; i < nres; i++) fails += !res[i].pass && !res[i].error, errors += res[i].error;
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f, "<testsuites name=\"fabench accept\" tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\">\n", nres,
          fails, errors, seconds);
  fprintf(f, "  <testsuite name=\"fabench accept\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"0\" time=\"%.3f\">\n",
          nres, fails, errors, seconds);
  for (int i = 0; i < nres; i++) {
    const acc_result *r = &res[i];
    fprintf(f, "    <testcase classname=\"fabench.accept\" name=\"");
    acc_xml_text(f, r->name);
    fprintf(f, "\" time=\"%.3f\"", r->seconds);
    if (r->pass) {
      fprintf(f, ">\n      <system-out>");
      acc_xml_text(f, r->evidence);
      fprintf(f, "</system-out>\n    </testcase>\n");
      continue;
    }
    const char *tag = r->error ? "error" : "failure";
    fprintf(f, ">\n      <%s message=\"", tag);
    acc_xml_text(f, r->evidence);
    fprintf(f, "\" type=\"%s\">", r->error ? "could not measure" : "threshold");
    acc_xml_text(f, r->evidence);
    for (int k = 0; k < r->ndirs; k++) {
      fprintf(f, "\nrun: ");
      acc_xml_text(f, r->dirs[k]);
    }
    for (int k = 0; k < nsus; k++) {
      fprintf(f, "\nsuspect %d: ", k + 1);
      acc_xml_text(f, sus[k].evidence);
    }
    fprintf(f, "</%s>\n    </testcase>\n", tag);
  }
  fprintf(f, "  </testsuite>\n</testsuites>\n");
  if (fclose(f)) {
    free(buf);
    return NULL;
  }
  return buf;
}

int acc_write(const char *dir, const acc_rules *rules, const acc_result *res, int nres, const acc_suspect *sus,
              int nsus, int status, double seconds, char *err, size_t cap) {
  char path[ACC_PATH_MAX + 32];
  cJSON *o = acc_json(rules, res, nres, sus, nsus, status, seconds);
  if (!o) return snprintf(err, cap, "accept.json: out of memory"), -1;
  snprintf(path, sizeof path, "%s/accept.json", dir);
  int rc = util_json_write_file(path, o, err, cap);
  cJSON_Delete(o);
  if (rc) return -1;
  size_t len = 0;
  char *x = acc_junit(res, nres, sus, nsus, seconds, &len);
  if (!x) return snprintf(err, cap, "accept.xml: out of memory"), -1;
  snprintf(path, sizeof path, "%s/accept.xml", dir);
  rc = util_file_replace(path, x, len, err, cap);
  free(x);
  if (rc) return -1;
  /* the suspect hosts: a named link's source and destination both */
  char **hosts = calloc((size_t)(2 * nsus + 1), sizeof *hosts), list[8192];
  int nh = 0;
  if (!hosts) return snprintf(err, cap, "suspects.txt: out of memory"), -1;
  for (int i = 0; i < nsus; i++) {
    hosts[nh++] = (char *)sus[i].host;
    const char *arrow = strstr(sus[i].link, "->");
    if (arrow) hosts[nh++] = (char *)arrow + 2;
  }
  int n = acc_hostlist_compress(hosts, nh, list, sizeof list - 1);
  free(hosts);
  if (n < 0) return snprintf(err, cap, "suspects.txt: out of memory"), -1;
  if (n) strcat(list, "\n");
  snprintf(path, sizeof path, "%s/suspects.txt", dir);
  return util_file_replace(path, list, strlen(list), err, cap);
}
