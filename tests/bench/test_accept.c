/* fabench accept: the rules file (every threshold kind, every refused input with its line), the
 * hostlists, the robust outliers, and the command end to end with --from on run directories
 * written here (a uniform 4-host p2p run, one with a slow host, one with a slow link, one with
 * wrong elements): its exit statuses, the suspects it names, accept.json, suspects.txt, and
 * accept.xml's JUnit shape (read back by python3's XML parser). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "accept.h"
#include "res.h"
#include "test_util.h"
#include "topo.h"
#include "util.h"

static char g_dir[256];

static int setup(void **state) {
  (void)state;
  return tu_tmpdir(g_dir, sizeof g_dir, "accept") ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  return tu_rmtree(g_dir);
}

/* Writes text as g_dir/name and loads it as rules: the load's return, err filled. */
static int load(acc_rules *r, const char *name, const char *text, char *err, size_t cap) {
  assert_int_equal(tu_write(g_dir, name, text), 0);
  char p[512];
  snprintf(p, sizeof p, "%s/%s", g_dir, name);
  err[0] = '\0';
  return acc_rules_load(r, p, err, cap);
}

static const char good_rules[] =
    "model: m.json\n"
    "reference: ref\n"
    "topology:\n"
    "  gpus: 8\n"
    "  nic_speed: 400 Gbit/s\n"
    "  pcie_width: 16\n"
    "rules:\n"
    "  - name: ar\n"
    "    run: allreduce --transport ucx --min-bytes 64M --max-bytes 64M\n"
    "    metric: busbw\n"
    "    at_least: 10 GB/s\n"
    "    repeat: 3\n"
    "  - name: lat\n"
    "    run: p2p --tests latency\n"
    "    metric: latency_p99\n"
    "    at_most: 20 us\n"
    "    bytes: 8\n"
    "  - name: lat-ms\n"
    "    run: p2p\n"
    "    metric: latency\n"
    "    at_most: 2ms\n"
    "  - name: link\n"
    "    run: p2p --pairs rounds --tests bw\n"
    "    metric: bw\n"
    "    at_least: 0.9 x link\n"
    "    transport: tcp\n"
    "  - name: model\n"
    "    run: allreduce\n"
    "    metric: time\n"
    "    at_most: 1.2 x model\n"
    "  - name: ref\n"
    "    run: allreduce\n"
    "    metric: algbw\n"
    "    at_least: 0.95 x reference\n"
    "  - name: nodes\n"
    "    run: p2p --pairs all\n"
    "    metric: bibw\n"
    "    at_least: 0.8 x median of nodes\n"
    "  - name: img\n"
    "    run: train -n 2 --model resnet18\n"
    "    metric: images_per_s\n"
    "    at_least: 500 images/s\n"
    "  - name: mbit\n"
    "    run: p2p\n"
    "    metric: bw\n"
    "    at_least: 800 Mbit/s\n"
    "  - name: t\n"
    "    run: topo\n";

static void test_rules_every_kind(void **state) {
  (void)state;
  acc_rules r;
  char err[1024];
  assert_int_equal(load(&r, "good.yaml", good_rules, err, sizeof err), 0);
  assert_int_equal(r.n, 10);
  assert_int_equal(r.gpus, 8);
  assert_true(fabs(r.nic_gbit - 400) < 1e-9);
  assert_int_equal(r.pcie_width, 16);
  assert_non_null(strstr(r.model, "/m.json"));
  assert_non_null(strstr(r.reference, "/ref"));
  const acc_rule *x = r.rules;
  assert_string_equal(x[0].name, "ar");
  assert_int_equal(x[0].metric, ACC_M_BUSBW);
  assert_int_equal(x[0].ref, ACC_REF_ABS);
  assert_true(x[0].at_least);
  assert_true(fabs(x[0].value - 10) < 1e-12);
  assert_int_equal(x[0].repeat, 3);
  assert_int_equal(x[0].argc, 7);
  assert_string_equal(x[0].argv[0], "allreduce");
  assert_string_equal(x[0].argv[6], "64M");
  assert_null(x[0].argv[7]);
  assert_int_equal(x[1].metric, ACC_M_LATENCY_P99);
  assert_false(x[1].at_least);
  assert_true(fabs(x[1].value - 20) < 1e-12);
  assert_int_equal(x[1].bytes, 8);
  assert_true(fabs(x[2].value - 2000) < 1e-9); /* 2ms in us */
  assert_int_equal(x[3].ref, ACC_REF_LINK);
  assert_true(fabs(x[3].value - 0.9) < 1e-12);
  assert_string_equal(x[3].transport, "tcp");
  assert_int_equal(x[4].ref, ACC_REF_MODEL);
  assert_int_equal(x[4].metric, ACC_M_TIME_P50);
  assert_int_equal(x[5].ref, ACC_REF_REFERENCE);
  assert_int_equal(x[6].ref, ACC_REF_NODES);
  assert_true(fabs(x[6].value - 0.8) < 1e-12);
  assert_int_equal(x[7].metric, ACC_M_IMAGES);
  assert_true(fabs(x[7].value - 500) < 1e-9);
  assert_true(fabs(x[8].value - 0.1) < 1e-12); /* 800 Mbit/s = 0.1 GB/s */
  assert_int_equal(x[9].metric, ACC_M_NONE);
  assert_int_equal(x[9].repeat, 1);
  acc_rules_free(&r);
}

