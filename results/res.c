/* results: tables, run directories and run metadata. */
#include "res.h"
#include "res_internal.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdatomic.h>
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

/* One CSV and one JSONL file written with plain write(2), so every row reaches the kernel
 * whole or, when the disk is full, is cut back off: the files never end in a partial line. */
typedef struct {
  int fd;
  off_t good; /* bytes of whole lines written */
  char path[4096];
} res_file;

struct res_table {
  res_file csv, jsonl;
  char failed[512]; /* set when a write failed: later rows are refused, leaving no gap */
  res_col cols[RES_MAX_COLS];
  size_t ncols;
  res_cell cells[RES_MAX_COLS];
  size_t filled;
  int bad; /* a value came with the wrong kind or too many values */
  const res_schema *schema; /* the record, when opened by res_table_open_schema */
};

void res_errf(char *err, size_t cap, const char *fmt, ...) {
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

/* Creates the file, or with append opens it to write after what it holds (f->good: its size). */
static int res_file_open(res_file *f, const char *dir, const char *base, const char *ext, int append,
                         char *err, size_t errcap) {
  f->good = 0;
  if ((size_t)snprintf(f->path, sizeof f->path, "%s/%s.%s", dir, base, ext) >= sizeof f->path) {
    res_errf(err, errcap, "path too long: %s/%s.%s", dir, base, ext);
    f->fd = -1;
    return -1;
  }
  f->fd = open(f->path, O_WRONLY | O_CREAT | (append ? 0 : O_TRUNC) | O_CLOEXEC, 0644);
  if (f->fd < 0) {
    res_errf(err, errcap, "cannot create '%s': %s", f->path, strerror(errno));
    return -1;
  }
  if (append) {
    off_t end = lseek(f->fd, 0, SEEK_END);
    if (end < 0) {
      res_errf(err, errcap, "cannot open '%s': %s", f->path, strerror(errno));
      return -1;
    }
    f->good = end;
  }
  return 0;
}

/* With append: 1 when path holds a CSV (its first line is kept in line), 0 when it is absent or
 * empty; -1 with err when it cannot be read. */
static int res_csv_head(const char *path, char *line, size_t cap, char *err, size_t errcap) {
  FILE *fp = fopen(path, "r");
  if (!fp) {
    if (errno == ENOENT) return 0;
    res_errf(err, errcap, "cannot read '%s': %s", path, strerror(errno));
    return -1;
  }
  int got = fgets(line, (int)cap, fp) != NULL;
  fclose(fp);
  return got;
}

/* Appends n bytes; on a short write (disk full, file too large, I/O error) the file is cut
 * back to its last whole line and errno says why. */
static int res_file_append(res_file *f, const char *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(f->fd, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      if (ftruncate(f->fd, f->good) == 0) lseek(f->fd, f->good, SEEK_SET);
      errno = e;
      return -1;
    }
    done += (size_t)w;
  }
  f->good += (off_t)n;
  return 0;
}

/* Cuts a file back to a length it had (when its twin's write failed), so both stay alike. */
static void res_file_rewind(res_file *f, off_t len) {
  if (ftruncate(f->fd, len) == 0) lseek(f->fd, len, SEEK_SET);
  f->good = len;
}

static void res_file_close(res_file *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}

static void res_table_fail(res_table *t, const res_file *f, int e, char *err, size_t errcap) {
  res_errf(t->failed, sizeof t->failed, "cannot write '%s': %s; the rows before are intact",
           f->path, strerror(e));
  res_errf(err, errcap, "%s", t->failed);
}

