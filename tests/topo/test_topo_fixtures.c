/* Detection on hwloc XMLs: the hand-made fixtures (layouts described in
 * fixtures/gen_fixtures.py; the expectations below follow from those descriptions and from
 * nvidia-smi's definitions), the real machines under $FABENCH_SHARED, bad input, and the hash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_topo_common.h"
#include "topo_int.h"

static topo_info *load(const char *fixture, const char *sysfs) {
  char x[1024], s[1024];
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.xml = fixture[0] == '/' ? fixture : tt_fixture(x, sizeof x, fixture);
  if (sysfs) o.sysfs_root = tt_fixture(s, sizeof s, sysfs);
  topo_info *ti = NULL;
  char err[512];
  if (topo_load(&ti, &o, err, sizeof err) != 0) fail_msg("loading %s: %s", fixture, err);
  return ti;
}

static int gpu_by_bdf(const topo_info *ti, const char *bdf) {
  for (int i = 0; i < ti->ngpus; i++)
    if (!strcmp(ti->gpu[i].pci.bdf, bdf)) return i;
  fail_msg("no GPU %s", bdf);
  return -1;
}

static int nic_by_name(const topo_info *ti, const char *name) {
  for (int i = 0; i < ti->nnics; i++)
    if (!strcmp(ti->nic[i].name, name)) return i;
  fail_msg("no NIC %s", name);
  return -1;
}

/* PCI-tree class between two devices, NVLink ignored */
static const char *pci_path(const topo_info *ti, const topo_pcidev *a, const topo_pcidev *b) {
  return topo_path_name(topo_path(ti, a, b, 0, NULL));
}

static const char *shared_fixture(char *buf, size_t cap, const char *name) {
  const char *sh = getenv("FABENCH_SHARED");
  if (!sh) return NULL;
  snprintf(buf, cap, "%s/fixtures/topo/%s", sh, name);
  return access(buf, R_OK) == 0 ? buf : NULL;
}

/* ---- hand-made fixtures ---- */

