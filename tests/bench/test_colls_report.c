/* fabench report over the collectives beside all-reduce: a section with a busbw plot per
 * collective and rank count and the table of the best algorithm per size, checked against the
 * rows it came from; the straggler table on hand-worked waits; and no such section, nor a
 * previous report's collective plots, over runs without colls.csv. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cli_run.h"
#include "test_util.h"

static int exists(const char *dir, const char *name) {
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  struct stat st;
  return stat(p, &st) == 0;
}

static void run_or_fail(run_result *r, char *const argv[]) {
  cli_run(r, 60, NULL, NULL, -1, NULL, argv);
  if (r->status != 0) fail_msg("%s: status %d\nstdout:\n%s\nstderr:\n%s", argv[0], r->status, r->out, r->err);
}

/* The index of column name in csv's header line; fails the test where there is none. */
static int col_of(const char *csv, const char *name) {
  size_t len = strlen(name);
  int k = 0;
  for (const char *p = csv; *p && *p != '\n'; k++) {
    size_t w = strcspn(p, ",\n");
    if (w == len && !strncmp(p, name, len)) return k;
    p += w;
    if (*p == ',') p++;
  }
  fail_msg("no column %s", name);
  return -1;
}

/* The n-th comma-separated field of line (0-based) into out. */
static void field(const char *line, int n, char *out, size_t cap) {
  for (int i = 0; i < n && line; i++) line = strchr(line, ',') ? strchr(line, ',') + 1 : NULL;
  size_t k = 0;
  for (; line && *line && *line != ',' && *line != '\n' && k + 1 < cap; line++) out[k++] = *line;
  out[k] = '\0';
}

/* The table's line the report must write for a run's colls.csv, worked out from the rows: at
 * the largest size (the sweeps here end below 64 KiB), the algorithm of the highest busbw, and
 * what it ran where that differs, its peer and busbw against it. */
