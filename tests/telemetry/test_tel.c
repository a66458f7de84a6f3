/* telemetry against a fake /proc and /sys tree made here: two readings with known growth give
 * the hand-worked CPU busy, link utilisation and retransmits; a missing file is left out, a
 * malformed one is an error and never a crash; the verdict's thresholds; the sampler's CSV. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tel.h"
#include "test_util.h"

/* ---- the fake tree ---- */

static void mkdirs(const char *root, const char *rel) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  mkdir(path, 0755);
}

static void put(const char *root, const char *rel, const char *text) {
  assert_int_equal(tu_write(root, rel, text), 0);
}

/* USER_HZ ticks: the counters are read as ms, ticks * 1000 / USER_HZ */
static long hz(void) { return sysconf(_SC_CLK_TCK); }

static const char stat_a[] = "cpu  100 0 50 800 0 0 50 0 0 0\n"
                             "cpu0 50 0 25 400 0 0 25 0 0 0\n"
                             "cpu1 50 0 25 400 0 0 25 0 0 0\n"
                             "intr 1 2 3\nctxt 123\nbtime 1\n";
/* cpu0: +90 user +5 system +5 softirq, no idle: busy 1.0; cpu1: +10 user, +90 idle: 0.1;
 * all: 110 busy of 200: 0.55 */
static const char stat_b[] = "cpu  200 0 55 890 0 0 55 0 0 0\n"
                             "cpu0 140 0 30 400 0 0 30 0 0 0\n"
                             "cpu1 60 0 25 490 0 0 25 0 0 0\n"
                             "intr 1 2 3\nctxt 124\nbtime 1\n";