static void test_dgx8(void **state) {
  (void)state;
  topo_info *ti = load("dgx8.xml", "sysfs/dgx8");
  assert_string_equal(ti->backend, "XML");
  assert_string_equal(ti->host, "dgx-a");
  assert_int_equal(ti->npkgs, 2);
  assert_int_equal(ti->nnuma, 2);
  assert_int_equal(ti->ncores, 8);
  assert_int_equal(ti->ngpus, 8);
  assert_int_equal(ti->nnics, 8);
  for (int g = 0; g < 8; g++) {
    char nic[32];
    snprintf(nic, sizeof nic, "mlx5_%d", g);
    int k = nic_by_name(ti, nic);
    assert_string_equal(ti->nic[k].kind, "infiniband");
    /* one GPU and one NIC per sub-switch: each GPU's own NIC is the nearest, through PIX */
    assert_int_equal(ti->gpu[g].nearest_nic, k);
    assert_string_equal(pci_path(ti, &ti->gpu[g].pci, &ti->nic[k].pci), "PIX");
    /* the other sub-switch of the same PCIe switch */
    assert_string_equal(pci_path(ti, &ti->gpu[g].pci, &ti->nic[k ^ 1].pci), "PXB");
    /* the other switch of the same package: another host bridge, same NUMA node */
    assert_string_equal(pci_path(ti, &ti->gpu[g].pci, &ti->nic[k ^ 2].pci), "NODE");
    /* the other package */
    assert_string_equal(pci_path(ti, &ti->gpu[g].pci, &ti->nic[k ^ 4].pci), "SYS");
    assert_int_equal(ti->gpu[g].pci.numa, g / 4);
    assert_string_equal(ti->gpu[g].pci.cpuset, g < 4 ? "0-3" : "4-7");
    assert_string_equal(ti->gpu[g].model, "NVIDIA H100 80GB HBM3");
    assert_int_equal(ti->gpu[g].switch_links, 18); /* 5+4+4+5 */
  }
  /* NVLink from hwloc's NVLinkBandwidth: every pair through the switches, NV18 */
  assert_string_equal(ti->nvlink_source, "hwloc");
  assert_non_null(ti->nvlinks);
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) {
      int links;
      topo_path_class c = topo_path(ti, &ti->gpu[a].pci, &ti->gpu[b].pci,
                                    ti->nvlinks[a * 8 + b], &links);
      if (a == b) {
        assert_int_equal(c, TOPO_PATH_X);
      } else {
        assert_int_equal(c, TOPO_PATH_NV);
        assert_int_equal(links, 18);
        assert_int_equal(ti->nvvia[a * 8 + b], 1);
      }
    }
  char cls[16]; /* the public form by bus id, as the nccl transport's ranks report them */
  assert_int_equal(topo_gpu_path(ti, ti->gpu[0].pci.bdf, ti->gpu[5].pci.bdf, cls, sizeof cls), 0);
  assert_string_equal(cls, "NV18");
  assert_int_equal(topo_has_ib(ti), 1);
  /* the fake sysfs: GPU0 idles at Gen1 below its Gen5 max, mlx5_0 runs 400 Gb/s */
  assert_int_equal(ti->gpu[0].pci.link.cur_gen, 1);
  assert_int_equal(ti->gpu[0].pci.link.max_gen, 5);
  assert_int_equal(ti->gpu[0].pci.link.downtrained, 1);
  assert_int_equal(ti->nic[0].pci.link.downtrained, 0);
  assert_true(ti->nic[0].speed_gbps == 400.0);
  assert_true(ti->nic[1].speed_gbps < 0); /* not in the tree: unknown */

  /* the JSON says the same */
  cJSON *j = topo_json(ti);
  assert_int_equal(cJSON_GetObjectItem(j, "schema_version")->valueint, TOPO_SCHEMA_VERSION);
  cJSON *pairs = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "nvlink"), "pairs");
  assert_int_equal(cJSON_GetArraySize(pairs), 28);
  cJSON *p0 = cJSON_GetArrayItem(pairs, 0);
  assert_int_equal(cJSON_GetObjectItem(p0, "links")->valueint, 18);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(p0, "via_nvswitch")));
  cJSON *paths = cJSON_GetObjectItem(j, "paths");
  cJSON *row0 = cJSON_GetArrayItem(cJSON_GetObjectItem(paths, "matrix"), 0);
  assert_string_equal(cJSON_GetArrayItem(row0, 0)->valuestring, "X");
  assert_string_equal(cJSON_GetArrayItem(row0, 1)->valuestring, "NV18");
  assert_string_equal(cJSON_GetArrayItem(row0, 8)->valuestring, "PIX");
  assert_string_equal(cJSON_GetArrayItem(row0, 12)->valuestring, "SYS");
  cJSON *g0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), 0);
  assert_string_equal(cJSON_GetObjectItem(g0, "nearest_nic")->valuestring, "mlx5_0");
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(g0, "pcie"), "downtrained")));
  cJSON_Delete(j);
  topo_free(ti);
}

