/* `fabench train -n N`: data-parallel training end to end.
 * - ranks that all read the same data end bit-identical to one rank (averaging identical
 *   gradients is exact), at 2 and 4 ranks, overlapped or not, also with --overlap-step;
 * - with different shards the ranks still hold one model (the hash check passes every step),
 *   and a rank whose weights are corrupted on purpose stops the run naming it;
 * - a run writes the single, none and per-transport rows with their efficiencies, and the
 *   per-step rows of every rank;
 * - a killed rank stops the others with an error naming it, never a hang (also amid stage 3's gathers);
 * - --dp sharded and sharded3 end where replicated does (bit-identical on the same data), their
 *   checkpoints whole; sharded3 sends 1.5x the bytes (less the bucket it keeps) and keeps less;
 * - a checkpoint from another world size is refused;
 * - --trace writes each rank's forward, backward layers, waits and every bucket once;
 * - --model-from predicts a row from its own run's bucket plan. */
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../bench/cli_run.h"
#include "coll.h"
#include "nn_data.h"
#include "res.h"
#include "test_util.h"

static char dir[256];

static void run(run_result *r, int timeout_s, const char *env, int kill_rank, const char *csv,
                const char *fmt, ...) {
  char line[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  char *args[64];
  int n = 0;
  for (char *t = strtok(line, " "); t && n < 63; t = strtok(NULL, " ")) args[n++] = t;
  args[n] = NULL;
  cli_run(r, timeout_s, "train", env, kill_rank, csv, args);
}

static void ok(const run_result *r) {
  if (r->status != 0) fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", r->status, r->out, r->err);
}

/* A record's rows from a run directory, through results' reader. */
static res_rows rows_of(const char *run, const res_schema *sch) {
  char p[600], err[512];
  res_rows r = {0};
  snprintf(p, sizeof p, "%s/%s", dir, run);
  if (res_table_read(&r, sch, p, err, sizeof err)) fail_msg("%s", err);
  return r;
}

/* A checkpoint's arena (params or momentum). */
static float *ckpt_arena(const char *name, int momentum, size_t *n) {
  char p[600], err[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  nn_ckpt_info info, got;
  if (nn_ckpt_read_info(p, &info, err, sizeof err)) fail_msg("%s", err);
  float *w = malloc(info.n_params * 4 + 4), *m = malloc(info.n_momentum * 4 + 4),
        *b = malloc(info.n_buffers * 4 + 4);
  if (nn_ckpt_load(p, &got, w, m, b, &info, err, sizeof err)) fail_msg("%s", err);
  free(b);
  if (momentum) free(w);
  else free(m);
  *n = momentum ? info.n_momentum : info.n_params;
  return momentum ? m : w;
}

#define SMALL "--model resnet8-w4 --data synthetic:1x8x8:4:96 --batch 8 --threads 1 --eval-every 0"

static void test_same_data_bit_identical(void **st) {
  (void)st;
  run_result r;
  run(&r, 120, NULL, -1, NULL, SMALL " --steps 6 --lr 0.1 --save %s/one.ckpt --out %s/one", dir, dir);
  ok(&r);
  size_t n1, n;
  float *one = ckpt_arena("one.ckpt", 0, &n1);
  const char *cases[][2] = {{"2", "--transport tcp --algo ring --overlap-step off"},
                            {"2", "--transport tcp --algo ring --no-overlap --bucket-mb 0.01 "
                                  "--overlap-step off"},
                            {"4", "--transport tcp --algo rhd --bucket-mb 0.003 "
                                  "--first-bucket-mb 0.001 --overlap-step off"},
                            {"4", "--transport tcp --algo ring --overlap-step off"},
                            /* the next forward overlapping the all-reduce (after 2 warm-up steps
                               that choose the front), the 1/N in SGD, layer by layer */
                            {"2", "--transport tcp --algo ring --overlap-step on --warmup-steps 2"},
                            {"4", "--transport tcp --algo rhd --bucket-mb 0.003 --first-bucket-mb "
                                  "0.001 --overlap-step on --warmup-steps 1"},
                            {"2", "--transport tcp --algo ring --overlap-step on --warmup-steps 0 "
                                  "--check-every 4"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run(&r, 180, "FABENCH_TEST_SAME_DATA=1", -1, NULL,
        SMALL " --steps 6 --lr 0.1 -n %s %s --save %s/dp%zu.ckpt --out %s/dp%zu", cases[i][0],
        cases[i][1], dir, i, dir, i);
    ok(&r);
    char name[64];
    snprintf(name, sizeof name, "dp%zu", i);
    res_rows rr = rows_of(name, res_schema_train());
    const res_train_row *t = rr.rows;
    int want_ostep = strstr(cases[i][1], "--overlap-step on") != NULL, ndp = 0;
    for (size_t k = 0; k < rr.n; k++) { /* the row says how the step was run */
      if (strcmp(t[k].role, "dp")) continue;
      ndp++;
      assert_int_equal((int)t[k].overlap_step, want_ostep);
      assert_int_equal((int)t[k].overlap, strstr(cases[i][1], "--no-overlap") == NULL);
    }
    assert_int_equal(ndp, 1);
    res_rows_free(&rr);
    snprintf(name, sizeof name, "dp%zu.ckpt", i);
    float *dp = ckpt_arena(name, 0, &n);
    assert_int_equal(n, n1);
    size_t diff = 0, first = 0;
    for (size_t k = 0; k < n; k++)
      if (memcmp(&dp[k], &one[k], 4) && !diff++) first = k;
    if (diff)
      fail_msg("-n %s %s: %zu of %zu parameters differ from one rank's, first %zu (%.9g vs %.9g)",
               cases[i][0], cases[i][1], diff, n, first, (double)dp[first], (double)one[first]);
    free(dp);
  }
  /* and training moved the weights: the comparison could fail */
  run(&r, 60, NULL, -1, NULL, SMALL " --steps 1 --lr 0.1 --save %s/init.ckpt --out %s/init", dir, dir);
  ok(&r);
  float *init = ckpt_arena("init.ckpt", 0, &n);
  assert_memory_not_equal(init, one, n * 4);
  free(init);
  free(one);
}

/* Elements of a and b (n each) further apart than rel x |b| + abs. */
static size_t arena_diff(const float *a, const float *b, size_t n, double rel, double abs_tol, size_t *first) {
  size_t bad = 0;
  for (size_t k = 0; k < n; k++)
    if (!(fabs((double)a[k] - (double)b[k]) <= rel * fabs((double)b[k]) + abs_tol) && !bad++) *first = k;
  return bad;
}

/* Stage 3's bytes a rank sends per step (MB), worked out from the bucket plan its run wrote:
 * per bucket of c floats, b = c / N blocks, t = c - N b the tail, the reduce-scatter and the
 * forward's gather (N-1) b each, the backward's gather (N-1) b more for every bucket but the
 * first (the last layer's: kept through the forward, as FSDP keeps its root's), the tail
 * all-reduced, 2 (N-1)/N t. */
static double stage3_mb(const char *run, int ranks) {
  res_rows rb = rows_of(run, res_schema_train_buckets());
  const res_train_buckets_row *b = rb.rows;
  double sum = 0, n = ranks;
  int seen = 0;
  for (size_t i = 0; i < rb.n; i++) {
    if (strcmp(b[i].role, "dp")) continue;
    double c = (double)b[i].bytes / 4, blk = floor(c / n), tail = c - blk * n;
    sum += ((b[i].offset_bytes == 0 ? 2 : 3) * (n - 1) * blk + 2 * (n - 1) / n * tail) * 4;
    seen++;
  }
  res_rows_free(&rb);
  if (seen < 2) fail_msg("%s: %d buckets in train_buckets.csv; the test needs several", run, seen);
  return sum / 1e6;
}

/* --dp sharded (ZeRO stage 2) and sharded3 (stage 3): ranks reading the same data end
 * bit-identical to one rank, weights and (gathered into the checkpoint) momentum, over tcp and
 * ucx; ranks on their own shards end where the replicated run (tcp) ends, within f32 rounding
 * (the sums run in another order), at 2 and 3 ranks, stage 2 over ucx, stage 3 over tcp and ucx;
 * the rows say sharded and keep a smaller state, stage 3 a smaller one still, its peak between,
 * and stage 3 sends what its bucket plan makes, 1.5x the replicated run's less the kept bucket. */
static void test_sharded(void **st) {
  (void)st;
  run_result r;
#define SH SMALL " --steps 6 --lr 0.1 --overlap-step off --bucket-mb 0.01 --first-bucket-mb 0.004"
  run(&r, 120, NULL, -1, NULL, SH " --save %s/sh1.ckpt --out %s/sh1", dir, dir);
  ok(&r);
  size_t n1, n, first = 0;
  float *one = ckpt_arena("sh1.ckpt", 0, &n1), *one_m = ckpt_arena("sh1.ckpt", 1, &n1);
  const char *same[] = {"tcp", coll_transport_built(COLL_UCX) ? "ucx" : NULL};
  for (int i = 0; i < 4 && same[i / 2]; i++) {
    const char *dp = i % 2 ? "sharded3" : "sharded";
    run(&r, 180, "FABENCH_TEST_SAME_DATA=1", -1, NULL,
        SH " -n 2 --transport %s --dp %s --no-single --save %s/shs%d.ckpt --out %s/shs%d", same[i / 2], dp, dir, i,
        dir, i);
    ok(&r);
    char name[64];
    snprintf(name, sizeof name, "shs%d.ckpt", i);
    float *w = ckpt_arena(name, 0, &n), *m = ckpt_arena(name, 1, &n);
    assert_int_equal(n, n1);
    size_t bad = arena_diff(w, one, n, 0, 0, &first);
    if (bad) fail_msg("%s %s, same data: %zu of %zu weights differ from one rank's, first %zu", dp, same[i / 2], bad, n, first);
    bad = arena_diff(m, one_m, n, 0, 0, &first);
    if (bad) fail_msg("%s %s, same data: %zu of %zu momentum values differ, first %zu", dp, same[i / 2], bad, n, first);
    free(w);
    free(m);
  }
  for (int ranks = 2; ranks <= 3; ranks++) {
    run(&r, 180, NULL, -1, NULL, SH " -n %d --transport tcp --no-single --save %s/rep%d.ckpt --out %s/rep%d", ranks,
        dir, ranks, dir, ranks);
    ok(&r);
    /* sharded over ucx where it is built (the buckets its ranks map), else tcp */
    run(&r, 180, NULL, -1, NULL, SH " -n %d --transport %s --dp sharded --no-single --save %s/shd%d.ckpt --out %s/shd%d",
        ranks, coll_transport_built(COLL_UCX) ? "ucx" : "tcp", dir, ranks, dir, ranks);
    ok(&r);
    char a[64], b[64];
    snprintf(a, sizeof a, "rep%d.ckpt", ranks);
    snprintf(b, sizeof b, "shd%d.ckpt", ranks);
    float *rep = ckpt_arena(a, 0, &n), *shd = ckpt_arena(b, 0, &n1);
    assert_int_equal(n, n1);
    size_t bad = arena_diff(shd, rep, n, 1e-4, 1e-6, &first);
    if (bad)
      fail_msg("-n %d: %zu of %zu sharded weights differ from replicated, first %zu (%.9g vs %.9g)", ranks, bad, n,
               first, (double)shd[first], (double)rep[first]);
    assert_memory_not_equal(rep, one, n * 4); /* another run's weights: the comparison could fail */
    free(rep);
    free(shd);
    snprintf(a, sizeof a, "rep%d", ranks);
    snprintf(b, sizeof b, "shd%d", ranks);
    res_rows rr = rows_of(a, res_schema_train()), rs = rows_of(b, res_schema_train());
    const res_train_row *tr = rr.rows, *ts = rs.rows;
    assert_string_equal(tr[rr.n - 1].dp, "replicated");
    assert_string_equal(ts[rs.n - 1].dp, "sharded");
    /* the same bytes on the wire; the optimizer state divided among the ranks */
    assert_true(fabs(tr[rr.n - 1].sent_mb_step - ts[rs.n - 1].sent_mb_step) < 1e-9);
    double opt = 4.0 * (double)tr[rr.n - 1].params / 1e6;
    if (!(ts[rs.n - 1].state_mb < tr[rr.n - 1].state_mb - opt * (ranks - 1) / ranks * 0.9))
      fail_msg("-n %d: sharded state %g MB, replicated %g MB", ranks, ts[rs.n - 1].state_mb, tr[rr.n - 1].state_mb);
    /* stage 3 over tcp and ucx: the same weights; its bytes and memory */
    for (int t = 0; t < 2 && same[t]; t++) {
      char run3[64], ck3[80];
      snprintf(run3, sizeof run3, "sh3%d%s", ranks, same[t]);
      snprintf(ck3, sizeof ck3, "%s.ckpt", run3);
      run(&r, 180, NULL, -1, NULL, SH " -n %d --transport %s --dp sharded3 --no-single --save %s/%s --out %s/%s", ranks,
          same[t], dir, ck3, dir, run3);
      ok(&r);
      char repck[64];
      snprintf(repck, sizeof repck, "rep%d.ckpt", ranks);
      float *rep = ckpt_arena(repck, 0, &n), *sh3 = ckpt_arena(ck3, 0, &n1);
      assert_int_equal(n, n1);
      size_t bad3 = arena_diff(sh3, rep, n, 1e-4, 1e-6, &first);
      if (bad3)
        fail_msg("-n %d %s: %zu of %zu sharded3 weights differ from replicated, first %zu (%.9g vs %.9g)", ranks, same[t],
                 bad3, n, first, (double)sh3[first], (double)rep[first]);
      free(rep);
      free(sh3);
      res_rows r3 = rows_of(run3, res_schema_train());
      const res_train_row *t3 = &((const res_train_row *)r3.rows)[r3.n - 1], *t2 = &ts[rs.n - 1], *t1 = &tr[rr.n - 1];
      assert_string_equal(t3->dp, "sharded3");
      /* 1.5x the all-reduce's bytes, less the kept bucket's second gather and the tails' */
      double want = stage3_mb(run3, ranks), ratio = t3->sent_mb_step / t1->sent_mb_step;
      if (!(fabs(t3->sent_mb_step - want) < 1e-9 && ratio <= 1.5 && ratio > 1.25))
        fail_msg("-n %d %s: sharded3 sends %.9g MB a step, the plan makes %.9g, %.4gx replicated's", ranks, same[t],
                 t3->sent_mb_step, want, ratio);
      /* between steps a rank keeps 1/N of the parameters too; at its peak more, never all */
      double par = 4.0 * (double)t1->params / 1e6;
      if (!(t3->state_mb < t2->state_mb - par * (ranks - 1) / ranks * 0.9 && t3->peak_mb > t3->state_mb &&
            t3->peak_mb < t2->peak_mb && fabs(t2->peak_mb - t2->state_mb) < 1e-12))
        fail_msg("-n %d %s: sharded3 state %g MB (peak %g), sharded %g (peak %g)", ranks, same[t], t3->state_mb,
                 t3->peak_mb, t2->state_mb, t2->peak_mb);
      res_rows_free(&r3);
    }
    res_rows_free(&rr);
    res_rows_free(&rs);
  }
  free(one);
  free(one_m);
#undef SH
}

/* hier on an emulated cluster of 2 nodes of 2 ranks (root only): its phases inside the nodes run
 * over ucx on the mapped gradients by default where ucx is built; the ranks reading the same data
 * still end bit-identical to one rank (x + x, then 2x + 2x: exact). */
static void test_hier_cluster_identical(void **st) {
  (void)st;
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: an emulated cluster needs root\n");
    skip();
  }
  run_result r;
  run(&r, 120, NULL, -1, NULL, SMALL " --steps 4 --lr 0.1 --save %s/h1.ckpt --out %s/h1", dir, dir);
  ok(&r);
  run(&r, 240, "FABENCH_TEST_SAME_DATA=1", -1, NULL,
      SMALL " --steps 4 --lr 0.1 --emulate 2x2:10gbit --transport tcp --algo hier --overlap-step off "
            "--no-single --save %s/h4.ckpt --out %s/h4", dir, dir);
  ok(&r);
  size_t n1, n;
  float *one = ckpt_arena("h1.ckpt", 0, &n1), *dp = ckpt_arena("h4.ckpt", 0, &n);
  assert_int_equal(n, n1);
  size_t diff = 0;
  for (size_t k = 0; k < n; k++) diff += memcmp(&dp[k], &one[k], 4) != 0;
  if (diff) fail_msg("hier on 2x2: %zu of %zu parameters differ from one rank's", diff, n);
  free(one);
  free(dp);
  char p[600];
  snprintf(p, sizeof p, "%s/h4/run.json", dir);
  char *meta = tu_slurp(p, NULL);
  assert_non_null(meta);
  if (coll_transport_built(COLL_UCX) && !strstr(meta, "\"tcp/intra\":\t\"ucx:"))
    fail_msg("hier's phases inside the nodes did not run over ucx:\n%s", meta);
  free(meta);
}

/* The threads of a rank that was given none: the cores of its CPU set divided among the ranks on
 * this machine with the same set, at least 1; a count that oversubscribes them is warned of
 * once, by the first of them. Each row records what the ranks ran. */
static long rows_threads(const char *run) {
  res_rows rr = rows_of(run, res_schema_train());
  const res_train_row *t = rr.rows;
  assert_true(rr.n > 0);
  long th = (long)t[0].threads;
  for (size_t k = 1; k < rr.n; k++) assert_int_equal((long)t[k].threads, th);
  res_rows_free(&rr);
  return th;
}

static void test_threads_default(void **st) {
  (void)st;
  cpu_set_t set;
  CPU_ZERO(&set);
  assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
  long cores = CPU_COUNT(&set), half = cores / 2 > 0 ? cores / 2 : 1;
#define PLAIN "--model resnet8-w4 --data synthetic:1x8x8:4:96 --batch 8 --steps 2 --eval-every 0"
  run_result r;
  run(&r, 120, NULL, -1, NULL, PLAIN " -n 2 --transport tcp --no-single --out %s/th2", dir);
  ok(&r);
  assert_int_equal(rows_threads("th2"), half);
  assert_null(strstr(r.err, "oversubscribe"));
  run(&r, 120, NULL, -1, NULL, PLAIN " --out %s/th1", dir);
  ok(&r);
  assert_int_equal(rows_threads("th1"), cores);
  run(&r, 120, NULL, -1, NULL, PLAIN " -n 2 --transport tcp --no-single --threads %ld --out %s/thx", cores, dir);
  ok(&r);
  assert_int_equal(rows_threads("thx"), cores);
  const char *w = strstr(r.err, "oversubscribe");
  if (!w || strstr(w + 1, "oversubscribe")) fail_msg("want one warning of oversubscribed cores:\n%s", r.err);
#undef PLAIN
}

static void test_rows_and_shards(void **st) {
  (void)st;
  run_result r;
  const char *tl = coll_transport_built(COLL_UCX) ? "none,tcp,ucx" : "none,tcp";
  run(&r, 240, NULL, -1, NULL,
      SMALL " --steps 8 --warmup-steps 2 -n 2 --transport %s --algo ring,ps --check-every 1"
            " --bucket-mb 0.01 --first-bucket-mb 0.004 --out %s/rows",
      tl, dir);
  ok(&r);
  int npairs = coll_transport_built(COLL_UCX) ? 4 : 2;
  res_rows rr = rows_of("rows", res_schema_train());
  const res_train_row *t = rr.rows;
  assert_int_equal((int)rr.n, 2 + npairs); /* single, none, then every transport x algo */
  assert_string_equal(t[0].role, "single");
  assert_int_equal((int)t[0].ranks, 1);
  assert_string_equal(t[1].role, "none");
  for (int i = 1; i < 2 + npairs; i++) {
    assert_int_equal((int)t[i].ranks, 2);
    assert_int_equal((int)t[i].global_batch, 16);
    /* present and positive: their size is the machine's business, not a test's */
    if (!(t[i].scaling_eff > 0 && isfinite(t[i].scaling_eff) && t[i].fabric_eff > 0 &&
          isfinite(t[i].fabric_eff)))
      fail_msg("row %d: scaling %g fabric %g", i, t[i].scaling_eff, t[i].fabric_eff);
    assert_int_equal((int)t[i].measured_steps, 6);
  }
  assert_string_equal(t[2].role, "dp");
  assert_string_equal(t[2].transport, "tcp");
  /* the gradient bytes: every parameter once, in f32 */
  assert_true(t[2].grad_bytes == 4 * t[2].params);
  assert_true(t[2].comm_ms > 0);
  assert_true(t[2].buckets >= 2);
  res_rows ss = rows_of("rows", res_schema_train_steps());
  assert_int_equal((int)ss.n, 8 * (1 + 2 * (1 + npairs)));
  /* throughput is wall time's: global images over the longest of the ranks' summed measured
   * steps (not each step's slowest rank, summed, which counts a wait twice); the mean step is
   * that wall time per step, and the p50 lies between the fastest and slowest step periods */
  const res_train_steps_row *sr = ss.rows;
  for (int i = 2; i < 2 + npairs; i++) {
    double wall[2] = {0, 0}, per[8] = {0};
    int64_t images = 0, nper = 0;
    for (size_t k = 0; k < ss.n; k++) {
      const res_train_steps_row *q = &sr[k];
      if (strcmp(q->transport, t[i].transport) || strcmp(q->algo, t[i].algo) || q->warmup) continue;
      assert_true(q->rank >= 0 && q->rank < 2 && q->step >= 1 && q->step <= 8);
      wall[q->rank] += q->step_ms;
      per[q->step - 1] += q->step_ms / 2;
      images += q->images;
    }
    double w = wall[0] > wall[1] ? wall[0] : wall[1], lo = INFINITY, hi = 0;
    for (int k = 0; k < 8; k++)
      if (per[k] > 0) {
        nper++;
        lo = per[k] < lo ? per[k] : lo;
        hi = per[k] > hi ? per[k] : hi;
      }
    assert_int_equal((int)nper, 6);
    assert_int_equal((int)images, 6 * 16);
    double want = 1e3 * (double)images / w;
    if (fabs(t[i].images_per_s / want - 1) > 2e-5 || fabs(t[i].step_ms_mean / (w / 6) - 1) > 2e-5 ||
        t[i].step_ms < lo * (1 - 1e-5) || t[i].step_ms > hi * (1 + 1e-5))
      fail_msg("row %d (%s/%s): %.6g images/s, mean step %.6g, p50 %.6g ms; from train_steps: "
               "%.6g images/s, mean %.6g, periods %.6g..%.6g ms",
               i, t[i].transport, t[i].algo, t[i].images_per_s, t[i].step_ms_mean, t[i].step_ms,
               want, w / 6, lo, hi);
  }
  res_rows_free(&ss);
  res_rows_free(&rr);
  rr = rows_of("rows", res_schema_train_buckets());
  assert_true((int)rr.n >= 2 * (2 + npairs));
  res_rows_free(&rr);
}

/* Rank 1's weights changed after step 3: the check after step 4 names it. With --overlap-step
 * that check waits for step 5's forward (which applies step 4's update): it must still see
 * step 4's parameters, and name that step. */
static void test_corrupted_rank_caught(void **st) {
  (void)st;
  const char *modes[] = {"--overlap-step off", "--overlap-step on --warmup-steps 1"};
  for (int m = 0; m < 2; m++) {
    run_result r;
    run(&r, 120, "FABENCH_TEST_CORRUPT=1:3", -1, NULL,
        SMALL " --steps 8 -n 2 --transport tcp --no-single --check-every 2 %s --out %s/corrupt%d",
        modes[m], dir, m);
    if (r.status == 0) fail_msg("%s: a corrupted rank went unnoticed:\n%s", modes[m], r.out);
    if (!strstr(r.err, "after step 4 the parameters differ") || !strstr(r.err, "rank(s) 1 ("))
      fail_msg("%s: exit %d, stderr lacks the parameter check's error:\n%s", modes[m], r.status, r.err);
  }
}

/* --overlap-step: a parameter check (--check-every, an epoch's end) does not drain the step, so
 * every step after the first overlapped one all-reduces its gradients behind the next forward
 * (a step after a drained one has none to wait for: comm 0); a checkpoint's epoch end does. The
 * checks still run and pass: the ranks' parameters agree. */
static void test_check_keeps_overlap(void **st) {
  (void)st;
  for (int m = 0; m < 2; m++) { /* without and with --save */
    run_result r;
    char save[600] = "";
    if (m) snprintf(save, sizeof save, "--save %s/keep.ckpt", dir);
    run(&r, 120, NULL, -1, NULL,
        SMALL " --steps 10 --warmup-steps 2 -n 2 --transport tcp --no-single --check-every 2 "
              "--overlap-step on %s --out %s/keep%d", save, dir, m);
    ok(&r);
    char name[32];
    snprintf(name, sizeof name, "keep%d", m);
    res_rows rr = rows_of(name, res_schema_train_steps());
    const res_train_steps_row *q = rr.rows;
    int zero = 0;
    for (size_t i = 0; i < rr.n; i++)
      if (q[i].step >= 4 && !(q[i].comm_ms > 0)) zero++;
    res_rows_free(&rr);
    /* 96 images, 2 ranks x 8: an epoch is 6 steps; with --save its end (step 6) drains */
    if (m == 0 && zero) fail_msg("%d step rows after step 3 waited for no all-reduce: a check drained", zero);
    if (m == 1 && zero != 2) fail_msg("%d step rows after step 3 waited for no all-reduce, not step 7's two", zero);
  }
}

static void test_killed_rank(void **st) {
  (void)st;
  /* stage 3 spends most of a step in its parameters' all-gathers: the kill most likely lands in one */
  const char *modes[] = {" --overlap-step off", " --overlap-step on --warmup-steps 1",
                         " --overlap-step off --dp sharded3 --bucket-mb 0.002 --first-bucket-mb 0.001"};
  for (int m = 0; m < 3; m++) {
    run_result r;
    char csv[600];
    snprintf(csv, sizeof csv, "%s/killed%d/train_steps.csv", dir, m);
    run(&r, 60, NULL, 1, csv,
        SMALL " --steps 100000 -n 2 --transport tcp --no-single --timeout 5%s --out %s/killed%d",
        modes[m], dir, m);
    if (r.status == 0) fail_msg("%s: a killed rank went unnoticed", modes[m]);
    /* from the kill: the start-up before it is a sanitizer build's and a slow machine's */
    if (r.kill_secs < 0) fail_msg("%s: no rank was killed (no step row in %.1f s)", modes[m], r.secs);
    if (r.kill_secs > 5 + 10)
      fail_msg("%s: took %.1f s to notice a killed rank (timeout 5 s)", modes[m], r.kill_secs);
    if (!strstr(r.err, "rank 1")) fail_msg("%s: stderr does not name rank 1:\n%s", modes[m], r.err);
    char name[32];
    snprintf(name, sizeof name, "killed%d", m);
    res_rows rr = rows_of(name, res_schema_train_steps()); /* rows already written stay */
    assert_true(rr.n >= 1);
    res_rows_free(&rr);
  }
}

static void test_checkpoint_world(void **st) {
  (void)st;
  run_result r;
  run(&r, 120, NULL, -1, NULL,
      SMALL " --steps 3 --epochs 2 -n 2 --transport tcp --save %s/two.ckpt --out %s/two", dir, dir);
  ok(&r);
  run(&r, 60, NULL, -1, NULL, SMALL " --epochs 2 --resume %s/two.ckpt --out %s/one-of-two", dir, dir);
  if (r.status == 0 || !strstr(r.err, "world")) fail_msg("exit %d:\n%s", r.status, r.err);
  /* the same world resumes */
  run(&r, 120, NULL, -1, NULL,
      SMALL " --epochs 2 -n 2 --transport tcp --resume %s/two.ckpt --out %s/two-again", dir, dir);
  ok(&r);
  /* several pairs cannot continue one checkpoint */
  run(&r, 60, NULL, -1, NULL,
      SMALL " --epochs 2 -n 2 --transport tcp,none --resume %s/two.ckpt --out %s/bad", dir, dir);
  if (r.status != 2 || !strstr(r.err, "one --transport")) fail_msg("exit %d:\n%s", r.status, r.err);
}

/* train --model-from: a data-parallel row's prediction is the one its run directory's rows
 * give (the run's own bucket plan, the none row's ready times), as report recomputes it; with
 * --overlap-step the run's plan is not the profile's. */
static void test_model_from_own_plan(void **st) {
  (void)st;
  run_result r;
  const char *args = SMALL " --steps 8 --warmup-steps 2 -n 2 --transport none,tcp --algo ring "
                           "--no-single --bucket-mb 0.01 --first-bucket-mb 0.004 --overlap-step on";
  /* the fabric's name is this host's (the launcher sets FABENCH_FABRIC): a first run tells it */
  run(&r, 180, NULL, -1, NULL, "%s --out %s/mf0", args, dir);
  ok(&r);
  res_rows rows = rows_of("mf0", res_schema_train());
  res_fabric_cost fm = {.transport = "tcp", .host_count = 1, .source = "allreduce",
                         .m = {.alpha = 200e-6, .beta = 20e-9, .gamma = 1e-9}};
  for (size_t i = 0; i < rows.n; i++)
    if (!strcmp(((const res_train_row *)rows.rows)[i].role, "dp"))
      snprintf(fm.fabric, sizeof fm.fabric, "%s", ((const res_train_row *)rows.rows)[i].fabric);
  res_rows_free(&rows);
  res_costmodel m = {.f = &fm, .n = 1, .gamma_kernel = NAN};
  char mp[600], err[512];
  snprintf(mp, sizeof mp, "%s/m.json", dir);
  if (res_costmodel_write(&m, mp, err, sizeof err)) fail_msg("%s", err);
  run(&r, 180, NULL, -1, NULL, "%s --model-from %s --out %s/mf", args, mp, dir);
  ok(&r);
  rows = rows_of("mf", res_schema_train());
  res_rows bk = rows_of("mf", res_schema_train_buckets());
  const res_train_row *t = rows.rows, *none = NULL, *dp = NULL;
  for (size_t i = 0; i < rows.n; i++) {
    if (!strcmp(t[i].role, "none")) none = &t[i];
    if (!strcmp(t[i].role, "dp")) dp = &t[i];
  }
  assert_non_null(none);
  assert_non_null(dp);
  if (!(dp->step_ms_pred > 0)) fail_msg("no prediction in the row: %g", dp->step_ms_pred);
  res_costmodel got;
  if (res_costmodel_read(&got, mp, err, sizeof err)) fail_msg("%s", err);
  res_train_row again = *dp;
  again.step_ms_pred = NAN;
  assert_int_equal(res_predict_train_row(&again, none, &bk, &got), 0);
  /* the rows hold 6 digits */
  if (!(fabs(again.step_ms_pred - dp->step_ms_pred) < 1e-4 * dp->step_ms_pred))
    fail_msg("train predicted %.6g ms, its rows give %.6g ms", dp->step_ms_pred, again.step_ms_pred);
  res_costmodel_free(&got);
  res_rows_free(&bk);
  res_rows_free(&rows);
}

/* --trace: Chrome trace events per rank: a forward and the layers' backward on the training
 * thread, each bucket's all-reduce (sharded: reduce-scatter, and the parameters' all-gathers) on
 * the communication thread once, labelled with its own
 * step (with --overlap-step it is reduced during the next), real spans (no empty ones at the
 * origin), and the waits for the last bucket. An epoch ends inside the traced steps: with
 * --overlap-step it drains no more than another step (its parameter check waits for the next
 * forward instead). */
static void test_trace(void **st) {
  (void)st;
  const char *modes[] = {"--overlap-step off", "--overlap-step on", "--overlap-step off --dp sharded",
                         "--overlap-step off --dp sharded3"};
  for (int m = 0; m < 4; m++) {
    run_result r;
    run(&r, 180, NULL, -1, NULL,
        SMALL " --steps 10 --warmup-steps 2 --trace-steps 5 -n 2 --transport tcp --algo ring "
              "--no-single --bucket-mb 0.01 --first-bucket-mb 0.004 %s --trace %s/t%d.json "
              "--out %s/trace%d",
        modes[m], dir, m, dir, m);
    ok(&r);
    char p[600];
    snprintf(p, sizeof p, "%s/t%d.json", dir, m);
    size_t len = 0;
    char *txt = tu_slurp(p, &len);
    if (!txt) fail_msg("%s: no trace written", p);
    cJSON *doc = cJSON_Parse(txt);
    free(txt);
    const cJSON *evs = cJSON_GetObjectItem(doc, "traceEvents");
    if (!cJSON_IsArray(evs)) fail_msg("%s: no traceEvents array", p);
    enum { MAXS = 64, MAXB = 64 };
    int pids[4], npid = 0, fwd[4][MAXS] = {{0}}, bwd[4][MAXS] = {{0}}, ar[4][MAXS][MAXB] = {{{0}}};
    int waits[4] = {0}, nb = 0, ag[4][MAXS][2] = {{{0}}};
    static double fwd_end[4][MAXS], ar_ts[4][MAXS][MAXB];
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
      const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
      if (!ph || strcmp(ph, "X")) continue;
      const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
      int pid = cJSON_GetObjectItem(e, "pid")->valueint, tid = cJSON_GetObjectItem(e, "tid")->valueint;
      double ts = cJSON_GetObjectItem(e, "ts")->valuedouble, dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
      int step = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "step")->valueint;
      assert_non_null(name);
      int k = 0;
      while (k < npid && pids[k] != pid) k++;
      if (k == npid) {
        assert_true(npid < 4);
        pids[npid++] = pid;
      }
      assert_true(step > 0 && step < MAXS);
      if (!(ts >= 0 && dur >= 0)) fail_msg("%s: span %s at %g for %g", p, name, ts, dur);
      int b;
      if (!strncmp(name, "allgather b", 11)) { /* sharded: forward's gathers, stage 3's backward's */
        assert_int_equal(tid, 1);
        if (!(dur > 0)) fail_msg("%s: step %d's %s is an empty span at %g", p, step, name, ts);
        ag[k][step][strstr(name, "bwd") != NULL]++;
        continue;
      }
      if (sscanf(name, m >= 2 ? "reducescatter b%d" : "allreduce b%d", &b) == 1) {
        assert_int_equal(tid, 1);
        assert_true(b >= 0 && b < MAXB);
        if (!(dur > 0)) fail_msg("%s: step %d's bucket %d is an empty span at %g", p, step, b, ts);
        ar[k][step][b]++;
        ar_ts[k][step][b] = ts;
        if (b + 1 > nb) nb = b + 1;
        continue;
      }
      assert_int_equal(tid, 0);
      if (!strcmp(name, "fwd")) fwd[k][step]++, fwd_end[k][step] = ts + dur;
      else if (!strncmp(name, "bwd L", 5)) bwd[k][step]++;
      else if (!strcmp(name, "wait")) waits[k]++;
    }
    cJSON_Delete(doc);
    assert_int_equal(npid, 2);
    assert_true(nb >= 2);
    for (int k = 0; k < npid; k++) {
      int traced = 0, with_buckets = 0;
      for (int s = 1; s < MAXS; s++) {
        if (fwd[k][s] > 1) fail_msg("%s: rank %d step %d has %d forwards", p, k, s, fwd[k][s]);
        int any = 0;
        for (int b = 0; b < nb; b++) {
          if (ar[k][s][b] > 1) fail_msg("%s: rank %d step %d bucket %d traced %d times", p, k, s, b, ar[k][s][b]);
          any |= ar[k][s][b];
        }
        if (!fwd[k][s]) {
          if (any) fail_msg("%s: rank %d: buckets of step %d, which is not traced", p, k, s);
          continue;
        }
        traced++;
        if (!bwd[k][s]) fail_msg("%s: rank %d step %d: no backward layers", p, k, s);
        /* sharded: a gather for every forward (in stage 2 the last update's, as the forward
         * starts), stage 3 also for the backward; replicated: none */
        if ((m >= 2) != (ag[k][s][0] > 0) || (m == 3) != (ag[k][s][1] > 0))
          fail_msg("%s: rank %d step %d: %d forward and %d backward all-gathers", p, k, s, ag[k][s][0],
                   ag[k][s][1]);
        if (any) {
          with_buckets++;
          for (int b = 0; b < nb; b++) {
            if (!ar[k][s][b]) fail_msg("%s: rank %d step %d: bucket %d missing", p, k, s, b);
            /* a step's gradients come from its own backward, after its forward (1 us: the
             * trace's rounding) */
            if (ar_ts[k][s][b] < fwd_end[k][s] - 1)
              fail_msg("%s: rank %d: step %d's bucket %d reduced at %.0f us, before the step's "
                       "forward ended (%.0f us)", p, k, s, b, ar_ts[k][s][b], fwd_end[k][s]);
          }
        }
      }
      assert_int_equal(traced, 5);
      /* also the last traced step's, which --overlap-step reduces during an untraced one */
      if (with_buckets != traced)
        fail_msg("%s: rank %d: buckets in %d of %d traced steps", p, k, with_buckets, traced);
      if (m != 1) assert_int_equal(waits[k], traced);
      else if (waits[k]) fail_msg("%s: rank %d: %d drains in the traced steps", p, k, waits[k]);
    }
  }
}