/* Each refused input: the error names the file, the line and the key. */
static void test_rules_refused(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 10 GB/s\n    colour: red\n", ":6: key 'colour': unknown key"},
      {"rulez:\n  - name: a\n", ":1: key 'rulez': unknown key"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 10 furlongs\n", ":5: key 'at_least': bad value or unit '10 furlongs'"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 10\n", ":5: key 'at_least': bad value or unit '10'"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: latency\n    at_most: 10 GB/s\n", ":5: key 'at_most': bad value or unit"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: -1 GB/s\n", ":5: key 'at_least': bad value"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 0.9 x switch\n", ":5: key 'at_least': unknown reference 'switch'"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 0 x link\n", ":5: key 'at_least': bad factor"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: latency\n    at_most: 2 x link\n", ":5: key 'at_most': 'x link' compares a rate"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 0.8 x model\n", ":2: key 'model': rule 'a' is relative to the model"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 0.8 x reference\n", ":2: key 'reference': rule 'a'"},
      {"rules:\n  - name: a\n    run: p2p\n    at_least: 1 GB/s\n", ":2: key 'metric': missing"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: busbw\n    at_least: 1 GB/s\n", ":4: key 'metric': 'busbw' is allreduce's, not p2p's"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: speed\n    at_least: 1 GB/s\n", ":4: key 'metric': unknown metric 'speed'"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n", ":2: key 'at_least': missing"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 1 GB/s\n    at_most: 9 GB/s\n", ":6: key 'at_most': a rule has one threshold"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    metric: bw\n    at_least: 1 GB/s\n", ":5: key 'metric': given twice"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 1 GB/s\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 1 GB/s\n", ":6: key 'name': 'a' names two rules"},
      {"rules:\n  - name: a\n    run: p2p --out x\n    metric: bw\n    at_least: 1 GB/s\n", ":3: key 'run': no --out"},
      {"rules:\n  - name: a\n    run: ping -c 1\n", ":3: key 'run': unknown measurement 'ping'"},
      {"rules:\n  - name: a\n    run: p2p; rm -rf /\n", ":3: key 'run': 'p2p; rm -rf /': words are split"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 1 GB/s\n    repeat: 0\n", ":6: key 'repeat': bad count '0'"},
      {"rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 1 GB/s\n    bytes: 1.5M\n", ":6: key 'bytes': bad size"},
      {"rules:\n  - name: Bad Name\n", ":2: key 'name': 'Bad Name' is not a name"},
      {"rules:\n  - run: p2p\n", ":2: key 'name': missing"},
      {"rules:\n  - name: t\n    run: topo\n    metric: bw\n", ":4: key 'metric': a topo rule"},
      {"rules:\n  - name: topology\n    run: topo\n", ":2: key 'name': 'topology' is the name"},
      {"rules: []\n", ":1: key 'rules': no rules"},
      {"rules: p2p\n", ":1: key 'rules': wants a list"},
      {"topology:\n  gpus: 8\n", ":1: key 'rules': missing"},
      {"topology:\n  gpus: eight\nrules:\n  - name: t\n    run: topo\n", ":2: key 'gpus': bad count 'eight'"},
      {"topology:\n  nic_speed: 400 GHz\nrules:\n  - name: t\n    run: topo\n", ":2: key 'nic_speed': bad speed or unit"},
      {"topology:\n  pcie_width: 12\nrules:\n  - name: t\n    run: topo\n", ":2: key 'pcie_width': bad width '12'"},
      {"topology:\n  cables: 3\nrules:\n  - name: t\n    run: topo\n", ":2: key 'cables': unknown key"},
      {"rules:\n  - name: a\n    run: [p2p]\n", ":3: key 'run': wants a single value"},
      {"rules:\n  - [a]\n", ":2: key 'rules': each rule is a mapping"},
      {"rules:\n  - name: a\n  run: p2p\n x", ":3: not YAML"},
      {"", ":0: empty"},
      {"- a\n- b\n", ":1: the file is a mapping"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    acc_rules r;
    char err[1024];
    int rc = load(&r, "bad.yaml", cases[i].text, err, sizeof err);
    if (rc != -1 || !strstr(err, cases[i].want) || !strstr(err, "bad.yaml:"))
      fail_msg("case %zu: rc %d, error '%s', wanted '%s'", i, rc, err, cases[i].want);
    assert_null(r.rules);
  }
}

/* The example rule files of the repository parse. */
static void test_rules_examples(void **state) {
  (void)state;
  const char *src = getenv("FABENCH_SRC");
  assert_non_null(src);
  const char *files[] = {"examples/accept/one-node.yaml", "examples/accept/cluster.yaml"};
  for (size_t i = 0; i < 2; i++) {
    char p[4200], err[1024];
    acc_rules r;
    snprintf(p, sizeof p, "%s/%s", src, files[i]);
    if (acc_rules_load(&r, p, err, sizeof err)) fail_msg("%s", err);
    assert_true(r.n >= 3);
    acc_rules_free(&r);
  }
}

static void test_quantity(void **state) {
  (void)state;
  double v;
  assert_int_equal(acc_parse_quantity("10 GB/s", ACC_Q_RATE, &v), 0), assert_true(fabs(v - 10) < 1e-12);
  assert_int_equal(acc_parse_quantity("100Gbit/s", ACC_Q_RATE, &v), 0), assert_true(fabs(v - 12.5) < 1e-12);
  assert_int_equal(acc_parse_quantity("1gbit", ACC_Q_RATE, &v), 0), assert_true(fabs(v - 0.125) < 1e-12);
  assert_int_equal(acc_parse_quantity("250 ns", ACC_Q_TIME, &v), 0), assert_true(fabs(v - 0.25) < 1e-12);
  assert_int_equal(acc_parse_quantity("1.5 s", ACC_Q_TIME, &v), 0), assert_true(fabs(v - 1.5e6) < 1e-6);
  assert_int_equal(acc_parse_quantity("10 us", ACC_Q_RATE, &v), -1);
  assert_int_equal(acc_parse_quantity("10 gb/s", ACC_Q_RATE, &v), -1);
  assert_int_equal(acc_parse_quantity("nan GB/s", ACC_Q_RATE, &v), -1);
  assert_int_equal(acc_parse_quantity("1e999 GB/s", ACC_Q_RATE, &v), -1);
  assert_int_equal(acc_parse_quantity("GB/s", ACC_Q_RATE, &v), -1);
}

static void check_compress(const char *const *in, int n, const char *want) {
  char out[512];
  assert_true(acc_hostlist_compress((char *const *)in, n, out, sizeof out) >= 0);
  assert_string_equal(out, want);
  /* and back: the expansion holds every name once */
  char **h = NULL, err[256];
  int m = acc_hostlist_expand(out, &h, err, sizeof err);
  if (n) {
    assert_true(m > 0);
    for (int i = 0; i < n; i++) {
      int found = 0;
      for (int k = 0; k < m; k++) found |= !strcmp(h[k], in[i]);
      if (!found) fail_msg("%s lost in %s", in[i], out);
    }
    acc_hostlist_free(h, m);
  }
}

static void test_hostlist(void **state) {
  (void)state;
  check_compress((const char *[]){"node17", "node03"}, 2, "node[03,17]");
  check_compress((const char *[]){"node03", "node01", "node02", "node05", "node02"}, 5, "node[01-03,05]");
  check_compress((const char *[]){"node2", "node10", "node3"}, 3, "node[2-3,10]");
  check_compress((const char *[]){"login", "node1"}, 2, "login,node1");
  check_compress((const char *[]){"a1", "b1", "a2"}, 3, "a[1-2],b1");
  check_compress((const char *[]){"n009", "n010", "n9"}, 3, "n9,n[009-010]");
  check_compress(NULL, 0, "");
  char **h = NULL, err[256];
  int n = acc_hostlist_expand("node[01-03,07],login1", &h, err, sizeof err);
  assert_int_equal(n, 5);
  assert_string_equal(h[0], "node01");
  assert_string_equal(h[2], "node03");
  assert_string_equal(h[3], "node07");
  assert_string_equal(h[4], "login1");
  acc_hostlist_free(h, n);
  const char *bad[] = {"", "node[", "node[3-1]", "node[a]", "[1-2]", "node[1]x", "a,,b", "a,", "node[1-2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = '\0';
    if (acc_hostlist_expand(bad[i], &h, err, sizeof err) != -1) fail_msg("'%s' accepted", bad[i]);
    assert_non_null(strstr(err, "bad hostlist"));
  }
}

static void test_outliers(void **state) {
  (void)state;
  int out[8];
  double med;
  /* hand-worked: median 10, deviations 0,0.2,0.3,0.1,6 -> MAD 0.2, 3 x 1.4826 x 0.2 = 0.89 < 2.5 */
  double x[] = {10, 10.2, 9.7, 9.9, 4};
  assert_int_equal(acc_outliers(x, 5, 0, &med, out), 1);
  assert_true(fabs(med - 9.9) < 1e-12);
  assert_int_equal(out[4], 1);
  assert_int_equal(out[0] + out[1] + out[2] + out[3], 0);
  /* uniform: nobody, even with MAD 0 */
  double u[] = {5, 5, 5, 5};
  assert_int_equal(acc_outliers(u, 4, 0, &med, out), 0);
  /* a 10% dip is noise, not a fault */
  double d[] = {5, 5, 5, 4.5};
  assert_int_equal(acc_outliers(d, 4, 0, &med, out), 0);
  /* latencies: higher is worse, twice the median needed */
  double l[] = {10, 11, 10, 25};
  assert_int_equal(acc_outliers(l, 4, 1, &med, out), 1);
  assert_int_equal(out[3], 1);
  double l2[] = {10, 11, 10, 18};
  assert_int_equal(acc_outliers(l2, 4, 1, &med, out), 0);
  /* two figures cannot tell who is off */
  assert_int_equal(acc_outliers(x, 2, 0, &med, out), 0);
}

/* ---- run directories written here ---- */

#define NODES 4
/* A run directory's run.json (made in g_dir/name) for `command` with argv: 4 hosts node0..3 of
 * one topology, node3's hash3 where given. The caller adds its own fields and writes it. */
static cJSON *run_meta(const char *name, const char *const *args, int nargs, const char *hash3) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  assert_int_equal(mkdir(dir, 0777), 0);
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "schema", 1);
  cJSON_AddStringToObject(m, "run_id", name);
  cJSON_AddStringToObject(m, "command", args[0]);
  cJSON *av = cJSON_AddArrayToObject(m, "argv");
  for (int i = 0; i < nargs; i++) cJSON_AddItemToArray(av, cJSON_CreateString(args[i]));
  cJSON *hosts = cJSON_AddArrayToObject(m, "hosts");
  for (int h = 0; h < NODES; h++) {
    char hn[16];
    snprintf(hn, sizeof hn, "node%d", h);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "host", hn);
    cJSON_AddStringToObject(o, "topo_hash", h == 3 && hash3 ? hash3 : "aaaabbbbccccdddd");
    cJSON_AddItemToArray(hosts, o);
  }
  return m;
}
/* A p2p run of 4 hosts (one rank each) over an emulated 1 Gbit/s: every ordered pair's bw at
 * 1 MiB, 0.12 GB/s with a little deterministic noise, times slow_host's links' factor (or
 * slow link's), and wrong bytes where asked. hash3: node3's topo_hash. */