static void test_pcie4(void **state) {
  (void)state;
  topo_info *ti = load("pcie4.xml", NULL);
  assert_int_equal(ti->ngpus, 4);
  assert_int_equal(ti->nnics, 3);
  int g0 = gpu_by_bdf(ti, "0000:03:00.0"), g1 = gpu_by_bdf(ti, "0000:06:00.0"),
      g2 = gpu_by_bdf(ti, "0000:10:00.0"), g3 = gpu_by_bdf(ti, "0000:81:00.0");
  int n0 = nic_by_name(ti, "eth0"), n1 = nic_by_name(ti, "eth1"), n2 = nic_by_name(ti, "eth2");
  const topo_pcidev *G0 = &ti->gpu[g0].pci, *G1 = &ti->gpu[g1].pci, *G2 = &ti->gpu[g2].pci,
                    *G3 = &ti->gpu[g3].pci, *N0 = &ti->nic[n0].pci, *N1 = &ti->nic[n1].pci,
                    *N2 = &ti->nic[n2].pci;
  assert_string_equal(pci_path(ti, G0, N0), "PIX");  /* same switch, one port each */
  assert_string_equal(pci_path(ti, G0, G1), "PXB");  /* G1 sits behind a second switch */
  assert_string_equal(pci_path(ti, G1, N0), "PXB");
  assert_string_equal(pci_path(ti, G0, G2), "PHB");  /* two root ports of one host bridge */
  assert_string_equal(pci_path(ti, G2, N0), "PHB");
  assert_string_equal(pci_path(ti, G0, N1), "NODE"); /* another host bridge, same NUMA */
  assert_string_equal(pci_path(ti, G0, G3), "SYS");  /* the other package */
  assert_string_equal(pci_path(ti, G3, N2), "PHB");
  assert_string_equal(pci_path(ti, G3, N0), "SYS");
  assert_string_equal(pci_path(ti, G0, G0), "X");
  /* symmetric */
  assert_string_equal(pci_path(ti, N0, G1), "PXB");
  assert_string_equal(pci_path(ti, N1, G0), "NODE");
  /* the public form, by CUDA's bus ids (upper-case hex from cudaDeviceGetPCIBusId too) */
  char cls[16];
  assert_int_equal(topo_gpu_path(ti, "0000:03:00.0", "0000:06:00.0", cls, sizeof cls), 0);
  assert_string_equal(cls, "PXB");
  assert_int_equal(topo_gpu_path(ti, "0000:03:00.0", "0000:81:00.0", cls, sizeof cls), 0);
  assert_string_equal(cls, "SYS");
  assert_int_equal(topo_gpu_path(ti, "0000:03:00.0", "0000:10:00.0", cls, sizeof cls), 0);
  assert_string_equal(cls, "PHB");
  assert_int_equal(topo_gpu_path(ti, "0000:10:00.0", "0000:10:00.0", cls, sizeof cls), 0);
  assert_string_equal(cls, "X");
  assert_int_equal(topo_gpu_path(ti, "0000:03:00.0", "0000:99:00.0", cls, sizeof cls), -1);
  assert_int_equal(topo_has_ib(ti), 0); /* three ethernet NICs */
  assert_int_equal(ti->gpu[g0].nearest_nic, n0);
  assert_int_equal(ti->gpu[g1].nearest_nic, n0);
  assert_int_equal(ti->gpu[g2].nearest_nic, n0);
  assert_int_equal(ti->gpu[g3].nearest_nic, n2);
  assert_int_equal(G0->numa, 0);
  assert_int_equal(G3->numa, 1);
  assert_int_equal(ti->nic[n2].pci.numa, 1);
  /* no NVML, no NVLinkBandwidth: NVLink unknown, never "0 links" */
  assert_string_equal(ti->nvlink_source, "unknown");
  assert_null(ti->nvlinks);
  cJSON *j = topo_json(ti);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "nvlink"), "pairs")));
  cJSON *gj = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), 0);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(gj, "nvswitch_links")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(gj, "memory_bytes")));
  assert_string_equal(cJSON_GetObjectItem(gj, "model")->valuestring, "NVIDIA [10de:20b5]");
  cJSON_Delete(j);
  topo_free(ti);
}