/* --overlap-step auto (the default) turns the overlap on after the warm-up only where backward
 * cannot hide the all-reduce: on over an emulated 10 Mbit/s link (1 MB takes 0.9 s against a
 * backward of tens of ms), off on loopback. Whether backward hides the loopback all-reduce
 * depends on the machine's speed (a sanitizer build is slow), so loopback is judged by rank 0's
 * warm-up steps, as the rule itself reads them: where one all-reduced in at most half its
 * backward, the rule must stay off; where none did, the machine is too slow to say, and the test
 * says so. The emulated half needs root, ip and tc, and is skipped with a message without them. */
static void test_overlap_step_auto(void **st) {
  (void)st;
  const char *base = "--model resnet20 --data synthetic:1x28x28:10:64 --batch 32 --threads 1 "
                     "--eval-every 0 --steps 6 --warmup-steps 4 --no-single -n 2 --transport tcp "
                     "--bucket-mb 0.5 --first-bucket-mb 0.1";
  int emu = geteuid() == 0 && system("command -v ip >/dev/null && command -v tc >/dev/null") == 0;
  if (!emu) fprintf(stderr, "SKIP (the emulated half): needs root, ip and tc\n");
  for (int m = 0; m < 1 + emu; m++) {
    run_result r;
    const char *link = m ? "10mbit" : "loopback";
    run(&r, 240, NULL, -1, NULL, "%s%s --out %s/auto%d", base, m ? " --emulate 10mbit" : "", dir,
        m);
    ok(&r);
    char name[32], msg[256] = "";
    snprintf(name, sizeof name, "auto%d", m);
    res_rows rr = rows_of(name, res_schema_train()), ss = rows_of(name, res_schema_train_steps());
    /* the warm-up step of rank 0 that all-reduced in the least of its backward */
    double best = INFINITY;
    const res_train_steps_row *q = ss.rows;
    for (size_t k = 0; k < ss.n; k++)
      if (q[k].rank == 0 && q[k].warmup && q[k].step >= 2 && q[k].bwd_ms > 0 &&
          q[k].comm_ms / q[k].bwd_ms < best)
        best = q[k].comm_ms / q[k].bwd_ms;
    int want = m ? 1 : best <= 0.5 ? 0 : -1;
    if (want < 0)
      fprintf(stderr, "SKIP (the loopback half): no warm-up step all-reduced in half its backward "
                      "(best %.2f of it): too slow a machine today to say\n", best);
    const res_train_row *t = rr.rows;
    int ndp = 0;
    for (size_t k = 0; k < rr.n; k++) {
      if (strcmp(t[k].role, "dp")) continue;
      ndp++;
      if (want >= 0 && (int)t[k].overlap_step != want)
        snprintf(msg, sizeof msg, "%s: overlap_step %d (comm %.1f ms, bwd %.1f ms; best warm-up "
                 "step's all-reduce %.2f of its backward), expected %d", link,
                 (int)t[k].overlap_step, t[k].comm_ms, t[k].bwd_ms, best, want);
    }
    res_rows_free(&rr);
    res_rows_free(&ss);
    if (msg[0]) fail_msg("%s", msg);
    assert_int_equal(ndp, 1);
  }
}

