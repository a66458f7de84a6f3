/* results: record tables (CSV + JSON Lines), run directories, run metadata, statistics.
 * results knows nothing of how a figure was measured; benches hand it rows. */
#ifndef FABENCH_RES_H
#define FABENCH_RES_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#define RES_SCHEMA_VERSION 1

/* ---- tables: one CSV and one JSONL file with the same rows, flushed row by row ---- */
typedef enum { RES_STR, RES_INT, RES_F64 } res_kind;
typedef struct {
  const char *name;
  res_kind kind;
} res_col;

typedef struct res_table res_table;

/* Creates <dir>/<base>.csv and <dir>/<base>.jsonl and writes the CSV header. */
int res_table_open(res_table **out, const char *dir, const char *base, const res_col *cols,
                   size_t ncols, char *err, size_t errcap);
/* Values are given in column order, one call per column, then res_row_end writes and flushes
 * the row to both files. A wrong count or kind is an error (reported at res_row_end). */
void res_row_str(res_table *t, const char *v);
void res_row_int(res_table *t, int64_t v);
void res_row_f64(res_table *t, double v);
int res_row_end(res_table *t, char *err, size_t errcap);
void res_table_close(res_table *t);

/* ---- records: columns defined once (res_rec.h), commands fill a struct ---- */
typedef struct {
  const char *name;
  res_kind kind;
  size_t offset; /* of the field in the record's row struct */
} res_field;
typedef struct {
  const char *base;       /* file base name: <base>.csv, <base>.jsonl */
  int version;            /* schema version the columns belong to */
  const res_field *fields;
  size_t nfields;
  size_t row_size;        /* sizeof the row struct */
} res_schema;

#include "res_rec.h" /* the records: res_<rec>_row and res_schema_<rec>() */

/* A row with every F64 NaN (written as not measured), every INT 0 and every STR NULL. */
void res_row_init(const res_schema *s, void *row);
/* Creates <dir>/<base>.csv and <dir>/<base>.jsonl for the record and writes the CSV header. */
int res_table_open_schema(res_table **out, const char *dir, const res_schema *s, char *err,
                          size_t errcap);
/* Writes and flushes one row (a res_<rec>_row of the table's record) to both files. NULL
 * strings are written as empty, non-finite F64 as an empty CSV field and JSON null. */
int res_table_put(res_table *t, const void *row, char *err, size_t errcap);

/* Rows read back from a record's CSV or JSONL file. */
typedef struct {
  const res_schema *schema;
  void *rows; /* n rows of schema->row_size bytes: a res_<rec>_row array */
  size_t n;
} res_rows;
/* Reads a record's rows from path: a run directory (<base>.csv, else <base>.jsonl) or a
 * .csv/.jsonl file. Columns are matched by name; a column the file lacks reads as NaN, 0 or
 * "" (an older schema); an unknown column, a malformed value, or a schema version newer than
 * s->version (from a row's schema column or the directory's run.json) is an error. Strings
 * are owned by out; free with res_rows_free. */
int res_table_read(res_rows *out, const res_schema *s, const char *path, char *err,
                   size_t errcap);
void res_rows_free(res_rows *r);
/* Moves src's rows to the end of dst (same record; dst may start zeroed). src is left empty. */
int res_rows_move(res_rows *dst, res_rows *src, char *err, size_t errcap);
/* Whether path holds the record's file (a directory with <base>.csv or .jsonl, or a file). */
int res_table_exists(const res_schema *s, const char *path);

/* ---- run directory and metadata ---- */
/* Makes the run directory: `out` if given, else results/<UTC YYYYmmddTHHMMSSZ>-<command>.
 * Parents are created. Writes the chosen path into dir (cap bytes). */
int res_run_dir(char *dir, size_t cap, const char *out, const char *command, char *err,
                size_t errcap);
/* A run id: UTC timestamp plus random hex, unique enough to join CSVs of several runs. */
void res_run_id(char *id, size_t cap);
/* Starts run.json's object with the fields every command records: schema, run_id, command,
 * argv, fabench version, start time, hostname, and a filtered environment (FABENCH_*, OMPI_*,
 * UCX_*, NCCL_*, SLURM_*, OMP_*, HWLOC_*, CUDA_VISIBLE_DEVICES) without secrets: no variable
 * whose name holds TOKEN, SECRET, KEY, PASSWORD, PASSWD or CREDENTIAL (any case), nor Open MPI's
 * PSM key OMPI_MCA_orte_precondition_transports, nor any value or argument holding the job
 * token FABENCH_TOKEN. Caller adds more fields. */
cJSON *res_meta_new(const char *run_id, const char *command, int argc, char **argv);
/* Writes the object as <dir>/run.json (atomically: temp file + rename). */
int res_meta_write(const char *dir, const cJSON *meta, char *err, size_t errcap);
/* Writes any JSON value to a file, pretty-printed. */
int res_json_write_file(const char *path, const cJSON *v, char *err, size_t errcap);

/* ---- statistics ---- */
typedef struct {
  size_t n;
  double min, p50, p90, p99, max, mean, stddev;
} res_stats;
/* Sorts x in place. Percentiles by nearest rank (ceil(n p) - 1), population stddev.
 * n == 0 gives all zeros. */
void res_stats_compute(res_stats *out, double *x, size_t n);

/* Seconds from a monotonic clock. */
double res_now(void);

#endif