static void test_cpuonly(void **state) {
  (void)state;
  topo_info *ti = load("cpuonly.xml", "sysfs/cpuonly");
  assert_int_equal(ti->ngpus, 0);
  assert_int_equal(ti->nnics, 3);
  assert_int_equal(ti->ncores, 4);
  int e0 = nic_by_name(ti, "eth0"), ib = nic_by_name(ti, "mlx5_0"), ro = nic_by_name(ti, "mlx5_1");
  assert_string_equal(ti->nic[e0].kind, "ethernet");
  assert_true(ti->nic[e0].speed_gbps == 25.0);
  assert_int_equal(ti->nic[e0].net[0].st.mtu, 9000);
  assert_int_equal(ti->nic[e0].pci.link.downtrained, 0);
  assert_string_equal(ti->nic[ib].kind, "infiniband");
  assert_string_equal(ti->nic[ib].hca, "mlx5_0");
  assert_int_equal(ti->nic[ib].nnet, 1);
  assert_string_equal(ti->nic[ib].net[0].name, "ib0");
  assert_int_equal(ti->nic[ib].net[0].st.speed_mbps, -1); /* unreadable speed */
  assert_true(ti->nic[ib].speed_gbps == 200.0);          /* from the active port */
  assert_int_equal(ti->nic[ib].nports, 1);
  assert_string_equal(ti->nic[ib].ports[0].state, "ACTIVE");
  assert_string_equal(ti->nic[ib].ports[0].phys_state, "LinkUp");
  assert_int_equal(ti->nic[ib].pci.link.downtrained, 1); /* Gen3 of Gen4 */
  assert_string_equal(ti->nic[ro].kind, "roce");
  assert_string_equal(ti->nic[ro].ports[0].state, "DOWN");
  assert_true(ti->nic[ro].speed_gbps < 0); /* port down and netdev speed -1: unknown */
  assert_int_equal(ti->nic[ro].pci.link.downtrained, 1); /* x8 of x16 */
  assert_string_equal(pci_path(ti, &ti->nic[ib].pci, &ti->nic[ro].pci), "PIX");
  assert_string_equal(pci_path(ti, &ti->nic[e0].pci, &ti->nic[ib].pci), "PHB");
  cJSON *j = topo_json(ti);
  cJSON *nics = cJSON_GetObjectItem(j, "nics");
  cJSON *ibj = cJSON_GetArrayItem(nics, ib);
  cJSON *nd = cJSON_GetArrayItem(cJSON_GetObjectItem(ibj, "netdevs"), 0);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(nd, "speed_mbps")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(nics, ro), "speed_gbps")));
  cJSON_Delete(j);
  topo_free(ti);

  /* without a sysfs tree: the same devices, every state unknown, ports from hwloc's infos */
  ti = load("cpuonly.xml", NULL);
  assert_int_equal(ti->nnics, 3);
  ib = nic_by_name(ti, "mlx5_0");
  assert_string_equal(ti->nic[ib].kind, "infiniband"); /* from the ib0 netdev */
  assert_string_equal(ti->nic[ib].ports[0].state, "ACTIVE");
  assert_true(ti->nic[ib].ports[0].rate_gbps < 0);
  for (int k = 0; k < ti->nnics; k++) {
    assert_true(ti->nic[k].speed_gbps < 0);
    assert_int_equal(ti->nic[k].pci.link.downtrained, -1);
  }
  topo_free(ti);
}

static void test_vm(void **state) {
  (void)state;
  topo_info *ti = load("vm.xml", "sysfs/vm");
  assert_int_equal(ti->ngpus, 1);
  assert_int_equal(ti->nnics, 1);
  /* pci_link_speed 0 and sysfs "Unknown"/0: unknown, not 0 */
  assert_true(ti->gpu[0].pci.hwloc_gbs < 0);
  assert_int_equal(ti->gpu[0].pci.link.max_gen, -1);
  assert_int_equal(ti->gpu[0].pci.link.downtrained, -1);
  assert_true(ti->nic[0].speed_gbps < 0);           /* speed file reads 0 */
  assert_int_equal(ti->nic[0].net[0].st.mtu, 1500);
  assert_string_equal(ti->nvlink_source, "unknown");
  cJSON *j = topo_json(ti);
  cJSON *pcie = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), 0), "pcie");
  cJSON *it;
  cJSON_ArrayForEach(it, pcie) assert_true(cJSON_IsNull(it));
  cJSON_Delete(j);
  topo_free(ti);
}

/* ---- real machines ---- */

static void test_real_dgx2(void **state) {
  (void)state;
  char p[1024];
  if (!shared_fixture(p, sizeof p, "nvidiaDGX2.xml")) skip();
  topo_info *ti = load(p, NULL);
  assert_int_equal(ti->ngpus, 16);
  assert_int_equal(ti->nnics, 0);
  assert_int_equal(ti->npkgs, 2);
  assert_string_equal(ti->nvlink_source, "hwloc");
  for (int g = 0; g < 16; g++) {
    assert_int_equal(ti->gpu[g].pci.numa, g < 8 ? 0 : 1);
    assert_int_equal(ti->gpu[g].switch_links, 6); /* 6 NVSwitch links per V100 */
    assert_int_equal(ti->gpu[g].nearest_nic, -1);
    for (int h = 0; h < 16; h++)
      if (g != h) assert_int_equal(ti->nvlinks[g * 16 + h], 6); /* nvidia-smi: NV6 */
  }
  /* the PCI tree alone: two levels of PLX switches per host bridge */
  assert_string_equal(pci_path(ti, &ti->gpu[0].pci, &ti->gpu[1].pci), "PIX");
  assert_string_equal(pci_path(ti, &ti->gpu[0].pci, &ti->gpu[2].pci), "PXB");
  assert_string_equal(pci_path(ti, &ti->gpu[0].pci, &ti->gpu[4].pci), "NODE");
  assert_string_equal(pci_path(ti, &ti->gpu[0].pci, &ti->gpu[8].pci), "SYS");
  assert_string_equal(ti->gpu[0].model, "Tesla V100-SXM3-32GB-H");
  topo_free(ti);
}

