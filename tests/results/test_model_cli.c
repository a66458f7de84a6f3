/* fit, predict, report and allreduce --model-from, run as a user runs them: on the fixture
 * run directory (tests/results/fixtures/make_fixture.py), and on bad or foreign ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli_run.h"
#include "res.h"
#include "test_util.h"

static long fsize(const char *dir, const char *name) {
  char path[600];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* fabench report with these arguments, which must succeed (a minute or two at most). */
static void report_ok(run_result *r, char *const argv[]) {
  cli_run(r, 120, "report", NULL, -1, NULL, argv);
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
}

/* dst: a copy of the fixture run (its run.json) whose allreduce.csv is the fixture's through the
 * awk program prog (-F, -v OFS=, and vars, more -v options or ""). */
static void fixture_rows(const char *dst, const char *vars, const char *prog) {
  char cmd[2048];
  int n = snprintf(cmd, sizeof cmd,
                   "mkdir -p '%s' && cp '%s/run.json' '%s/' && awk -F, -v OFS=, %s '%s' '%s/allreduce.csv' > '%s/allreduce.csv'",
                   dst, FIXTURE_RUN, dst, vars, prog, FIXTURE_RUN, dst);
  assert_true(n > 0 && (size_t)n < sizeof cmd);
  assert_int_equal(system(cmd), 0);
}

/* The report on the fixture run directory draws every plot, as PNG and SVG. The run records
 * the fixture's reduction rate (5 GB/s) as a run records its kernel's, so that the fit does not
 * depend on this machine's kernel (under ASan 10x slower: a fitted gamma that much faster is
 * replaced by the kernel's, which moved the host CPU per byte to 4.56 ns). */
static void test_report_every_plot(void **state) {
  (void)state;
  char tmp[64], out[128], run[128], cmd[512];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && sed -i '0,/\"schema\": 1,/s//\"schema\": 1, \"reduce_gbps\": 5,/' '%s/run.json'",
           FIXTURE_RUN, run, run);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){run, "--out", out, NULL});
  static const char *plots[] = {"busbw", "latency", "train_images", "train_breakdown", "pred_vs_meas", "scaling", "p2p_heatmap", "p2p_latency", "p2p_bw"};
  char *md = NULL;
  size_t len = 0;
  char mdpath[256];
  snprintf(mdpath, sizeof mdpath, "%s/report.md", out);
  FILE *f = fopen(mdpath, "r");
  assert_non_null(f);
  FILE *m = open_memstream(&md, &len);
  int c;
  while ((c = fgetc(f)) != EOF) fputc(c, m);
  fclose(f);
  fclose(m);
  for (size_t i = 0; i < sizeof plots / sizeof *plots; i++) {
    char png[64], svg[64];
    snprintf(png, sizeof png, "%s.png", plots[i]);
    snprintf(svg, sizeof svg, "%s.svg", plots[i]);
    if (fsize(out, png) < 1000) fail_msg("%s missing or empty", png);
    if (fsize(out, svg) < 1000) fail_msg("%s missing or empty", svg);
    if (!strstr(md, png)) fail_msg("report.md does not show %s", png);
  }
  /* the p2p table: the ping-pong's latency at its smallest size, no latency for the stream */
  assert_non_null(strstr(md, "| tcp:lo/reno | tcp | latency | 0-1 | 5 | 12.00 |"));
  assert_non_null(strstr(md, "| tcp:lo/reno | tcp | bw | 0-1 | 5 | - |"));
  /* the fit of the fixture (alpha 30 us, 1.5 GB/s, 5 GB/s reduction, 3% noise) */
  const char *row = strstr(md, "| tcp:lo/reno | tcp | 1 | allreduce |");
  assert_non_null(row);
  /* the host's CPU per byte sent, from the 4-rank rows' host_cpu_us (5 ns; the reductions are
   * taken out at the model's gamma, fitted beside the rate the run records) */
  double cpu = NAN;
  for (int bar = 1; bar < 8 && row; bar++) row = strchr(row + 1, '|'); /* to the 8th cell's bar */
  if (row) cpu = atof(row + 1);
  if (!(cpu > 4.7 && cpu < 5.3)) fail_msg("report's host CPU per byte sent: %g ns, want 5", cpu);
  assert_non_null(strstr(md, "2 training runs with a prediction"));
  /* the training table: the predicted exposed communication beside the predicted step */
  assert_non_null(strstr(md, "| predicted step (ms) | predicted exposed (ms) | error of the mean step |"));
  row = strstr(md, "| resnet20 | 2 | tcp:lo/reno | tcp | ring |");
  for (int bar = 1; bar < 10 && row; bar++) row = strchr(row + 1, '|'); /* to the 10th cell's bar */
  assert_non_null(row);
  if (row[1] != ' ' || !(row[2] >= '0' && row[2] <= '9')) fail_msg("no predicted exposed time: '%.40s'", row);
  /* fitted on these rows, the model learned what its formulas miss at their sizes and holds
   * their times there: its error in words is the formulas', and what was learned is named as
   * no test; a model of the formulas alone (model.json in the run) is judged as it predicts */
  if (!strstr(md, "**tcp:lo/reno** (tcp): the model's formulas predict ") ||
      !strstr(md, "With what it learned of their misses (at "))
    fail_msg("report.md judges a model fitted on its rows by what it learned:\n%s", md);
  free(md);
  char model[160];
  snprintf(model, sizeof model, "%s/model.json", run);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, "--formulas-only", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  report_ok(r, (char *[]){run, "--out", out, "--no-plot", NULL});
  if (!tu_file_has(out, "report.md", "**tcp:lo/reno** (tcp): the model predicts ") ||
      tu_file_has(out, "report.md", "With what it learned"))
    fail_msg("report.md on a model of the formulas alone names what it learned");
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A missing, foreign or newer run directory is refused with the reason. */
static void test_report_refuses(void **state) {
  (void)state;
  char tmp[64], out[128], foreign[128], newer[128], cmd[600];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){"/nonexistent/run", "--out", out, NULL});
  assert_int_equal(r->status, 1);
  assert_non_null(strstr(r->err, "'/nonexistent/run' is not a directory"));
  cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){tmp, "--out", out, NULL});
  assert_int_equal(r->status, 1);
  assert_non_null(strstr(r->err, "not a fabench run directory (no run.json)"));
  snprintf(foreign, sizeof foreign, "%s/foreign", tmp);
  mkdir(foreign, 0755);
  assert_int_equal(tu_write(foreign, "run.json", "{\"schema\": 1}\n"), 0);
  assert_int_equal(tu_write(foreign, "allreduce.csv", "name,score\nx,1\n"), 0);
  cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){foreign, "--out", out, NULL});
  assert_int_equal(r->status, 1);
  assert_non_null(strstr(r->err, "not a fabench allreduce table"));
  snprintf(newer, sizeof newer, "%s/newer", tmp);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && sed -i 's/\"schema\": 1/\"schema\": 99/' '%s/run.json'", FIXTURE_RUN, newer, newer);
  assert_int_equal(system(cmd), 0);
  cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){FIXTURE_RUN, newer, "--out", out, NULL});
  assert_int_equal(r->status, 1);
  assert_non_null(strstr(r->err, "newer than this fabench"));
  cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){"--bogus", NULL});
  assert_int_equal(r->status, 2);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A plot with nothing to show is not drawn, and report.md says so: gnuplot fails on a log
 * scale with no point, which made report exit 1 on any run without predictions. A training
 * run alone (the fixture's train rows), a predict run alone, and a one-rank all-reduce, whose
 * busbw is 0 for the log-log busbw plot. */
static void test_report_nothing_to_plot(void **state) {
  (void)state;
  char tmp[64], train[128], pred[128], one[128], out[128], cmd[1024];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(train, sizeof train, "%s/train", tmp);
  snprintf(pred, sizeof pred, "%s/pred", tmp);
  snprintf(one, sizeof one, "%s/one", tmp);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s/run.json' '%s/train.csv' '%s/train_buckets.csv' '%s/'", train,
           FIXTURE_RUN, FIXTURE_RUN, FIXTURE_RUN, train);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "predict", NULL, -1, NULL,
          (char *[]){"--model", "resnet20", "--ranks", "2", "--intra", "alpha=5,gbps=50,reduce=20", "--no-plot", "--out", pred, NULL});
  if (r->status) fail_msg("predict: status %d\n%s\n%s", r->status, r->out, r->err);
  cli_run(r, 60, "allreduce", NULL, -1, NULL,
          (char *[]){"-n", "1", "--transport", "tcp", "--algo", "ring", "--max-bytes", "4K", "--iters", "2", "--out", one, NULL});
  if (r->status) fail_msg("allreduce: status %d\n%s\n%s", r->status, r->out, r->err);
  const char *dirs[] = {train, pred, one};
  for (int i = 0; i < 3; i++) {
    snprintf(out, sizeof out, "%s/rep%d", tmp, i);
    cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){(char *)dirs[i], "--out", out, NULL});
    if (r->status) fail_msg("report %s: status %d\n%s\n%s", dirs[i], r->status, r->out, r->err);
    if (!tu_file_has(out, "report.md", "*predicted against measured (y = x)*: not drawn, nothing to plot."))
      fail_msg("report %s: no word of the empty plot", dirs[i]);
    assert_false(tu_file_has(out, "report.md", "pred_vs_meas.png"));
    assert_int_equal(fsize(out, "pred_vs_meas.png"), -1);
  }
  snprintf(out, sizeof out, "%s/rep0", tmp);
  if (fsize(out, "train_images.png") < 1000) fail_msg("train_images.png missing or empty");
  snprintf(out, sizeof out, "%s/rep2", tmp);
  assert_true(tu_file_has(out, "report.md", "*all-reduce busbw (dashed: cost model)*: not drawn"));
  if (fsize(out, "latency.png") < 1000) fail_msg("latency.png missing or empty");
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* Runs the command past a file size limit of lim bytes (SIGXFSZ ignored, as a shell's
 * ulimit -f leaves it): what it cannot write in full is an error, not a cut file. */
