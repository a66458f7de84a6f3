/* results: the record descriptors (from res_rec.h) and the one reader of CSV/JSONL rows. */
#include "res.h"
#include "res_internal.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- descriptors: one function per record, const data, no state ---- */

#define RES_KIND_STR RES_STR
#define RES_KIND_INT RES_INT
#define RES_KIND_F64 RES_F64
#define RES_KIND_STR_OPT RES_STR
#define RES_KIND_INT_OPT RES_INT
#define RES_KIND_F64_OPT RES_F64
#define RES_OPT_STR 0
#define RES_OPT_INT 0
#define RES_OPT_F64 0
#define RES_OPT_STR_OPT 1
#define RES_OPT_INT_OPT 1
#define RES_OPT_F64_OPT 1
#define RES_FDESC_(kind, name) {#name, RES_KIND_##kind, offsetof(row_t, name), RES_OPT_##kind},
#define RES_SCHEMA_FN_(rec, COLS)                                                             \
  const res_schema *res_schema_##rec(void) {                                                  \
    typedef res_##rec##_row row_t;                                                            \
    static const res_field fields[] = {COLS(RES_FDESC_)};                                     \
    static const res_schema s = {#rec, RES_SCHEMA_VERSION, fields,                            \
                                 sizeof fields / sizeof *fields, sizeof(row_t)};              \
    return &s;                                                                                \
  }
RES_RECORDS(RES_SCHEMA_FN_)

void res_row_init(const res_schema *s, void *row) {
  memset(row, 0, s->row_size);
  for (size_t i = 0; i < s->nfields; i++)
    if (s->fields[i].kind == RES_F64) *(double *)((char *)row + s->fields[i].offset) = NAN;
}

/* ---- reading ---- */

static int rr_ends(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

static int rr_is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int rr_is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The file to read: a directory's <base>.csv, else its <base>.jsonl, else path itself. */
static int rr_pick(char *file, size_t cap, const res_schema *s, const char *path) {
  if (rr_is_dir(path)) {
    snprintf(file, cap, "%s/%s.csv", path, s->base);
    if (rr_is_file(file)) return 0;
    snprintf(file, cap, "%s/%s.jsonl", path, s->base);
    return rr_is_file(file) ? 0 : -1;
  }
  snprintf(file, cap, "%s", path);
  return rr_is_file(file) ? 0 : -1;
}

int res_table_exists(const res_schema *s, const char *path) {
  char file[4200];
  return rr_pick(file, sizeof file, s, path) == 0;
}

/* A run.json: 1 when there is none, 0 with *ver (INT_MAX: past any int, newer than any) and
 * run_id when it is a JSON object with a whole schema number from 1, else -1 with err naming
 * the file. A truncated or foreign run.json must not pass for one without a version: the
 * newer-schema guard reads the version from it. */
static int rr_meta_read(const char *path, int *ver, char *run_id, size_t idcap, char *err, size_t cap) {
  *ver = 0;
  if (run_id && idcap) run_id[0] = '\0';
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT) return 1;
  cJSON *j;
  char why[512];
  if (util_json_read_file(path, &j, why, sizeof why)) {
    res_errf(err, cap, "%s; a run.json is a JSON object with its schema version", why);
    return -1;
  }
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "schema");
  double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
  if (!cJSON_IsObject(j) || !(d >= 1) || d != floor(d)) {
    res_errf(err, cap, "%s: not a fabench run.json: %s", path,
             !cJSON_IsObject(j) ? "not a JSON object" : !v ? "no schema version" : "schema is not a whole number from 1");
    cJSON_Delete(j);
    return -1;
  }
  *ver = d >= INT_MAX ? INT_MAX : (int)d;
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "run_id");
  if (run_id && idcap && cJSON_IsString(id)) snprintf(run_id, idcap, "%s", id->valuestring);
  cJSON_Delete(j);
  return 0;
}