static void test_real_power8(void **state) {
  (void)state;
  char p[1024];
  if (!shared_fixture(p, sizeof p, "power8gpudistances.xml")) skip();
  topo_info *ti = load(p, NULL);
  assert_int_equal(ti->ngpus, 4);
  assert_string_equal(ti->nvlink_source, "hwloc");
  /* GPU pairs joined by 2 NVLink 1.0 links (40000 = 2 x 20000), nothing across sockets */
  assert_int_equal(ti->nvlinks[0 * 4 + 1], 2);
  assert_int_equal(ti->nvlinks[2 * 4 + 3], 2);
  assert_int_equal(ti->nvlinks[0 * 4 + 2], 0);
  assert_int_equal(ti->nvversion[0 * 4 + 1], 1);
  assert_string_equal(pci_path(ti, &ti->gpu[0].pci, &ti->gpu[2].pci), "SYS");
  assert_int_equal(ti->gpu[0].pci.numa, 0);
  assert_int_equal(ti->gpu[3].pci.numa, 1);
  topo_free(ti);
}

static void test_real_xeons(void **state) {
  (void)state;
  char p[1024];
  /* NIC counts: PCI functions carrying network/OpenFabrics OS devices, counted separately
   * from the XML text with Python's ElementTree */
  struct { const char *f; int nics, gpus; } c[] = {{"24em64t-2n6c2t-pci.xml", 3, 3},
                                                   {"32em64t-2n8c2t-pci-normalio.xml", 3, 3},
                                                   {"16intel64-manyVFs.xml", 6, 0},
                                                   {"96em64t-4n4d3ca2co-pci.xml", 8, 0}};
  int ran = 0;
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    if (!shared_fixture(p, sizeof p, c[i].f)) continue;
    ran++;
    topo_info *ti = load(p, NULL);
    assert_int_equal(ti->nnics, c[i].nics);
    assert_int_equal(ti->ngpus, c[i].gpus);
    if (i == 0) {
      int k = nic_by_name(ti, "mlx4_0");
      assert_string_equal(ti->nic[k].kind, "infiniband");
      assert_int_equal(ti->nic[k].nnet, 2); /* eth2 and ib0 */
    }
    if (i == 1) {
      int k = nic_by_name(ti, "mlx5_0");
      int g = gpu_by_bdf(ti, "0000:84:00.0");
      assert_int_equal(ti->gpu[g].nearest_nic, k);
      assert_string_equal(pci_path(ti, &ti->gpu[g].pci, &ti->nic[k].pci), "PIX");
      assert_int_equal(ti->nnuma, 2);
      assert_int_equal(ti->gpu[gpu_by_bdf(ti, "0000:03:00.0")].pci.numa, 0);
    }
    if (i == 3) assert_int_equal(ti->nnuma, 4);
    topo_free(ti);
  }
  if (!ran) skip();
}

/* ---- bad input ---- */

