/* util: the small things every module needs and none owns: whole-file reading and atomic
 * replacement (with the stop signals that wait for it), JSON files, sample statistics and a
 * monotonic clock. It depends on nothing of fabench's, so any module may link it. */
#ifndef FABENCH_UTIL_H
#define FABENCH_UTIL_H

#include <stddef.h>
#include <cjson/cJSON.h>

/* ---- files (util_file.c) ---- */
/* Reads a whole file of at most max bytes into *out, NUL-terminated (free it), its length in
 * *len. 0; -2 with err when the file cannot be opened (a caller may word a missing file its
 * own way); -1 with err when it cannot be read or is larger than max. */
int util_file_read(const char *path, size_t max, char **out, size_t *len, char *err, size_t errcap);
/* The directory a file path names its file in ("." for a bare name, "/" for one at the root):
 * 0, or -1 when it does not fit in cap. */
int util_path_dir(char *dir, size_t cap, const char *path);

/* ---- atomic replacement (util_replace.c) ---- */
/* Makes SIGTERM, SIGINT and SIGHUP wait for a util_file_replace in progress, in any thread,
 * then end the process as before (default action). Call once at start, before any thread. */
int util_stop_signals_install(void);
/* Replaces path with the n bytes at data, whole: written to an unnamed file in path's directory,
 * synced, named path.tmp and renamed over path, so a crash or kill leaves the old file or the
 * new. 0, or -1 with err naming the file. */
int util_file_replace(const char *path, const void *data, size_t n, char *err, size_t errcap);

/* ---- JSON files (util_json.c) ---- */
/* Reads and parses a JSON file of at most UTIL_JSON_MAX_BYTES into *out (cJSON_Delete it):
 * util_file_read's returns, and -1 with err when it is not JSON (err names the line and column
 * where the parse stopped). *out is NULL on error. */
#define UTIL_JSON_MAX_BYTES ((size_t)256 << 20)
int util_json_read_file(const char *path, cJSON **out, char *err, size_t errcap);
/* Writes any JSON value to a file, pretty-printed, atomically (util_file_replace). */
int util_json_write_file(const char *path, const cJSON *v, char *err, size_t errcap);

/* ---- statistics (util_stats.c) ---- */
typedef struct {
  size_t n;
  double min, p50, p90, p99, max, mean, stddev;
} util_stats;
/* Sorts x in place. Percentiles by nearest rank (ceil(n p) - 1), population stddev.
 * n == 0 gives all zeros. */
void util_stats_compute(util_stats *out, double *x, size_t n);
/* The median of x[0..n) (sorted in place; the mean of the middle two where n is even), NaN for
 * n == 0. */
double util_median(double *x, size_t n);
/* x[0..n) measured in `rounds` rounds of consecutive samples (round r: [n r / rounds,
 * n (r + 1) / rounds)): the slowest round's median over the fastest's, less 1. Sorts each
 * round's samples in place. NaN where fewer than 2 rounds have a sample. */
double util_round_spread(double *x, size_t n, int rounds);

/* ---- clock (util_clock.c) ---- */
/* Seconds from a monotonic clock. */
double util_now(void);

#endif
