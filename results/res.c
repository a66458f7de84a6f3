/* results: tables, run directories, metadata and statistics. */
#include "res.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define RES_MAX_COLS 128

typedef struct {
  res_kind kind;
  int64_t i;
  double f;
  char *s;
} res_cell;

struct res_table {
  FILE *csv, *jsonl;
  res_col cols[RES_MAX_COLS];
  size_t ncols;
  res_cell cells[RES_MAX_COLS];
  size_t filled;
  int bad; /* a value came with the wrong kind or too many values */
  const res_schema *schema; /* the record, when opened by res_table_open_schema */
};

static void res_errf(char *err, size_t cap, const char *fmt, ...) {
  if (!err || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

static int res_mkdirs(const char *path, char *err, size_t errcap) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) {
    res_errf(err, errcap, "bad directory path '%s'", path);
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
        res_errf(err, errcap, "cannot create directory '%s': %s", buf, strerror(errno));
        return -1;
      }
      buf[i] = c;
    }
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    res_errf(err, errcap, "'%s' is not a directory", path);
    return -1;
  }
  return 0;
}

int res_table_open(res_table **out, const char *dir, const char *base, const res_col *cols,
                   size_t ncols, char *err, size_t errcap) {
  *out = NULL;
  if (ncols == 0 || ncols > RES_MAX_COLS) {
    res_errf(err, errcap, "table %s: %zu columns (1..%d allowed)", base, ncols, RES_MAX_COLS);
    return -1;
  }
  res_table *t = calloc(1, sizeof *t);
  if (!t) {
    res_errf(err, errcap, "out of memory");
    return -1;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.csv", dir, base);
  t->csv = fopen(path, "w");
  if (!t->csv) {
    res_errf(err, errcap, "cannot create '%s': %s", path, strerror(errno));
    free(t);
    return -1;
  }
  snprintf(path, sizeof path, "%s/%s.jsonl", dir, base);
  t->jsonl = fopen(path, "w");
  if (!t->jsonl) {
    res_errf(err, errcap, "cannot create '%s': %s", path, strerror(errno));
    fclose(t->csv);
    free(t);
    return -1;
  }
  memcpy(t->cols, cols, ncols * sizeof *cols);
  t->ncols = ncols;
  for (size_t i = 0; i < ncols; i++) fprintf(t->csv, "%s%s", i ? "," : "", cols[i].name);
  fputc('\n', t->csv);
  fflush(t->csv);
  *out = t;
  return 0;
}

static res_cell *res_next(res_table *t, res_kind k) {
  if (t->filled >= t->ncols || t->cols[t->filled].kind != k) {
    t->bad = 1;
    return NULL;
  }
  res_cell *c = &t->cells[t->filled++];
  c->kind = k;
  return c;
}

void res_row_str(res_table *t, const char *v) {
  res_cell *c = res_next(t, RES_STR);
  if (c) c->s = strdup(v ? v : "");
}
void res_row_int(res_table *t, int64_t v) {
  res_cell *c = res_next(t, RES_INT);
  if (c) c->i = v;
}
void res_row_f64(res_table *t, double v) {
  res_cell *c = res_next(t, RES_F64);
  if (c) c->f = v;
}

/* CSV quoting per RFC 4180: quote when the text holds a comma, quote or newline. */
static void res_csv_str(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void res_row_clear(res_table *t) {
  for (size_t i = 0; i < t->filled; i++) {
    if (t->cells[i].kind == RES_STR) free(t->cells[i].s);
    t->cells[i].s = NULL;
  }
  t->filled = 0;
  t->bad = 0;
}

int res_row_end(res_table *t, char *err, size_t errcap) {
  if (t->bad || t->filled != t->ncols) {
    res_errf(err, errcap, "internal: row has %zu of %zu columns or a value of the wrong kind",
             t->filled, t->ncols);
    res_row_clear(t);
    return -1;
  }
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; i < t->ncols; i++) {
    const res_cell *c = &t->cells[i];
    if (i) fputc(',', t->csv);
    switch (c->kind) {
    case RES_STR:
      res_csv_str(t->csv, c->s);
      cJSON_AddStringToObject(o, t->cols[i].name, c->s);
      break;
    case RES_INT:
      fprintf(t->csv, "%lld", (long long)c->i);
      cJSON_AddNumberToObject(o, t->cols[i].name, (double)c->i);
      break;
    case RES_F64:
      if (isfinite(c->f)) {
        fprintf(t->csv, "%.6g", c->f);
        cJSON_AddNumberToObject(o, t->cols[i].name, c->f);
      } else {
        cJSON_AddNullToObject(o, t->cols[i].name); /* CSV cell stays empty */
      }
      break;
    }
  }
  fputc('\n', t->csv);
  char *line = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  int rc = 0;
  if (line) {
    fputs(line, t->jsonl);
    fputc('\n', t->jsonl);
    free(line);
  }
  /* flushed per row so a crash later loses nothing already measured */
  if (fflush(t->csv) != 0 || fflush(t->jsonl) != 0 || !line) {
    res_errf(err, errcap, "writing a result row failed: %s", strerror(errno));
    rc = -1;
  }
  res_row_clear(t);
  return rc;
}

void res_table_close(res_table *t) {
  if (!t) return;
  res_row_clear(t);
  fclose(t->csv);
  fclose(t->jsonl);
  free(t);
}

int res_table_open_schema(res_table **out, const char *dir, const res_schema *s, char *err,
                          size_t errcap) {
  res_col cols[RES_MAX_COLS];
  *out = NULL;
  if (s->nfields > RES_MAX_COLS) {
    res_errf(err, errcap, "table %s: %zu columns (at most %d)", s->base, s->nfields, RES_MAX_COLS);
    return -1;
  }
  for (size_t i = 0; i < s->nfields; i++) cols[i] = (res_col){s->fields[i].name, s->fields[i].kind};
  if (res_table_open(out, dir, s->base, cols, s->nfields, err, errcap)) return -1;
  (*out)->schema = s;
  return 0;
}

int res_table_put(res_table *t, const void *row, char *err, size_t errcap) {
  const res_schema *s = t->schema;
  if (!s) {
    res_errf(err, errcap, "internal: res_table_put on a table opened without a record");
    return -1;
  }
  const char *base = row;
  for (size_t i = 0; i < s->nfields; i++) {
    const void *p = base + s->fields[i].offset;
    switch (s->fields[i].kind) {
    case RES_STR: res_row_str(t, *(const char *const *)p); break;
    case RES_INT: res_row_int(t, *(const int64_t *)p); break;
    case RES_F64: res_row_f64(t, *(const double *)p); break;
    }
  }
  return res_row_end(t, err, errcap);
}

int res_run_dir(char *dir, size_t cap, const char *out, const char *command, char *err,
                size_t errcap) {
  if (out && *out) {
    if (strlen(out) >= cap) {
      res_errf(err, errcap, "--out path too long");
      return -1;
    }
    snprintf(dir, cap, "%s", out);
  } else {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(dir, cap, "results/%s-%s", ts, command);
    /* two runs in the same second must not share a directory */
    struct stat st;
    for (int k = 2; stat(dir, &st) == 0 && k < 1000; k++)
      snprintf(dir, cap, "results/%s-%s-%d", ts, command, k);
  }
  return res_mkdirs(dir, err, errcap);
}

void res_run_id(char *id, size_t cap) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char ts[32];
  strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (uint32_t)getpid() ^ (uint32_t)now;
  snprintf(id, cap, "%s-%08x", ts, r);
}

