/* `fabench report DIR`: a run directory as report reads it, every record report merges through
 * results' res_run_read, and model.json through res_costmodel_read and its predictions. The input
 * is the directory as a small archive: each file starts with a line "=== NAME" (NAME one of the
 * files report reads; other names are skipped); text before the first such line is
 * allreduce.csv. The files are written to a scratch directory made once per process. Rows that
 * were read are written back with results' writer and read again, from the CSV and from the
 * JSONL: what we write, we can read, to the precision written. */
#include <float.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "res.h"
#include "test_util.h"

/* The tables report reads (bench/cmd_report.c), each as CSV or JSON Lines. */
static const res_schema *fz_schema(size_t k) {
  switch (k) {
  case 0: return res_schema_allreduce();
  case 1: return res_schema_p2p();
  case 2: return res_schema_p2p_matrix();
  case 3: return res_schema_train();
  case 4: return res_schema_train_buckets();
  default: return res_schema_predict();
  }
}
#define FZ_NREC 6

/* libFuzzer gives the target no context: the scratch directories live for the process */
static char fz_dir[4096], fz_back[4200];

static void fz_cleanup(void) {
  if (fz_dir[0]) tu_rmtree(fz_dir);
}

/* Empties a directory (one level: report reads no subdirectories). */
static void fz_empty(const char *dir) {
  static const char *const names[] = {"run.json", "model.json"};
  char p[4300];
  for (size_t i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
  for (size_t k = 0; k < FZ_NREC; k++) {
    snprintf(p, sizeof p, "%s/%s.csv", dir, fz_schema(k)->base);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s.jsonl", dir, fz_schema(k)->base);
    unlink(p);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* under TMPDIR: scripts/fuzz.sh removes its TMPDIR, also after a crash skipped atexit */
  const char *tmp = getenv("TMPDIR");
  snprintf(fz_dir, sizeof fz_dir, "%s/fabench-fuzz-rundir-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(fz_dir)) {
    perror("fuzz_rundir: mkdtemp");
    abort();
  }
  snprintf(fz_back, sizeof fz_back, "%s/back", fz_dir);
  if (mkdir(fz_back, 0700) != 0) abort();
  atexit(fz_cleanup);
  return 0;
}

/* Whether name is a file report reads. */
static int fz_allowed(const char *name) {
  if (!strcmp(name, "run.json") || !strcmp(name, "model.json")) return 1;
  for (size_t k = 0; k < FZ_NREC; k++) {
    size_t l = strlen(fz_schema(k)->base);
    if (!strncmp(name, fz_schema(k)->base, l) &&
        (!strcmp(name + l, ".csv") || !strcmp(name + l, ".jsonl")))
      return 1;
  }
  return 0;
}

static void fz_write(const char *name, const uint8_t *d, size_t n) {
  if (!fz_allowed(name)) return;
  char p[4300];
  snprintf(p, sizeof p, "%s/%s", fz_dir, name);
  FILE *f = fopen(p, "wb");
  FUZZ_CHECK(f != NULL);
  FUZZ_CHECK(fwrite(d, 1, n, f) == n || n == 0);
  fclose(f);
}

/* Splits the archive into files. */
static void fz_unpack(const uint8_t *data, size_t size) {
  static const char mark[] = "=== ";
  const size_t ml = sizeof mark - 1;
  char name[64] = "allreduce.csv";
  size_t start = 0;
  for (size_t i = 0; i <= size; i++) {
    int at_mark = i < size && (i == 0 || data[i - 1] == '\n') && size - i >= ml &&
                  !memcmp(data + i, mark, ml);
    if (!at_mark && i < size) continue;
    if (i > 0) fz_write(name, data + start, i - start); /* (nothing before a leading mark) */
    if (i == size) break;
    size_t e = i + ml;
    while (e < size && data[e] != '\n') e++;
    size_t l = e - (i + ml) < sizeof name - 1 ? e - (i + ml) : sizeof name - 1;
    memcpy(name, data + i + ml, l);
    name[l] = '\0';
    start = e < size ? e + 1 : e;
    i = start - 1;
  }
}

/* A value read back from what the writer made of it. */
static void fz_same(const res_schema *s, const void *a, const void *b, int exact) {
  for (size_t i = 0; i < s->nfields; i++) {
    const res_field *f = &s->fields[i];
    if (!strcmp(f->name, "schema")) continue; /* the writer stamps its own version */
    const char *pa = (const char *)a + f->offset, *pb = (const char *)b + f->offset;
    if (f->kind == RES_STR) {
      FUZZ_CHECK(strcmp(*(char *const *)pa, *(char *const *)pb) == 0);
    } else if (f->kind == RES_INT) {
      if (*(const int64_t *)pa != *(const int64_t *)pb)
        fprintf(stderr, "fuzz_rundir: %s.%s: %lld read back as %lld\n", s->base, f->name,
                (long long)*(const int64_t *)pa, (long long)*(const int64_t *)pb);
      FUZZ_CHECK(*(const int64_t *)pa == *(const int64_t *)pb);
    } else {
      double x = *(const double *)pa, y = *(const double *)pb;
      /* CSV: 6 significant digits; JSON: cJSON prints 15 when they read back within an ulp or
       * two of the value (its compare_double), else 17 */
      double tol = (exact ? 4 * DBL_EPSILON : 1e-5) * fabs(x);
      if (isfinite(x) ? !(fabs(x - y) <= tol) : !isnan(y)) /* non-finite: not measured */
        fprintf(stderr, "fuzz_rundir: %s.%s: %.17g read back as %.17g\n", s->base, f->name, x, y);
      FUZZ_CHECK(isfinite(x) ? fabs(x - y) <= tol : isnan(y));
    }
  }
}

/* Writes the rows with results' writer, reads them back from the CSV and the JSONL. */
static void fz_round_trip(const res_rows *r) {
  const res_schema *s = r->schema;
  char err[512];
  res_table *t;
  FUZZ_CHECK(res_table_open_schema(&t, fz_back, s, err, sizeof err) == 0);
  for (size_t i = 0; i < r->n; i++)
    FUZZ_CHECK(res_table_put(t, (const char *)r->rows + i * s->row_size, err, sizeof err) == 0);
  res_table_close(t);
  for (int jsonl = 0; jsonl < 2; jsonl++) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s.%s", fz_back, s->base, jsonl ? "jsonl" : "csv");
    res_rows back;
    int rc = res_table_read(&back, s, p, err, sizeof err);
    if (rc != 0) fprintf(stderr, "fuzz_rundir: re-reading %s: %s\n", p, err);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(back.n == r->n);
    for (size_t i = 0; i < r->n; i++)
      fz_same(s, (const char *)r->rows + i * s->row_size, (const char *)back.rows + i * s->row_size,
              jsonl);
    res_rows_free(&back);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_empty(fz_dir);
  fz_unpack(data, size);
  const res_schema *sch[FZ_NREC];
  res_rows rows[FZ_NREC];
  memset(rows, 0, sizeof rows);
  for (size_t k = 0; k < FZ_NREC; k++) sch[k] = fz_schema(k);
  char err[512];
  err[0] = '\0';
  int got = res_run_read(rows, sch, FZ_NREC, fz_dir, err, sizeof err);
  FUZZ_SAY(got < 0 ? -1 : 0, err);
  if (got < 0) FUZZ_CHECK(err[0] != '\0');
  else
    for (size_t k = 0; k < FZ_NREC; k++)
      if (rows[k].n) fz_round_trip(&rows[k]);
  for (size_t k = 0; k < FZ_NREC; k++) res_rows_free(&rows[k]);
  fz_empty(fz_back);

  char path[4300];
  snprintf(path, sizeof path, "%s/model.json", fz_dir);
  if (access(path, F_OK) == 0) {
    res_costmodel m;
    err[0] = '\0';
    int rc = res_costmodel_read(&m, path, err, sizeof err);
    FUZZ_SAY(rc, err);
    if (rc == 0) {
      FUZZ_CHECK(m.n > 0);
      /* each residual's call as the model predicts it, what it learned included: never negative */
      for (size_t i = 0; i < m.n; i++)
        for (size_t q = 0; q < m.f[i].nresid; q++) {
          const res_resid *r = &m.f[i].resid[q];
          coll_algo a;
          if (coll_algo_parse(r->algo, &a) || r->ranks < 2 || r->bytes <= 0) continue;
          double t = coll_model_time(&m.f[i].m, a, r->ranks, (size_t)r->bytes, (size_t)m.f[i].chunk_bytes);
          FUZZ_CHECK(!(t < 0));
        }
      res_costmodel_free(&m);
    } else {
      FUZZ_CHECK(err[0] != '\0');
    }
  }
  return 0;
}
