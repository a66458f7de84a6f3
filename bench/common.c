/* Helpers shared by the subcommands: parsing, errors, run directories. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "res.h"
#include "topo.h"

int bench_parse_size(const char *s, uint64_t *out) {
  if (!s || !*s) return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || s[0] == '-') return -1;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: return -1;
    }
    end++;
    if (*end == 'i' || *end == 'B' || *end == 'b') end++; /* 4KiB, 4KB */
    if (*end == 'B') end++;
    if (*end) return -1;
  }
  if (shift && v > (ULLONG_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

int bench_parse_int(const char *s, long min, long max, long *out) {
  if (!s || !*s) return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int bench_parse_double(const char *s, double min, double max, double *out) {
  if (!s || !*s) return -1;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !isfinite(v) || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int bench_split_list(const char *s, char **items, int max, char **store) {
  *store = strdup(s ? s : "");
  if (!*store) return -1;
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(*store, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n == max) return -1;
    items[n++] = tok;
  }
  return n;
}

int bench_usage_error(const char *usage, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fabench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fputs(usage, stderr);
  return 2;
}

int bench_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fabench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

int bench_run_begin(bench_run *r, const char *out, const char *command, int argc, char **argv) {
  memset(r, 0, sizeof *r);
  char err[512];
  if (res_run_dir(r->dir, sizeof r->dir, out, command, err, sizeof err) != 0)
    return bench_error("%s", err), -1;
  res_run_id(r->run_id, sizeof r->run_id);
  r->meta = res_meta_new(r->run_id, command, argc, argv);
  cJSON_AddStringToObject(r->meta, "run_dir", r->dir);
  gethostname(r->host, sizeof r->host - 1);

  topo_stamp st;
  cJSON *summary = NULL;
  if (topo_record(r->dir, &st, &summary, err, sizeof err) == 0) {
    snprintf(r->topo_hash, sizeof r->topo_hash, "%s", st.hash);
    cJSON *t = cJSON_AddObjectToObject(r->meta, "topology");
    cJSON_AddStringToObject(t, "host", st.host);
    cJSON_AddStringToObject(t, "topo_hash", st.hash);
    cJSON_AddStringToObject(t, "hwloc_backend", st.backend);
    if (summary) {
      char path[4400];
      snprintf(path, sizeof path, "%s/topo.json", r->dir);
      if (res_json_write_file(path, summary, err, sizeof err) != 0) bench_error("%s", err);
      cJSON_AddItemToObject(t, "summary", summary);
    }
  } else {
    /* a run is still worth having without its topology; say so once */
    bench_error("topology not recorded: %s", err);
    cJSON_AddStringToObject(r->meta, "topology_error", err);
  }
  return bench_run_write(r);
}

int bench_run_write(bench_run *r) {
  char err[512];
  if (res_meta_write(r->dir, r->meta, err, sizeof err) != 0) return bench_error("%s", err), -1;
  return 0;
}

void bench_run_end(bench_run *r) {
  cJSON_Delete(r->meta);
  r->meta = NULL;
}