/* The run.json beside a table file (in its directory). */
static void rr_meta_path(char *path, size_t cap, const char *file) {
  snprintf(path, cap, "%s", file);
  char *slash = strrchr(path, '/');
  if (slash)
    snprintf(slash + 1, cap - (size_t)(slash + 1 - path), "run.json");
  else
    snprintf(path, cap, "run.json");
}

typedef struct {
  const res_schema *s;
  const char *file;
  char *rows;
  size_t n, cap;
  int col_of[128]; /* file column -> schema field, -1 when none */
  size_t ncols;
} rr_ctx;

static void *rr_new_row(rr_ctx *x) {
  if (x->n == x->cap) {
    size_t nc = x->cap ? x->cap * 2 : 64;
    char *r = realloc(x->rows, nc * x->s->row_size);
    if (!r) return NULL;
    x->rows = r;
    x->cap = nc;
  }
  void *row = x->rows + x->n * x->s->row_size;
  res_row_init(x->s, row);
  x->n++;
  return row;
}

static void rr_free_rows(const res_schema *s, char *rows, size_t n) {
  for (size_t r = 0; r < n; r++)
    for (size_t i = 0; i < s->nfields; i++)
      if (s->fields[i].kind == RES_STR) free(*(char **)(rows + r * s->row_size + s->fields[i].offset));
  free(rows);
}

/* Every STR field left NULL (absent from the file) becomes "", so readers need no checks. */
static int rr_fill_strings(const res_schema *s, void *row) {
  for (size_t i = 0; i < s->nfields; i++) {
    if (s->fields[i].kind != RES_STR) continue;
    char **p = (char **)((char *)row + s->fields[i].offset);
    if (!*p && !(*p = strdup(""))) return -1;
  }
  return 0;
}

static int rr_version_ok(rr_ctx *x, int64_t v, size_t line, char *err, size_t cap) {
  if (v > x->s->version) {
    res_errf(err, cap, "%s:%zu: schema version %lld is newer than this fabench's %d (%s records); read it with a newer fabench",
            x->file, line, (long long)v, x->s->version, x->s->base);
    return -1;
  }
  return 0;
}

/* The integers a row may hold: what a JSON number (a double) carries exactly, so that a row read
 * from either file is written to both and reads back the same (converting a larger double to
 * int64_t is undefined: a fuzz finding). */
#define RR_INT_MAX (1LL << 53)

/* Stores text into a field; kind decides the parse. */
static int rr_set(rr_ctx *x, void *row, const res_field *f, const char *txt, size_t line,
                  char *err, size_t cap) {
  void *p = (char *)row + f->offset;
  char *end;
  switch (f->kind) {
  case RES_STR: {
    char *d = strdup(txt);
    if (!d) return res_errf(err, cap, "out of memory"), -1;
    free(*(char **)p);
    *(char **)p = d;
    return 0;
  }
  case RES_INT: {
    errno = 0;
    long long v = strtoll(txt, &end, 10);
    if (!*txt || *end || errno || v > RR_INT_MAX || v < -RR_INT_MAX) {
      res_errf(err, cap, "%s:%zu: column %s: '%s' is not an integer within +-2^53", x->file, line,
              f->name, txt);
      return -1;
    }
    *(int64_t *)p = v;
    if (!strcmp(f->name, "schema")) return rr_version_ok(x, v, line, err, cap);
    return 0;
  }
  case RES_F64: {
    if (!*txt) {
      *(double *)p = NAN; /* not measured */
      return 0;
    }
    double v = strtod(txt, &end);
    if (*end) {
      res_errf(err, cap, "%s:%zu: column %s: '%s' is not a number", x->file, line, f->name, txt);
      return -1;
    }
    *(double *)p = v;
    return 0;
  }
  }
  return -1;
}

static int rr_field_index(const res_schema *s, const char *name) {
  for (size_t i = 0; i < s->nfields; i++)
    if (!strcmp(s->fields[i].name, name)) return (int)i;
  return -1;
}

/* The first required field of s that none of the file's ncols columns (col_of: their fields)
 * holds, or NULL. */