static void want_best(const char *run, const char *name, char *want, size_t cap) {
  char path[4200];
  snprintf(path, sizeof path, "%s/colls.csv", run);
  char *c = tu_slurp(path, NULL);
  assert_non_null(c);
  /* the columns by name, from the header */
  int ib = col_of(c, "bytes"), iw = col_of(c, "busbw_gbps"), ia = col_of(c, "algo"), ir = col_of(c, "algo_ran"),
      in = col_of(c, "ranks"), ifa = col_of(c, "fabric"), ip = col_of(c, "peer"), iv = col_of(c, "busbw_vs_peer");
  long long top = -1;
  double bw = -1;
  char algo[64] = "", ran[64] = "", ranks[16] = "", fabric[64] = "", peer[64] = "", vs[64] = "";
  for (int pass = 0; pass < 2; pass++)
    for (char *line = strchr(c, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
      char f[64];
      field(line + 1, ib, f, sizeof f);
      long long b = atoll(f);
      if (!pass) {
        if (b > top) top = b;
        continue;
      }
      field(line + 1, iw, f, sizeof f);
      if (b == top && atof(f) > bw) {
        bw = atof(f);
        field(line + 1, ia, algo, sizeof algo);
        field(line + 1, ir, ran, sizeof ran); /* rd on 3 ranks runs the ring */
        field(line + 1, in, ranks, sizeof ranks);
        field(line + 1, ifa, fabric, sizeof fabric);
        field(line + 1, ip, peer, sizeof peer);
        field(line + 1, iv, vs, sizeof vs);
      }
    }
  free(c);
  char shown[160];
  snprintf(shown, sizeof shown, "%s%s%s%s", algo, strcmp(ran, algo) ? " (ran " : "", strcmp(ran, algo) ? ran : "",
           strcmp(ran, algo) ? ")" : "");
  char ratio[32] = "-";
  if (*vs) snprintf(ratio, sizeof ratio, "%.2fx", atof(vs));
  snprintf(want, cap, "| %s | %s | %lld* | %s | tcp | %s | %.3f | %s | %s |", name, ranks, top, fabric, shown, bw,
           *peer ? peer : "-", ratio);
}

static void test_report_colls(void **state) {
  (void)state;
  char dir[128];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "collsrep"));
  char ag[200], bc[200], out[200];
  snprintf(ag, sizeof ag, "%s/ag", dir);
  snprintf(bc, sizeof bc, "%s/bc", dir);
  snprintf(out, sizeof out, "%s/rep", dir);
  run_result *r = calloc(1, sizeof *r);
  assert_non_null(r);
  run_or_fail(r, (char *[]){"allgather", "-n", "3", "--transport", "tcp", "--max-bytes", "64K", "--step-factor", "16",
                            "--iters", "3", "--out", ag, NULL});
  /* the broadcast against a peer of its own: the table's last two columns */
  run_or_fail(r, (char *[]){"bcast", "-n", "3", "--transport", "tcp", "--max-bytes", "64K", "--step-factor", "16",
                            "--iters", "3", "--peer", "tcp/chain", "--out", bc, NULL});
  run_or_fail(r, (char *[]){"report", ag, bc, "--out", out, NULL});
  assert_true(tu_file_has(out, "report.md", "## Other collectives"));
  assert_true(tu_file_has(out, "report.md", "### Best algorithm against the peer (from 64 KiB)"));
  char want[512];
  want_best(ag, "all-gather", want, sizeof want);
  if (!tu_file_has(out, "report.md", want)) fail_msg("report.md has no line '%s'", want);
  want_best(bc, "broadcast", want, sizeof want);
  if (!tu_file_has(out, "report.md", want)) fail_msg("report.md has no line '%s'", want);
  /* the factors stated under the table */
  assert_true(tu_file_has(out, "report.md", "reduce-scatter (n-1)/n, all-gather (n-1)/n, broadcast 1, all-to-all (n-1)/n"));
  /* a plot per collective and rank count, drawn and linked */
  static const char *const plots[] = {"coll_allgather_p3.png", "coll_allgather_p3.svg", "coll_bcast_p3.png",
                                      "coll_bcast_p3.svg"};
  for (size_t i = 0; i < sizeof plots / sizeof *plots; i++) {
    if (!exists(out, plots[i])) fail_msg("no %s in %s", plots[i], out);
    char link[64];
    snprintf(link, sizeof link, "(%s)", plots[i]);
    if (!tu_file_has(out, "report.md", link)) fail_msg("report.md does not link %s", plots[i]);
  }
  assert_true(tu_file_has(out, "report.md", "![all-gather busbw (algbw x (n-1)/n), 3 ranks]"));
  assert_true(tu_file_has(out, "report.md", "![broadcast busbw (algbw x 1), 3 ranks]"));
  assert_true(tu_file_has(out, "report.md", "## Who the others waited for"));

  /* the same --out over a run without colls.csv: no section, and no collective plot left over */
  run_or_fail(r, (char *[]){"report", FIXTURE_RUN, "--out", out, "--no-plot", NULL});
  assert_true(tu_file_has(out, "report.md", "## All-reduce"));
  assert_false(tu_file_has(out, "report.md", "## Other collectives"));
  assert_false(tu_file_has(out, "report.md", "Best algorithm against the peer"));
  for (size_t i = 0; i < sizeof plots / sizeof *plots; i++)
    if (exists(out, plots[i])) fail_msg("%s of the earlier report left in %s", plots[i], out);
  assert_false(exists(out, "coll_bcast_p3.gp"));
  assert_false(exists(out, "colls.dat"));
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* Hand-worked waits: over allgather tcp/ring rank 2 is at 0 at both sizes while ranks 0 and 1
 * wait 60, 50, 70, 80 us (median 65) of times whose median is (100 + 130) / 2 = 115; over
 * tcp/bruck the others wait 1 and 2 us of 101: no straggler stands out there; over bcast
 * tcp/tree the root is done first (10 us) and the others wait 50 of a median 60. */