static int res_table_open_mode(res_table **out, const char *dir, const char *base, const res_col *cols,
                               size_t ncols, int append, char *err, size_t errcap) {
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
  t->csv.fd = t->jsonl.fd = -1;
  memcpy(t->cols, cols, ncols * sizeof *cols);
  t->ncols = ncols;
  size_t hl = 0;
  for (size_t i = 0; i < ncols; i++) hl += strlen(cols[i].name) + 1;
  char *head = malloc(hl + 1);
  if (!head) {
    res_errf(err, errcap, "out of memory");
    free(t);
    return -1;
  }
  size_t off = 0;
  for (size_t i = 0; i < ncols; i++)
    off += (size_t)sprintf(head + off, "%s%s", i ? "," : "", cols[i].name);
  head[off++] = '\n';
  int rc = -1, had = 0;
  if (append) { /* rows go after those there, under the same header only */
    char path[4200], *line = malloc(off + 2);
    snprintf(path, sizeof path, "%s/%s.csv", dir, base);
    had = line ? res_csv_head(path, line, off + 2, err, errcap) : -1;
    if (!line) res_errf(err, errcap, "out of memory");
    else if (had > 0 && (strlen(line) != off || memcmp(line, head, off)))
      had = -1, res_errf(err, errcap, "'%s' has other columns than this %s's: cannot add rows to it", path, base);
    free(line);
    if (had < 0) goto out;
  }
  if (res_file_open(&t->csv, dir, base, "csv", had, err, errcap) != 0 ||
      res_file_open(&t->jsonl, dir, base, "jsonl", had, err, errcap) != 0)
    goto out;
  if (!had && res_file_append(&t->csv, head, off) != 0) {
    res_errf(err, errcap, "cannot write '%s': %s", t->csv.path, strerror(errno));
    goto out;
  }
  rc = 0;
out:
  free(head);
  if (rc != 0) {
    res_file_close(&t->csv);
    res_file_close(&t->jsonl);
    free(t);
    return -1;
  }
  *out = t;
  return 0;
}

