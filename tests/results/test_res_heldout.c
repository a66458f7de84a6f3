/* Held-out pricing: a stated or unfitted emulated rate priced from the nearest fitted rate of
 * its transport (the loopback stack's cost per byte a floor) against hand-worked timelines; the
 * replay/held-out label; learned residuals used only at the fabric, host count, rank count and
 * algorithm where they were learned; the ablation switches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "res.h"

static void near(double got, double want, double rel, const char *what) {
  if (!(fabs(got - want) <= rel * fabs(want))) fail_msg("%s: got %.9g, want %.9g", what, got, want);
}

/* The profile of test_res_model's timeline: forward 10 ms, backward 30, optimizer 2, and three
 * buckets of 5, 15 and 5 MB ready at 10, 20 and 30 ms of backward. */
static res_train_row one;
static res_train_buckets_row bk[3];
static res_rows br = {0};

static void profile(void) {
  res_row_init(res_schema_train(), &one);
  one.run_id = "r1", one.ranks = 1, one.batch = 32;
  one.fwd_ms = 10, one.bwd_ms = 30, one.opt_ms = 2, one.data_ms = 0;
  const double bytes[3] = {5e6, 15e6, 5e6}, ready[3] = {10, 20, 30}, offs[3] = {0, 5e6, 20e6};
  for (int i = 0; i < 3; i++) {
    res_row_init(res_schema_train_buckets(), &bk[i]);
    bk[i].run_id = "r1", bk[i].ranks = 1, bk[i].bucket = i;
    bk[i].offset_bytes = (int64_t)offs[i], bk[i].bytes = (int64_t)bytes[i], bk[i].ready_ms = ready[i];
  }
  br = (res_rows){res_schema_train_buckets(), bk, 3};
}

/* A data-parallel row of `ranks` ranks on one host of fabric, ring unless algo. */
static res_train_row dp(const char *fabric, const char *algo, int ranks, int hosts) {
  res_train_row r;
  res_row_init(res_schema_train(), &r);
  r.fabric = fabric, r.transport = "tcp", r.algo = algo, r.host_count = hosts, r.ranks = ranks;
  r.ranks_per_host = ranks / hosts, r.batch = 32, r.overlap = 1, r.step_ms_mean = 100;
  return r;
}

static void fabric(res_fabric_cost *f, const char *name, double beta) {
  memset(f, 0, sizeof *f);
  snprintf(f->fabric, sizeof f->fabric, "%s", name);
  snprintf(f->transport, sizeof f->transport, "tcp");
  f->host_count = 1;
  f->m.beta = beta, f->m.hosts = 1;
}

/* Fitted: emulated 1 and 10 Gbit/s (8 and 0.8 ns/B) and loopback (0.2 ns/B, the stack's floor).
 * A 2-rank ring moves n bytes per rank, so a bucket of n takes n beta. Timelines by hand: */