static void write_p2p_run(const char *name, int slow_host, int slow_src, int slow_dst, double factor, int errors,
                          const char *hash3) {
  char dir[512], err[512];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  const char *args[] = {"p2p", "--pairs", "all", "--tests", "bw"};
  cJSON *m = run_meta(name, args, 5, hash3);
  cJSON_AddStringToObject(m, "emulated_rate", "1gbit");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "p2p"), "status", errors ? "wrong data" : "ok");
  assert_int_equal(res_meta_write(dir, m, err, sizeof err), 0);
  cJSON_Delete(m);
  res_table *t = NULL;
  assert_int_equal(res_table_open_schema(&t, dir, res_schema_p2p(), err, sizeof err), 0);
  int k = 0;
  for (int s = 0; s < NODES; s++)
    for (int d = 0; d < NODES; d++) {
      if (s == d) continue;
      char sh[16], dh[16];
      snprintf(sh, sizeof sh, "node%d", s);
      snprintf(dh, sizeof dh, "node%d", d);
      double bw = 0.12 * (1 + 0.03 * ((k++ * 7) % 5 - 2) / 2.0);
      if (s == slow_host || d == slow_host || (s == slow_src && d == slow_dst)) bw *= factor;
      res_p2p_row r;
      res_row_init(res_schema_p2p(), &r);
      r.run_id = name;
      r.schema = 1;
      r.ranks = NODES;
      r.fabric = "emu-1gbit";
      r.transport = "tcp";
      r.test = "bw";
      r.src = s;
      r.dst = d;
      r.bytes = 1 << 20;
      r.iters = 10;
      r.t_p50_us = r.t_min_us = r.t_p99_us = r.t_max_us = r.t_mean_us = (double)(1 << 20) / (bw * 1e3);
      r.gbps = r.gbps_mean = bw;
      r.gbit_s = bw * 8;
      r.host = "node0";
      r.topo_hash = "aaaabbbbccccdddd";
      r.window = 64;
      r.t_stddev_us = 0;
      r.errors = errors && s == 1 ? errors : 0;
      r.src_host = sh;
      r.dst_host = dh;
      r.link = "emu-1gbit";
      assert_int_equal(res_table_put(t, &r, err, sizeof err), 0);
    }
  res_table_close(t);
}

/* Each host's hwloc XML in a run directory: node3 a synthetic machine of one package of 4
 * cores, the others two packages of 4. */
static void write_topo_xmls(const char *name) {
  for (int h = 0; h < NODES; h++) {
    topo_opts o = {.synthetic = h == 3 ? "pack:1 core:4 pu:1" : "pack:2 core:4 pu:1", .nvml = TOPO_NVML_OFF};
    topo_info *ti = NULL;
    char err[256], p[512];
    if (topo_load(&ti, &o, err, sizeof err)) fail_msg("%s", err);
    snprintf(p, sizeof p, "%s/%s/topo-node%d.xml", g_dir, name, h);
    assert_int_equal(topo_write_xml(ti, p, err, sizeof err), 0);
    topo_free(ti);
  }
}

