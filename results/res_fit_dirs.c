/* results: the fit's inputs from run directories. A command hands over the directories; the
 * rows, the host they were measured on and what their runs recorded in run.json (the reduction
 * kernel's rate, the emulated links' shapers, whether ranks slept) are read here and fitted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "launch.h" /* launch_emu_parse_rate: an emulated fabric's name gives its rate */
#include "res.h"
#include "util.h"

int res_fit_read_dirs(res_rows *ar, res_rows *pp, char *const *dirs, int ndirs, int quiet, char *err,
                      size_t cap) {
  const res_schema *sch[2] = {res_schema_allreduce(), res_schema_p2p()};
  res_rows rows[2] = {{sch[0], NULL, 0}, {sch[1], NULL, 0}};
  int rc = 0, found = 0;
  size_t untimed = 0;
  char where[600] = "";
  for (int i = 0; i < ndirs && !rc; i++) {
    struct stat st;
    if (stat(dirs[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
      snprintf(err, cap, "'%s' is not a run directory", dirs[i]);
      rc = -1;
      break;
    }
    res_rows one[2] = {{sch[0], NULL, 0}, {sch[1], NULL, 0}};
    int got = res_run_read(one, sch, 2, dirs[i], err, cap);
    size_t u = got > 0 ? res_rows_drop_untimed(&one[0]) + res_rows_drop_untimed(&one[1]) : 0;
    if (u) {
      size_t l = strlen(where);
      snprintf(where + l, sizeof where - l, "%s%s: %zu", l ? ", " : "", dirs[i], u);
    }
    untimed += u;
    for (int k = 0; k < 2; k++) {
      if (!rc && got >= 0 && res_rows_move(&rows[k], &one[k], err, cap)) rc = -1;
      res_rows_free(&one[k]);
    }
    if (got < 0) rc = -1;
    if (got > 0) found = 1;
  }
  /* Left out and said, as the fit leaves out rows with errors, rather than refused: NaN is what
   * the writer leaves for a time not measured, which the reader accepts as such, and one
   * damaged row should not stop the rest of a sweep from being fitted or checked. */
  if (!rc && untimed && !quiet)
    fprintf(stderr, "fabench: left out %zu row%s whose measure (median time, or a p2p rate) is negative or not a number (%s)\n",
            untimed, untimed == 1 ? "" : "s", where);
  if (!rc && !found) {
    snprintf(err, cap, "no allreduce.csv or p2p.csv in %s%s", dirs[0], ndirs > 1 ? " and the others" : "");
    rc = -1;
  }
  if (rc) {
    res_rows_free(&rows[0]);
    res_rows_free(&rows[1]);
  }
  *ar = rows[0];
  *pp = rows[1];
  return rc;
}

/* run.json of a run directory, parsed (NULL: none or unreadable). */
static cJSON *rfd_run_json(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", dir);
  cJSON *o;
  return util_json_read_file(path, &o, NULL, 0) ? NULL : o;
}

void res_fit_dir_host(const char *dir, int *cores) {
  cJSON *o = rfd_run_json(dir);
  const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(o, "topology");
  cpu = cJSON_GetObjectItemCaseSensitive(cpu, "summary");
  cpu = cJSON_GetObjectItemCaseSensitive(cpu, "cpu");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(cpu, "cores");
  *cores = cJSON_IsNumber(t) && t->valuedouble >= 1 ? (int)t->valuedouble : 0;
  cJSON_Delete(o);
}

/* The emulated fabric a run directory measured, from the environment its ranks ran with
 * (run.json): its name, links' MTU and shaper burst in bytes (0 where not recorded); 0 if the
 * run was not emulated. */
static int rfd_dir_emu(const char *dir, char *fabric, size_t cap, int *mtu, double *burst) {
  cJSON *o = rfd_run_json(dir);
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "environment");
  const cJSON *fab = cJSON_GetObjectItemCaseSensitive(env, "FABENCH_FABRIC");
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(env, "FABENCH_EMU_MTU");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(env, "FABENCH_EMU_BURST");
  int emu = cJSON_IsString(fab) && *fab->valuestring;
  if (emu) snprintf(fabric, cap, "%s", fab->valuestring);
  *mtu = emu && cJSON_IsString(m) ? atoi(m->valuestring) : 0;
  *burst = emu && cJSON_IsString(b) ? strtod(b->valuestring, NULL) : 0;
  if (!(*burst > 0)) *burst = 0;
  cJSON_Delete(o);
  return emu;
}

int res_fit_recorded(res_fit_opts *o, char *const *dirs, int ndirs) {
  res_fit_burst *b = calloc(ndirs > 0 ? (size_t)ndirs : 1, sizeof *b);
  o->bursts = b;
  o->nbursts = 0;
  if (!b) return -1;
  /* each run's recorded kernel rate, for the fabrics its rows measured (res_fit_opts.runs) */
  res_fit_run *runs = calloc(ndirs > 0 ? (size_t)ndirs : 1, sizeof *runs);
  o->runs = runs;
  o->nruns = 0;
  if (!runs) return -1;
  for (int d = 0; d < ndirs; d++) {
    cJSON *j = rfd_run_json(dirs[d]);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "run_id"), *g = cJSON_GetObjectItemCaseSensitive(j, "reduce_gbps");
    if (cJSON_IsString(id)) {
      res_fit_run *r = &runs[o->nruns++];
      snprintf(r->run_id, sizeof r->run_id, "%s", id->valuestring);
      r->gamma_kernel = !isnan(o->gamma_kernel) && cJSON_IsNumber(g) && g->valuedouble > 0 && isfinite(g->valuedouble)
                            ? 1e-9 / g->valuedouble
                            : NAN;
    }
    cJSON_Delete(j);
  }
  for (int d = 0; d < ndirs; d++) {
    int mtu;
    res_fit_burst *x = &b[o->nbursts];
    if (!rfd_dir_emu(dirs[d], x->fabric, sizeof x->fabric, &mtu, &x->bytes) || !(x->bytes > 0)) continue;
    /* tbf counts a frame from its Ethernet header (14 + MTU), of which MTU - 52 is TCP payload */
    uint64_t bps;
    if (mtu > 52 && !strncmp(x->fabric, "emu-", 4) && !launch_emu_parse_rate(x->fabric + 4, &bps) && bps > 0)
      x->ceil_beta = 8.0 * (mtu + 14) / ((double)bps * (mtu - 52));
    o->nbursts++;
  }
  return 0;
}