static const res_field *rr_missing(const res_schema *s, const int *col_of, size_t ncols) {
  for (size_t i = 0; i < s->nfields; i++) {
    if (s->fields[i].optional) continue;
    size_t c = 0;
    while (c < ncols && col_of[c] != (int)i) c++;
    if (c == ncols) return &s->fields[i];
  }
  return NULL;
}

/* A table without a required column is refused: read on, its rows would pass for measured
 * ones with that figure not measured (a report of nan, a fit of nothing without saying why). */
static int rr_missing_err(const rr_ctx *x, const res_field *f, size_t line, char *err, size_t cap) {
  if (line)
    res_errf(err, cap, "%s:%zu: no field '%s', which every %s record of schema %d has", x->file, line, f->name,
             x->s->base, x->s->version);
  else
    res_errf(err, cap, "%s: no column '%s', which every %s table of schema %d has", x->file, f->name, x->s->base,
             x->s->version);
  return -1;
}

/* One CSV record (RFC 4180: quoted fields may hold commas, doubled quotes and newlines)
 * split in place: fields point into buf. Returns the field count, -1 at the end of input. */
static int rr_csv_record(char **cur, char **fields, int maxf, size_t *line) {
  char *p = *cur;
  if (!*p) return -1;
  int nf = 0;
  for (;;) {
    char *out = p, *start = p;
    if (*p == '"') {
      p++;
      for (;;) {
        if (!*p) break;
        if (*p == '"') {
          if (p[1] == '"') {
            *out++ = '"';
            p += 2;
            continue;
          }
          p++;
          break;
        }
        if (*p == '\n') (*line)++;
        *out++ = *p++;
      }
      while (*p && *p != ',' && *p != '\n' && *p != '\r') p++; /* junk after the quote */
    } else {
      while (*p && *p != ',' && *p != '\n' && *p != '\r') *out++ = *p++;
    }
    char sep = *p;
    *out = '\0';
    if (nf < maxf) fields[nf] = start;
    nf++;
    if (sep == ',') {
      p++;
      continue;
    }
    /* out may have overwritten the separator: step over it by what it was */
    if (sep == '\r') {
      p++;
      if (*p == '\n') p++;
    } else if (sep == '\n') {
      p++;
    }
    break;
  }
  *cur = p;
  return nf;
}

static int rr_read_csv(rr_ctx *x, char *buf, char *err, size_t cap) {
  char *cur = buf, *f[128];
  size_t line = 1;
  int nf = rr_csv_record(&cur, f, 128, &line);
  if (nf <= 0) {
    res_errf(err, cap, "%s: empty file, not a fabench %s table", x->file, x->s->base);
    return -1;
  }
  if (nf > 128) {
    res_errf(err, cap, "%s: %d columns, not a fabench %s table", x->file, nf, x->s->base);
    return -1;
  }
  x->ncols = (size_t)nf;
  int unknown = -1;
  for (int i = 0; i < nf; i++) {
    x->col_of[i] = rr_field_index(x->s, f[i]);
    if (x->col_of[i] < 0 && unknown < 0) unknown = i;
    for (int k = 0; k < i && x->col_of[i] >= 0; k++)
      if (x->col_of[k] == x->col_of[i]) { /* which of the two is the figure? */
        res_errf(err, cap, "%s: column '%s' twice: not a fabench %s table", x->file, f[i], x->s->base);
        return -1;
      }
  }
  if (x->col_of[0] != 0) {
    res_errf(err, cap, "%s: first column '%s' is not '%s': not a fabench %s table", x->file, f[0],
            x->s->fields[0].name, x->s->base);
    return -1;
  }
  char unknown_name[128] = "";
  if (unknown >= 0) snprintf(unknown_name, sizeof unknown_name, "%s", f[unknown]);
  /* a required column the header lacks: said after the first row, like an unknown one, so that
   * a newer schema (which may have dropped it) is refused as newer */
  const res_field *missing = rr_missing(x->s, x->col_of, (size_t)nf);
  for (;;) {
    size_t at = ++line;
    int n = rr_csv_record(&cur, f, 128, &line);
    if (n < 0) break;
    if (n == 1 && !*f[0]) continue; /* blank line */
    if (n != nf) {
      res_errf(err, cap, "%s:%zu: %d fields, the header has %d", x->file, at, n, nf);
      return -1;
    }
    void *row = rr_new_row(x);
    if (!row) return res_errf(err, cap, "out of memory"), -1;
    for (int i = 0; i < n; i++)
      if (x->col_of[i] >= 0 && rr_set(x, row, &x->s->fields[x->col_of[i]], f[i], at, err, cap))
        return -1;
    if (unknown >= 0) { /* a newer schema was refused above; otherwise foreign */
      res_errf(err, cap, "%s: unknown column '%s': not a fabench %s table of schema %d", x->file,
              unknown_name, x->s->base, x->s->version);
      return -1;
    }
    if (missing) return rr_missing_err(x, missing, 0, err, cap);
    if (rr_fill_strings(x->s, row)) return res_errf(err, cap, "out of memory"), -1;
  }
  if (unknown >= 0 && x->n == 0) {
    res_errf(err, cap, "%s: unknown column '%s': not a fabench %s table of schema %d", x->file,
            unknown_name, x->s->base, x->s->version);
    return -1;
  }
  if (missing) return rr_missing_err(x, missing, 0, err, cap);
  return 0;
}