/* A model of the emulated link: alpha 10 us, 1 Gbit/s. */
static void write_model(void) {
  res_costmodel m = {0};
  m.f = calloc(1, sizeof *m.f);
  m.n = 1;
  m.gamma_kernel = NAN;
  snprintf(m.f[0].fabric, sizeof m.f[0].fabric, "emu-1gbit");
  snprintf(m.f[0].transport, sizeof m.f[0].transport, "tcp");
  snprintf(m.f[0].source, sizeof m.f[0].source, "p2p");
  m.f[0].host_count = 2;
  coll_model_default(&m.f[0].m, COLL_TCP);
  m.f[0].m.alpha = 10e-6;
  m.f[0].m.beta = 8e-9;
  char p[512], err[512];
  snprintf(p, sizeof p, "%s/model.json", g_dir);
  assert_int_equal(res_costmodel_write(&m, p, err, sizeof err), 0);
  free(m.f);
}

static const char cli_rules[] =
    "model: model.json\n"
    "reference: uniform\n"
    "rules:\n"
    "  - name: abs\n    run: p2p -n 4 --pairs all --tests bw\n    metric: bw\n    at_least: 0.1 GB/s\n"
    "  - name: link\n    run: p2p --pairs all --tests bw\n    metric: bw\n    at_least: 0.9 x link\n"
    "  - name: model\n    run: p2p --pairs all\n    metric: bw\n    at_least: 0.85 x model\n"
    "  - name: ref\n    run: p2p --pairs all\n    metric: bw\n    at_least: 0.9 x reference\n"
    "  - name: nodes\n    run: p2p --tests bw\n    metric: bw\n    at_least: 0.8 x median of nodes\n";

/* Runs fabench accept --rules RULES --out OUT --from DIRS... in g_dir, stdout and stderr in
 * g_dir/OUT.log, and fails (showing the log) unless it exits with want. */
#define accept_run(rules, out, dirs, extra, want) accept_run_(rules, out, dirs, extra, want, __LINE__)
static void accept_run_(const char *rules, const char *out, const char *dirs, const char *extra, int want, int line) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && %s accept --rules %s --out %s %s %s%s > %s.log 2>&1", g_dir, getenv("FABENCH_BIN"),
           rules, out, extra ? extra : "", dirs ? "--from " : "", dirs ? dirs : "", out);
  int st = system(cmd);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
    char log[512];
    snprintf(log, sizeof log, "%s/%s.log", g_dir, out);
    char *text = tu_slurp(log, NULL), shown[8192];
    snprintf(shown, sizeof shown, "%s", text ? text : "(none)");
    free(text);
    fail_msg("line %d: %s: status %d, wanted %d; its output:\n%s", line, cmd, WIFEXITED(st) ? WEXITSTATUS(st) : -1, want,
             shown);
  }
}

static char *slurp_in(const char *rel) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", g_dir, rel);
  char *s = tu_slurp(p, NULL);
  if (!s) fail_msg("cannot read %s", p);
  return s;
}

/* accept.xml: valid against the JUnit schema CI systems read (tests/bench/junit.xsd, through
 * xmllint), one testsuite, a testcase per rule and the topology, failures where accept.json says
 * fail (python3's parser). */
static void check_junit(const char *out, int cases, int failures) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "xmllint --noout --schema %s/tests/bench/junit.xsd %s/%s/accept.xml",
           getenv("FABENCH_SRC"), g_dir, out);
  assert_int_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import sys, xml.etree.ElementTree as E\n"
           "r = E.parse(sys.argv[1]).getroot()\n"
           "assert r.tag == \"testsuites\", r.tag\n"
           "s = r.findall(\"testsuite\"); assert len(s) == 1\n"
           "c = s[0].findall(\"testcase\"); assert len(c) == int(sys.argv[2]), len(c)\n"
           "f = [x for x in c if x.find(\"failure\") is not None or x.find(\"error\") is not None]\n"
           "assert len(f) == int(sys.argv[3]), len(f)\n"
           "assert int(s[0].get(\"tests\")) == len(c)\n"
           "assert int(s[0].get(\"failures\")) + int(s[0].get(\"errors\")) == len(f)\n"
           "assert all(x.get(\"name\") and x.get(\"classname\") and x.get(\"time\") is not None for x in c)\n"
           "' %s/%s/accept.xml %d %d",
           g_dir, out, cases, failures);
  assert_int_equal(system(cmd), 0);
}

static cJSON *accept_json(const char *out) {
  char p[512];
  cJSON *o = NULL;
  snprintf(p, sizeof p, "%s/%s/accept.json", g_dir, out);
  assert_int_equal(util_json_read_file(p, &o, NULL, 0), 0);
  return o;
}

