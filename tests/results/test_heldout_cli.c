/* One prediction path: fabench predict answers the question a train row asks of its model
 * (res_predict_train_row, what `train --model-from` writes) with the same step, the host CPU
 * share included; a stated rate on a fitted model is priced as an unfitted emulated train row
 * is; each row says replay or held-out; FABENCH_MODEL_OFF turns terms off or is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "cli_run.h"
#include "res.h"
#include "test_util.h"

static char tmp[64], prof[128], model[160];
static res_train_row one;
static res_train_buckets_row bk[3];

/* A one-rank profile run (train.csv, train_buckets.csv) and a model.json of emulated 1 Gbit/s
 * tcp on a 2-core host whose sends cost CPU (cpu_byte), fitted at 2 ranks of the ring. */
static void setup_files(void) {
  char err[256];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "hocli"));
  snprintf(prof, sizeof prof, "%s/prof", tmp);
  snprintf(model, sizeof model, "%s/model.json", tmp);
  assert_int_equal(mkdir(prof, 0755), 0);
  res_row_init(res_schema_train(), &one);
  one.run_id = "r1", one.schema = 1, one.host = "h", one.host_count = 1, one.ranks = 1, one.role = "single";
  one.fabric = "none", one.transport = "none", one.algo = "none", one.model = "resnet20", one.params = 272474;
  one.data = "synthetic", one.input = "3x32x32", one.device = "cpu", one.batch = 32, one.threads = 1;
  one.fwd_ms = 10, one.bwd_ms = 30, one.opt_ms = 2, one.data_ms = 1, one.load_ms = 1;
  one.grad_dtype = "f32", one.lr_schedule = "cosine", one.augment = "none", one.backend = "dnnl", one.status = "done";
  res_table *t;
  if (res_table_open_schema(&t, prof, res_schema_train(), err, sizeof err)) fail_msg("%s", err);
  if (res_table_put(t, &one, err, sizeof err)) fail_msg("%s", err);
  res_table_close(t);
  const double bytes[3] = {0.3e6, 0.5e6, 0.3e6}, ready[3] = {10, 20, 30}, offs[3] = {0, 0.3e6, 0.8e6};
  if (res_table_open_schema(&t, prof, res_schema_train_buckets(), err, sizeof err)) fail_msg("%s", err);
  for (int i = 0; i < 3; i++) {
    res_row_init(res_schema_train_buckets(), &bk[i]);
    bk[i].run_id = "r1", bk[i].role = "single", bk[i].transport = "none", bk[i].algo = "none", bk[i].ranks = 1;
    bk[i].bucket = i, bk[i].offset_bytes = (int64_t)offs[i], bk[i].bytes = (int64_t)bytes[i], bk[i].ready_ms = ready[i];
    if (res_table_put(t, &bk[i], err, sizeof err)) fail_msg("%s", err);
  }
  res_table_close(t);
  res_fabric_cost f[2];
  memset(f, 0, sizeof f);
  snprintf(f[0].fabric, sizeof f[0].fabric, "emu-1gbit");
  snprintf(f[1].fabric, sizeof f[1].fabric, "tcp:lo");
  res_resid rs = {.algo = "ring", .ranks = 2, .bytes = 1 << 20, .t_us = 9000, .pred_us = 9000};
  for (int i = 0; i < 2; i++) {
    snprintf(f[i].transport, sizeof f[i].transport, "tcp");
    snprintf(f[i].source, sizeof f[i].source, "allreduce");
    f[i].host_count = 1;
    f[i].m = (coll_model){.alpha = 20e-6, .beta = i ? 0.5e-9 : 8.2e-9, .gamma = 0.2e-9, .cores = 2, .hosts = 1};
    f[i].resid = &rs, f[i].nresid = 1;
  }
  f[0].cpu_byte = 1.5e-9;
  res_costmodel m = {.f = f, .n = 2, .gamma_kernel = NAN};
  if (res_costmodel_write(&m, model, err, sizeof err)) fail_msg("%s", err);
}

