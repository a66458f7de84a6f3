/* fabench train: sweeps. Comma lists for --batch, --lr, --optimizer, --epochs, --threads and
 * --loader-workers make one run train their product, a setting after another (the first list
 * changes slowest; within a setting, each --device, and on it the roles and pairs as a run
 * without lists trains them). A run continued with --resume DIR skips the entries whose rows
 * are in DIR's train.csv. Also the dataset files' bytes, dropped from the page cache first for
 * --cold-cache. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

/* Each dimension's range, as the single-value flags take it. */
static const struct {
  double lo, hi;
  int whole;
} sw_range[SW_DIMS] = {{1, 1 << 20, 1}, {0, 1e3, 0}, {0, 2, 1}, {1, 1000000, 1}, {1, 4096, 1}, {0, NN_LOADER_MAX_WORKERS, 1}};

int train_sweep_list(train_args *a, int dim, const char *flag, const char *list) {
  char *items[TRAIN_SWEEP_MAX_ITEMS + 1], *store = NULL;
  int n = bench_split_list(list, items, TRAIN_SWEEP_MAX_ITEMS + 1, &store);
  int rc = 0;
  if (n < 1 || n > TRAIN_SWEEP_MAX_ITEMS)
    rc = bench_usage_error(train_usage(), "bad --%s '%s' (a comma list of 1 to %d values, no empty item)", flag, list,
                           TRAIN_SWEEP_MAX_ITEMS);
  for (int i = 0; !rc && i < n; i++) {
    double v = 0;
    long l = 0;
    if (dim == SW_OPTIM) {
      int k = nn_optim_parse(items[i]);
      if (k < 0) rc = bench_usage_error(train_usage(), "bad --optimizer '%s' (sgd, adam or adamw)", items[i]);
      v = k;
    } else if (sw_range[dim].whole) {
      if (bench_parse_int(items[i], (long)sw_range[dim].lo, (long)sw_range[dim].hi, &l))
        rc = bench_usage_error(train_usage(), "bad value '%s' for --%s (an integer %ld..%ld)", items[i], flag,
                               (long)sw_range[dim].lo, (long)sw_range[dim].hi);
      v = (double)l;
    } else if (bench_parse_double(items[i], sw_range[dim].lo, sw_range[dim].hi, &v)) {
      rc = bench_usage_error(train_usage(), "bad value '%s' for --%s (a number %g..%g)", items[i], flag,
                             sw_range[dim].lo, sw_range[dim].hi);
    }
    for (int j = 0; !rc && j < i; j++)
      if (a->sw.v[dim][j] == v) rc = bench_usage_error(train_usage(), "--%s '%s': '%s' twice", flag, list, items[i]);
    if (!rc) a->sw.v[dim][i] = v;
  }
  free(store);
  if (!rc) a->sw.n[dim] = n;
  return rc;
}

int train_sweep_count(const train_args *a) {
  int n = 1;
  for (int d = 0; d < SW_DIMS; d++) n *= a->sw.n[d] ? a->sw.n[d] : 1;
  return n;
}

static double sw_max(const train_args *a, int dim) {
  double m = a->sw.v[dim][0];
  for (int i = 1; i < a->sw.n[dim]; i++) m = a->sw.v[dim][i] > m ? a->sw.v[dim][i] : m;
  return m;
}

void train_sweep_prepare(train_args *a) {
  train_sweep_apply(a, 0);
  if (a->sw.n[SW_BATCH]) a->batch = (long)sw_max(a, SW_BATCH);
  if (a->sw.n[SW_EPOCHS]) a->epochs = (long)sw_max(a, SW_EPOCHS);
  if (a->sw.n[SW_THREADS]) a->threads = (long)sw_max(a, SW_THREADS);
}