static int rr_read_jsonl(rr_ctx *x, char *buf, char *err, size_t cap) {
  size_t line = 0;
  for (char *p = buf; *p;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    line++;
    char *q = p;
    p = nl ? nl + 1 : p + strlen(p);
    while (*q == ' ' || *q == '\t' || *q == '\r') q++;
    if (!*q) continue;
    cJSON *o = cJSON_Parse(q);
    if (!cJSON_IsObject(o)) {
      cJSON_Delete(o);
      res_errf(err, cap, "%s:%zu: not a JSON object", x->file, line);
      return -1;
    }
    void *row = rr_new_row(x);
    if (!row) {
      cJSON_Delete(o);
      return res_errf(err, cap, "out of memory"), -1;
    }
    int rc = 0;
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "schema");
    if (cJSON_IsNumber(ver)) {
      double d = ver->valuedouble;
      rc = rr_version_ok(x, d > RR_INT_MAX ? RR_INT_MAX : d < -RR_INT_MAX ? -RR_INT_MAX : (int64_t)d,
                         line, err, cap);
    }
    if (!cJSON_GetObjectItemCaseSensitive(o, x->s->fields[0].name) && !rc) {
      res_errf(err, cap, "%s:%zu: no '%s': not a fabench %s record", x->file, line,
              x->s->fields[0].name, x->s->base);
      rc = -1;
    }
    for (const cJSON *it = o->child; it && !rc; it = it->next) {
      int fi = rr_field_index(x->s, it->string ? it->string : "");
      if (fi < 0) {
        res_errf(err, cap, "%s:%zu: unknown field '%s': not a fabench %s record of schema %d",
                x->file, line, it->string ? it->string : "", x->s->base, x->s->version);
        rc = -1;
        break;
      }
      const res_field *f = &x->s->fields[fi];
      void *dst = (char *)row + f->offset;
      if (f->kind == RES_STR && cJSON_IsString(it)) {
        rc = rr_set(x, row, f, it->valuestring, line, err, cap);
      } else if (f->kind == RES_INT && cJSON_IsNumber(it) && it->valuedouble == floor(it->valuedouble) &&
                 fabs(it->valuedouble) <= (double)RR_INT_MAX) {
        *(int64_t *)dst = (int64_t)it->valuedouble;
      } else if (f->kind == RES_F64 && cJSON_IsNumber(it)) {
        *(double *)dst = it->valuedouble;
      } else if (f->kind == RES_F64 && cJSON_IsNull(it)) {
        *(double *)dst = NAN;
      } else {
        res_errf(err, cap, "%s:%zu: field %s has the wrong type", x->file, line, f->name);
        rc = -1;
      }
    }
    for (size_t i = 0; i < x->s->nfields && !rc; i++)
      if (!x->s->fields[i].optional && !cJSON_GetObjectItemCaseSensitive(o, x->s->fields[i].name))
        rc = rr_missing_err(x, &x->s->fields[i], line, err, cap);
    cJSON_Delete(o);
    if (rc) return -1;
    if (rr_fill_strings(x->s, row)) return res_errf(err, cap, "out of memory"), -1;
  }
  return 0;
}