static void test_stated_rate(void **state) {
  (void)state;
  profile();
  res_fabric_cost fs[3];
  fabric(&fs[0], "emu-1gbit", 8e-9), fabric(&fs[1], "emu-10gbit", 0.8e-9), fabric(&fs[2], "tcp:lo", 0.2e-9);
  res_costmodel m = {.f = fs, .n = 3, .gamma_kernel = NAN};
  /* 2 Gbit/s: nearest 1gbit (a factor 2 against 5), beta 4 ns/B: the buckets take 20, 60, 20
   * ms: 10-30, 30-90, 90-110; backward ends at 30, so 80 exposed, step 42 + 80 */
  res_train_row r = dp("emu-2gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 122, 1e-9, "2gbit step");
  near(r.exposed_comm_ms_pred, 80, 1e-9, "2gbit exposed");
  assert_string_equal(r.pred_kind, "held-out");
  /* 5 Gbit/s: nearest 10gbit (2 against 5), beta 1.6: 8, 24, 8 ms: 10-18, 20-44, 44-52: step 64 */
  r = dp("emu-5gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 64, 1e-9, "5gbit step");
  /* 100 Gbit/s: 10gbit x 10 is 0.08 ns/B, under loopback's 0.2: 1, 3, 1 ms: 10-11, 20-23,
   * 30-31: 1 exposed, step 43 */
  r = dp("emu-100gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 43, 1e-9, "100gbit step, floored by loopback");
  /* the suite's 10x what-if is the same scaling: 1gbit x 10 = 0.8 ns/B: 4, 12, 4 ms: 10-14,
   * 20-32, 32-36: 6 exposed, step 48 */
  r = dp("emu-1gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row_link(&r, &one, &br, &m, 10), 0);
  near(r.step_ms_pred, 48, 1e-9, "10x what-if");
  assert_string_equal(r.pred_kind, "held-out");
  /* train --link: a loopback row priced on a stated 2 Gbit/s link, no error against a run on
   * another link; 2500mbit: 1gbit x 2.5, 3.2 ns/B: 16, 48, 16 ms: 10-26, 26-74, 74-90: step 102 */
  r = dp("tcp:lo", "ring", 2, 1);
  assert_int_equal(res_predict_train_row_rate(&r, &one, &br, &m, 2e9), 0);
  near(r.step_ms_pred, 122, 1e-9, "--link 2gbit");
  assert_true(isnan(r.pred_err));
  assert_string_equal(r.pred_kind, "held-out");
  r = dp("emu-2gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row_rate(&r, &one, &br, &m, 2e9), 0);
  near(r.pred_err, (100 - 122) / 122.0, 1e-9, "--link at the row's own rate: its error");
  r = dp("tcp:lo", "ring", 2, 1);
  assert_int_equal(res_predict_train_row_rate(&r, &one, &br, &m, 2.5e9), 0);
  near(r.step_ms_pred, 102, 1e-9, "--link 2500mbit");
  /* the fabric at a rate, directly: named, scaled, nothing of the source's own link kept */
  res_fabric_cost at;
  const res_fabric_cost *src = NULL;
  assert_int_equal(res_fabric_at_rate(&at, &m, "tcp", 1, NULL, 2e9, NULL, &src), 0);
  assert_ptr_equal(src, &fs[0]);
  assert_string_equal(at.fabric, "emu-2gbit");
  near(at.m.beta, 4e-9, 1e-12, "2gbit beta");
  /* which fitted rate: the same host count before a nearer rate; at equal distance the faster */
  res_fabric_cost pick[3];
  fabric(&pick[0], "emu-1gbit", 8e-9), fabric(&pick[1], "emu-4gbit", 2e-9), fabric(&pick[2], "emu-8gbit", 1e-9);
  pick[2].host_count = 3;
  res_costmodel pm = {.f = pick, .n = 3, .gamma_kernel = NAN};
  assert_int_equal(res_fabric_at_rate(&at, &pm, "tcp", 1, NULL, 2e9, NULL, &src), 0);
  assert_ptr_equal(src, &pick[1]);
  near(at.m.beta, 4e-9, 1e-12, "2gbit from 4gbit");
  assert_int_equal(res_fabric_at_rate(&at, &pm, "tcp", 3, NULL, 2e9, NULL, &src), 0);
  assert_ptr_equal(src, &pick[2]);
  assert_int_equal(at.host_count, 3);
  /* no emulated fabric of the transport, an unparsable or unfitted non-emulated fabric: none */
  assert_int_equal(res_fabric_at_rate(&at, &m, "ucx", 1, NULL, 2e9, NULL, &src), -1);
  r = dp("tcp:eth0", "ring", 2, 1);
  r.step_ms_pred = NAN;
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), -1);
  assert_true(isnan(r.step_ms_pred));
  r = dp("emu-fast", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), -1);
  r = dp("emu-2gbit", "ring", 2, 1);
  r.transport = "ucx";
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), -1);
}

/* The suite's side by side: a rate it measured, priced by the model without that rate's fabric.
 * emu-10gbit's fit (5 ns/B) is far from 1gbit scaled (0.8), so its leaking in would show. */