static void test_cli_from(void **state) {
  (void)state;
  write_p2p_run("uniform", -1, -1, -1, 1, 0, NULL);
  write_p2p_run("slowhost", 2, -1, -1, 0.4, 0, NULL);
  write_p2p_run("slowlink", -1, 1, 3, 0.3, 0, NULL);
  write_p2p_run("wrong", -1, -1, -1, 1, 5, NULL);
  write_p2p_run("otherhash", -1, -1, -1, 1, 0, "eeeeffff00001111");
  write_topo_xmls("otherhash");
  write_model();
  assert_int_equal(tu_write(g_dir, "rules.yaml", cli_rules), 0);

  /* uniform: every kind passes, nobody named, suspects.txt empty */
  accept_run("rules.yaml", "a-uniform", "uniform", NULL, 0);
  check_junit("a-uniform", 6, 0);
  char *s = slurp_in("a-uniform/suspects.txt");
  assert_string_equal(s, "");
  free(s);
  cJSON *o = accept_json("a-uniform");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "suspects")), 0);
  cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "rules"), 1); /* link: 0.9 x 0.125 GB/s */
  assert_true(fabs(cJSON_GetObjectItem(r0, "threshold")->valuedouble - 0.1125) < 1e-9);
  cJSON_Delete(o);

  /* a slow host: every relative rule fails, node2 named alone, first */
  accept_run("rules.yaml", "a-slowhost", "slowhost", NULL, 1);
  check_junit("a-slowhost", 6, 5);
  s = slurp_in("a-slowhost/suspects.txt");
  assert_string_equal(s, "node2\n");
  free(s);
  o = accept_json("a-slowhost");
  cJSON *sus = cJSON_GetObjectItem(o, "suspects");
  assert_int_equal(cJSON_GetArraySize(sus), 1);
  cJSON *first = cJSON_GetArrayItem(sus, 0);
  assert_string_equal(cJSON_GetObjectItem(first, "host")->valuestring, "node2");
  assert_string_equal(cJSON_GetObjectItem(first, "kind")->valuestring, "host");
  assert_int_equal(cJSON_GetObjectItem(first, "rank")->valueint, 2);
  assert_int_equal(cJSON_GetObjectItem(first, "order")->valueint, 1);
  assert_non_null(strstr(cJSON_GetObjectItem(first, "evidence")->valuestring, "host node2: its links at 0.4"));
  cJSON *nodes = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "rules"), 4);
  assert_non_null(strstr(cJSON_GetObjectItem(nodes, "where")->valuestring, "host node2"));
  cJSON_Delete(o);

  /* a slow link: named as the link, neither of its hosts alone */
  accept_run("rules.yaml", "a-slowlink", "slowlink", NULL, 1);
  o = accept_json("a-slowlink");
  sus = cJSON_GetObjectItem(o, "suspects");
  assert_int_equal(cJSON_GetArraySize(sus), 1);
  first = cJSON_GetArrayItem(sus, 0);
  assert_string_equal(cJSON_GetObjectItem(first, "kind")->valuestring, "link");
  assert_string_equal(cJSON_GetObjectItem(first, "link")->valuestring, "node1->node3");
  const char *ev = cJSON_GetObjectItem(first, "evidence")->valuestring;
  /* hand-worked: 0.12 x 0.97 (its noise) x 0.3 against the others' median 0.12 */
  if (!strstr(ev, "link node1->node3: 0.29 of the median bw (0.03492 vs 0.12 GB/s) over 1 run")) fail_msg("evidence: %s", ev);
  cJSON_Delete(o);
  s = slurp_in("a-slowlink/suspects.txt");
  assert_string_equal(s, "node[1,3]\n");
  free(s);
  /* --exclude leaves a host out of the judging and the naming */
  accept_run("rules.yaml", "a-excl", "slowhost", "--exclude node[2]", 0);

  /* wrong elements fail whatever the threshold says */
  accept_run("rules.yaml", "a-wrong", "wrong", NULL, 1);
  s = slurp_in("a-wrong.log");
  assert_non_null(strstr(s, "wrong data"));
  free(s);

  /* a host whose topology differs from the majority's is named, and the topology fails */
  accept_run("rules.yaml", "a-hash", "otherhash", NULL, 1);
  s = slurp_in("a-hash/suspects.txt");
  assert_string_equal(s, "node3\n");
  free(s);
  s = slurp_in("a-hash.log");
  assert_non_null(strstr(s, "host node3: topology eeeeffff00001111 differs from the majority's aaaabbbbccccdddd (3 of 4 hosts): "
                      "1 CPU packages (majority 2), 4 cores (majority 8), 4 hardware threads (majority 8)"));
  free(s);

  /* the rules' topology expectations against a recorded topology (a topo run's topo.json) */
  char tdir[600];
  snprintf(tdir, sizeof tdir, "%s/topo-a", g_dir);
  assert_int_equal(mkdir(tdir, 0777), 0);
  strcat(tdir, "/t"); /* the rule's folder, as an earlier accept run left it */
  assert_int_equal(mkdir(tdir, 0777), 0);
  assert_int_equal(tu_write(tdir, "topo.json",
                            "{\"schema\": \"fabench-topo\", \"host\": \"gpu7\", \"topo_hash\": \"0123456789abcdef\","
                            " \"gpus\": [{\"name\": \"GPU0\", \"pcie\": {\"cur_width\": 8}}],"
                            " \"nics\": [{\"name\": \"mlx5_0\", \"speed_gbps\": 200, \"pcie\": {\"cur_width\": 16}}]}"),
                   0);
  assert_int_equal(tu_write(g_dir, "topo-bad.yaml", "topology:\n  gpus: 2\n  nic_speed: 400 Gbit/s\n  pcie_width: 16\n"
                                                   "rules:\n  - name: t\n    run: topo\n"),
                   0);
  assert_int_equal(tu_write(g_dir, "topo-good.yaml", "topology:\n  gpus: 1\n  nic_speed: 200 Gbit/s\n  pcie_width: 8\n"
                                                    "rules:\n  - name: t\n    run: topo\n"),
                   0);
  accept_run("topo-good.yaml", "a-topo-good", "topo-a", NULL, 0);
  accept_run("topo-bad.yaml", "a-topo-bad", "topo-a", NULL, 1);
  s = slurp_in("a-topo-bad.log");
  if (!strstr(s, "gpu7: 1 GPUs, expected 2; gpu7: fastest NIC 200 Gbit/s, expected 400; gpu7: GPU0 at PCIe x8, expected x16"))
    fail_msg("%s", s);
  free(s);

  /* nothing measured the rules' runs: could not measure */
  assert_int_equal(tu_write(g_dir, "train.yaml", "rules:\n  - name: img\n    run: train\n    metric: images_per_s\n"
                                                 "    at_least: 1 images/s\n"),
                   0);
  accept_run("train.yaml", "a-none", "uniform", NULL, 3);
  check_junit("a-none", 2, 2);

  /* rules and usage errors: 2, naming the file and line */
  assert_int_equal(tu_write(g_dir, "broken.yaml", "rules:\n  - name: a\n    run: p2p\n    metric: bw\n    at_least: 3 parsecs\n"), 0);
  accept_run("broken.yaml", "a-broken", "uniform", NULL, 2);
  s = slurp_in("a-broken.log");
  assert_non_null(strstr(s, "broken.yaml:5: key 'at_least'"));
  free(s);
  accept_run("rules.yaml", "a-usage", "uniform", "--colour", 2);
  accept_run("rules.yaml", "a-nodir", "no-such-dir", NULL, 2);
  accept_run("rules.yaml", "a-excl2", "uniform", "--exclude node[", 2);
}

/* A run.json of a command that ended ok (or with status). */
static void write_meta(const char *dir, const char *command, const char *status) {
  char err[512];
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "schema", 1);
  cJSON_AddStringToObject(m, "run_id", command);
  cJSON_AddStringToObject(m, "command", command);
  cJSON *av = cJSON_AddArrayToObject(m, "argv");
  const char *args[] = {command, "--transport", "tcp"};
  for (int i = 0; i < 3; i++) cJSON_AddItemToArray(av, cJSON_CreateString(args[i]));
  cJSON *topo = cJSON_AddObjectToObject(m, "topology");
  cJSON_AddStringToObject(topo, "host", "vm");
  cJSON_AddStringToObject(topo, "topo_hash", "aaaabbbbccccdddd");
  cJSON_AddStringToObject(m, "status", status);
  assert_int_equal(res_meta_write(dir, m, err, sizeof err), 0);
  cJSON_Delete(m);
}

/* An all-reduce run: tcp ring at 4 MiB (busbw 0.5 GB/s, 900 us) and 64 MiB (busbw 2 GB/s),
 * wrong elements at 64 MiB where asked. */