/* The mpi transport under an MPI bootstrap (mpirun) shares one library, initialised for one
 * thread at a time, with the step's records and checks: --overlap-step on, which exchanges them
 * while the communication thread reduces, stays off there and says so; tcp in the same run
 * overlaps. */
static void test_overlap_step_mpi_off(void **st) {
  (void)st;
  if (!coll_transport_built(COLL_MPI)) skip();
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1); /* Open MPI's plugins: see test_allreduce_cli */
  run_result r;
  run(&r, 240, NULL, -1, NULL, "--model resnet20 --data synthetic:1x28x28:10:64 --batch 16 --threads 1 "
      "--eval-every 0 --steps 6 --warmup-steps 2 --no-single -n 2 --transport tcp,mpi --algo ring "
      "--overlap-step on --check-every 2 --out %s/ompi", dir);
  ok(&r);
  if (!strstr(r.out, "# mpi/ring: --overlap-step off")) fail_msg("no note for mpi:\n%s", r.out);
  if (strstr(r.out, "# tcp/ring: --overlap-step off")) fail_msg("tcp turned off too:\n%s", r.out);
  res_rows rr = rows_of("ompi", res_schema_train());
  const res_train_row *t = rr.rows;
  int seen = 0;
  for (size_t k = 0; k < rr.n; k++)
    if (!strcmp(t[k].role, "dp")) {
      int want = !strcmp(t[k].transport, "tcp");
      if ((int)t[k].overlap_step != want)
        fail_msg("%s: overlap_step %d, expected %d", t[k].transport, (int)t[k].overlap_step, want);
      seen++;
    }
  res_rows_free(&rr);
  assert_int_equal(seen, 2);
}