static void run_size_limited(run_result *r, rlim_t lim_bytes, const char *cmd, char **args) {
  struct rlimit was, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &was), 0);
  lim = was;
  lim.rlim_cur = lim_bytes;
  void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0); /* inherited by the command */
  cli_run(r, 60, cmd, NULL, -1, NULL, args);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &was), 0);
  signal(SIGXFSZ, old);
}

/* Neither dir/name (NULL: no name) nor a .tmp file in dir. */
static void assert_not_left(const char *dir, const char *name) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, name ? name : "");
  if (name && access(path, F_OK) == 0) fail_msg("a cut %s was left", path);
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) fail_msg("%s/%s was left", dir, e->d_name);
  }
  closedir(d);
}

/* A file report cannot write in full (here past a 1 KiB file size limit) is an error naming
 * it and the cause, not a cut report.md: the report's files are written whole or not at all
 * (a cut 1 KiB report.md was left before). */
static void test_report_write_fails(void **state) {
  (void)state;
  char tmp[64], out[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  run_result *r = calloc(1, sizeof *r);
  run_size_limited(r, 1024, "report", (char *[]){FIXTURE_RUN, "--no-plot", "--out", out, NULL});
  if (r->status != 1 || !strstr(r->err, "fabench: report: cannot write ") || !strstr(r->err, out) ||
      !strstr(r->err, ": File too large"))
    fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_null(strstr(r->out, "# report:"));
  assert_not_left(out, "report.md");
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* The same for predict's gnuplot script (1.6 KB here, its rows and run.json under 1.6 KB):
 * it was written in place, its write errors unchecked, and gnuplot ran on a cut script. The
 * rows are written, so the plot missing is a warning naming the file and cause, exit 0. */
static void test_predict_write_fails(void **state) {
  (void)state;
  char tmp[64], out[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/pr", tmp);
  run_result *r = calloc(1, sizeof *r);
  run_size_limited(r, 1600, "predict",
                   (char *[]){"--model", "resnet20", "--ranks", "2", "--intra", "alpha=5,gbps=50,reduce=20", "--out", out, NULL});
  if (r->status != 0 || !strstr(r->err, "fabench: predict: no plot: cannot write ") || !strstr(r->err, out) ||
      !strstr(r->err, "/predict.gp': File too large") || strstr(r->out, "# plot:"))
    fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_not_left(out, "predict.gp");
  assert_not_left(out, "predict.png");
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* gnuplot exits 0 on a plot cut short (here past a 12 KB file size limit, under which the
 * report's text files fit): the cut plot is not kept under its name, and report says which
 * one and exits 1 (a cut 12 KB busbw.png was left, exit 0, before). */
static void test_report_plot_cut(void **state) {
  (void)state;
  char tmp[64], out[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  run_result *r = calloc(1, sizeof *r);
  run_size_limited(r, 12000, "report", (char *[]){FIXTURE_RUN, "--out", out, NULL});
  if (r->status != 1 || !strstr(r->err, "fabench: report: plots missing: gnuplot left ") || !strstr(r->err, out) ||
      !strstr(r->err, "/busbw.png cut short"))
    fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_true(tu_file_has(out, "report.md", "![all-reduce busbw"));
  static const char *const plots[] = {"busbw.png", "busbw.svg", "latency.png", "latency.svg", "train_images.png", "scaling.svg"};
  for (size_t i = 0; i < sizeof plots / sizeof *plots; i++) assert_not_left(out, plots[i]);
  /* again, over what a report killed while gnuplot drew would have left (--no-plot: no
   * plot of this run draws over it) */
  char stale[300];
  snprintf(stale, sizeof stale, "%s/scaling.svg.tmp", out);
  FILE *f = fopen(stale, "w");
  assert_non_null(f);
  fclose(f);
  report_ok(r, (char *[]){FIXTURE_RUN, "--no-plot", "--out", out, NULL});
  assert_not_left(out, NULL);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* Rows of two dtypes are told apart: the All-reduce table has a row per dtype, and the plots'
 * keys name it (here the fixture's rows again as f64). */
static void test_report_dtypes(void **state) {
  (void)state;
  char tmp[64], run[128], out[128], cmd[1024];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(cmd, sizeof cmd,
           "cp -r '%s' '%s' && awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"dtype\") c = i; "
           "if (!c) exit 1; print; next } { print; $c = \"f64\"; print }' '%s/allreduce.csv' > '%s/allreduce.csv'",
           FIXTURE_RUN, run, FIXTURE_RUN, run);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){run, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "| tcp:lo/reno | tcp | ring | f32 | sum | 2 | 7 |"));
  assert_true(tu_file_has(out, "report.md", "| tcp:lo/reno | tcp | ring | f64 | sum | 2 | 7 |"));
  assert_true(tu_file_has(out, "busbw.gp", "title 'ring p2 f32 sum'"));
  assert_true(tu_file_has(out, "busbw.gp", "title 'ring p2 f64 sum'"));
  assert_true(tu_file_has(out, "busbw.gp", "set title 'all-reduce busbw (dashed: cost model), tcp:lo/reno'"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* fit writes model.json that reads back with the fixture's parameters; predict writes its rows. The fits
 * leave out the reduction kernel measured on the spot: gamma is checked against it, and a sanitizer
 * build's kernel is many times slower than the fixture machine's. */
static void test_fit_and_predict(void **state) {
  (void)state;
  char tmp[64], model[128], out[128], intra[160];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(model, sizeof model, "%s/model.json", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, "--out", model, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  res_costmodel m;
  char err[256];
  if (res_costmodel_read(&m, model, err, sizeof err)) fail_msg("%s", err);
  const res_fabric_cost *f = res_costmodel_find(&m, "tcp:lo/reno", "tcp", 1, NULL);
  assert_non_null(f);
  assert_true(fabs(f->m.alpha - 30e-6) < 3e-6);
  assert_true(fabs(1 / f->m.beta - 1.5e9) < 0.1e9);
  res_costmodel_free(&m);

  snprintf(out, sizeof out, "%s/pred", tmp);
  snprintf(intra, sizeof intra, "%s@tcp:lo/reno", model);
  cli_run(r, 60, "predict", NULL, -1, NULL,
          (char *[]){"--model", "resnet20", "--ranks", "2,16", "--ranks-per-node", "4", "--intra", intra, "--inter",
                     "alpha=10,gbit=10,reduce=20", "--algo", "ring,hier:ring", "--no-plot", "--out", out, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  res_rows rows;
  if (res_table_read(&rows, res_schema_predict(), out, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(rows.n, 4);
  const res_predict_row *p = rows.rows;
  for (size_t i = 0; i < rows.n; i++) {
    assert_true(p[i].scaling_eff > 0 && p[i].scaling_eff <= 1);
    assert_true(p[i].images_per_s > 0);
  }
  /* on one node flat and hierarchical are the same; across 4 nodes of 10 Gbit/s the hierarchy
   * moves a quarter of the bytes between nodes, so it is faster */
  assert_true(fabs(p[0].step_ms - p[2].step_ms) < 1e-9);
  assert_true(p[3].comm_ms < p[1].comm_ms);
  res_rows_free(&rows);
  /* one rank needs no link: any rate reaches the target, said as such, not as the rate search's
   * lower bound (it printed 0.001). The reduction rate is given: measured on the spot, a sanitizer
   * build's kernel alone keeps 2 ranks under the target ("not by link"). */
  snprintf(out, sizeof out, "%s/pred1", tmp);
  cli_run(r, 60, "predict", NULL, -1, NULL,
          (char *[]){"--model", "resnet20", "--ranks", "1,2", "--intra", "alpha=5,gbps=50,reduce=20", "--no-plot", "--out", out, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (res_table_read(&rows, res_schema_predict(), out, err, sizeof err)) fail_msg("%s", err);
  assert_true(rows.n >= 2);
  p = rows.rows;
  assert_int_equal(p[0].ranks, 1);
  assert_true(p[0].inter_gbps_needed == 0);
  assert_true(isfinite(p[1].inter_gbps_needed) && p[1].inter_gbps_needed > 0.001);
  assert_non_null(strstr(r->out, " any\n"));
  res_rows_free(&rows);
  /* no inter-node rate reaches the target: said whether a faster intra-node link would (a 1 Gbit/s
   * one inside the nodes), or start-ups hold it back (1 ms a message between them); both were
   * "not by link". Both fabrics' reduction rates given (measured on the spot, a sanitizer build's
   * kernel holds them back whatever the links) */
  snprintf(out, sizeof out, "%s/pred2", tmp);
  cli_run(r, 60, "predict", NULL, -1, NULL,
          (char *[]){"--model", "resnet50", "--ranks", "64", "--ranks-per-node", "8", "--intra", "alpha=5,gbit=1,reduce=20",
                     "--inter", "alpha=10,gbit=100,reduce=20", "--algo", "ring", "--no-plot", "--out", out, NULL});
  if (r->status || !strstr(r->out, " intra-bound\n")) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  cli_run(r, 60, "predict", NULL, -1, NULL,
          (char *[]){"--model", "resnet50", "--ranks", "1024", "--ranks-per-node", "8", "--intra", "alpha=5,gbps=50,reduce=20",
                     "--inter", "alpha=1000,gbit=100,reduce=20", "--algo", "ring", "--no-plot", "--out", out, NULL});
  if (r->status || !strstr(r->out, " not by link\n")) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  /* a profile as train writes it: the one-rank row exchanges nothing (grad_bytes 0), and
   * without its buckets; the gradient is still its model's parameters, 4 bytes each */
  char prof[128], cmd[1024];
  snprintf(prof, sizeof prof, "%s/prof", tmp);
  snprintf(cmd, sizeof cmd,
           "mkdir -p %s && cp %s/run.json %s/ && awk -F, -v OFS=, 'NR > 1 && $6 == 1 { $26 = 0 } 1' %s/train.csv > %s/train.csv",
           prof, FIXTURE_RUN, prof, FIXTURE_RUN, prof);
  assert_int_equal(system(cmd), 0);
  snprintf(out, sizeof out, "%s/pred2", tmp);
  cli_run(r, 60, "predict", NULL, -1, NULL,
          (char *[]){"--profile", prof, "--ranks", "16", "--intra", "alpha=5,gbit=1,reduce=20", "--algo", "ring",
                     "--no-plot", "--out", out, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (res_table_read(&rows, res_schema_predict(), out, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(rows.n, 1);
  p = rows.rows;
  assert_int_equal(p[0].grad_bytes, 4 * 272474);
  assert_true(p[0].comm_ms > 1 && p[0].scaling_eff < 0.99);
  res_rows_free(&rows);
  /* the profile's figures are its model's: another --model is refused, not replaced */
  cli_run(r, 60, "predict", NULL, -1, NULL, (char *[]){"--profile", prof, "--model", "resnet50", "--no-plot", NULL});
  assert_int_equal(r->status, 2);
  assert_non_null(strstr(r->err, "trained resnet20"));
  cli_run(r, 60, "predict", NULL, -1, NULL, (char *[]){"--algo", "native", NULL});
  assert_int_equal(r->status, 2);
  assert_non_null(strstr(r->err, "no cost formula"));
  cli_run(r, 60, "predict", NULL, -1, NULL, (char *[]){"--inter", "alpha=3", NULL});
  assert_int_equal(r->status, 2);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* Rows measured beside a load (allreduce --beside-compute's compute_loss): fit keeps their
 * losses per ranks and size in model.json and prints them, and leaves them out of the link's
 * parameters (here the fixture's rows again, 1.3x slower, as another run). */
static void test_fit_beside_compute(void **state) {
  (void)state;
  char tmp[64], loaded[128], plain[160], both[160], cmd[1200];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(loaded, sizeof loaded, "%s/loaded", tmp);
  snprintf(plain, sizeof plain, "%s/plain.json", tmp);
  snprintf(both, sizeof both, "%s/both.json", tmp);
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && sed 's/\"run_id\": \"fixture\"/\"run_id\": \"fixture-loaded\"/' '%s/run.json' > '%s/run.json' && "
           "awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == \"t_p50_us\") c = i; if ($i == \"run_id\") "
           "id = i; if ($i == \"ranks\") rk = i } if (!c || !id || !rk) exit 1; print $0, \"compute_loss\"; next } "
           "{ $c = $c * 1.3; $id = \"fixture-loaded\"; print $0, ($rk == 2 ? 0.25 : 0.5) }' '%s/allreduce.csv' > '%s/allreduce.csv'",
           loaded, FIXTURE_RUN, loaded, FIXTURE_RUN, loaded);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, "--out", plain, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_null(strstr(r->out, "beside a load"));
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, loaded, "--out", both, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  const char *line = strstr(r->out, "beside a load");
  if (!line || !strstr(line, "p2 1M:0.25") || !strstr(line, "p4 4M:0.50"))
    fail_msg("fit does not print the losses:\n%s", r->out);
  res_costmodel a, b;
  char err[512];
  if (res_costmodel_read(&a, plain, err, sizeof err) || res_costmodel_read(&b, both, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(a.n, 1);
  assert_int_equal(b.n, 1);
  assert_true(a.f[0].m.beta == b.f[0].m.beta && a.f[0].m.alpha == b.f[0].m.alpha);
  assert_int_equal(a.f[0].nbusy, 0);
  assert_true(b.f[0].nbusy >= 4 && b.f[0].busy[0].ranks == 2 && b.f[0].busy[0].bytes == 1 << 20);
  res_costmodel_free(&a);
  res_costmodel_free(&b);
  /* the report leaves them out of its all-reduce table, and says so */
  char rep[160];
  snprintf(rep, sizeof rep, "%s/rep", tmp);
  report_ok(r, (char *[]){FIXTURE_RUN, loaded, "--out", rep, "--no-plot", NULL});
  assert_true(tu_file_has(rep, "report.md", "rows measured beside a load (`--beside-compute`) are left out here"));
  /* fit --check leaves the loaded rows out: the fixture's own rows only */
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", both, "--min-bytes", "1M", "--check", loaded, NULL});
  assert_int_equal(r->status, 1);
  assert_non_null(strstr(r->err, "no all-reduce row"));
  /* a noisy pace alone can put a row's loss below -1: the model holds it at -1 and reads back */
  snprintf(cmd, sizeof cmd, "sed -i 's/,0\\.[0-9]*$/,-1.5/' '%s/allreduce.csv'", loaded);
  assert_int_equal(system(cmd), 0);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, loaded, "--out", both, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (res_costmodel_read(&b, both, err, sizeof err)) fail_msg("%s", err);
  assert_true(b.f[0].nbusy >= 4);
  for (int q = 0; q < b.f[0].nbusy; q++) assert_true(b.f[0].busy[q].loss == -1);
  res_costmodel_free(&b);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* fit --check: a model predicts another run's rows (here the fixture's own), the table and
 * model_check.csv carry each row's error; --model checks a model.json without fitting; wrong
 * combinations are usage errors. */
static void test_fit_check(void **state) {
  (void)state;
  char tmp[64], model[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(model, sizeof model, "%s/model.json", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL,
          (char *[]){FIXTURE_RUN, "--out", model, "--min-bytes", "1M", "--check", FIXTURE_RUN, "--check-out", tmp, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_non_null(strstr(r->out, "out-of-sample error"));
  assert_non_null(strstr(r->out, "within 10%"));
  res_rows rows;
  char err[256];
  if (res_table_read(&rows, res_schema_model_check(), tmp, err, sizeof err)) fail_msg("%s", err);
  assert_true(rows.n > 3);
  const res_model_check_row *k = rows.rows;
  for (size_t i = 0; i < rows.n; i++) {
    assert_true(k[i].bytes >= (1 << 20));
    assert_true(k[i].t_pred_us > 0);
    /* the error is the measured against the predicted, recomputed here (CSV keeps 6 digits) */
    assert_true(fabs(k[i].pred_err - (k[i].t_p50_us - k[i].t_pred_us) / k[i].t_pred_us) < 1e-4);
  }
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, "--check", FIXTURE_RUN, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (strstr(r->out, "again:")) fail_msg("'again' without --repeat:\n%s", r->out);
  /* the model learned what its formulas miss (model.json says so, and the check counts the rows
   * with the formulas alone and between the sizes fitted); --formulas-only, fitting or checking,
   * leaves it out */
  if (!tu_file_has(tmp, "model.json", "\"learned\":\ttrue")) fail_msg("model.json does not say it learned");
  if (!strstr(r->out, "   formulas alone: ") || !strstr(r->out, "   between: "))
    fail_msg("a learned model's check without the formulas alone:\n%s", r->out);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, "--check", FIXTURE_RUN, "--formulas-only", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (strstr(r->out, "formulas alone")) fail_msg("--formulas-only, and the model learned:\n%s", r->out);
  char plain[128];
  snprintf(plain, sizeof plain, "%s/plain.json", tmp);
  cli_run(r, 60, "fit", NULL, -1, NULL,
          (char *[]){FIXTURE_RUN, "--out", plain, "--formulas-only", "--no-gamma-kernel", "--check", FIXTURE_RUN, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (strstr(r->out, "formulas alone") || strstr(r->out, "# learned:") || !tu_file_has(tmp, "plain.json", "\"learned\":\tfalse"))
    fail_msg("fit --formulas-only learned:\n%s", r->out);
  /* --repeat: the same rows measured again, here a copy whose times are all 1.25x; a row with no
   * twin (the copy's 1 MiB rows removed) is not counted */
  char again[128];
  snprintf(again, sizeof again, "%s/again", tmp);
  fixture_rows(again, "",
               "NR == 1 { for (i = 1; i <= NF; i++) "
               "{ if ($i == \"t_p50_us\") c = i; if ($i == \"bytes\") b = i } if (!c || !b) exit 1; print; next } "
               "$b != 1048576 { $c = $c * 1.25; print }");
  cli_run(r, 60, "fit", NULL, -1, NULL,
          (char *[]){"--model", model, "--min-bytes", "1M", "--check", FIXTURE_RUN, "--repeat", again, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  const char *line = strstr(r->out, "again: median");
  if (!line || !strstr(line, "20.0%  within 10%: 0/")) fail_msg("--repeat: a 1.25x copy, expected 20.0%%:\n%s", r->out);
  int ng = 0, nrows = 0;
  for (size_t i = 0; i < rows.n; i++) nrows += k[i].bytes != (1 << 20);
  if (sscanf(strstr(line, "0/"), "0/%d", &ng) != 1 || ng != nrows) fail_msg("--repeat: %d twins, expected %d:\n%s", ng, nrows, r->out);
  if (!strstr(line, "repeated: 0/0")) fail_msg("--repeat: no row within 10%% of its twin, expected 0/0:\n%s", r->out);
  /* repeated: the rows measured alike twice, and of them those the model has within 10%. The
   * checked rows: the fixture's, its 1 MiB rows 1.3x (beyond 10% of the model); measured again:
   * those 1.02x, but the 4 MiB rings 1.25x (not alike) */
  char chk[128], alike[128];
  snprintf(chk, sizeof chk, "%s/chk", tmp);
  snprintf(alike, sizeof alike, "%s/alike", tmp);
  for (int pass = 0; pass < 2; pass++)
    fixture_rows(pass ? alike : chk, pass ? "-v again=1" : "-v again=0",
                 "NR == 1 { for (i = 1; i <= NF; i++) "
                 "{ if ($i == \"t_p50_us\") c = i; if ($i == \"bytes\") b = i; if ($i == \"algo\") a = i } "
                 "if (!c || !b || !a) exit 1; print; next } "
                 "{ f = $b == 1048576 ? 1.3 : 1; if (again) f *= $b == 4194304 && $a == \"ring\" ? 1.25 : 1.02; "
                 "$c = $c * f; print }");
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, "--min-bytes", "1M", "--check", chk, "--repeat", alike, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  int nalike = 0, nalike_ok = 0, got_ok = -1, got_n = -1;
  for (size_t i = 0; i < rows.n; i++) {
    if (k[i].bytes == (4 << 20) && !strcmp(k[i].algo, "ring")) continue;
    double f = k[i].bytes == (1 << 20) ? 1.3 : 1;
    nalike++;
    nalike_ok += fabs((1 + k[i].pred_err) * f - 1) <= 0.10;
  }
  if (nalike_ok == 0 || nalike_ok == nalike) fail_msg("%d of %d: the test tells nothing", nalike_ok, nalike);
  line = strstr(r->out, "   repeated: "); /* the fabric's line, not the legend */
  if (!line || sscanf(line, "   repeated: %d/%d", &got_ok, &got_n) != 2 || got_n != nalike || got_ok != nalike_ok)
    fail_msg("repeated: want %d/%d:\n%s", nalike_ok, nalike, r->out);
  if (strstr(r->out, "steady:")) fail_msg("'steady' for rows of one round:\n%s", r->out);
  /* rows measured in rounds: those whose rounds agreed within 10% (here all but the 4 MiB ones)
   * are counted apart */
  char steady[128];
  snprintf(steady, sizeof steady, "%s/steady", tmp);
  fixture_rows(steady, "",
               "NR == 1 { for (i = 1; i <= NF; i++) "
               "if ($i == \"bytes\") b = i; if (!b) exit 1; print $0, \"round_spread\"; next } "
               "{ print $0, ($b == 4194304 ? 0.5 : 0.02) }");
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, "--min-bytes", "1M", "--check", steady, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  int nsteady = 0, ns = -1, sok = -1;
  for (size_t i = 0; i < rows.n; i++) nsteady += k[i].bytes != (4 << 20);
  line = strstr(r->out, "   steady: "); /* the fabric's line, not the legend */
  if (!line || sscanf(line, "   steady: %d/%d", &sok, &ns) != 2 || ns != nsteady || sok < 0 || sok > ns)
    fail_msg("steady rows: want %d of them:\n%s", nsteady, r->out);
  /* the report says how many rows moved between their rounds */
  char rep[160], want[160];
  snprintf(rep, sizeof rep, "%s/rep", steady);
  report_ok(r, (char *[]){steady, "--out", rep, "--no-plot", NULL});
  snprintf(want, sizeof want, "%d of the %d rows measured in rounds moved more than 10%%", (int)rows.n - nsteady,
           (int)rows.n);
  if (!tu_file_has(rep, "report.md", want)) fail_msg("report.md does not say '%s'", want);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, "--repeat", again, NULL});
  assert_int_equal(r->status, 2);
  assert_non_null(strstr(r->err, "--repeat needs --check"));
  res_rows_free(&rows);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, NULL});
  assert_int_equal(r->status, 2);
  assert_non_null(strstr(r->err, "--model needs --check"));
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){"--model", model, "--check", FIXTURE_RUN, FIXTURE_RUN, NULL});
  assert_int_equal(r->status, 2);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, "--min-bytes", "lots", NULL});
  assert_int_equal(r->status, 2);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* fit takes the reduction kernel's rate a run recorded (run.json's reduce_gbps) over one
 * measured now, so two fits of the same rows agree; a run records it. */
static void test_fit_recorded_kernel(void **state) {
  (void)state;
  char tmp[64], dir[128], cmd[512], model[160];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(dir, sizeof dir, "%s/run", tmp);
  snprintf(model, sizeof model, "%s/model.json", tmp);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && sed -i '0,/\"schema\": 1,/s//\"schema\": 1, \"reduce_gbps\": 12.345,/' '%s/run.json'",
           FIXTURE_RUN, dir, dir);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  for (int i = 0; i < 2; i++) {
    cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){dir, "--out", model, NULL});
    if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
    if (!strstr(r->out, "reduction kernel (f32 sum, 8 MiB): 12.345 GB/s")) fail_msg("not the recorded rate:\n%s", r->out);
  }
  snprintf(dir, sizeof dir, "%s/ar", tmp);
  cli_run(r, 120, "allreduce", NULL, -1, NULL,
          (char *[]){"-n", "2", "--transport", "tcp", "--algo", "ring", "--max-bytes", "64K", "--iters", "2", "--out", dir, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_true(tu_file_has(dir, "run.json", "\"reduce_gbps\""));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* allreduce --model-from: every row carries the prediction and its error. */
static void test_allreduce_model_from(void **state) {
  (void)state;
  char tmp[64], model[128], out[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(model, sizeof model, "%s/model.json", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, "--out", model, "--no-gamma-kernel", NULL});
  assert_int_equal(r->status, 0);
  /* the fixture's fabric, tcp:lo/reno, is this host's too: loopback, and reno is the tcp
   * transport's default congestion control (the launcher sets FABENCH_FABRIC itself) */
  snprintf(out, sizeof out, "%s/ar", tmp);
  cli_run(r, 120, "allreduce", NULL, -1, NULL,
          (char *[]){"-n", "2", "--transport", "tcp", "--algo", "ring,rd,auto", "--min-bytes", "64K", "--max-bytes", "256K",
                     "--step-factor", "4", "--iters", "3", "--model-from", model, "--out", out, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  res_rows rows;
  char err[256];
  if (res_table_read(&rows, res_schema_allreduce(), out, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(rows.n, 6);
  const res_allreduce_row *a = rows.rows;
  for (size_t i = 0; i < rows.n; i++) {
    assert_true(a[i].t_pred_us > 0);
    /* both times are written to 6 digits: a loaded machine's 100x error keeps ~1e-5 of it */
    double want = (a[i].t_p50_us - a[i].t_pred_us) / a[i].t_pred_us;
    if (!(fabs(a[i].pred_err - want) < 1e-4 * (1 + fabs(want))))
      fail_msg("pred_err %.9g, from the times %.9g", a[i].pred_err, want);
  }
  res_rows_free(&rows);
  cli_run(r, 60, "allreduce", NULL, -1, NULL, (char *[]){"--model-from", "/nonexistent/model.json", NULL});
  assert_int_equal(r->status, 2);
  assert_non_null(strstr(r->err, "does not exist"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* Lines of text holding needle. */
static int count_lines(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) {
    n++;
    const char *nl = strchr(p, '\n');
    if (!nl) break;
    p = nl;
  }
  return n;
}

/* The fixture copied to dir, its run recording its kernel's rate (so that no fit measures one). */
static void copy_fixture(const char *dir, const char *gbps) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && sed -i '0,/\"schema\": 1,/s//\"schema\": 1, \"reduce_gbps\": %s,/' '%s/run.json'",
           FIXTURE_RUN, dir, gbps, dir);
  assert_int_equal(system(cmd), 0);
}

/* A run directory given twice, also spelled differently or as a copy (same run_id), is read once,
 * said in one line: report counted its rows twice (56 all-reduce rows for 28, "4 of 8 within
 * 10%") and fit weighed them double. */
static void test_dir_given_twice(void **state) {
  (void)state;
  char tmp[64], run[128], run2[160], copy[128], out[128], model[128], model2[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(run2, sizeof run2, "%s/./run/", tmp);
  snprintf(copy, sizeof copy, "%s/copy", tmp);
  copy_fixture(run, "5");
  char cmd[400];
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", run, copy);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  snprintf(out, sizeof out, "%s/rep1", tmp);
  report_ok(r, (char *[]){run, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "Rows: 28 all-reduce, 10 p2p,"));
  snprintf(out, sizeof out, "%s/rep2", tmp);
  report_ok(r, (char *[]){run, run2, copy, "--no-plot", "--out", out, NULL});
  if (!tu_file_has(out, "report.md", "Rows: 28 all-reduce, 10 p2p,")) fail_msg("rows counted again:\n%s", r->err);
  if (count_lines(r->err, "read once") != 1 || !strstr(r->err, run2) || !strstr(r->err, copy))
    fail_msg("not said in one line:\n%s", r->err);
  snprintf(model, sizeof model, "%s/m1.json", tmp);
  snprintf(model2, sizeof model2, "%s/m2.json", tmp);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  const char *row = strstr(r->out, "  tcp:lo/reno");
  assert_non_null(row);
  char once[256];
  snprintf(once, sizeof once, "%.*s", (int)(strchr(row, '\n') - row), row);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, run2, "--out", model2, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (!strstr(r->out, once)) fail_msg("fit of the run twice differs from once (%s):\n%s", once, r->out);
  assert_int_equal(count_lines(r->err, "read once"), 1);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A table without a column its record requires, or a run.json that is not a JSON object with a
 * schema number, is refused by report and fit, naming the file (and the column): report wrote
 * "No model" over 28 rows, fit said "nothing to fit", a truncated run.json passed the
 * newer-schema guard. */
static void test_damaged_run_refused(void **state) {
  (void)state;
  char tmp[64], run[128], out[128], model[128], cmd[1024], want[300];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(model, sizeof model, "%s/m.json", tmp);
  run_result *r = calloc(1, sizeof *r);
  static const char *const cols[] = {"t_p50_us", "busbw_gbps"};
  for (int c = 0; c < 2; c++) {
    tu_rmtree(run);
    snprintf(cmd, sizeof cmd,
             "cp -r '%s' '%s' && awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"%s\") c = i; if (!c) exit 1 } "
             "{ s = \"\"; for (i = 1; i <= NF; i++) if (i != c) s = s (s == \"\" && i == 1 ? \"\" : OFS) $i; print s }' "
             "'%s/allreduce.csv' > '%s/allreduce.csv'",
             FIXTURE_RUN, run, cols[c], FIXTURE_RUN, run);
    assert_int_equal(system(cmd), 0);
    snprintf(want, sizeof want, "%s/allreduce.csv: no column '%s'", run, cols[c]);
    cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){run, "--no-plot", "--out", out, NULL});
    if (r->status != 1 || !strstr(r->err, want)) fail_msg("report without %s: status %d\n%s", cols[c], r->status, r->err);
    cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, NULL});
    if (r->status != 1 || !strstr(r->err, want)) fail_msg("fit without %s: status %d\n%s", cols[c], r->status, r->err);
  }
  static const char *const bad[] = {"{\"schema\": 1, ", "[]"};
  for (int b = 0; b < 2; b++) {
    tu_rmtree(run);
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", FIXTURE_RUN, run);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tu_write(run, "run.json", bad[b]), 0);
    snprintf(want, sizeof want, "%s/run.json", run);
    cli_run(r, 60, "report", NULL, -1, NULL, (char *[]){run, "--no-plot", "--out", out, NULL});
    if (r->status != 1 || !strstr(r->err, want)) fail_msg("report, run.json '%s': status %d\n%s", bad[b], r->status, r->err);
    cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, NULL});
    if (r->status != 1 || !strstr(r->err, want)) fail_msg("fit, run.json '%s': status %d\n%s", bad[b], r->status, r->err);
  }
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A row whose median time is negative or not a number is left out by fit and report, which say
 * how many: report plotted p50 = -7725 and priced it as a 382% model error. So is a p2p row whose
 * measure is (the fit dropped it without a word). */
static void test_untimed_rows_left_out(void **state) {
  (void)state;
  char tmp[64], run[128], out[128], model[128], cmd[1024];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(model, sizeof model, "%s/m.json", tmp);
  snprintf(cmd, sizeof cmd,
           "cp -r '%s' '%s' && awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == \"t_p50_us\") c = i; if (!c) exit 1 } "
           "NR == 20 { $c = -7725 } NR == 21 { $c = \"nan\" } { print }' '%s/allreduce.csv' > '%s/allreduce.csv' && "
           "awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == \"gbps\") c = i; if ($i == \"test\") t = i } "
           "if (!c || !t) exit 1 } NR > 1 && $t == \"bw\" && !done { $c = -1; done = 1 } { print }' '%s/p2p.csv' > '%s/p2p.csv'",
           FIXTURE_RUN, run, FIXTURE_RUN, run, FIXTURE_RUN, run);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){run, "--no-plot", "--out", out, NULL});
  if (count_lines(r->err, "left out 3 rows whose measure (median time, or a p2p rate) is negative or not a number") != 1)
    fail_msg("report did not say:\n%s", r->err);
  assert_false(tu_file_has(out, "allreduce.dat", "-7725"));
  assert_false(tu_file_has(out, "allreduce.dat", "nan,"));
  assert_true(tu_file_has(out, "report.md", "Rows: 26 all-reduce, 9 p2p"));
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (count_lines(r->err, "left out 3 rows") != 1) fail_msg("fit did not say:\n%s", r->err);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A model.json with a negative cost is refused by predict --intra FILE@FABRIC and allreduce
 * --model-from, naming the file, fabric and field; both took beta = -1e-9 as it was. */
static void test_negative_model_refused(void **state) {
  (void)state;
  char tmp[64], model[128], intra[200], cmd[600];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(model, sizeof model, "%s/model.json", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, "--out", model, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  snprintf(cmd, sizeof cmd, "sed -i 's/\"beta_s_per_byte\":[^,]*,/\"beta_s_per_byte\": -1e-9,/' '%s'", model);
  assert_int_equal(system(cmd), 0);
  assert_true(tu_file_has(tmp, "model.json", "-1e-9"));
  snprintf(intra, sizeof intra, "%s@tcp:lo/reno", model);
  cli_run(r, 60, "predict", NULL, -1, NULL, (char *[]){"--model", "resnet20", "--ranks", "2", "--intra", intra, "--no-plot", NULL});
  if (r->status == 0 || !strstr(r->err, model) || !strstr(r->err, "fabric tcp:lo/reno") || !strstr(r->err, "beta_s_per_byte"))
    fail_msg("predict: status %d\n%s", r->status, r->err);
  cli_run(r, 60, "allreduce", NULL, -1, NULL, (char *[]){"-n", "2", "--model-from", model, NULL});
  if (r->status != 2 || !strstr(r->err, model) || !strstr(r->err, "fabric tcp:lo/reno") || !strstr(r->err, "beta_s_per_byte"))
    fail_msg("allreduce: status %d\n%s", r->status, r->err);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* predict --intra PATH@X: X is a fabric string of the model or a transport that names one of its
 * fabrics (UCX's fabric strings differ from machine to machine, so a documented `@ucx:posix`
 * fails elsewhere); a model of several fabrics needs an X, where the first of them was taken silently. The
 * model has tcp:lo/reno and two ucx fabrics, each from the fixture's rows. */
/* predict --intra MODEL<at> for each case: its exit status, and want in what it said. */
typedef struct {
  const char *at, *want;
  int status;
} pred_case;
static void predict_cases(run_result *r, const char *model, const char *out, const pred_case *c, size_t n) {
  char spec[300];
  for (size_t i = 0; i < n; i++) {
    snprintf(spec, sizeof spec, "%s%s", model, c[i].at);
    cli_run(r, 60, "predict", NULL, -1, NULL,
            (char *[]){"--model", "resnet20", "--ranks", "2", "--intra", spec, "--no-plot", "--out", (char *)out, NULL});
    const char *said = c[i].status ? r->err : r->out;
    if (r->status != c[i].status || !strstr(said, c[i].want))
      fail_msg("--intra %s: status %d (expected %d), wanted '%s'\nstdout:\n%s\nstderr:\n%s", spec, r->status,
               c[i].status, c[i].want, r->out, r->err);
  }
}

static void test_predict_fabric_choice(void **state) {
  (void)state;
  char tmp[64], run[128], model[160], out[160], cmd[2048];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(model, sizeof model, "%s/model.json", tmp);
  snprintf(out, sizeof out, "%s/pred", tmp);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && for f in posix sysv; do sed -n '2,$p' '%s/allreduce.csv' | "
           "sed \"s|tcp:lo/reno,tcp|ucx:$f,ucx|\" >> '%s/allreduce.csv.new'; done && "
           "cat '%s/allreduce.csv.new' >> '%s/allreduce.csv' && rm '%s/allreduce.csv.new' '%s/allreduce.jsonl' 2>/dev/null; true",
           FIXTURE_RUN, run, run, run, run, run, run, run);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  static const pred_case cases[] = {
      {"@tcp", "tcp:lo/reno/tcp(fit)", 0},
      {"@ucx:sysv", "ucx:sysv/ucx(fit)", 0},
      {"@ucx", "2 fabrics of transport ucx in the model (tcp:lo/reno, ucx:posix, ucx:sysv): name one", 2},
      {"", "has 3 fabrics (tcp:lo/reno, ucx:posix, ucx:sysv): name one", 2},
      {"@mpi", "no fabric or transport 'mpi' in the model (it has tcp:lo/reno, ucx:posix, ucx:sysv)", 2},
  };
  predict_cases(r, model, out, cases, sizeof cases / sizeof *cases);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* allreduce --model-from a model without the run's fabric says so once, naming the fabric and
 * those the model has: the rows' t_pred_us were left empty without a word. */
static void test_allreduce_model_other_fabric(void **state) {
  (void)state;
  char tmp[64], model[128], out[128], cmd[600];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(model, sizeof model, "%s/model.json", tmp);
  snprintf(out, sizeof out, "%s/ar", tmp);
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, "--out", model, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  snprintf(cmd, sizeof cmd, "sed -i 's|\"fabric\":[[:space:]]*\"tcp:lo/reno\"|\"fabric\": \"emu-9gbit\"|' '%s'", model);
  assert_int_equal(system(cmd), 0);
  assert_true(tu_file_has(tmp, "model.json", "emu-9gbit"));
  cli_run(r, 120, "allreduce", NULL, -1, NULL,
          (char *[]){"-n", "2", "--transport", "tcp", "--algo", "ring,rd", "--min-bytes", "1K", "--max-bytes", "4K", "--iters", "2",
                     "--model-from", model, "--out", out, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (count_lines(r->err, "no model of fabric") != 1 || !strstr(r->err, "emu-9gbit (tcp)"))
    fail_msg("not said once, with the model's fabrics:\n%s", r->err);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A run with no rows to fit (training only) added to fit changes nothing: the kernel's rate of
 * a fabric is its own runs' (fit ar1 gave a tcp link 2.109 GB/s, fit ar1 t1 2.063). */
static void test_fit_unrelated_run(void **state) {
  (void)state;
  char tmp[64], run[128], train[128], model[128], cmd[1024];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(train, sizeof train, "%s/train", tmp);
  snprintf(model, sizeof model, "%s/m.json", tmp);
  copy_fixture(run, "5");
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && cp '%s/train.csv' '%s/' && sed 's/\"run_id\": \"fixture\"/\"run_id\": \"train-only\", \"reduce_gbps\": 50/' "
           "'%s/run.json' > '%s/run.json'",
           train, FIXTURE_RUN, train, FIXTURE_RUN, train);
  assert_int_equal(system(cmd), 0);
  assert_true(tu_file_has(train, "run.json", "train-only"));
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, "--out", model, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  char *alone = strdup(r->out);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){run, train, "--out", model, NULL});
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  if (strcmp(alone, r->out)) fail_msg("fit changed by a train-only run:\n%s\n---\n%s", alone, r->out);
  free(alone);
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* report into a reused --out removes the plots an earlier report left (and nothing else); a
 * '|' in a fabric name is escaped in the Markdown tables; the training table's step is the p50
 * (step_ms, as train prints it and train.csv names it), not the mean; a row of several rounds
 * shows its slowest too. */
static void test_report_cosmetics(void **state) {
  (void)state;
  char tmp[64], run[128], out[128], cmd[1200];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(run, sizeof run, "%s/run", tmp);
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' '%s' && cp '%s/run.json' '%s/train_buckets.csv' '%s/' && awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) "
           "{ if ($i == \"fabric\") f = i; if ($i == \"step_ms_mean\") m = i } if (!f || !m) exit 1; print; next } "
           "{ $f = \"tcp|x\"; $m = 123.45; print }' '%s/train.csv' > '%s/train.csv'",
           run, out, FIXTURE_RUN, FIXTURE_RUN, run, FIXTURE_RUN, run);
  assert_int_equal(system(cmd), 0);
  static const char *const stale[] = {"p2p_bw.png", "busbw.svg", "latency.gp", "allreduce.dat"};
  for (int i = 0; i < 4; i++) assert_int_equal(tu_write(out, stale[i], "old"), 0);
  assert_int_equal(tu_write(out, "notes.txt", "mine"), 0);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){run, "--no-plot", "--out", out, NULL});
  for (int i = 0; i < 4; i++)
    if (fsize(out, stale[i]) >= 0) fail_msg("%s of an earlier report left", stale[i]);
  assert_int_equal(fsize(out, "notes.txt"), 4);
  if (!tu_file_has(out, "report.md", "| resnet20 | 1 | tcp\\|x | none | none | 329.9 | 97.00 |"))
    fail_msg("the training table's row (escaped fabric, step p50)");
  assert_true(tu_file_has(out, "report.md", "| step p50 (ms) |"));
  assert_false(tu_file_has(out, "report.md", "| tcp|x |"));
  assert_false(tu_file_has(out, "report.md", "| 123.45 |"));
  assert_false(tu_file_has(out, "report.md", "slowest")); /* a row of one round: no spread */
  /* a row of train --rounds 3: its slowest round beside the fastest */
  snprintf(cmd, sizeof cmd,
           "awk -F, -v OFS=, 'NR == 1 { print $0, \"rounds\", \"images_per_s_slowest\"; next } { print $0, 3, 301.25 }' "
           "'%s/train.csv' > '%s/t' && mv '%s/t' '%s/train.csv'", run, run, run, run);
  assert_int_equal(system(cmd), 0);
  report_ok(r, (char *[]){run, "--no-plot", "--out", out, NULL});
  if (!tu_file_has(out, "report.md", "| 329.9 (slowest of 3 rounds 301.2) |")) fail_msg("no slowest round in the table");
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* Each want[i] = {file, text}: the file of dir holds the text. */
static void files_have(const char *dir, const char *const want[][2], size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!tu_file_has(dir, want[i][0], want[i][1])) fail_msg("%s: no '%s'", want[i][0], want[i][1]);
}

/* Two runs of one key (fabric, algorithm, ranks; here two clusters with one fabric string) are
 * two curves and two table rows, each naming its run: they were one line zigzagging between the
 * runs' sizes. Names are drawn as written (noenhanced: the _ of ucx's rkey_ptr was a
 * subscript). The two machines (their topology hashes) get a model each, labelled with the
 * hash, and predict asks which one is meant. */
static void test_report_two_runs_one_key(void **state) {
  (void)state;
  char tmp[64], again[128], out[128], model[160], cmd[800];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(again, sizeof again, "%s/again", tmp);
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(model, sizeof model, "%s/model.json", tmp);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s' && sed -i 's/^fixture,/again,/; s/\"run_id\": \"fixture\"/\"run_id\": \"again\"/; "
           "s/,h1,abc,/,h2,def,/' '%s'/*.csv '%s/run.json' && rm -f '%s'/*.jsonl", FIXTURE_RUN, again, again, again, again);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){FIXTURE_RUN, again, "--no-plot", "--out", out, NULL});
  static const char *const want[][2] = {
      {"busbw.gp", "title 'ring p2 (fixture)' noenhanced"},
      {"busbw.gp", "title 'ring p2 (again)' noenhanced"},
      {"report.md", "| tcp:lo/reno (fixture) | tcp | ring | f32 | sum | 2 |"},
      {"report.md", "| tcp:lo/reno (again) | tcp | ring | f32 | sum | 2 |"},
      {"p2p_latency.gp", "title 'tcp:lo/reno tcp latency 0-1 (again)' noenhanced"},
      {"report.md", "| tcp:lo/reno [abc] | tcp | 1 | allreduce |"},
      {"report.md", "| tcp:lo/reno [def] | tcp | 1 | allreduce |"},
  };
  files_have(out, want, sizeof want / sizeof *want);
  cli_run(r, 60, "fit", NULL, -1, NULL, (char *[]){FIXTURE_RUN, again, "--out", model, "--no-gamma-kernel", NULL});
  if (r->status) fail_msg("fit: status %d\n%s\n%s", r->status, r->out, r->err);
  if (!strstr(r->out, "tcp:lo/reno [abc]") || !strstr(r->out, "tcp:lo/reno [def]"))
    fail_msg("fit does not label the two machines' models:\n%s", r->out);
  static const pred_case cases[] = {
      {"@tcp:lo/reno", "fabric tcp:lo/reno was fitted on more than one machine: 'tcp:lo/reno [abc]' (tcp, topology abc)", 2},
      {"@tcp:lo/reno [def]", "tcp:lo/reno [def]", 0},
  };
  predict_cases(r, model, out, cases, sizeof cases / sizeof *cases);
  /* one run alone: no run in the names */
  report_ok(r, (char *[]){again, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "busbw.gp", "title 'ring p2' noenhanced"));
  assert_false(tu_file_has(out, "report.md", "(again)"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* The all-reduce plots have a panel per fabric (and transport, where the fabric does not name
 * it), each curve named by its algorithm and ranks: 26 curves of 5 fabrics in one plot, their key
 * 52 lines, hid each other. Rows measured beside a load are not drawn, so another run of them
 * does not put run names on the curves of the key they share. */
static void test_report_panels(void **state) {
  (void)state;
  char tmp[64], out[128], emu[128], busy[128], cmd[1024];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(emu, sizeof emu, "%s/emu", tmp);
  snprintf(busy, sizeof busy, "%s/busy", tmp);
  fixture_rows(emu, "", "NR == 1 { print; next } { $1 = \"emu\"; $5 = \"emu-1gbit\"; print }");
  fixture_rows(busy, "", "NR == 1 { print $0 \",compute_loss\"; next } $7 == \"ring\" && $4 == 2 { $1 = \"busy\"; print $0 \",0.3\" }");
  int n = snprintf(cmd, sizeof cmd, "sed -i 's/\"run_id\": \"fixture\"/\"run_id\": \"emu\"/' '%s/run.json' && "
                   "sed -i 's/\"run_id\": \"fixture\"/\"run_id\": \"busy\"/' '%s/run.json'", emu, busy);
  assert_true(n > 0 && (size_t)n < sizeof cmd);
  assert_int_equal(system(cmd), 0);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){FIXTURE_RUN, emu, busy, "--no-plot", "--out", out, NULL});
  static const char *const want[][2] = {
      {"busbw.gp", "set multiplot layout 1,2 title 'all-reduce busbw (dashed: cost model)'"},
      {"busbw.gp", "set title 'tcp:lo/reno' noenhanced\nplot 'allreduce.dat' index 0 using 1:2 with linespoints lc 1 "
                   "title 'ring p2' noenhanced"},
      {"busbw.gp", "set title 'emu-1gbit (tcp)' noenhanced\nplot"},
      {"busbw.gp", "title 'rd p4' noenhanced"},
      {"latency.gp", "set multiplot layout 1,2 title 'all-reduce time (solid: p50, dotted: p99)'"},
      {"latency.gp", "set title 'emu-1gbit (tcp)' noenhanced\nplot"},
  };
  files_have(out, want, sizeof want / sizeof *want);
  assert_false(tu_file_has(out, "busbw.gp", "(fixture)"));
  assert_false(tu_file_has(out, "busbw.gp", "(busy)"));
  /* two panels of 4 curves (2 to a key row at half the width): 2 key rows under each */
  assert_true(tu_file_has(out, "busbw.gp", "set terminal pngcairo size 1000,458"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A key of many curves below the plot makes the canvas taller, so that the plot keeps its height
 * and the key its room: one run's 4 curves on 1000x700, twelve runs' 48 (three columns of 16 rows
 * at these titles' length) on more; at 700 the key had overflowed the canvas and hid the title. */
static void test_report_key_room(void **state) {
  (void)state;
  char tmp[64], out[128], cmd[2048];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  char *argv[16];
  char dirs[12][128];
  for (int i = 0; i < 12; i++) {
    snprintf(dirs[i], sizeof dirs[i], "%s/run%d", tmp, i);
    int n = snprintf(cmd, sizeof cmd,
                     "cp -r '%s' '%s' && sed -i 's/^fixture,/run%d,/; s/\"run_id\": \"fixture\"/\"run_id\": \"run%d\"/' "
                     "'%s'/*.csv '%s/run.json' && rm -f '%s'/*.jsonl", FIXTURE_RUN, dirs[i], i, i, dirs[i], dirs[i], dirs[i]);
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    assert_int_equal(system(cmd), 0);
    argv[i] = dirs[i];
  }
  argv[12] = "--no-plot", argv[13] = "--out", argv[14] = out, argv[15] = NULL;
  run_result *r = calloc(1, sizeof *r);
  cli_run(r, 60, "report", NULL, -1, NULL, argv);
  if (r->status) fail_msg("status %d\n%s\n%s", r->status, r->out, r->err);
  assert_true(tu_file_has(out, "busbw.gp", "title 'rd p4 (run11)' noenhanced"));
  if (!tu_file_has(out, "busbw.gp", "set terminal pngcairo size 1000,824") ||
      !tu_file_has(out, "busbw.gp", "set terminal svg size 1000,824 dynamic"))
    fail_msg("busbw.gp of 48 curves is not 824 px tall");
  report_ok(r, (char *[]){dirs[0], "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "busbw.gp", "set terminal pngcairo size 1000,700"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* The report's verdict on a model needs rows from 1 MiB to judge by: the fixture's 8 get one,
 * its 1 MiB rows alone (4, as suite --quick's loopback sweep has 3) are too few. */
static void test_report_verdict_rows(void **state) {
  (void)state;
  char tmp[64], out[128], few[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(few, sizeof few, "%s/few", tmp);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){FIXTURE_RUN, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "within 10%; the median error"));
  assert_false(tu_file_has(out, "report.md", "Too few rows from 1 MiB"));
  fixture_rows(few, "", "NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i } NR == 1 || $h[\"bytes\"] < 4194304");
  report_ok(r, (char *[]){few, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "of 4 measured all-reduce times from 1 MiB within 10%"));
  assert_true(tu_file_has(out, "report.md", "Too few rows from 1 MiB to judge it"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

/* A group whose time grows over 3 times as fast as its size from 1 MiB is named under the
 * all-reduce table, with the two sizes; a steep step below 1 MiB, or one 2.7 times as fast, is
 * not; and MPI's own all-reduce gets the reason README gives. The fixture as it is has none. */
static void test_report_steep_rows(void **state) {
  (void)state;
  char tmp[64], out[128], steep[128], mpi[128];
  assert_non_null(tu_tmpdir(tmp, sizeof tmp, "mcli"));
  snprintf(out, sizeof out, "%s/rep", tmp);
  snprintf(steep, sizeof steep, "%s/steep", tmp);
  snprintf(mpi, sizeof mpi, "%s/mpi", tmp);
  run_result *r = calloc(1, sizeof *r);
  report_ok(r, (char *[]){FIXTURE_RUN, "--no-plot", "--out", out, NULL});
  assert_false(tu_file_has(out, "report.md", "Rows whose time grows"));
  /* rd on 2 ranks: 4 MiB 20x slower (80.0x the 1 MiB time); ring on 4: 4 MiB 2.9x slower (10.8x,
   * 2.7 times the size's 4x); ring on 2: 64 KiB 20x slower, below 1 MiB */
  const char *prog = "NR == 1 { print; next } $7 == \"rd\" && $4 == 2 && $10 == 4194304 { $15 *= 20 } "
                     "$7 == \"ring\" && $4 == 4 && $10 == 4194304 { $15 *= 2.9 } "
                     "$7 == \"ring\" && $4 == 2 && $10 == 65536 { $15 *= 20 } { print }";
  fixture_rows(steep, "", prog);
  report_ok(r, (char *[]){steep, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "Rows whose time grows over 3 times as fast as their size from 1 MiB"));
  assert_true(tu_file_has(out, "report.md", "- **tcp:lo/reno** (tcp): rd on 2 ranks, from 1 to 4 MiB its time grew 80.0x, the size 4x.\n"));
  assert_false(tu_file_has(out, "report.md", "ring on 4 ranks, from"));
  assert_false(tu_file_has(out, "report.md", "ring on 2 ranks, from"));
  assert_false(tu_file_has(out, "report.md", "Open MPI 4.1's MPI_Allreduce maps"));
  /* the same steep group as MPI's own all-reduce */
  fixture_rows(mpi, "", "NR == 1 { print; next } $7 == \"rd\" && $4 == 2 { $6 = \"mpi\"; $7 = \"native\"; "
                        "$5 = \"mpi:ob1/vader\"; if ($10 == 4194304) $15 *= 20 } { print }");
  report_ok(r, (char *[]){mpi, "--no-plot", "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "(mpi): native on 2 ranks, from 1 to 4 MiB its time grew 80.0x, the size 4x. "
                                            "Open MPI 4.1's MPI_Allreduce maps a fresh scratch buffer"));
  free(r);
  assert_int_equal(tu_rmtree(tmp), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_report_every_plot),
      cmocka_unit_test(test_report_refuses),
      cmocka_unit_test(test_report_nothing_to_plot),
      cmocka_unit_test(test_report_write_fails),
      cmocka_unit_test(test_predict_write_fails),
      cmocka_unit_test(test_report_plot_cut),
      cmocka_unit_test(test_report_dtypes),
      cmocka_unit_test(test_fit_and_predict),
      cmocka_unit_test(test_fit_check),
      cmocka_unit_test(test_fit_beside_compute),
      cmocka_unit_test(test_fit_recorded_kernel),
      cmocka_unit_test(test_allreduce_model_from),
      cmocka_unit_test(test_dir_given_twice),
      cmocka_unit_test(test_damaged_run_refused),
      cmocka_unit_test(test_untimed_rows_left_out),
      cmocka_unit_test(test_negative_model_refused),
      cmocka_unit_test(test_predict_fabric_choice),
      cmocka_unit_test(test_allreduce_model_other_fabric),
      cmocka_unit_test(test_fit_unrelated_run),
      cmocka_unit_test(test_report_cosmetics),
      cmocka_unit_test(test_report_two_runs_one_key),
      cmocka_unit_test(test_report_panels),
      cmocka_unit_test(test_report_key_room),
      cmocka_unit_test(test_report_verdict_rows),
      cmocka_unit_test(test_report_steep_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