static void test_bad_input(void **state) {
  (void)state;
  char dir[] = "/tmp/topo-bad-XXXXXX";
  assert_non_null(mkdtemp(dir));
  tt_write(dir, "trunc.xml", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n <object type=");
  tt_write(dir, "text.xml", "this is not xml at all\n");
  tt_write(dir, "empty.xml", "");
  tt_write(dir, "other.xml", "<?xml version=\"1.0\"?><html><body/></html>\n");
  const char *bad[] = {"trunc.xml", "text.xml", "empty.xml", "other.xml", "missing.xml"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[512], err[512] = "";
    snprintf(path, sizeof path, "%s/%s", dir, bad[i]);
    topo_opts o;
    memset(&o, 0, sizeof o);
    o.xml = path;
    topo_info *ti = (topo_info *)1;
    assert_int_equal(topo_load(&ti, &o, err, sizeof err), -1);
    assert_null(ti);
    assert_non_null(strstr(err, path)); /* the message names the file */
  }
  char err[512];
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.sysfs_root = "/nonexistent/sysroot";
  topo_info *ti;
  assert_int_equal(topo_load(&ti, &o, err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent/sysroot"));
  char file[512];
  snprintf(file, sizeof file, "%s/text.xml", dir);
  o.sysfs_root = file;
  assert_int_equal(topo_load(&ti, &o, err, sizeof err), -1);
  assert_non_null(strstr(err, "not a directory"));
  memset(&o, 0, sizeof o);
  o.synthetic = "pack:2 bogus:3";
  assert_int_equal(topo_load(&ti, &o, err, sizeof err), -1);
  tt_rmtree(dir);
}

/* ---- the hash ---- */

static char *slurp(const char *path) {
  char *s = tu_slurp(path, NULL);
  assert_non_null(s);
  return s;
}

/* Replaces every occurrence of a by b (same length or not) into a new string. */
static char *replace_all(const char *s, const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b), n = 0;
  for (const char *p = strstr(s, a); p; p = strstr(p + na, a)) n++;
  char *out = malloc(strlen(s) + n * (nb > na ? nb - na : 0) + 1), *o = out;
  for (const char *p = s;;) {
    const char *q = strstr(p, a);
    if (!q) {
      strcpy(o, p);
      break;
    }
    memcpy(o, p, (size_t)(q - p));
    o += q - p;
    memcpy(o, b, nb);
    o += nb;
    p = q + na;
  }
  return out;
}

static void hash_of_text(const char *dir, const char *text, char *hash) {
  char path[512];
  snprintf(path, sizeof path, "%s/t.xml", dir);
  tt_write(dir, "t.xml", "%s", text);
  topo_info *ti = load(path, NULL);
  strcpy(hash, ti->hash);
  topo_free(ti);
}

static void test_hash(void **state) {
  (void)state;
  char dir[] = "/tmp/topo-hash-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char x[1024];
  char *orig = slurp(tt_fixture(x, sizeof x, "dgx8.xml"));
  char h0[32], h1[32];
  hash_of_text(dir, orig, h0);
  assert_int_equal(strlen(h0), 16);
  hash_of_text(dir, orig, h1);
  assert_string_equal(h0, h1); /* stable */

  /* volatile fields changed: host name, process, MACs, GUIDs, current link speed, memory by
   * a few MB: the same hash */
  char *v1 = replace_all(orig, "dgx-a", "dgx-b-much-longer-name");
  char *v2 = replace_all(v1, "lstopo", "fabench");
  char *v3 = replace_all(v2, "00:00:00:00:00:0", "02:42:ac:11:00:0");
  char *v4 = replace_all(v3, "a088:c203", "ffff:ffff");
  char *v5 = replace_all(v4, "pci_link_speed=\"31.507692\"", "pci_link_speed=\"2.000000\"");
  char *v6 = replace_all(v5, "local_memory=\"1099511627776\"", "local_memory=\"1099505336320\"");
  hash_of_text(dir, v6, h1);
  assert_string_equal(h0, h1);
  /* a network interface renamed, or not there (a network namespace shows only its own): the
   * same machine; its NIC, the PCI device, still counts (d1 below) */
  char *n1 = replace_all(orig, "name=\"ibp22s0\"", "name=\"eth0\"");
  assert_string_not_equal(n1, orig);
  hash_of_text(dir, n1, h1);
  assert_string_equal(h0, h1);
  char *n2 = replace_all(orig, "<object type=\"OSDev\" name=\"ibp22s0\" osdev_type=\"2\" gp_index=\"27\">\n"
                               "                      <info name=\"Address\" value=\"00:00:00:00:00:00\"/>\n"
                               "                    </object>\n", "");
  assert_string_not_equal(n2, orig);
  hash_of_text(dir, n2, h1);
  assert_string_equal(h0, h1);
  free(n1);
  free(n2);
  /* with or without link state from sysfs: the same */
  topo_info *ti = load("dgx8.xml", "sysfs/dgx8");
  assert_string_equal(ti->hash, h0);
  topo_free(ti);

  /* real differences: one GPU fewer, one NVLink fewer, another CPU model */
  char *d1 = replace_all(orig, "0302 [10de:2330]", "0200 [8086:2330]");
  hash_of_text(dir, d1, h1);
  assert_string_not_equal(h0, h1);
  char *d2 = replace_all(orig, "125000 0 0 0 0 1000000", "100000 0 0 0 0 1000000");
  assert_string_not_equal(d2, orig); /* the edit hit something */
  hash_of_text(dir, d2, h1);
  assert_string_not_equal(h0, h1);
  char *d3 = replace_all(orig, "Platinum 8480C", "Platinum 8468");
  hash_of_text(dir, d3, h1);
  assert_string_not_equal(h0, h1);
  free(orig);
  free(v1); free(v2); free(v3); free(v4); free(v5); free(v6);
  free(d1); free(d2); free(d3);
  tt_rmtree(dir);
}

/* This machine, exported and read back: the same hash (and the same counts). */
static void test_roundtrip_this_machine(void **state) {
  (void)state;
  char err[512];
  topo_info *a = NULL;
  assert_int_equal(topo_load(&a, NULL, err, sizeof err), 0);
  assert_string_equal(a->backend, "Linux");
  assert_int_equal(a->thissystem, 1);
  assert_true(a->npus >= 1);
  char dir[] = "/tmp/topo-rt-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[512];
  snprintf(path, sizeof path, "%s/me.xml", dir);
  assert_int_equal(topo_write_xml(a, path, err, sizeof err), 0);
  topo_info *b = load(path, NULL);
  assert_string_equal(b->backend, "XML");
  assert_string_equal(b->source_backend, "Linux");
  assert_string_equal(a->hash, b->hash);
  assert_int_equal(a->npus, b->npus);
  assert_int_equal(a->nnics, b->nnics);
  assert_int_equal(a->ngpus, b->ngpus);
  /* a stray HWLOC_XMLFILE does not pass for this machine */
  char fx[1024];
  setenv("HWLOC_XMLFILE", tt_fixture(fx, sizeof fx, "pcie4.xml"), 1);
  topo_info *c = NULL;
  int rc = topo_load(&c, NULL, err, sizeof err);
  unsetenv("HWLOC_XMLFILE");
  assert_int_equal(rc, 0);
  assert_string_equal(c->backend, "XML");
  assert_non_null(strstr(c->warnings, "HWLOC_XMLFILE"));
  topo_free(c);
  topo_free(a);
  topo_free(b);
  tt_rmtree(dir);
}

static void test_synthetic(void **state) {
  (void)state;
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.synthetic = "pack:2 numa:1 l3:1 core:3 pu:2";
  topo_info *ti = NULL;
  char err[256];
  assert_int_equal(topo_load(&ti, &o, err, sizeof err), 0);
  assert_string_equal(ti->backend, "Synthetic");
  assert_int_equal(ti->npkgs, 2);
  assert_int_equal(ti->nnuma, 2);
  assert_int_equal(ti->ncores, 6);
  assert_int_equal(ti->npus, 12);
  assert_int_equal(ti->ngpus + ti->nnics, 0);
  assert_string_equal(ti->sysfs_root, ""); /* never this machine's sysfs */
  topo_free(ti);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dgx8),          cmocka_unit_test(test_pcie4),
      cmocka_unit_test(test_cpuonly),       cmocka_unit_test(test_vm),
      cmocka_unit_test(test_real_dgx2),     cmocka_unit_test(test_real_power8),
      cmocka_unit_test(test_real_xeons),    cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_hash),          cmocka_unit_test(test_roundtrip_this_machine),
      cmocka_unit_test(test_synthetic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