static void test_suite_checks(void **state) {
  (void)state;
  profile();
  res_fabric_cost fs[3];
  fabric(&fs[0], "emu-1gbit", 8e-9), fabric(&fs[1], "emu-10gbit", 5e-9), fabric(&fs[2], "tcp:lo", 0.2e-9);
  res_costmodel m = {.f = fs, .n = 3, .gamma_kernel = NAN};
  res_costmodel v;
  assert_int_equal(res_costmodel_without(&v, &m, "emu-10gbit"), 0);
  assert_int_equal(v.n, 2);
  assert_int_equal(m.n, 3);
  for (size_t i = 0; i < v.n; i++) assert_string_not_equal(v.f[i].fabric, "emu-10gbit");
  free(v.f);
  /* 10 Gbit/s from 1gbit x 10, 0.8 ns/B: step 48 (test_stated_rate's what-if), whatever the
   * 10gbit fit says; with it the same row would take 25, 75, 25 ms: 10-35, 35-110, 110-135,
   * step 147 */
  char src[64] = "";
  res_train_row r = dp("emu-1gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row_heldout(&r, &one, &br, &m, 10e9, src, sizeof src), 0);
  near(r.step_ms_pred, 48, 1e-9, "10gbit without its fit");
  assert_string_equal(src, "emu-1gbit");
  assert_string_equal(r.pred_kind, "held-out");
  res_train_row full = dp("emu-10gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&full, &one, &br, &m), 0);
  near(full.step_ms_pred, 147, 1e-9, "10gbit with its fit");
  fs[1].m.beta = 1e-12;
  r = dp("tcp:lo", "ring", 2, 1);
  assert_int_equal(res_predict_train_row_heldout(&r, &one, &br, &m, 10e9, NULL, 0), 0);
  near(r.step_ms_pred, 48, 1e-9, "10gbit without its fit, whatever it was");
  /* the suite's check: 3 Gbit/s on 2 hosts of a rank each, from 1gbit / 3 (8/3 ns/B): 40/3, 40,
   * 40/3 ms: 10-23.3, 23.3-63.3, 63.3-76.7: 46.7 exposed, step 88.7 */
  r = dp("tcp:lo", "ring", 2, 2);
  assert_int_equal(res_predict_train_row_heldout(&r, &one, &br, &m, 3e9, src, sizeof src), 0);
  near(r.step_ms_pred, 42 + 140 / 3.0, 1e-9, "3gbit on 2 hosts");
  assert_string_equal(src, "emu-1gbit");
  /* nothing emulated of the transport, or no rate: nothing */
  r = dp("tcp:lo", "ring", 2, 1);
  r.transport = "ucx";
  assert_int_equal(res_predict_train_row_heldout(&r, &one, &br, &m, 3e9, NULL, 0), -1);
  assert_int_equal(res_predict_train_row_heldout(&r, &one, &br, &m, 0, NULL, 0), -1);
}

/* The suite's held-out rate: between its slowest and fastest, rounded, never one it measured. */
static void test_middle_rate(void **state) {
  (void)state;
  const double a[] = {1e9, 10e9}, b[] = {1e9}, c[] = {1e9, 2e9}, d[] = {3e9, 1e9, 10e9}, e[] = {1e9, 1.1e9},
               f[] = {100e6, 1e9}, g[] = {1e9, 1e9};
  near(res_middle_rate(a, 2), 3e9, 1e-12, "1 and 10 gbit");
  near(res_middle_rate(b, 1), 2e9, 1e-12, "one rate: twice it");
  near(res_middle_rate(c, 2), 1.4e9, 1e-12, "1 and 2 gbit: two digits");
  near(res_middle_rate(d, 3), 3.2e9, 1e-12, "3gbit measured: two digits");
  near(res_middle_rate(f, 2), 300e6, 1e-12, "100 mbit and 1 gbit");
  near(res_middle_rate(g, 2), 2e9, 1e-12, "one rate twice");
  assert_true(res_middle_rate(e, 2) == 0);
  assert_true(res_middle_rate(a, 0) == 0);
}

/* emu-1gbit (1 ns/B) learned that ring on 2 ranks on one host takes twice its formula (ln 2 at
 * 1 to 64 MiB, the buckets' sizes between). That doubles the replay and nothing else. */
static void test_residuals_stay(void **state) {
  (void)state;
  profile();
  res_fabric_cost fs[2];
  fabric(&fs[0], "emu-1gbit", 1e-9), fabric(&fs[1], "emu-10gbit", 0.1e-9);
  coll_model_curve *k = &fs[0].m.curve[0];
  k->algo = (coll_algo){COLL_ALGO_RING, 0}, k->ranks = 2, k->n = 2;
  k->lg[0] = 20, k->lg[1] = 26, k->ln[0] = k->ln[1] = (float)log(2.0);
  fs[0].m.ncurves = 1, fs[0].learned = 1;
  res_resid rs = {.algo = "ring", .ranks = 2, .bytes = 1 << 20, .t_us = 2, .pred_us = 1};
  fs[0].resid = &rs, fs[0].nresid = 1;
  res_costmodel m = {.f = fs, .n = 2, .gamma_kernel = NAN};
  res_fabric_cost plain[2] = {fs[0], fs[1]};
  plain[0].m.ncurves = 0;
  res_costmodel formulas = {.f = plain, .n = 2, .gamma_kernel = NAN};

  /* the replay: buckets 10, 30, 10 ms: 10-20, 20-50, 50-60: 30 exposed, step 72 */
  res_train_row r = dp("emu-1gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 72, 1e-6, "replay: the learned factor");
  assert_string_equal(r.pred_kind, "replay");
  /* another rank count: 4 ranks move 1.5 n: 7.5, 22.5, 7.5 ms: 10-17.5, 20-42.5, 42.5-50: step 62
   * (the factor leaked would give 82) */
  r = dp("emu-1gbit", "ring", 4, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 62, 1e-6, "4 ranks: the formulas alone");
  assert_string_equal(r.pred_kind, "held-out");
  /* other algorithms, another host count, another rate: as the model without the curve */
  struct {
    const char *fabric, *algo;
    int ranks, hosts;
  } other[] = {{"emu-1gbit", "tree", 2, 1}, {"emu-1gbit", "rhd", 2, 1}, {"emu-1gbit", "ring", 2, 2},
               {"emu-2gbit", "ring", 2, 1}, {"emu-1gbit", "dtree", 2, 1}};
  for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
    res_train_row a = dp(other[i].fabric, other[i].algo, other[i].ranks, other[i].hosts);
    res_train_row b = a;
    assert_int_equal(res_predict_train_row(&a, &one, &br, &m), 0);
    assert_int_equal(res_predict_train_row(&b, &one, &br, &formulas), 0);
    char what[96];
    snprintf(what, sizeof what, "%s %s %d ranks on %d hosts", other[i].fabric, other[i].algo, other[i].ranks,
             other[i].hosts);
    near(a.step_ms_pred, b.step_ms_pred, 1e-12, what);
    assert_string_equal(a.pred_kind, "held-out");
  }
  /* the 2gbit row by hand: 1gbit scaled x2, 0.5 ns/B: 2.5, 7.5, 2.5 ms: 10-12.5, 20-27.5,
   * 30-32.5: 2.5 exposed, step 44.5 (with the factor: 52) */
  r = dp("emu-2gbit", "ring", 2, 1);
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 44.5, 1e-9, "2gbit: not the 1gbit's curve");
  /* the all-reduce across nodes: the curve applies to 2 ranks on one host only */
  res_ar_spec s1 = {.intra = &fs[0].m, .algo = {COLL_ALGO_RING, 0}, .ranks = 2, .ranks_per_node = 1};
  near(res_allreduce_time(&s1, 8e6), 8e-3, 1e-6, "2 nodes of 1 rank: the formula");
  s1.ranks_per_node = 2;
  near(res_allreduce_time(&s1, 8e6), 16e-3, 1e-6, "one node of 2: learned");
}

static void test_ablation(void **state) {
  (void)state;
  unsigned mask = 99;
  char err[256] = "";
  assert_int_equal(res_terms_parse("", &mask, err, sizeof err), 0);
  assert_int_equal(mask, 0);
  assert_int_equal(res_terms_parse("curves,cpu,share", &mask, err, sizeof err), 0);
  assert_int_equal(mask, RES_TERM_CURVES | RES_TERM_CPU | RES_TERM_SHARE);
  assert_int_equal(res_terms_parse("curves,bogus", &mask, err, sizeof err), -1);
  assert_non_null(strstr(err, "'bogus'"));
  assert_int_equal(res_terms_parse("cpu,", &mask, err, sizeof err), -1);
  /* terms the model no longer has are refused as any other name */
  static const char *const gone[] = {"delta", "wake", "mem"};
  for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
    assert_int_equal(res_terms_parse(gone[i], &mask, err, sizeof err), -1);
    assert_non_null(strstr(err, "is not a term of the model"));
  }
  for (unsigned b = 1; b <= RES_TERMS_ALL; b <<= 1) {
    unsigned back;
    assert_non_null(res_term_name(b));
    assert_int_equal(res_terms_parse(res_term_name(b), &back, err, sizeof err), 0);
    assert_int_equal(back, b);
  }
  assert_null(res_term_name(RES_TERMS_ALL + 1));
  /* each term off alone: its parameters 0, the others kept */
  res_fabric_cost f;
  fabric(&f, "emu-1gbit", 1e-9);
  f.m = (coll_model){.alpha = 1e-6, .beta = 1e-9, .gamma = 2e-10, .beta_cpu = 4e-10, .burst = 65536, .red_hidden = 1,
                     .ncurves = 1};
  f.cpu_byte = 1e-9, f.nbusy = 1;
  res_costmodel m = {.f = &f, .n = 1};
  res_fabric_cost keep = f;
  res_costmodel_ablate(&m, RES_TERM_CPU);
  assert_true(f.m.beta_cpu == 0);
  assert_true(f.m.ncurves == 1 && f.cpu_byte > 0 &&
              f.m.burst > 0 && f.m.alpha == keep.m.alpha && f.m.beta == keep.m.beta);
  res_costmodel_ablate(&m, RES_TERM_CURVES | RES_TERM_BURST | RES_TERM_SHARE);
  assert_true(f.m.ncurves == 0 && f.m.beta_cpu == 0 &&
              f.m.burst == 0 && f.m.red_hidden == 0 && f.cpu_byte == 0 && f.nbusy == 0);
  assert_true(f.m.alpha == keep.m.alpha && f.m.beta == keep.m.beta && f.m.gamma == keep.m.gamma);
}