/* Each round's throughput from train_steps: global images over the longest of the ranks' summed
 * measured steps, as the loop counts it. */
static double round_ips(const res_rows *ss, const char *transport, int64_t round, int ranks) {
  double wall[2] = {0, 0};
  int64_t images = 0;
  const res_train_steps_row *q = ss->rows;
  for (size_t k = 0; k < ss->n; k++)
    if (!strcmp(q[k].transport, transport) && q[k].round == round && !q[k].warmup) {
      wall[q[k].rank] += q[k].step_ms;
      images += q[k].images;
    }
  double w = wall[0] > wall[1] ? wall[0] : wall[1];
  assert_true(ranks == 1 || wall[1] > 0);
  return 1e3 * (double)images / w;
}

/* --rounds: the pairs take turns; each row is its fastest round's, images_per_s_slowest its
 * slowest, and the efficiencies divide by the baselines' fastest rounds. A round that fails
 * keeps the rows of the rounds done. */
static void test_rounds(void **st) {
  (void)st;
  run_result r;
  run(&r, 240, NULL, -1, NULL,
      SMALL " --steps 6 --warmup-steps 2 -n 2 --transport none,tcp --rounds 3 --out %s/rounds", dir);
  ok(&r);
  if (!strstr(r.out, "round 2 of 3")) fail_msg("no round line:\n%s", r.out);
  res_rows rr = rows_of("rounds", res_schema_train()), ss = rows_of("rounds", res_schema_train_steps());
  const res_train_row *t = rr.rows;
  assert_int_equal((int)rr.n, 3);
  assert_int_equal((int)ss.n, 3 * 6 * (1 + 2 + 2)); /* 3 rounds of single, none, tcp */
  const char *tr[3] = {"-", "none", "tcp"};
  for (int i = 0; i < 3; i++) {
    assert_string_equal(t[i].transport, tr[i]);
    assert_int_equal((int)t[i].rounds, 3);
    double fast = 0, slow = INFINITY;
    for (int k = 1; k <= 3; k++) {
      double v = round_ips(&ss, tr[i], k, i ? 2 : 1);
      fast = v > fast ? v : fast;
      slow = v < slow ? v : slow;
    }
    if (fabs(t[i].images_per_s / fast - 1) > 2e-5 || fabs(t[i].images_per_s_slowest / slow - 1) > 2e-5)
      fail_msg("%s: row %.6g (slowest %.6g), rounds %.6g..%.6g images/s", tr[i], t[i].images_per_s,
               t[i].images_per_s_slowest, slow, fast);
  }
  /* the CSV keeps 6 significant digits: three roundings put a ratio within 2e-5 of it, relatively */
  double fe = t[2].images_per_s / t[1].images_per_s, se = t[2].images_per_s / (2 * t[0].images_per_s);
  assert_float_equal(t[2].fabric_eff, fe, 2e-5 * fe);
  assert_float_equal(t[2].scaling_eff, se, 2e-5 * se);
  res_rows_free(&rr);
  res_rows_free(&ss);

  /* tcp fails in round 2 (rank 1's weights corrupted): none has its row of 2 rounds, tcp the
   * row of its first */
  run(&r, 240, "FABENCH_TEST_CORRUPT=1:3:2", -1, NULL,
      SMALL " --steps 6 --warmup-steps 2 -n 2 --transport none,tcp --no-single --check-every 2"
            " --rounds 2 --out %s/roundfail", dir);
  if (r.status != 1 || !strstr(r.err, "the parameters differ") || !strstr(r.out, "tcp/ring: the row of its 1 round(s) of 2 done"))
    fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
  rr = rows_of("roundfail", res_schema_train());
  t = rr.rows;
  assert_int_equal((int)rr.n, 2);
  assert_string_equal(t[0].transport, "none");
  assert_int_equal((int)t[0].rounds, 2);
  assert_string_equal(t[1].transport, "tcp");
  assert_int_equal((int)t[1].rounds, 1);
  assert_true(t[1].images_per_s > 0 && t[1].images_per_s == t[1].images_per_s_slowest);
  res_rows_free(&rr);
}