int res_table_read(res_rows *out, const res_schema *s, const char *path, char *err,
                   size_t errcap) {
  memset(out, 0, sizeof *out);
  out->schema = s;
  char file[4200];
  if (rr_pick(file, sizeof file, s, path)) {
    if (rr_is_dir(path))
      res_errf(err, errcap, "'%s' has no %s.csv or %s.jsonl", path, s->base, s->base);
    else
      res_errf(err, errcap, "'%s': %s", path, rr_is_file(path) || errno != ENOENT ? "not a regular file" : "no such file or directory");
    return -1;
  }
  char meta[4200];
  int dv;
  rr_meta_path(meta, sizeof meta, file);
  if (rr_meta_read(meta, &dv, NULL, 0, err, errcap) < 0) return -1;
  if (dv > s->version) {
    res_errf(err, errcap, "%s: its run.json has schema version %d, newer than this fabench's %d; read it with a newer fabench",
            file, dv, s->version);
    return -1;
  }
  size_t len;
  char *buf;
  if (util_file_read(file, SIZE_MAX, &buf, &len, err, errcap)) return -1;
  if (strlen(buf) != len) {
    free(buf);
    res_errf(err, errcap, "%s: binary data, not a fabench %s table", file, s->base);
    return -1;
  }
  rr_ctx x = {.s = s, .file = file};
  int rc = rr_ends(file, ".jsonl") || rr_ends(file, ".json") ? rr_read_jsonl(&x, buf, err, errcap)
                                                              : rr_read_csv(&x, buf, err, errcap);
  free(buf);
  if (rc) {
    /* a half-filled last row may hold NULL strings: free() takes them */
    rr_free_rows(s, x.rows, x.n);
    return -1;
  }
  out->rows = x.rows;
  out->n = x.n;
  return 0;
}

void res_rows_free(res_rows *r) {
  if (!r || !r->schema) return;
  rr_free_rows(r->schema, r->rows, r->n);
  r->rows = NULL;
  r->n = 0;
}

int res_rows_move(res_rows *dst, res_rows *src, char *err, size_t errcap) {
  if (!dst->schema) dst->schema = src->schema;
  if (dst->schema != src->schema) {
    res_errf(err, errcap, "internal: merging %s rows into %s rows", src->schema->base, dst->schema->base);
    return -1;
  }
  size_t sz = dst->schema->row_size;
  if (src->n) {
    char *r = realloc(dst->rows, (dst->n + src->n) * sz);
    if (!r) return res_errf(err, errcap, "out of memory"), -1;
    memcpy(r + dst->n * sz, src->rows, src->n * sz);
    dst->rows = r;
    dst->n += src->n;
  }
  free(src->rows);
  src->rows = NULL;
  src->n = 0;
  return 0;
}

int res_run_meta_check(const char *dir, char *run_id, size_t idcap, char *err, size_t errcap) {
  char path[4200];
  int ver;
  snprintf(path, sizeof path, "%s/run.json", dir);
  int rc = rr_meta_read(path, &ver, run_id, idcap, err, errcap);
  if (rc) return rc;
  if (ver > RES_SCHEMA_VERSION) {
    res_errf(err, errcap, "%s: schema version %d is newer than this fabench's %d; read it with a newer fabench", path,
             ver, RES_SCHEMA_VERSION);
    return -1;
  }
  return 0;
}

int res_run_read(res_rows *rows, const res_schema *const *schemas, size_t n, const char *dir,
                 char *err, size_t errcap) {
  if (res_run_meta_check(dir, NULL, 0, err, errcap) < 0) return -1;
  int found = 0;
  for (size_t k = 0; k < n; k++) {
    if (!res_table_exists(schemas[k], dir)) continue;
    res_rows r;
    if (res_table_read(&r, schemas[k], dir, err, errcap)) return -1;
    int rc = res_rows_move(&rows[k], &r, err, errcap);
    res_rows_free(&r);
    if (rc) return -1;
    found++;
  }
  return found;
}