static void write_allreduce_run(const char *name, int64_t errors) {
  char dir[512], err[512];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  assert_int_equal(mkdir(dir, 0777), 0);
  write_meta(dir, "allreduce", "ok"); /* the rows alone tell the wrong elements */
  res_table *t = NULL;
  assert_int_equal(res_table_open_schema(&t, dir, res_schema_allreduce(), err, sizeof err), 0);
  for (int k = 0; k < 2; k++) {
    res_allreduce_row r;
    res_row_init(res_schema_allreduce(), &r);
    r.run_id = name;
    r.schema = 1;
    r.host_count = 1;
    r.ranks = 2;
    r.fabric = "tcp:lo/reno";
    r.transport = "tcp";
    r.algo = r.algo_ran = "ring";
    r.dtype = "f32";
    r.op = "sum";
    r.bytes = k ? 64 << 20 : 4 << 20;
    r.count = r.bytes / 4;
    r.iters = 10;
    r.timing = "barrier";
    r.busbw_gbps = k ? 2.0 : 0.5;
    r.algbw_gbps = r.busbw_gbps; /* 2 ranks: 2(n-1)/n = 1 */
    r.t_p50_us = r.t_min_us = r.t_p90_us = r.t_max_us = r.t_mean_us = (double)r.bytes / (r.algbw_gbps * 1e3);
    r.t_p99_us = k ? 40000 : 9000;
    r.errors = k ? errors : 0;
    r.host = "vm";
    r.topo_hash = "aaaabbbbccccdddd";
    r.boot = "env";
    assert_int_equal(res_table_put(t, &r, err, sizeof err), 0);
  }
  res_table_close(t);
}

/* A train run: the ranks with no exchange (role none, 300 images/s: not the job) and a
 * data-parallel pair at 800 images/s. */
static void write_train_run(const char *name) {
  char dir[512], err[512];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  assert_int_equal(mkdir(dir, 0777), 0);
  write_meta(dir, "train", "ok");
  res_table *t = NULL;
  assert_int_equal(res_table_open_schema(&t, dir, res_schema_train(), err, sizeof err), 0);
  for (int k = 0; k < 2; k++) {
    res_train_row r;
    res_row_init(res_schema_train(), &r);
    r.run_id = name;
    r.schema = 1;
    r.ranks = 2;
    r.role = k ? "dp" : "none";
    r.transport = "tcp";
    r.algo = "ring";
    r.status = "done";
    r.images_per_s = k ? 800 : 300;
    assert_int_equal(res_table_put(t, &r, err, sizeof err), 0);
  }
  res_table_close(t);
}

/* A train run whose steps (3 ranks x 10 measured steps of about 100 ms, tcp ring) have rank `slow`
 * arriving last: it computes 98 ms and waits 2, the others compute about 70 and wait 30 (-1: all
 * compute 97 and wait 3). */
static void write_train_steps_run(const char *name, int slow) {
  char dir[512], err[512];
  write_train_run(name);
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  res_table *t = NULL;
  assert_int_equal(res_table_open_schema(&t, dir, res_schema_train_steps(), err, sizeof err), 0);
  for (int step = 1; step <= 12; step++)
    for (int r = 0; r < 3; r++) {
      res_train_steps_row q;
      res_row_init(res_schema_train_steps(), &q);
      char host[16];
      snprintf(host, sizeof host, "node%d", r);
      q.run_id = name;
      q.rank = r;
      q.host = host;
      q.transport = "tcp";
      q.algo = "ring";
      q.step = step;
      q.images = 32;
      q.step_ms = 100 + (step % 3);
      /* the rest of the step is waiting: 2 ms for the slow rank, about 30 for the others */
      q.fwd_ms = 30;
      q.bwd_ms = slow < 0 ? 66 : r == slow ? 67 : 39 - (step % 2);
      q.opt_ms = 1;
      q.exposed_comm_ms = slow < 0 ? 1 : r == slow ? 1 : 10;
      q.warmup = step <= 2;
      assert_int_equal(res_table_put(t, &q, err, sizeof err), 0);
    }
  res_table_close(t);
}

/* The rank the others wait for is named from the steps' waits, with its host; nobody where the
 * waits are even. */
static void test_cli_straggler(void **state) {
  (void)state;
  write_train_steps_run("tr-slow", 1);
  write_train_steps_run("tr-even", -1);
  assert_int_equal(tu_write(g_dir, "strag.yaml",
                            "rules:\n  - name: img\n    run: train\n    metric: images_per_s\n    at_least: 100 images/s\n"),
                   0);
  accept_run("strag.yaml", "a-slow", "tr-slow", NULL, 0);
  cJSON *o = accept_json("a-slow");
  cJSON *sus = cJSON_GetObjectItem(o, "suspects");
  assert_int_equal(cJSON_GetArraySize(sus), 1);
  cJSON *s0 = cJSON_GetArrayItem(sus, 0);
  assert_string_equal(cJSON_GetObjectItem(s0, "kind")->valuestring, "rank");
  assert_string_equal(cJSON_GetObjectItem(s0, "host")->valuestring, "node1");
  assert_int_equal(cJSON_GetObjectItem(s0, "rank")->valueint, 1);
  const char *ev = cJSON_GetObjectItem(s0, "evidence")->valuestring;
  if (!strstr(ev, "rank 1 (node1): the other ranks waited 3") || !strstr(ev, "ms for it each step")) fail_msg("%s", ev);
  cJSON_Delete(o);
  char *txt = slurp_in("a-slow/suspects.txt");
  assert_string_equal(txt, "node1\n");
  free(txt);
  accept_run("strag.yaml", "a-even", "tr-even", NULL, 0);
  o = accept_json("a-even");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "suspects")), 0);
  cJSON_Delete(o);
}

/* A real straggler: two ranks bound a core each, a busy loop on rank 1's core, so rank 1
 * computes each step at half speed and rank 0 waits for it; accept names rank 1 (where there
 * are two cores to bind to). */
static void test_cli_straggler_hog(void **state) {
  (void)state;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) || !CPU_ISSET(0, &set) || !CPU_ISSET(1, &set)) {
    fprintf(stderr, "SKIP: no cores 0 and 1 to bind two ranks to\n");
    skip();
  }
  pid_t hog = fork();
  if (hog == 0) { /* the busy loop, on core 1 until killed */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    sched_setaffinity(0, sizeof one, &one);
    for (volatile unsigned long i = 0;; i++) {
    }
  }
  assert_true(hog > 0);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s train -n 2 --bind core --threads 1 --model resnet20 --data synthetic:3x32x32:10:256 "
           "--batch 16 --steps 16 --warmup-steps 4 --eval-every 0 --transport tcp --no-single --telemetry-hz 0 "
           "--out hogrun > hogrun.log 2>&1",
           g_dir, getenv("FABENCH_BIN"));
  int st = system(cmd);
  kill(hog, SIGKILL);
  waitpid(hog, NULL, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st)) fail_msg("%s: status %d", cmd, st);
  assert_int_equal(tu_write(g_dir, "hog.yaml",
                            "rules:\n  - name: img\n    run: train\n    metric: images_per_s\n    at_least: 1 images/s\n"),
                   0);
  accept_run("hog.yaml", "a-hog", "hogrun", NULL, 0);
  cJSON *o = accept_json("a-hog");
  cJSON *sus = cJSON_GetObjectItem(o, "suspects");
  char *txt = cJSON_Print(sus);
  if (cJSON_GetArraySize(sus) != 1 || cJSON_GetObjectItem(cJSON_GetArrayItem(sus, 0), "rank")->valueint != 1 ||
      strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(sus, 0), "kind")->valuestring, "rank"))
    fail_msg("want rank 1 named alone:\n%s", txt);
  free(txt);
  cJSON_Delete(o);
}