void res_fit_recorded_free(res_fit_opts *o) {
  free((void *)o->bursts);
  o->bursts = NULL;
  o->nbursts = 0;
  free((void *)o->runs);
  o->runs = NULL;
  o->nruns = 0;
}

int res_fit_dir_emu_mtu(const char *dir, const char *fabric) {
  char fab[64];
  int mtu;
  double burst;
  return rfd_dir_emu(dir, fab, sizeof fab, &mtu, &burst) && !strcmp(fab, fabric) ? mtu : 0;
}


/* A train-only run's rate is not the fitted rows' (res_fit_opts.runs keeps each fabric to its
 * own runs' rates; this is the rate the fit prints and falls back on). */
double res_fit_dirs_gamma(char *const *dirs, int ndirs) {
  double *v = calloc(ndirs > 0 ? (size_t)ndirs : 1, sizeof *v);
  size_t n = 0;
  for (int d = 0; v && d < ndirs; d++) {
    if (!res_table_exists(res_schema_allreduce(), dirs[d]) && !res_table_exists(res_schema_p2p(), dirs[d])) continue;
    cJSON *o = rfd_run_json(dirs[d]);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(o, "reduce_gbps");
    if (cJSON_IsNumber(g) && g->valuedouble > 0 && isfinite(g->valuedouble)) v[n++] = 1e-9 / g->valuedouble;
    cJSON_Delete(o);
  }
  util_stats st = {0};
  if (n) util_stats_compute(&st, v, n);
  free(v);
  return n ? st.p50 : NAN;
}

int res_fit_dirs(res_costmodel *m, char *const *dirs, int ndirs, const res_fit_opts *o, int quiet, char *err,
                 size_t cap) {
  res_rows ar, pp;
  if (res_fit_read_dirs(&ar, &pp, dirs, ndirs, quiet, err, cap)) return -1;
  res_fit_opts with = *o;
  int rc = res_fit_recorded(&with, dirs, ndirs);
  if (rc) snprintf(err, cap, "out of memory");
  else rc = res_fit_ex(m, &ar, &pp, &with, err, cap);
  res_fit_recorded_free(&with);
  res_rows_free(&ar);
  res_rows_free(&pp);
  return rc;
}