int res_run_dirs_unique(char **dirs, int *ndirs, char *note, size_t notecap) {
  typedef struct {
    char *real;
    char id[128];
  } seen_t;
  seen_t *seen = calloc(*ndirs > 0 ? (size_t)*ndirs : 1, sizeof *seen);
  size_t nl = 0;
  int kept = 0, left = 0;
  if (note && notecap) note[0] = '\0';
  if (!seen) return 0; /* out of memory: every directory read, as before */
  for (int i = 0; i < *ndirs; i++) {
    seen_t me = {realpath(dirs[i], NULL), ""};
    /* a run.json that cannot be read names no run here; reading the directory says why */
    if (res_run_meta_check(dirs[i], me.id, sizeof me.id, NULL, 0) != 0) me.id[0] = '\0';
    int dup = -1;
    for (int k = 0; k < kept && dup < 0; k++)
      if ((me.real && seen[k].real && !strcmp(me.real, seen[k].real)) || (me.id[0] && !strcmp(me.id, seen[k].id)))
        dup = k;
    if (dup < 0) {
      seen[kept] = me;
      dirs[kept++] = dirs[i];
      continue;
    }
    if (note && notecap && nl < notecap)
      nl += (size_t)snprintf(note + nl, notecap - nl, "%s'%s' (%s '%s')", left ? ", " : "the same run given again, read once: ",
                             dirs[i], me.real && seen[dup].real && !strcmp(me.real, seen[dup].real) ? "same directory as" : "same run_id as",
                             dirs[dup]);
    free(me.real);
    left++;
  }
  for (int k = 0; k < kept; k++) free(seen[k].real);
  free(seen);
  *ndirs = kept;
  return left;
}

/* Removes the rows keep() refuses, freeing their strings; order kept; how many went. */
static size_t rr_drop_rows(res_rows *t, int (*keep)(const void *row)) {
  const res_schema *s = t->schema;
  char *base = t->rows;
  size_t k = 0, n = t->n;
  for (size_t i = 0; i < n; i++) {
    char *row = base + i * s->row_size;
    if (keep(row)) {
      if (k != i) memcpy(base + k * s->row_size, row, s->row_size);
      k++;
      continue;
    }
    for (size_t f = 0; f < s->nfields; f++) /* its strings are the row's own */
      if (s->fields[f].kind == RES_STR) free(*(char **)(row + s->fields[f].offset));
  }
  t->n = k;
  return n - k;
}

static int rr_timed(double v) { return isfinite(v) && v >= 0; }

static int rr_allreduce_timed(const void *row) {
  return rr_timed(((const res_allreduce_row *)row)->t_p50_us);
}

static int rr_colls_timed(const void *row) { return rr_timed(((const res_colls_row *)row)->t_p50_us); }

/* a latency row's measure is its time, the others' (bw, bibw, copies) their rate */
static int rr_p2p_timed(const void *row) {
  const res_p2p_row *r = row;
  return rr_timed(r->test && !strcmp(r->test, "latency") ? r->t_p50_us : r->gbps);
}

size_t res_rows_drop_untimed(res_rows *t) {
  if (t->schema == res_schema_allreduce()) return rr_drop_rows(t, rr_allreduce_timed);
  if (t->schema == res_schema_colls()) return rr_drop_rows(t, rr_colls_timed);
  if (t->schema == res_schema_p2p()) return rr_drop_rows(t, rr_p2p_timed);
  return 0;
}

void res_colls_row_of(res_colls_row *c, const res_allreduce_row *a, const char *coll, int64_t root, double imbalance) {
  res_row_init(res_schema_colls(), c);
#define RR_COPY_(kind, name) c->name = a->name;
  RES_ALLREDUCE_COLS(RR_COPY_)
#undef RR_COPY_
  c->coll = coll;
  c->root = root;
  c->imbalance = imbalance;
}