/* An allreduce --pairs all (pairs: 4 hosts of one rank, a row per pair a < b, busbw 0.12 GB/s
 * with p2p's noise) or --nodes alone run (4 hosts of two ranks, a row per node, 2 GB/s with the
 * noise) at 1 MiB; slow_host's rows (and the pair slow_a, slow_b) times factor. */
static void write_groups_run(const char *name, int pairs, int slow_host, int slow_a, int slow_b, double factor) {
  char dir[512], err[512];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  const char *args[] = {"allreduce", pairs ? "--pairs" : "--nodes", pairs ? "all" : "alone"};
  cJSON *m = run_meta(name, args, 3, NULL);
  cJSON_AddStringToObject(m, "status", "ok");
  assert_int_equal(res_meta_write(dir, m, err, sizeof err), 0);
  cJSON_Delete(m);
  res_table *t = NULL;
  assert_int_equal(res_table_open_schema(&t, dir, res_schema_allreduce_groups(), err, sizeof err), 0);
  int k = 0;
  for (int a = 0; a < NODES; a++)
    for (int b = pairs ? a + 1 : -1; b < (pairs ? NODES : 0); b++) {
      char ah[16], bh[16];
      snprintf(ah, sizeof ah, "node%d", a);
      snprintf(bh, sizeof bh, "node%d", pairs ? b : a);
      double bw = (pairs ? 0.12 : 2.0) * (1 + 0.03 * ((k++ * 7) % 5 - 2) / 2.0);
      if (a == slow_host || b == slow_host || (a == slow_a && b == slow_b)) bw *= factor;
      res_allreduce_groups_row r;
      res_row_init(res_schema_allreduce_groups(), &r);
      r.run_id = name;
      r.schema = 1;
      r.fabric = "emu-1gbit";
      r.transport = "tcp";
      r.algo = "ring";
      r.dtype = "f32";
      r.mode = pairs ? "all" : "alone";
      r.group = pairs ? "pair" : "node";
      r.round = pairs ? k - 1 : 0;
      r.src = pairs ? a : 2 * a;
      r.dst = pairs ? b : -1;
      r.src_host = ah;
      r.dst_host = bh;
      r.ranks = 2;
      r.bytes = 1 << 20;
      r.iters = 10;
      r.algbw_gbps = r.busbw_gbps = bw; /* two ranks: 2(n-1)/n = 1 */
      r.t_p50_us = r.t_p99_us = (double)(1 << 20) / (bw * 1e3);
      r.errors = 0;
      r.topo_hash = "aaaabbbbccccdddd";
      assert_int_equal(res_table_put(t, &r, err, sizeof err), 0);
    }
  res_table_close(t);
}

/* The one suspect of an accept run: its kind, host, rank and evidence (hand-worked). */
static void check_one_suspect(const char *out, const char *kind, const char *host, int rank, const char *evidence) {
  cJSON *o = accept_json(out);
  cJSON *sus = cJSON_GetObjectItem(o, "suspects");
  char *txt = cJSON_Print(sus);
  cJSON *f = cJSON_GetArrayItem(sus, 0);
  if (cJSON_GetArraySize(sus) != 1 || strcmp(cJSON_GetObjectItem(f, "kind")->valuestring, kind) ||
      strcmp(cJSON_GetObjectItem(f, "host")->valuestring, host) || cJSON_GetObjectItem(f, "rank")->valueint != rank ||
      !strstr(cJSON_GetObjectItem(f, "evidence")->valuestring, evidence))
    fail_msg("%s: want %s %s (rank %d) alone with '%s':\n%s", out, kind, host, rank, evidence, txt);
  free(txt);
  cJSON_Delete(o);
}

/* Runs `fabench accept ARGS` in g_dir into LOG, wanting exit status want; the log's text. */
static char *accept_args(const char *args, const char *log, int want) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd %s && %s accept %s > %s 2>&1", g_dir, getenv("FABENCH_BIN"), args, log);
  int st = system(cmd);
  char *text = slurp_in(log);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != want) fail_msg("%s: status %d, wanted %d:\n%s", cmd, st, want, text);
  return text;
}

