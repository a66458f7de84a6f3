/* The cost model for the commands that use it (fit, allreduce --model-from, predict, report,
 * suite, train): the kernel rate a fit takes, and a model loaded from a file or fitted from a run
 * directory on the spot (results' res_fit_dirs). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "bench.h"
#include "res.h"

double bench_fit_gamma(char *const *dirs, int ndirs) {
  double rec = res_fit_dirs_gamma(dirs, ndirs);
  return rec > 0 ? rec : bench_gamma_kernel();
}

/* FABENCH_MODEL_OFF: the model's terms turned off (res_terms_parse's names), for ablation. */
static int cm_ablate(res_costmodel *m, int rc, char *err, size_t cap) {
  const char *off = getenv("FABENCH_MODEL_OFF");
  unsigned mask = 0;
  if (rc || !off || !*off) return rc;
  char why[256];
  if (res_terms_parse(off, &mask, why, sizeof why)) {
    res_costmodel_free(m);
    snprintf(err, cap, "FABENCH_MODEL_OFF: %s", why);
    return -1;
  }
  res_costmodel_ablate(m, mask);
  return 0;
}

static int cm_load(res_costmodel *m, const char *from, int quiet, char *err, size_t cap) {
  struct stat st;
  if (stat(from, &st) != 0) {
    snprintf(err, cap, "'%s' does not exist", from);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return res_costmodel_read(m, from, err, cap);
  char path[4200];
  snprintf(path, sizeof path, "%s/model.json", from);
  if (stat(path, &st) == 0) return res_costmodel_read(m, path, err, cap);
  char *dirs[1] = {(char *)from};
  /* fit it now */
  res_fit_opts o = {.gamma_kernel = bench_fit_gamma(dirs, 1)};
  res_fit_dir_host(from, &o.cores);
  return res_fit_dirs(m, dirs, 1, &o, quiet, err, cap);
}

int bench_costmodel_load(res_costmodel *m, const char *from, int quiet, char *err, size_t cap) {
  return cm_ablate(m, cm_load(m, from, quiet, err, cap), err, cap);
}
