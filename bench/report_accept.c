/* fabench report's acceptance section: for each accept run directory given (its accept.json),
 * the verdict, the rules' pass/fail table and the suspects, most suspect first, with rank, host,
 * link and evidence; a clean run says that nobody was named. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "report_int.h"
#include "util.h"

static const char *rp_jstr(const cJSON *o, const char *key, const char *none) {
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsString(v) ? v->valuestring : none;
}

/* A number of accept.json for a table cell ("-" where null or absent). */
static const char *rp_jnum(char *buf, size_t cap, const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItem(o, key);
  if (cJSON_IsNumber(v) && isfinite(v->valuedouble)) snprintf(buf, cap, "%.5g", v->valuedouble);
  else snprintf(buf, cap, "-");
  return buf;
}

static void rp_accept_one(rp_ctx *x, const char *dir, const cJSON *o) {
  FILE *md = x->md;
  char c1[600], c2[600], c3[1100], n1[32], n2[32];
  const cJSON *st = cJSON_GetObjectItem(o, "exit_status");
  fprintf(md, "\n## Acceptance: `%s`\n\nRules `%s`: **%s** (exit status %d).\n\n", rp_md(c1, sizeof c1, dir),
          rp_md(c2, sizeof c2, rp_jstr(o, "rules_file", "?")), rp_jstr(o, "result", "?"),
          cJSON_IsNumber(st) ? st->valueint : -1);
  fprintf(md, "| rule | result | value | threshold | evidence |\n| --- | --- | ---: | ---: | --- |\n");
  const cJSON *r;
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(o, "rules")) {
    fprintf(md, "| %s | %s | %s | %s | %s |\n", rp_md(c1, sizeof c1, rp_jstr(r, "name", "?")),
            rp_md(c2, sizeof c2, rp_jstr(r, "result", "?")), rp_jnum(n1, sizeof n1, r, "value"),
            rp_jnum(n2, sizeof n2, r, "threshold"), rp_md(c3, sizeof c3, rp_jstr(r, "evidence", "")));
  }
  const cJSON *sus = cJSON_GetObjectItem(o, "suspects");
  if (cJSON_GetArraySize(sus) == 0) {
    fprintf(md, "\nSuspects: nobody was named (no host, link or rank stood out).\n");
    return;
  }
  fprintf(md, "\nSuspects, most suspect first:\n\n| # | kind | host | rank | link | evidence |\n"
              "| ---: | --- | --- | ---: | --- | --- |\n");
  const cJSON *s;
  cJSON_ArrayForEach(s, sus) {
    const cJSON *ord = cJSON_GetObjectItem(s, "order"), *rank = cJSON_GetObjectItem(s, "rank");
    char rk[24] = "-";
    if (cJSON_IsNumber(rank)) snprintf(rk, sizeof rk, "%d", rank->valueint);
    fprintf(md, "| %d | %s | %s | %s | %s | %s |\n", cJSON_IsNumber(ord) ? ord->valueint : 0,
            rp_md(n1, sizeof n1, rp_jstr(s, "kind", "?")), rp_md(c1, sizeof c1, rp_jstr(s, "host", "?")), rk,
            rp_md(c2, sizeof c2, rp_jstr(s, "link", "-")), rp_md(c3, sizeof c3, rp_jstr(s, "evidence", "")));
  }
}

void rp_accept(rp_ctx *x, char *const *dirs, int n) {
  for (int i = 0; i < n; i++) {
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/accept.json", dirs[i]);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    cJSON *o = NULL;
    if (util_json_read_file(path, &o, err, sizeof err)) { /* said in the report, not dropped silently */
      fprintf(x->md, "\n## Acceptance: `%s`\n\nIts verdict could not be read: %s\n", dirs[i], err);
      continue;
    }
    rp_accept_one(x, dirs[i], o);
    cJSON_Delete(o);
  }
}