/* The leave-out split, the error and the no-overlap baseline, by hand. */
/* A node's cores. Emulated nodes share the machine's: a 2-core machine fitted as 2 emulated nodes
 * has 1 core a node, and 3 emulated nodes get 2/3 each; a real cluster's hosts keep theirs.
 * Ring on 3 nodes of one rank, n bytes: S = 4n sent, 4n/3 by each node, 4n/3 on each link.
 * Link 10 Gbit/s (0.8 ns/B), measured host CPU 0.2 ns per byte sent, gamma 0, one thread a rank. */
static void test_node_cores(void **state) {
  (void)state;
  profile();
  near(res_node_cores(2, 1, 3), 2.0 / 3, 1e-12, "3 emulated nodes on 2 cores");
  near(res_node_cores(2, 0, 3), 2, 1e-12, "3 real hosts of 2 cores");
  assert_true(res_node_cores(0, 1, 3) == 0);
  res_fabric_cost f[2];
  fabric(&f[0], "emu-10gbit", 0.8e-9), fabric(&f[1], "tcp:eth0", 0.8e-9);
  for (int i = 0; i < 2; i++) {
    f[i].host_count = f[i].m.hosts = 2; /* fitted on 2 nodes */
    f[i].cpu_byte = 0.2e-9;
  }
  f[0].m.cores = 1; /* the 2-core machine's share of each of its 2 emulated nodes */
  f[1].m.cores = 2; /* each real host's */
  near(res_machine_cores(&f[0]), 2, 1e-12, "the emulated fit's machine");
  res_fabric_cost at = f[0];
  res_fabric_on_hosts(&at, 3);
  near(at.m.cores, 2.0 / 3, 1e-12, "emulated, on 3 nodes");
  at = f[1];
  res_fabric_on_hosts(&at, 3);
  near(at.m.cores, 2, 1e-12, "real, on 3 hosts");
  res_costmodel m = {.f = f, .n = 2, .gamma_kernel = NAN};
  /* Emulated, 3x1, 1 thread: the 3 ranks crowd 2 cores (1 >= 2/3), so the reduction takes
   * CPU from backward: a node's CPU 4n/3 x 0.2 over (2/3 core x the call's 4n/3 x 0.8): share
   * 0.375, backward at 0.625 beside it. Buckets 5.33, 16, 5.33 ms: 10-15.33 (backward to 13.33),
   * backward alone to 20 (at 22), 22-38 (backward ends at 38), 38-43.33: step 42 + 13.33. */
  res_train_row r = dp("emu-10gbit", "ring", 3, 3);
  r.threads = 1;
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 42 + 40.0 / 3, 1e-6, "emulated 3x1 step");
  assert_string_equal(r.pred_kind, "held-out");
  /* Real hosts of 2 cores, 2 threads a rank: share 4n/3 x 0.2 / (2 x 4n/3 x 0.8) = 0.125,
   * backward at 0.875: 10-15.33 (backward to 14.67), alone to 20 (at 20.67), then 16 ms: backward
   * ends at 32.10 with 4.57 left, 36.67, 36.67-42: step 42 + 12 */
  r = dp("tcp:eth0", "ring", 3, 3);
  r.threads = 2;
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 54, 1e-6, "real 3x1 step");
  /* 1 thread a rank on real 2-core hosts: a core is free for the reduction: no share; buckets
   * 10-15.33, 20-36, 36-41.33: step 42 + 11.33 */
  r.threads = 1;
  assert_int_equal(res_predict_train_row(&r, &one, &br, &m), 0);
  near(r.step_ms_pred, 42 + 34.0 / 3, 1e-6, "real 3x1 step, a core free");
  /* The all-reduce's CPU bound (beta_cpu 1.2 ns per byte sent, with at most the node's cores):
   * 3 emulated nodes send the machine's 4n with its 2 cores, 2n x 1.2 = 2.4 ns/B, over the link's
   * 4n/3 x 0.8; real hosts send 4n/3 each with their own core: 1.6 ns/B */
  f[0].m.beta_cpu = f[1].m.beta_cpu = 1.2e-9;
  res_allreduce_row a;
  res_row_init(res_schema_allreduce(), &a);
  a.fabric = "emu-10gbit", a.transport = "tcp", a.algo = "ring", a.ranks = 3, a.host_count = 3;
  a.ranks_per_host = 1, a.bytes = 8 << 20;
  near(res_allreduce_row_time(&m, &a, NULL, NULL), 2.4e-9 * (8 << 20), 1e-9, "emulated all-reduce, CPU-bound");
  a.fabric = "tcp:eth0";
  near(res_allreduce_row_time(&m, &a, NULL, NULL), 1.6e-9 * (8 << 20), 1e-9, "real all-reduce, CPU-bound");
}