void train_sweep_apply(train_args *a, int k) {
  a->setting = k;
  int idx[SW_DIMS];
  for (int d = SW_DIMS - 1; d >= 0; d--) {
    int n = a->sw.n[d] ? a->sw.n[d] : 1;
    idx[d] = k % n;
    k /= n;
  }
  const train_sweep *s = &a->sw;
  if (s->n[SW_BATCH]) a->batch = (long)s->v[SW_BATCH][idx[SW_BATCH]];
  if (s->n[SW_LR]) a->lr = s->v[SW_LR][idx[SW_LR]];
  if (s->n[SW_OPTIM]) a->optimizer = (int)s->v[SW_OPTIM][idx[SW_OPTIM]];
  if (s->n[SW_EPOCHS]) a->epochs = (long)s->v[SW_EPOCHS][idx[SW_EPOCHS]];
  if (s->n[SW_THREADS]) a->threads = (long)s->v[SW_THREADS][idx[SW_THREADS]];
  if (s->n[SW_WORKERS]) a->loader_workers = (long)s->v[SW_WORKERS][idx[SW_WORKERS]];
}

int train_sweep_load_done(res_rows *rows, const char *dir, char *err, size_t cap) {
  memset(rows, 0, sizeof *rows);
  rows->schema = res_schema_train();
  if (!res_table_exists(res_schema_train(), dir)) return 0;
  return res_table_read(rows, res_schema_train(), dir, err, cap);
}

static int same_str(const char *x, const char *y) { return !strcmp(x ? x : "", y ? y : ""); }

const res_train_row *train_sweep_done(const res_rows *rows, const train_args *a, const char *role,
                                      const char *transport, const char *algo, const char *device,
                                      int ranks, double lr) {
  const res_train_row *r = rows ? rows->rows : NULL;
  for (size_t i = 0; r && i < rows->n; i++) {
    const res_train_row *q = &r[i];
    /* an older row without the sweep's columns is sgd with one loader thread */
    const char *opt = q->optimizer && *q->optimizer ? q->optimizer : "sgd";
    long workers = q->optimizer && *q->optimizer ? (long)q->loader_workers : 1;
    if (same_str(q->role, role) && same_str(q->transport, transport) && same_str(q->algo, algo) &&
        same_str(q->device, device) && q->ranks == ranks && q->batch == a->batch &&
        fabs(q->lr - lr) <= 1e-9 * fabs(lr) && same_str(opt, nn_optim_name(a->optimizer)) &&
        q->epochs == a->epochs && q->threads == a->threads && workers == a->loader_workers &&
        same_str(q->model, a->model) && !same_str(q->status, "failed"))
      return q;
  }
  return NULL;
}

int train_data_files(const nn_data_spec *sp, int drop, double *bytes, char *err, size_t cap) {
  *bytes = NAN;
  if (sp->kind == NN_DATA_SYNTHETIC) return 0;
  DIR *d = opendir(sp->dir);
  if (!d) {
    snprintf(err, cap, "%s: %s", sp->dir, strerror(errno));
    return -1;
  }
  double total = 0;
  int rc = 0;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", sp->dir, e->d_name);
    if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
    total += (double)st.st_size;
    if (!drop) continue;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int arc = fd < 0 ? errno : posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (fd >= 0) close(fd);
    if (arc) {
      snprintf(err, cap, "--cold-cache: %s: %s", path, strerror(arc));
      rc = -1;
    }
  }
  closedir(d);
  *bytes = total;
  return rc;
}

int train_sweep_keep_id(bench_run *r, const char *id) {
  if (strlen(id) >= sizeof r->run_id) return bench_error("run.json's run_id '%s' is too long", id);
  snprintf(r->run_id, sizeof r->run_id, "%s", id);
  cJSON *v = cJSON_CreateString(id);
  if (!v || !cJSON_ReplaceItemInObject(r->meta.base, "run_id", v)) {
    cJSON_Delete(v);
    return bench_error("out of memory");
  }
  return bench_run_write(r);
}