int res_table_open(res_table **out, const char *dir, const char *base, const res_col *cols,
                   size_t ncols, char *err, size_t errcap) {
  return res_table_open_mode(out, dir, base, cols, ncols, 0, err, errcap);
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
  if (c && !(c->s = strdup(v ? v : ""))) t->bad = 2; /* out of memory */
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

/* The row as one CSV line (in a memory stream) and one JSON line; NULL on out of memory. */
static int res_row_render(const res_table *t, char **csv, size_t *csvlen, char **json) {
  *csv = *json = NULL;
  FILE *m = open_memstream(csv, csvlen);
  cJSON *o = cJSON_CreateObject();
  if (!m || !o) {
    if (m) fclose(m);
    cJSON_Delete(o);
    return -1;
  }
  for (size_t i = 0; i < t->ncols; i++) {
    const res_cell *c = &t->cells[i];
    if (i) fputc(',', m);
    switch (c->kind) {
    case RES_STR:
      res_csv_str(m, c->s);
      cJSON_AddStringToObject(o, t->cols[i].name, c->s);
      break;
    case RES_INT:
      fprintf(m, "%lld", (long long)c->i);
      cJSON_AddNumberToObject(o, t->cols[i].name, (double)c->i);
      break;
    case RES_F64:
      if (isfinite(c->f)) {
        fprintf(m, "%.6g", c->f);
        cJSON_AddNumberToObject(o, t->cols[i].name, c->f);
      } else {
        cJSON_AddNullToObject(o, t->cols[i].name); /* CSV cell stays empty */
      }
      break;
    }
  }
  fputc('\n', m);
  int bad = ferror(m);
  bad |= fclose(m) != 0;
  char *line = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  size_t n = line ? strlen(line) : 0;
  char *l2 = line ? realloc(line, n + 2) : NULL;
  if (bad || !l2) {
    free(l2 ? l2 : line);
    free(*csv);
    *csv = NULL;
    return -1;
  }
  l2[n] = '\n';
  l2[n + 1] = '\0';
  *json = l2;
  return 0;
}

int res_row_end(res_table *t, char *err, size_t errcap) {
  int rc = -1;
  char *csv = NULL, *json = NULL;
  size_t csvlen = 0;
  if (t->failed[0]) {
    res_errf(err, errcap, "%s", t->failed);
  } else if (t->bad == 2) {
    res_errf(err, errcap, "out of memory");
  } else if (t->bad || t->filled != t->ncols) {
    res_errf(err, errcap, "internal: row has %zu of %zu columns or a value of the wrong kind",
             t->filled, t->ncols);
  } else if (res_row_render(t, &csv, &csvlen, &json) != 0) {
    res_errf(err, errcap, "out of memory");
  } else {
    /* written per row so a crash later loses nothing already measured; a row lands in both
     * files or in neither */
    off_t csv_before = t->csv.good;
    if (res_file_append(&t->csv, csv, csvlen) != 0) {
      res_table_fail(t, &t->csv, errno, err, errcap);
    } else if (res_file_append(&t->jsonl, json, strlen(json)) != 0) {
      int e = errno;
      res_file_rewind(&t->csv, csv_before);
      res_table_fail(t, &t->jsonl, e, err, errcap);
    } else {
      rc = 0;
    }
  }
  free(csv);
  free(json);
  res_row_clear(t);
  return rc;
}

void res_table_close(res_table *t) {
  if (!t) return;
  res_row_clear(t);
  res_file_close(&t->csv);
  res_file_close(&t->jsonl);
  free(t);
}

int res_table_open_schema(res_table **out, const char *dir, const res_schema *s, char *err,
                          size_t errcap) {
  return res_table_open_schema_mode(out, dir, s, 0, err, errcap);
}

int res_table_open_schema_mode(res_table **out, const char *dir, const res_schema *s, int append, char *err,
                               size_t errcap) {
  res_col cols[RES_MAX_COLS];
  *out = NULL;
  if (s->nfields > RES_MAX_COLS) {
    res_errf(err, errcap, "table %s: %zu columns (at most %d)", s->base, s->nfields, RES_MAX_COLS);
    return -1;
  }
  for (size_t i = 0; i < s->nfields; i++) cols[i] = (res_col){s->fields[i].name, s->fields[i].kind};
  if (res_table_open_mode(out, dir, s->base, cols, s->nfields, append, err, errcap)) return -1;
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
    case RES_INT:
      /* the schema column is the record's own version, whatever the command put there */
      res_row_int(t, strcmp(s->fields[i].name, "schema") ? *(const int64_t *)p : s->version);
      break;
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

/* Whether an environment variable's name says it holds a secret. */
static int res_env_secret(const char *name, size_t len) {
  static const char *const words[] = {"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD",
                                      "CREDENTIAL"};
  /* Open MPI's PSM key (a per-job shared secret), named for neither */
  static const char psm[] = "OMPI_MCA_orte_precondition_transports";
  if (len == sizeof psm - 1 && !strncmp(name, psm, len)) return 1;
  for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
    size_t wl = strlen(words[w]);
    for (size_t i = 0; i + wl <= len; i++)
      if (!strncasecmp(name + i, words[w], wl)) return 1;
  }
  return 0;
}

static int res_env_keep(const char *kv) {
  static const char *const prefixes[] = {"FABENCH_", "OMPI_",  "UCX_",  "NCCL_",
                                         "SLURM_",   "OMP_",   "HWLOC_", "CUDA_VISIBLE_DEVICES",
                                         "PMIX_MCA_", "DNNL_", "ONEDNN_"};
  const char *eq = strchr(kv, '=');
  if (!eq || res_env_secret(kv, (size_t)(eq - kv))) return 0;
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return 0;
}

cJSON *res_meta_new(const char *run_id, const char *command, int argc, char **argv) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "schema", RES_SCHEMA_VERSION);
  cJSON_AddStringToObject(m, "run_id", run_id);
  cJSON_AddStringToObject(m, "command", command);
  /* the job token must not leak through another variable or the command line either (a long
   * one only: a short token would match innocent text) */
  const char *tok = getenv("FABENCH_TOKEN");
  if (tok && strlen(tok) < 8) tok = NULL;
  cJSON *a = cJSON_AddArrayToObject(m, "argv");
  for (int i = 0; i < argc; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(tok && strstr(argv[i], tok) ? "(redacted)" : argv[i]));
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
    if (!eq || (tok && strstr(eq + 1, tok))) continue;
    char key[256];
    size_t kl = (size_t)(eq - *e);
    if (kl >= sizeof key) continue;
    memcpy(key, *e, kl);
    key[kl] = '\0';
    cJSON_AddStringToObject(env, key, eq + 1);
  }
  return m;
}

int res_meta_write(const char *dir, const cJSON *meta, char *err, size_t errcap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/run.json", dir);
  return util_json_write_file(path, meta, err, errcap);
}