/* The flags from one table: --help lists each with the default, bad values refused naming them. */
static void test_cli_flags(void **state) {
  (void)state;
  char *s = accept_args("--help", "help.log", 0);
  const char *want[] = {"--rules FILE", "--from DIR...", "--exclude HOSTLIST", "--run-timeout S", "(default: 3600)",
                        "--out DIR", "exit status: 0 all rules pass"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(s, want[i])) fail_msg("--help lacks '%s':\n%s", want[i], s);
  free(s);
  const char *bad[][2] = {{"--rules r.yaml --run-timeout 0", "bad --run-timeout '0' (seconds, 1 to a week)"},
                          {"--rules r.yaml --run-timeout 1e9", "bad --run-timeout '1e9'"},
                          {"--rules", "option '--rules' needs a value"},
                          {"--run-timeout 5", "--rules FILE is needed"},
                          {"--rules r.yaml --from a --from b", "--from given twice"},
                          {"--rules r.yaml stray", "unexpected argument 'stray'"},
                          {"--rules r.yaml --from a b -x", "--from: '-x' is not a directory"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    s = accept_args(bad[i][0], "bad.log", 2);
    if (!strstr(s, bad[i][1])) fail_msg("accept %s: wanted '%s':\n%s", bad[i][0], bad[i][1], s);
    free(s);
  }
}

/* allreduce --pairs and --nodes: a slow node among the pairs, a slow pair, a node slow inside
 * itself are named from the groups' busbw, each alone; a uniform run names nobody. */
static void test_cli_groups(void **state) {
  (void)state;
  write_groups_run("gp-uniform", 1, -1, -1, -1, 1);
  write_groups_run("gp-slowhost", 1, 3, -1, -1, 0.4);
  write_groups_run("gp-slowpair", 1, -1, 0, 2, 0.3);
  write_groups_run("gn-uniform", 0, -1, -1, -1, 1);
  write_groups_run("gn-slow", 0, 1, -1, -1, 0.25);
  assert_int_equal(tu_write(g_dir, "gp.yaml", "rules:\n  - name: pairs\n    run: allreduce --pairs all\n"
                                              "    metric: busbw\n    at_least: 0.8 x median of nodes\n"), 0);
  assert_int_equal(tu_write(g_dir, "gn.yaml", "rules:\n  - name: nodes\n    run: allreduce --nodes alone\n"
                                              "    metric: busbw\n    at_least: 1 GB/s\n"), 0);
  accept_run("gp.yaml", "a-gp-uniform", "gp-uniform", NULL, 0);
  cJSON *o = accept_json("a-gp-uniform");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "suspects")), 0);
  cJSON_Delete(o);
  /* node3's three pairs at 0.4: hosts' medians 0.97, 0.97, 0.985 (x 0.12) and node3's 0.406;
   * the rank is node3's though it is every pair's higher end */
  accept_run("gp.yaml", "a-gp-slowhost", "gp-slowhost", NULL, 1);
  check_one_suspect("a-gp-slowhost", "host", "node3", 3,
                    "host node3: its links at 0.42 of the median busbw (0.04872 vs 0.1164 GB/s) over 1 run");
  /* the pair 0-2 at 0.3 against the pairs' median (0.97 + 0.985) / 2: no host explains it */
  accept_run("gp.yaml", "a-gp-slowpair", "gp-slowpair", NULL, 0);
  check_one_suspect("a-gp-slowpair", "link", "node0", 0,
                    "link node0->node2: 0.31 of the median busbw (0.036 vs 0.1173 GB/s) over 1 run");
  accept_run("gn.yaml", "a-gn-uniform", "gn-uniform", NULL, 0);
  o = accept_json("a-gn-uniform");
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "suspects")), 0);
  cJSON_Delete(o);
  /* node1 alone at 0.5 GB/s against the nodes' median (1.94 + 1.97) / 2 */
  accept_run("gn.yaml", "a-gn-slow", "gn-slow", NULL, 1);
  check_one_suspect("a-gn-slow", "host", "node1", 2,
                    "host node1: inside it 0.26 of the median busbw between ranks of one host (0.5 vs 1.955 GB/s)");

  /* fabench report of accept runs: the verdict, the rules' table, the suspects or nobody */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd %s && %s report --no-plot --out rep a-gp-slowhost a-gn-uniform > rep.log 2>&1", g_dir,
           getenv("FABENCH_BIN"));
  int st = system(cmd);
  char *md = slurp_in(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "rep/report.md" : "rep.log");
  const char *want[] = {"## Acceptance: `a-gp-slowhost`\n\nRules `gp.yaml`: **fail** (exit status 1).",
                        "| pairs | fail | 0.04872 | 0.09312 | busbw 0.04872 GB/s < 0.09312 GB/s (0.8 x median of nodes) at host node3",
                        "| topology | pass | - | - | 4 hosts share one topology |",
                        "Suspects, most suspect first:",
                        "| 1 | host | node3 | 3 | - | host node3: its links at 0.42 of the median busbw (0.04872 vs 0.1164 GB/s) over 1 run |",
                        "## Acceptance: `a-gn-uniform`\n\nRules `gn.yaml`: **pass** (exit status 0).",
                        "Suspects: nobody was named"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(md, want[i])) fail_msg("report lacks '%s':\n%s", want[i], md);
  /* the suspects' table comes before the uniform run's section: the first's, not the second's */
  assert_true(strstr(md, "| 1 | host | node3") < strstr(md, "## Acceptance: `a-gn-uniform`"));
  free(md);
}

/* allreduce's and train's figures: the size judged, the model's prediction, wrong elements. */
static void test_cli_allreduce_train(void **state) {
  (void)state;
  write_allreduce_run("ar", 0);
  write_allreduce_run("ar-wrong", 3);
  write_train_run("tr");
  assert_int_equal(tu_write(g_dir, "ar.yaml",
                            "rules:\n"
                            "  - name: busbw\n    run: allreduce --transport tcp\n    metric: busbw\n    at_least: 1 GB/s\n"
                            "  - name: time\n    run: allreduce\n    metric: time\n    at_most: 10 ms\n"
                            "  - name: p99\n    run: allreduce\n    metric: time_p99\n    at_most: 50 ms\n    bytes: 64M\n"
                            "  - name: img\n    run: train\n    metric: images_per_s\n    at_least: 750 images/s\n"),
                   0);
  /* busbw at the largest size (2 >= 1, though 4 MiB gives 0.5); time at the smallest
   * (4 MiB / 0.5 GB/s = 8389 us <= 10 ms); p99 at 64 MiB; the dp row's 800, not none's 300 */
  accept_run("ar.yaml", "a-ar", "ar tr", NULL, 0);
  cJSON *o = accept_json("a-ar");
  cJSON *rules = cJSON_GetObjectItem(o, "rules");
  assert_true(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(rules, 0), "value")->valuedouble - 2.0) < 1e-9);
  assert_true(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(rules, 1), "value")->valuedouble - 4194304 / 500.0) < 0.01); /* as the CSV keeps it */
  assert_true(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(rules, 2), "value")->valuedouble - 40000) < 1e-9);
  assert_true(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(rules, 3), "value")->valuedouble - 800) < 1e-9);
  cJSON_Delete(o);
  /* x model on a train row the model cannot price (no compute profile): fails, saying so */
  write_model();
  assert_int_equal(tu_write(g_dir, "img.yaml", "model: model.json\nrules:\n  - name: img\n    run: train\n"
                                               "    metric: images_per_s\n    at_least: 0.85 x model\n"),
                   0);
  accept_run("img.yaml", "a-img", "tr", NULL, 1);
  o = accept_json("a-img");
  const char *ev0 = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "rules"), 0), "evidence")->valuestring;
  if (!strstr(ev0, "the model prices no dp tcp ring x2")) fail_msg("%s", ev0);
  cJSON_Delete(o);
  /* wrong elements fail a rule whose figure passes */
  accept_run("ar.yaml", "a-arw", "ar-wrong tr", NULL, 1);
  o = accept_json("a-arw");
  const char *ev = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "rules"), 0), "evidence")->valuestring;
  if (!strstr(ev, "3 wrong elements in ")) fail_msg("%s", ev);
  cJSON_Delete(o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules_every_kind), cmocka_unit_test(test_rules_refused), cmocka_unit_test(test_rules_examples),
      cmocka_unit_test(test_quantity),         cmocka_unit_test(test_hostlist),      cmocka_unit_test(test_outliers),
      cmocka_unit_test(test_cli_from),         cmocka_unit_test(test_cli_allreduce_train),
      cmocka_unit_test(test_cli_straggler),    cmocka_unit_test(test_cli_straggler_hog),
      cmocka_unit_test(test_cli_groups),       cmocka_unit_test(test_cli_flags),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