/* The scaling table predicts a cluster: nodes of 2 ranks, inside each loopback as fitted here,
 * between them each fitted link (emulated 1 and 10 Gbit/s, fitted on 2 nodes of a 2-core machine:
 * 1 core each) and 100 and 400 Gbit/s stated (the 10gbit fit scaled: 0.08 and 0.02 ns/B, over
 * loopback's 0.01), flat and hier; never loopback between nodes. Without a fitted link, the stated
 * rates over loopback's stack alone. */
static void check_plan(res_scale_plan *p, const char *const *inters, const double *betas, size_t n) {
  assert_int_equal(p->n, 2 * n);
  for (size_t k = 0; k < p->n; k++) {
    res_scale_curve *c = &p->c[k];
    assert_string_equal(c->inter_name, inters[k / 2]);
    near(c->inter.m.beta, betas[k / 2], 1e-9, c->label);
    assert_int_equal(c->hier, (int)(k % 2));
    assert_string_equal(c->intra->fabric, "tcp:lo");
    assert_non_null(strstr(c->label, "held-out"));
    near(c->inter.m.cores, 2, 1e-12, "a cluster node has the machine's cores");
    for (int ranks = 2; ranks <= 1024; ranks *= 2) {
      res_ar_spec s;
      const res_fabric_cost *bound = res_scaling_spec(c, 2, ranks, &s);
      assert_int_equal(s.ranks, ranks);
      assert_int_equal(s.ranks_per_node, 2);
      if (ranks == 2) { /* one node: the fabric measured here alone */
        assert_null(s.inter);
        assert_ptr_equal(bound, c->intra);
        continue;
      }
      /* past one node: a link between nodes, never the host's own fabric */
      assert_non_null(s.inter);
      assert_true(s.inter != &c->intra->m);
      assert_string_not_equal(bound->fabric, "tcp:lo");
      assert_int_equal(s.inter->hosts, ranks / 2);
      assert_int_equal(s.hier, c->hier);
      assert_true(res_allreduce_time(&s, 1 << 20) > 0);
    }
  }
}