static const char dev_head[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
    "carrier compressed\n";

static void write_dev(const char *root, uint64_t lo_bytes, uint64_t eth_rx, uint64_t eth_tx, uint64_t rx_drop,
                      uint64_t tx_drop) {
  char t[2048];
  snprintf(t, sizeof t,
           "%s    lo: %llu 10 0 0 0 0 0 0 %llu 10 0 0 0 0 0 0\n"
           "  eth0: %llu 100 0 %llu 0 0 0 0 %llu 200 0 %llu 0 0 0 0\n",
           dev_head, (unsigned long long)lo_bytes, (unsigned long long)lo_bytes, (unsigned long long)eth_rx,
           (unsigned long long)rx_drop, (unsigned long long)eth_tx, (unsigned long long)tx_drop);
  put(root, "proc/net/dev", t);
}

static void write_snmp(const char *root, int outsegs, int retrans) {
  char t[1024];
  snprintf(t, sizeof t,
           "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
           "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets "
           "CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
           "Tcp: 1 200 120000 -1 10 5 0 0 2 1000 %d %d 0 0 0\n"
           "Udp: InDatagrams\nUdp: 5\n",
           outsegs, retrans);
  put(root, "proc/net/snmp", t);
}

static void write_ib(const char *root, uint64_t xmit_words, uint64_t rcv_words) {
  char t[64];
  snprintf(t, sizeof t, "%llu\n", (unsigned long long)xmit_words);
  put(root, "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", t);
  snprintf(t, sizeof t, "%llu\n", (unsigned long long)rcv_words);
  put(root, "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data", t);
}

/* A full tree in state A. */
static void make_tree(char *root, size_t cap) {
  assert_non_null(tu_tmpdir(root, cap, "tel"));
  mkdirs(root, "proc/net");
  mkdirs(root, "sys/class/net/eth0");
  mkdirs(root, "sys/class/infiniband/mlx5_0/ports/1/counters");
  put(root, "proc/stat", stat_a);
  write_dev(root, 5000, 1000, 2000, 1, 0);
  write_snmp(root, 2000, 7);
  put(root, "proc/net/netstat", "TcpExt: SyncookiesSent TCPTimeouts TCPLostRetransmit\nTcpExt: 0 3 1\n"
                                "IpExt: InNoRoutes\nIpExt: 0\n");
  put(root, "sys/class/net/eth0/speed", "1000\n");
  put(root, "sys/class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
  put(root, "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_packets", "10\n");
  put(root, "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_packets", "10\n");
  write_ib(root, 1000, 1000);
}

/* Into state B: the growth the tests work by hand. */
static void to_state_b(const char *root) {
  put(root, "proc/stat", stat_b);
  /* lo moves far more than eth0 and must not be named; eth0 sends 20 MB */
  write_dev(root, 5000 + 10000000000ull, 1000 + 5000000, 2000 + 20000000, 4, 2);
  write_snmp(root, 2500, 19);
  write_ib(root, 1000 + 1000000, 1000);
}

static tel_opts opts_for(const char *root) {
  return (tel_opts){.root = root, .hz = 0, .host = "fakehost", .nvml = ""};
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* ---- the summary of two readings ---- */

static void test_summary_known_deltas(void **state) {
  (void)state;
  char root[256], err[512] = "";
  make_tree(root, sizeof root);
  tel_opts o = opts_for(root);
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  assert_int_equal(tel_mark_begin(h, "step one", err, sizeof err), 0);
  to_state_b(root);
  sleep_s(0.2);
  tel_summary s;
  assert_int_equal(tel_mark_end(h, &s, err, sizeof err), 0);
  tel_stop(h, NULL);

  assert_string_equal(s.label, "step one");
  assert_true(s.secs >= 0.2 && s.secs < 5);
  if (hz() == 100 || hz() == 1000 || hz() == 250) { /* ticks * 1000 / hz in whole ms: exact */
    assert_true(fabs(s.cpu_busy - 0.55) < 1e-12);
    assert_true(fabs(s.cpu_busy_max - 1.0) < 1e-12);
    assert_int_equal(s.cpu_busiest, 0);
    assert_int_equal(s.ncpus, 2);
    assert_true(fabs(s.core_busy[0] - 1.0) < 1e-12);
    assert_true(fabs(s.core_busy[1] - 0.1) < 1e-12);
  }
  /* eth0, not lo: 20 MB sent (the larger way) in s.secs against its 1000 Mb/s */
  assert_string_equal(s.link, "net:eth0");
  double bits = 8.0 * 20000000 / s.secs;
  assert_true(fabs(s.link_bits_s - bits) < 1e-6 * bits);
  assert_true(fabs(s.link_bps - 1e9) < 1);
  assert_true(fabs(s.link_util - bits / 1e9) < 1e-9);
  assert_true(s.retrans == 12);
  assert_true(s.out_segs == 500);
  assert_true(s.drops == 5); /* 3 received, 2 sent */
  assert_string_equal(s.verdict, tel_verdict(s.link_util, s.cpu_busy, s.cpu_busy_max, NULL));
  assert_int_equal(tu_rmtree(root), 0);
}

/* A given link rate judges every link against it: the InfiniBand port's 4 MB (words of 4
 * bytes) against a rate so small that it is the most utilised. */
static void test_summary_given_rate(void **state) {
  (void)state;
  char root[256], err[512] = "";
  make_tree(root, sizeof root);
  tel_opts o = opts_for(root);
  o.link_bps = 1e6;
  put(root, "sys/class/net/eth0/speed", "-1\n"); /* unknown: the given rate is used all the same */
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  assert_int_equal(tel_mark_begin(h, "x", err, sizeof err), 0);
  write_ib(root, 1000 + 1000000, 1000 + 50000000); /* received: 200 MB */
  sleep_s(0.05);
  tel_summary s;
  assert_int_equal(tel_mark_end(h, &s, err, sizeof err), 0);
  tel_stop(h, NULL);
  assert_string_equal(s.link, "ib:mlx5_0/1");
  double bits = 8.0 * 4 * 50000000 / s.secs;
  assert_true(fabs(s.link_bits_s - bits) < 1e-6 * bits);
  assert_true(fabs(s.link_util - bits / 1e6) < 1e-6 * bits / 1e6);
  assert_string_equal(s.verdict, "link-bound");
  assert_int_equal(tu_rmtree(root), 0);
}

/* ---- missing and malformed files ---- */

static void test_missing_files_left_out(void **state) {
  (void)state;
  char root[256], err[512] = "";
  assert_non_null(tu_tmpdir(root, sizeof root, "tel"));
  mkdirs(root, "proc");
  put(root, "proc/stat", stat_a);
  tel_opts o = opts_for(root);
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  assert_int_equal(tel_mark_begin(h, "m", err, sizeof err), 0);
  put(root, "proc/stat", stat_b);
  tel_summary s;
  assert_int_equal(tel_mark_end(h, &s, err, sizeof err), 0);
  tel_stop(h, NULL);
  assert_true(s.cpu_busy > 0.5 && s.cpu_busy < 0.6);
  assert_string_equal(s.link, "");
  assert_true(isnan(s.link_util) && isnan(s.link_bits_s));
  assert_true(isnan(s.retrans) && isnan(s.out_segs) && isnan(s.drops));
  assert_string_equal(s.verdict, "cpu-bound"); /* cpu0 at 1.0 */
  /* nothing at all: every figure unknown, "neither" */
  char empty[256];
  assert_non_null(tu_tmpdir(empty, sizeof empty, "tel"));
  o = opts_for(empty);
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  assert_int_equal(tel_mark_begin(h, "m", err, sizeof err), 0);
  assert_int_equal(tel_mark_end(h, &s, err, sizeof err), 0);
  tel_stop(h, NULL);
  assert_true(isnan(s.cpu_busy) && isnan(s.cpu_busy_max) && s.cpu_busiest == -1);
  assert_string_equal(s.verdict, "neither");
  assert_int_equal(tu_rmtree(root), 0);
  assert_int_equal(tu_rmtree(empty), 0);
}

/* Each malformed file: an error naming it, its figures unknown, the others still read. */
static void test_malformed_files(void **state) {
  (void)state;
  static const struct {
    const char *rel, *text, *unknown;
  } cases[] = {
      {"proc/stat", "cpu  1 2\ncpu0 1 2 3 4\n", "cpu"},          /* too few counts */
      {"proc/stat", "cpu  1 2 x 4\n", "cpu"},                    /* not a number */
      {"proc/stat", "intr 1 2 3\n", "cpu"},                      /* no cpu line at all */
      {"proc/stat", "", "cpu"},
      {"proc/net/dev", "  eth0: 1 2 3\n", "link"},               /* too few counts */
      {"proc/net/dev", "eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", "link"}, /* no colon */
      {"proc/net/dev", "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 junk\n", "link"},
      {"proc/net/snmp", "Tcp: RetransSegs OutSegs\n", "tcp"},    /* names without values */
      {"proc/net/snmp", "Tcp: RetransSegs OutSegs\nTcp: 1\n", "tcp"},
      {"proc/net/snmp", "Tcp: RetransSegs OutSegs\nTcp: 1 x\n", "tcp"},
      {"proc/stat", "\x01\x02\xff binary\n", "cpu"},
      {"proc/stat", "cpu  18446744073709551616 0 0 0\n", "cpu"}, /* 2^64: no counter */
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char root[256], err[512] = "";
    make_tree(root, sizeof root);
    tel_opts o = opts_for(root);
    tel *h;
    assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
    put(root, cases[c].rel, cases[c].text);
    err[0] = '\0';
    assert_int_equal(tel_mark_begin(h, "bad", err, sizeof err), -1);
    assert_non_null(strstr(err, cases[c].rel));
    assert_non_null(strstr(err, "malformed"));
    if (strcmp(cases[c].rel, "proc/stat")) put(root, "proc/stat", stat_b); /* the CPUs move */
    tel_summary s;
    assert_int_equal(tel_mark_end(h, &s, err, sizeof err), -1);
    tel_stop(h, NULL);
    if (!strcmp(cases[c].unknown, "cpu")) {
      assert_true(isnan(s.cpu_busy));
      assert_true(s.retrans == 0); /* the others read */
    } else if (!strcmp(cases[c].unknown, "link")) {
      assert_string_equal(s.link, "ib:mlx5_0/1"); /* the port is all that is left */
      assert_false(isnan(s.cpu_busy));
    } else {
      assert_true(isnan(s.retrans));
      assert_string_equal(s.link, "net:eth0");
    }
    assert_int_equal(tu_rmtree(root), 0);
  }
  /* an InfiniBand counter that is not a number */
  char root[256], err[512] = "";
  make_tree(root, sizeof root);
  tel_opts o = opts_for(root);
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  put(root, "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "lots\n");
  assert_int_equal(tel_mark_begin(h, "bad", err, sizeof err), -1);
  assert_non_null(strstr(err, "port_xmit_data"));
  tel_stop(h, NULL);
  assert_int_equal(tu_rmtree(root), 0);
}

/* The valid files cut short and with bytes changed at random (a seeded generator, so a failure
 * repeats): each reading either parses or says which file did not, never reads past the text
 * (the sanitizer build) or crashes. */
static void test_mutated_files(void **state) {
  (void)state;
  char root[256], err[512];
  make_tree(root, sizeof root);
  to_state_b(root);
  static const char *const rels[] = {"proc/stat", "proc/net/dev", "proc/net/snmp", "proc/net/netstat"};
  char *orig[4];
  for (int f = 0; f < 4; f++) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", root, rels[f]);
    assert_non_null(orig[f] = tu_slurp(path, NULL));
  }
  tel_opts o = opts_for(root);
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  static const char alphabet[] = "0123456789 :-|\n\tabcxyzTcp";
  unsigned seed = 12345;
  int failed = 0;
  for (int it = 0; it < 2000; it++) {
    int f = it % 4;
    size_t n = strlen(orig[f]);
    char *m = strdup(orig[f]);
    assert_non_null(m);
    int edits = 1 + (int)(rand_r(&seed) % 4);
    for (int e = 0; e < edits; e++) m[rand_r(&seed) % n] = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
    if (rand_r(&seed) % 3 == 0) m[rand_r(&seed) % n] = '\0'; /* cut short */
    put(root, rels[f], m);
    free(m);
    err[0] = '\0';
    int rc = tel_mark_begin(h, "m", err, sizeof err);
    assert_true(rc == 0 || rc == -1);
    if (rc) {
      assert_non_null(strstr(err, "malformed"));
      failed++;
    }
    tel_summary sm;
    tel_mark_end(h, &sm, err, sizeof err);
    assert_non_null(sm.verdict);
    put(root, rels[f], orig[f]);
  }
  tel_stop(h, NULL);
  assert_true(failed > 100 && failed < 2000); /* some edits break a file, some do not */
  for (int f = 0; f < 4; f++) free(orig[f]);
  assert_int_equal(tu_rmtree(root), 0);
}

/* ---- the verdict ---- */

static void test_verdict_thresholds(void **state) {
  (void)state;
  assert_string_equal(tel_verdict(0.70, 0.1, 0.1, NULL), "link-bound");
  assert_string_equal(tel_verdict(0.6999, 0.1, 0.1, NULL), "neither");
  assert_string_equal(tel_verdict(NAN, 0.90, 0.90, NULL), "cpu-bound");
  assert_string_equal(tel_verdict(NAN, 0.8999, 0.9499, NULL), "neither");
  assert_string_equal(tel_verdict(0.1, 0.5, 0.95, NULL), "cpu-bound"); /* one core saturated */
  assert_string_equal(tel_verdict(0.8, 1.0, 1.0, NULL), "link-bound"); /* the link first */
  assert_string_equal(tel_verdict(NAN, NAN, NAN, NULL), "neither");
  tel_opts o = {.link_bound = 0.5, .cpu_bound = 0.6, .core_bound = 0.99};
  assert_string_equal(tel_verdict(0.5, 0, 0, &o), "link-bound");
  assert_string_equal(tel_verdict(0.49, 0.6, 0, &o), "cpu-bound");
  assert_string_equal(tel_verdict(0.49, 0.59, 0.98, &o), "neither");
  assert_true(TEL_LINK_BOUND_UTIL == 0.70 && TEL_CPU_BOUND_BUSY == 0.90 && TEL_CORE_BOUND_BUSY == 0.95);
}

/* ---- the sampler's CSV ---- */

static int count_lines(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p++) n++;
  return n;
}

static void test_sampler_csv(void **state) {
  (void)state;
  char root[256], err[512] = "", csv[512];
  make_tree(root, sizeof root);
  snprintf(csv, sizeof csv, "%s/telemetry.csv", root);
  tel_opts o = opts_for(root);
  o.hz = 50;
  o.csv_path = csv;
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  sleep_s(0.1);
  assert_int_equal(tel_mark_begin(h, "size 1K, ring", err, sizeof err), 0); /* the comma is cleaned */
  sleep_s(0.1);
  tel_summary s;
  assert_int_equal(tel_mark_end(h, &s, err, sizeof err), 0);
  sleep_s(0.1);
  tel_stats st;
  tel_stop(h, &st);
  assert_string_equal(st.error, "");
  assert_true(st.samples >= 5 && st.samples <= 20); /* 50 Hz for about 0.3 s */
  assert_true(st.cpu_s >= 0 && st.cpu_s < st.wall_s);
  char *t = tu_slurp(csv, NULL);
  assert_non_null(t);
  assert_true(!strncmp(t, "time_s,host,label,source,counter,value\n", 39));
  char want[128];
  /* every reading: cpu0's user time in ms, eth0's bytes, the port's in bytes (4 per word) */
  int readings = count_lines(t, ",cpu0,user_ms,");
  assert_int_equal(readings, st.samples + 2); /* and the two marks' */
  /* the thread's readings before and after the marks unlabelled, the marks' and those between
   * them labelled */
  snprintf(want, sizeof want, ",fakehost,,cpu0,user_ms,%ld\n", 50 * 1000 / hz());
  int unlabelled = count_lines(t, want);
  snprintf(want, sizeof want, ",fakehost,size 1K  ring,cpu0,user_ms,%ld\n", 50 * 1000 / hz());
  int labelled = count_lines(t, want);
  assert_int_equal(unlabelled + labelled, readings);
  assert_true(labelled >= 2 && unlabelled >= 2);
  assert_int_equal(count_lines(t, ",net:eth0,tx_bytes,2000\n"), readings);
  assert_int_equal(count_lines(t, ",net:lo,rx_bytes,5000\n"), readings);
  assert_int_equal(count_lines(t, ",ib:mlx5_0/1,tx_bytes,4000\n"), readings);
  assert_int_equal(count_lines(t, ",tcp,retrans_segs,7\n"), readings);
  assert_int_equal(count_lines(t, ",tcp,timeouts,3\n"), readings);
  assert_int_equal(count_lines(t, ",tcp,lost_retransmit,1\n"), readings);
  /* every line has six fields */
  for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) assert_int_equal(count_lines(line, ","), 5);
  free(t);
  assert_int_equal(tu_rmtree(root), 0);
}

/* A malformed file under the running sampler: said at its stop, the readings go on. */
static void test_sampler_malformed(void **state) {
  (void)state;
  char root[256], err[512] = "";
  make_tree(root, sizeof root);
  put(root, "proc/net/dev", "garbage without a colon\n");
  tel_opts o = opts_for(root);
  o.hz = 100;
  tel *h;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  sleep_s(0.05);
  tel_stats st;
  tel_stop(h, &st);
  assert_true(st.samples >= 1);
  assert_non_null(strstr(st.error, "proc/net/dev"));
  assert_int_equal(tu_rmtree(root), 0);
}

/* The GPUs' rows from NVML (the test library: 8 GPUs, GPU i busy 10 i + 1 %, NVLink counters
 * 1000 + i and 2000 + i KiB, none on GPU 7); a library that is not there gives no GPU rows. */
static void test_nvml_rows(void **state) {
  (void)state;
  char root[256], err[512] = "", csv[512];
  make_tree(root, sizeof root);
  snprintf(csv, sizeof csv, "%s/telemetry.csv", root);
  setenv("FABENCH_NVML_SHIM", "dgx8", 1);
  static const char *const libs[] = {TEL_NVML_SHIM, "/nonexistent/libnvidia-ml.so.1"};
  for (int l = 0; l < 2; l++) {
    tel_opts o = opts_for(root);
    o.csv_path = csv;
    o.nvml = libs[l];
    tel *h;
    assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
    assert_int_equal(tel_mark_begin(h, "gpu", err, sizeof err), 0);
    tel_stop(h, NULL);
    char *t = tu_slurp(csv, NULL);
    assert_non_null(t);
    if (l == 0) {
      for (int g = 0; g < 8; g++) {
        char want[128];
        snprintf(want, sizeof want, ",gpu,gpu%d,util_pct,%d\n", g, 10 * g + 1);
        assert_int_equal(count_lines(t, want), 1);
        snprintf(want, sizeof want, ",gpu,gpu%d,mem_used_bytes,0\n", g);
        assert_int_equal(count_lines(t, want), 1);
        snprintf(want, sizeof want, ",gpu,gpu%d,nvlink_tx_kib,%d\n", g, 1000 + g);
        assert_int_equal(count_lines(t, want), g < 7);
        snprintf(want, sizeof want, ",gpu,gpu%d,nvlink_rx_kib,%d\n", g, 2000 + g);
        assert_int_equal(count_lines(t, want), g < 7);
      }
    } else {
      assert_null(strstr(t, ",gpu0,"));
    }
    free(t);
  }
  assert_int_equal(tu_rmtree(root), 0);
}

/* Refused: a rate out of range, a CSV that cannot be created or written, an end without a begin. */
static void test_refused(void **state) {
  (void)state;
  char err[512] = "";
  tel *h = (tel *)1;
  tel_opts o = opts_for("/nonexistent");
  o.hz = -1;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), -1);
  assert_null(h);
  o.hz = NAN;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), -1);
  o.hz = 0;
  o.csv_path = "/nonexistent/dir/telemetry.csv";
  assert_int_equal(tel_start(&h, &o, err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent/dir/telemetry.csv"));
  if (access("/dev/full", W_OK) == 0) {
    o.csv_path = "/dev/full";
    assert_int_equal(tel_start(&h, &o, err, sizeof err), -1);
    assert_non_null(strstr(err, "/dev/full"));
  }
  o.csv_path = NULL;
  assert_int_equal(tel_start(&h, &o, err, sizeof err), 0);
  tel_summary s;
  assert_int_equal(tel_mark_end(h, &s, err, sizeof err), -1);
  assert_non_null(strstr(err, "without"));
  tel_stop(h, NULL);
  tel_stop(NULL, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary_known_deltas), cmocka_unit_test(test_summary_given_rate),
      cmocka_unit_test(test_missing_files_left_out), cmocka_unit_test(test_malformed_files),
      cmocka_unit_test(test_mutated_files),
      cmocka_unit_test(test_verdict_thresholds), cmocka_unit_test(test_sampler_csv),
      cmocka_unit_test(test_sampler_malformed), cmocka_unit_test(test_nvml_rows),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