static int res_env_keep(const char *kv) {
  static const char *const prefixes[] = {"FABENCH_", "OMPI_",  "UCX_",  "NCCL_",
                                         "SLURM_",   "OMP_",   "HWLOC_", "CUDA_VISIBLE_DEVICES",
                                         "PMIX_MCA_", "DNNL_", "ONEDNN_"};
  if (strncmp(kv, "FABENCH_TOKEN=", 14) == 0) return 0; /* a secret */
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return 0;
}

cJSON *res_meta_new(const char *run_id, const char *command, int argc, char **argv) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "schema", RES_SCHEMA_VERSION);
  cJSON_AddStringToObject(m, "run_id", run_id);
  cJSON_AddStringToObject(m, "command", command);
  cJSON *a = cJSON_AddArrayToObject(m, "argv");
  for (int i = 0; i < argc; i++) cJSON_AddItemToArray(a, cJSON_CreateString(argv[i]));
  cJSON_AddStringToObject(m, "fabench_version", FABENCH_VERSION);
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  char ts[32];
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  cJSON_AddStringToObject(m, "start_time", ts);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  cJSON_AddStringToObject(m, "hostname", host);
  cJSON *env = cJSON_AddObjectToObject(m, "environment");
  for (char **e = environ; e && *e; e++) {
    if (!res_env_keep(*e)) continue;
    const char *eq = strchr(*e, '=');
    if (!eq) continue;
    char key[256];
    size_t kl = (size_t)(eq - *e);
    if (kl >= sizeof key) continue;
    memcpy(key, *e, kl);
    key[kl] = '\0';
    cJSON_AddStringToObject(env, key, eq + 1);
  }
  return m;
}

int res_json_write_file(const char *path, const cJSON *v, char *err, size_t errcap) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  char *txt = cJSON_Print(v);
  if (!txt) {
    res_errf(err, errcap, "cannot render JSON for '%s'", path);
    return -1;
  }
  FILE *f = fopen(tmp, "w");
  if (!f) {
    res_errf(err, errcap, "cannot create '%s': %s", tmp, strerror(errno));
    free(txt);
    return -1;
  }
  int ok = fputs(txt, f) >= 0 && fputc('\n', f) != EOF;
  ok = (fclose(f) == 0) && ok;
  free(txt);
  if (!ok || rename(tmp, path) != 0) {
    res_errf(err, errcap, "cannot write '%s': %s", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  return 0;
}

int res_meta_write(const char *dir, const cJSON *meta, char *err, size_t errcap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/run.json", dir);
  return res_json_write_file(path, meta, err, errcap);
}

static int res_cmp_f64(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double res_rank_pct(const double *x, size_t n, double p) {
  size_t k = (size_t)ceil((double)n * p);
  if (k == 0) k = 1;
  if (k > n) k = n;
  return x[k - 1];
}

void res_stats_compute(res_stats *out, double *x, size_t n) {
  memset(out, 0, sizeof *out);
  out->n = n;
  if (n == 0) return;
  qsort(x, n, sizeof *x, res_cmp_f64);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += x[i];
  double mean = sum / (double)n, var = 0;
  for (size_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  out->min = x[0];
  out->max = x[n - 1];
  out->p50 = res_rank_pct(x, n, 0.50);
  out->p90 = res_rank_pct(x, n, 0.90);
  out->p99 = res_rank_pct(x, n, 0.99);
  out->mean = mean;
  out->stddev = sqrt(var / (double)n);
}

double res_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