static void test_scaling_plan(void **state) {
  (void)state;
  res_fabric_cost fs[3];
  fabric(&fs[0], "tcp:lo", 0.01e-9), fabric(&fs[1], "emu-1gbit", 8e-9), fabric(&fs[2], "emu-10gbit", 0.8e-9);
  fs[0].m.cores = 2;
  for (int i = 1; i < 3; i++) fs[i].host_count = fs[i].m.hosts = 2, fs[i].m.cores = 1;
  res_costmodel m = {.f = fs, .n = 3, .gamma_kernel = NAN};
  const double stated[2] = {100e9, 400e9};
  res_scale_plan p;
  assert_int_equal(res_scaling_plan(&p, &m, 2, stated, 2), 0);
  const char *names[4] = {"emu-1gbit", "emu-10gbit", "100gbit", "400gbit"};
  const double betas[4] = {8e-9, 0.8e-9, 0.08e-9, 0.02e-9};
  check_plan(&p, names, betas, 4);
  assert_false(p.c[0].stated);
  assert_true(p.c[4].stated);
  assert_non_null(strstr(p.c[4].label, "from emu-10gbit"));
  res_scaling_plan_free(&p);
  /* loopback alone: only the stated links between nodes, over this stack (8 bits / rate) */
  m.n = 1;
  assert_int_equal(res_scaling_plan(&p, &m, 2, stated, 2), 0);
  const double own[2] = {8.0 / 100e9, 8.0 / 400e9};
  check_plan(&p, names + 2, own, 2);
  res_scaling_plan_free(&p);
  /* and none stated: no curve at all, rather than loopback stretched */
  assert_int_equal(res_scaling_plan(&p, &m, 2, stated, 0), 0);
  assert_int_equal(p.n, 0);
  res_scaling_plan_free(&p);
}