static void test_bad_flags(void **st) {
  (void)st;
  run_result r;
  const char *cases[][2] = {{"--grad-dtype f64", "--grad-dtype"},
                            {"--transport carrier-pigeon", "unknown transport"},
                            {"--algo zigzag", "unknown algorithm"},
                            {"--bucket-mb 0", "--bucket-mb"},
                            {"--emulate 1gbit", "--emulate needs -n"},
                            {"--overlap-step maybe", "--overlap-step"},
                            {"--emulate fast -n 2", "--emulate"},
                            {"-n 0", "-n"},
                            {"--rounds 0", "--rounds"},
                            {"--rounds 2 --save ck", "--rounds 2 with --save or --resume"},
                            {"--dp zero3", "bad --dp 'zero3'"},
                            {"--dp sharded --grad-dtype bf16", "--dp sharded: gradients travel as f32"},
                            {"--dp sharded --overlap-step on", "--dp sharded takes no --overlap-step on"},
                            {"--dp sharded3 --grad-dtype f16", "--dp sharded3: gradients travel as f32"},
                            {"--dp sharded3 --overlap-step on", "--dp sharded3 takes no --overlap-step on"},
                            {"--dp sharded3 --device cuda", "--dp sharded3 trains on the CPU only"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run(&r, 30, NULL, -1, NULL, SMALL " %s --out %s/bad", cases[i][0], dir);
    if (r.status != 2 || !strstr(r.err, cases[i][1]))
      fail_msg("%s: exit %d, stderr:\n%s", cases[i][0], r.status, r.err);
  }
}

static int setup(void **st) {
  (void)st;
  return tu_tmpdir(dir, sizeof dir, "test-dp") ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  return tu_rmtree(dir);
}

int main(void) {
  if (!getenv("FABENCH_BIN")) {
    fprintf(stderr, "FABENCH_BIN is not set (ctest sets it); skipping\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_flags),
      cmocka_unit_test(test_same_data_bit_identical),
      cmocka_unit_test(test_sharded),
      cmocka_unit_test(test_hier_cluster_identical),
      cmocka_unit_test(test_threads_default),
      cmocka_unit_test(test_rows_and_shards),
      cmocka_unit_test(test_rounds),
      cmocka_unit_test(test_corrupted_rank_caught),
      cmocka_unit_test(test_check_keeps_overlap),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_checkpoint_world),
      cmocka_unit_test(test_trace),
      cmocka_unit_test(test_overlap_step_auto),
      cmocka_unit_test(test_overlap_step_mpi_off),
      cmocka_unit_test(test_model_from_own_plan),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