static void test_report_waits(void **state) {
  (void)state;
  char dir[128];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "collwait"));
  char run[200], out[200];
  snprintf(run, sizeof run, "%s/run", dir);
  snprintf(out, sizeof out, "%s/rep", dir);
  assert_int_equal(mkdir(run, 0755), 0);
  assert_int_equal(tu_write(run, "run.json", "{\"schema\": 1, \"run_id\": \"fx\", \"command\": \"allgather\"}\n"), 0);
  assert_int_equal(tu_write(run, "coll_ranks.csv",
                            "run_id,schema,coll,transport,algo,dtype,op,bytes,ranks,rank,host,t_p50_us,wait_us\n"
                            "fx,1,allgather,tcp,ring,f32,-,8,3,0,hostA,100,60\n"
                            "fx,1,allgather,tcp,ring,f32,-,8,3,1,hostB,90,50\n"
                            "fx,1,allgather,tcp,ring,f32,-,8,3,2,hostC,40,0\n"
                            "fx,1,allgather,tcp,ring,f32,-,1024,3,0,hostA,200,70\n"
                            "fx,1,allgather,tcp,ring,f32,-,1024,3,1,hostB,210,80\n"
                            "fx,1,allgather,tcp,ring,f32,-,1024,3,2,hostC,130,0\n"
                            "fx,1,allgather,tcp,bruck,f32,-,8,3,0,hostA,100,0\n"
                            "fx,1,allgather,tcp,bruck,f32,-,8,3,1,hostB,101,1\n"
                            "fx,1,allgather,tcp,bruck,f32,-,8,3,2,hostC,102,2\n"
                            "fx,1,bcast,tcp,tree,f32,-,8,3,0,hostA,10,0\n"
                            "fx,1,bcast,tcp,tree,f32,-,8,3,1,hostB,60,50\n"
                            "fx,1,bcast,tcp,tree,f32,-,8,3,2,hostC,60,50\n"),
                   0);
  run_result *r = calloc(1, sizeof *r);
  assert_non_null(r);
  run_or_fail(r, (char *[]){"report", run, "--out", out, "--no-plot", NULL});
  const char *want = "| fx | all-gather | tcp/ring | 3 | 2 (hostC) | 2 of 2 sizes | 65.0 | 115.0 |";
  if (!tu_file_has(out, "report.md", want)) fail_msg("report.md has no line '%s'", want);
  assert_false(tu_file_has(out, "report.md", "tcp/bruck"));
  /* a broadcast's root (0 by default) at wait 0 is said to be the root */
  want = "| fx | broadcast | tcp/tree | 3 | 0 (hostA, the root) | 1 of 1 sizes | 50.0 | 60.0 |";
  if (!tu_file_has(out, "report.md", want)) fail_msg("report.md has no line '%s'", want);
  assert_true(tu_file_has(out, "report.md", "A broadcast's root is done once its data has left"));
  assert_true(tu_file_has(out, "report.md", "In the other 1 groups no straggler stands out"));
  /* without colls.csv, no section of the other collectives */
  assert_false(tu_file_has(out, "report.md", "## Other collectives"));

  /* the ring's others waiting 5 us of 115: no straggler anywhere, and said so */
  assert_int_equal(tu_write(run, "coll_ranks.csv",
                            "run_id,schema,coll,transport,algo,dtype,op,bytes,ranks,rank,host,t_p50_us,wait_us\n"
                            "fx,1,allgather,tcp,ring,f32,-,8,3,0,hostA,100,5\n"
                            "fx,1,allgather,tcp,ring,f32,-,8,3,1,hostB,130,5\n"
                            "fx,1,allgather,tcp,ring,f32,-,8,3,2,hostC,95,0\n"),
                   0);
  run_or_fail(r, (char *[]){"report", run, "--out", out, "--no-plot", NULL});
  assert_true(tu_file_has(out, "report.md", "No straggler stands out: in each of the 1 groups"));
  assert_false(tu_file_has(out, "report.md", "| straggler (host) |"));
  free(r);
  assert_int_equal(tu_rmtree(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_report_colls),
      cmocka_unit_test(test_report_waits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