static void test_validate_arithmetic(void **state) {
  (void)state;
  const double tb[2] = {1e9, 10e9};
  res_vcell c = {1e9, 2, 1};
  assert_string_equal(res_validate_held(&c, tb, 2, 2), "");
  c.bps = 2e9;
  assert_string_equal(res_validate_held(&c, tb, 2, 2), "rate");
  c.bps = 10e9, c.nodes = 3;
  assert_string_equal(res_validate_held(&c, tb, 2, 2), "nodes");
  c.bps = 5e9;
  assert_string_equal(res_validate_held(&c, tb, 2, 2), "both");
  c.nodes = 1;
  assert_string_equal(res_validate_held(&c, tb, 1, 2), "rate");
  near(res_validate_err(110, 100), 0.10, 1e-12, "10% over");
  near(res_validate_err(90, 100), -0.10, 1e-12, "10% under");
  assert_true(isnan(res_validate_err(NAN, 100)) && isnan(res_validate_err(1, 0)) && isnan(res_validate_err(-1, 5)));
  /* 8 MB over 1 Gbit/s: 2 ranks ring 2 (1/2) n = n: 64 ms; 4 ranks on 2 nodes flat: 1.5 n,
   * 96 ms; hier on those 2 nodes: the nodes' ring, n: 64 ms; one node: nothing crosses */
  res_vcell two = {1e9, 2, 1}, fl = {1e9, 2, 2}, one = {1e9, 1, 4};
  near(res_validate_bytes_s(8e6, &two, 0), 0.064, 1e-12, "2 ranks");
  near(res_validate_bytes_s(8e6, &fl, 0), 0.096, 1e-12, "2x2 flat");
  near(res_validate_bytes_s(8e6, &fl, 1), 0.064, 1e-12, "2x2 hier");
  assert_true(res_validate_bytes_s(8e6, &one, 0) == 0);
  double v[6] = {0.1, -0.3, NAN, 0.2, -0.05, INFINITY}, med, worst;
  size_t n;
  res_validate_abs_stats(v, 6, &med, &worst, &n);
  assert_int_equal(n, 4);
  near(med, 0.15, 1e-12, "median of 0.05, 0.1, 0.2, 0.3");
  near(worst, 0.3, 1e-12, "worst");
  res_validate_abs_stats(v, 1, &med, &worst, &n);
  near(med, 0.1, 1e-12, "one");
  res_validate_abs_stats(v + 2, 1, &med, &worst, &n);
  assert_true(n == 0 && isnan(med) && isnan(worst));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stated_rate),
      cmocka_unit_test(test_residuals_stay),
      cmocka_unit_test(test_ablation),
      cmocka_unit_test(test_suite_checks),
      cmocka_unit_test(test_middle_rate),
      cmocka_unit_test(test_validate_arithmetic),
      cmocka_unit_test(test_node_cores),
      cmocka_unit_test(test_scaling_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