/* predict's step for one question (2 ranks on one node, ring) on fabric spec; its kind. */
/* predict.csv holds 6 digits: the two agree to 2e-5 */
static double predict_step(const char *spec, const char *env, char *kind, size_t cap) {
  char out[160], err[256];
  snprintf(out, sizeof out, "%s/pred", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "predict", env, -1, NULL,
          (char *[]){"--profile", prof, "--intra", (char *)spec, "--ranks", "2", "--ranks-per-node", "2", "--algo", "ring",
                     "--no-plot", "--out", out, NULL});
  if (r->status) fail_msg("predict %s: status %d\n%s\n%s", spec, r->status, r->out, r->err);
  free(r);
  res_rows rows;
  if (res_table_read(&rows, res_schema_predict(), out, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(rows.n, 1);
  const res_predict_row *p = rows.rows;
  double s = p->step_ms;
  snprintf(kind, cap, "%s", p->pred_kind ? p->pred_kind : "");
  res_rows_free(&rows);
  return s;
}

/* train's pricing of a 2-rank ring row of fabric on one host, from the same files. */
static double train_step(const char *fabric, char *kind, size_t cap, unsigned off) {
  res_costmodel m;
  char err[256];
  if (res_costmodel_read(&m, model, err, sizeof err)) fail_msg("%s", err);
  res_costmodel_ablate(&m, off);
  res_train_row r;
  res_row_init(res_schema_train(), &r);
  r.run_id = "r2", r.fabric = fabric, r.transport = "tcp", r.algo = "ring", r.host_count = 1, r.ranks = 2;
  r.ranks_per_host = 2, r.batch = 32, r.threads = 1, r.overlap = 1, r.grad_dtype = "f32";
  res_rows br = {res_schema_train_buckets(), bk, 3};
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  snprintf(kind, cap, "%s", r.pred_kind);
  res_costmodel_free(&m);
  return r.step_ms_pred;
}

static void test_same_answer(void **state) {
  (void)state;
  setup_files();
  char spec[256], k1[32], k2[32];
  /* the fitted fabric at its own configuration: a replay, the CPU share counted by both */
  snprintf(spec, sizeof spec, "%s@emu-1gbit", model);
  double p = predict_step(spec, NULL, k1, sizeof k1), t = train_step("emu-1gbit", k2, sizeof k2, 0);
  if (!(fabs(p - t) <= 2e-5 * t)) fail_msg("fitted: predict %.9g ms, train %.9g ms", p, t);
  assert_string_equal(k1, "replay");
  assert_string_equal(k2, "replay");
  /* the share is in it: without it the step is shorter, by both again */
  double p0 = predict_step(spec, "FABENCH_MODEL_OFF=share", k1, sizeof k1);
  double t0 = train_step("emu-1gbit", k2, sizeof k2, RES_TERM_SHARE);
  if (!(fabs(p0 - t0) <= 2e-5 * t0) || !(p0 < p - 0.5)) fail_msg("no share: predict %.9g, train %.9g, with %.9g", p0, t0, p);
  /* a stated rate: the transport's emulated fabric scaled, held out, as a train row on an
   * emulated rate the model did not fit */
  snprintf(spec, sizeof spec, "%s@tcp,gbit=2", model);
  p = predict_step(spec, NULL, k1, sizeof k1), t = train_step("emu-2gbit", k2, sizeof k2, 0);
  if (!(fabs(p - t) <= 2e-5 * t)) fail_msg("2 Gbit/s: predict %.9g ms, train %.9g ms", p, t);
  assert_string_equal(k1, "held-out");
  assert_string_equal(k2, "held-out");
  snprintf(spec, sizeof spec, "%s@emu-1gbit,gbit=2", model);
  double p2 = predict_step(spec, NULL, k1, sizeof k1);
  if (!(fabs(p2 - t) <= 2e-5 * t)) fail_msg("@emu-1gbit,gbit=2: %.9g ms, train %.9g ms", p2, t);
  /* refused: a bad rate, a transport without an emulated fabric, a bad term */
  run_result *r = calloc(1, sizeof *r);
  snprintf(spec, sizeof spec, "%s@tcp,gbit=fast", model);
  cli_run(r, 60, "predict", NULL, -1, NULL, (char *[]){"--intra", spec, "--no-plot", NULL});
  if (r->status != 2 || !strstr(r->err, "gbit=fast")) fail_msg("status %d: %s", r->status, r->err);
  snprintf(spec, sizeof spec, "%s@ucx,gbit=2", model);
  cli_run(r, 60, "predict", NULL, -1, NULL, (char *[]){"--intra", spec, "--no-plot", NULL});
  if (r->status != 2 || !strstr(r->err, "no emulated fabric of transport ucx")) fail_msg("status %d: %s", r->status, r->err);
  snprintf(spec, sizeof spec, "%s@emu-1gbit", model);
  cli_run(r, 60, "predict", "FABENCH_MODEL_OFF=curves,bogus", -1, NULL, (char *[]){"--intra", spec, "--no-plot", NULL});
  if (r->status != 2 || !strstr(r->err, "FABENCH_MODEL_OFF: 'bogus'")) fail_msg("status %d: %s", r->status, r->err);
  free(r);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_answer)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
